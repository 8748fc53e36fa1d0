"""The token-cosine view's state and its plainest work: reading the journal's new lines into the index,
noticing a replaced journal, and loading the saved index (mapped). `TokenCosineView` (semantic.py) is
this with its saves and learned associations (cosine_view_learn.py) and its background build
(cosine_view_build.py) on top.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from urchin.journal import Journal
from urchin.search import assoc, cosine_store
from urchin.search.cosine import TokenCosineIndex
from urchin.search.cosine_extract import WorkerError, extract_parallel, line_aligned_end
from urchin.search.cosine_tail import FIRST_TAIL_BYTES, TAIL_BYTES, Tail
from urchin.search.journal_handle import JournalHandle
from urchin.search.postings import RowOffsets, release_pages
from urchin.tombstones import ForgetLog

__all__ = ["CosineViewBase", "SAVE_EVERY", "BULK_BYTES", "BUILD_SAVE_S", "BUILD_RETRY_S"]

log = logging.getLogger("urchin.search.semantic")   # the name these lines logged under before the split

_CATCH_UP_BYTES = 4 << 20
SAVE_EVERY = 10_000  # events indexed since the last save (and 5% of the saved) that make `catch_up` save
BULK_BYTES = 64 << 20  # a backlog this large is tokenised by worker processes, in bulk mode
BUILD_SAVE_S = 60.0    # a background build saves at least this often (a kill -9 loses no more of it)
BUILD_RETRY_S = 60.0   # after a failed build, the next starts no sooner than this


class _Covered(NamedTuple):
    """A cover check's answer (`offset`: what the saved index covers, None: nothing) for the files it
    was made on (`key`), and the journal's size and mtime when last looked at."""

    key: tuple[int, ...]
    offset: int | None
    size: int = -1
    mtime_ns: int = -1


class CosineViewBase:
    """The token-cosine view's fields, its journal reading and its load; see `TokenCosineView`."""

    def __init__(self, journal: Journal, index_dir: Path | None = None, *, save_every: int = SAVE_EVERY,
                 workers: int | None = None, home: Path | None = None) -> None:
        """`index_dir`: where to persist (None: memory only). `save_every` 0: save only when asked.
        `workers`: processes for a large backlog (default: 2 when there are 2 CPUs; 1: none).
        `home`: whose install key proves lines (workers check them as `journal.proof` does here)."""
        self.journal = journal
        self.home = home
        self.index_dir = index_dir
        self.save_every = save_every
        self.workers = min(2, os.cpu_count() or 1) if workers is None else workers
        self.index = TokenCosineIndex()
        self.offsets = RowOffsets()
        self.next_offset = 0
        self.loaded_from_disk = False
        self.rebuild_reason: str | None = None  # why a saved index was not used (None: used, or none)
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._opened = False
        self._identity: tuple[int, int] | None = None  # (device, inode) of the journal followed
        self._handle: JournalHandle | None = None   # that file, open: queries read their hits from it
        # (the saved manifest's and the journal file's stat keys, the offset the saved index covers or
        # None): `saved_covers`, asked again only when either file changed
        self._covered: _Covered | None = None
        self._saved = (-1, -1)  # (rows, next_offset) of the index on disk
        self._reuse: cosine_store.Reuse = {}
        self._learned: tuple[tuple[int, int, int], assoc.Associations | None] | None = None  # see associations()
        # The daemon: associations are built by a child process at the lowest priority, never in this
        # one (see urchin/search/assoc_child.py), and only at saves, never before a query.
        self.learn_apart = False
        # The daemon: saves are the follower's (its catch-up), never a query's, whose caller would
        # wait for hundreds of megabytes written (seconds, the first save after a build).
        self.save_in_queries = True
        self._learning: threading.Thread | None = None   # the thread waiting on a child (None: none)
        self._learn_pending = False   # a save asked for a model since the running child started
        self._generation = 0    # bumped when the index starts over: a model learned before is not installed
        self._used: float | None = None   # when a query last read the maps (None: released since)
        self.forgotten = ForgetLog(journal)
        self.background: str | None = None   # None: callers wait for builds; "thread" or "process" (above)
        self.tail_bytes = TAIL_BYTES
        self.first_tail_bytes = FIRST_TAIL_BYTES   # a thread build's first tail (grown to tail_bytes by it)
        self.save_every_s = BUILD_SAVE_S
        self.build_chunk: int | None = None  # bytes per worker batch of a build (None: extract's default)
        self.bulk_bytes = BULK_BYTES         # a build's backlog this large goes to worker processes
        self._behind = False    # a build owns `index` (queries answer from `_tail`)
        self._builder: int | None = None     # the thread ident of the build running in this process
        self._build_thread: threading.Thread | None = None
        self._tail: Tail | None = None
        self._build_failed_at = -BUILD_RETRY_S
        self._spilling = True   # a build writes its frozen segments as they fill (`_spill`) until one fails


    def _read_tail(self, end: int | None = None) -> int:
        """Index the complete lines from `next_offset` on, to the journal's end (or to `end`, its size
        when the caller looked: one read of a small backlog, not a second one to find nothing more)."""
        added = 0
        while end is None or self.next_offset < end:
            result = self.journal.read_from(self.next_offset, _CATCH_UP_BYTES)
            if not result.lines:
                self.next_offset = result.next_offset
                return added
            batch = self.index.extract_lines(result.lines, self.journal.proof)
            self.index.add_batch(batch)
            self.offsets.frombytes(batch.offsets.tobytes())
            added += len(batch)
            self.next_offset = result.next_offset
        return added

    def _build_parallel(self) -> int:
        """Index the backlog with worker processes; on any failure the caller goes on in-process."""
        stop = line_aligned_end(self.journal.path, self.next_offset, self.journal.size())
        added = 0
        try:
            for batch in extract_parallel(self.journal.path, self.next_offset, stop, self.workers,
                                          home=self.home):
                self.index.add_batch(batch)
                self.offsets.frombytes(batch.offsets.tobytes())
                added += len(batch)
                self.next_offset = batch.end
        except (OSError, WorkerError, RuntimeError, pickle.UnpicklingError) as exc:
            log.warning("token-cosine: parallel build failed (%s); continuing in-process", exc)
        return added

    def _check_journal(self) -> int:
        """Start over when the journal was replaced or cut below what is indexed; returns its size."""
        try:
            info = os.stat(self.journal.path)
        except FileNotFoundError:
            identity, size = None, 0
        else:
            identity, size = (info.st_dev, info.st_ino), info.st_size
        if self.next_offset and (size < self.next_offset or (identity and identity != self._identity)):
            reason = "journal replaced" if size >= self.next_offset else "journal shorter than the index"
            if identity != self._identity and self.forgotten.compacted_into(identity):  # a forget's compaction
                reason = "journal compacted after a forget"
                log.info("token-cosine: %s; rebuilding", reason)
            else:
                log.warning("token-cosine: %s; rebuilding", reason)
            self.rebuild_reason = reason
            self._reset()
        if identity != self._identity:
            self._handle = None     # the old file's: closed once no query reads it (journal_handle)
        self._identity = identity
        return size

    def _handle_of(self, identity: tuple[int, int] | None) -> JournalHandle | None:
        """Under the lock: the held handle on the journal file `identity` (the one just ranked), opened
        when the view holds none of it; None when that file is no longer at the journal's path (hits are
        then read by path, as a fresh open would)."""
        held = self._handle
        if held is not None and held.identity == identity:
            return held
        if identity is None:
            return None
        fresh = JournalHandle.open(self.journal.path)
        if fresh is None or fresh.identity != identity:
            return None
        self._handle = fresh
        return fresh

    def let_go(self) -> None:
        """Close the held journal file (once no query reads it): it was replaced. Without the lock (a
        compaction must not wait for a query): a query that takes it meanwhile reads the file it ranked
        in; the next one opens the new file, or reads by path until its catch-up follows the new file."""
        self._handle = None

    def saved_covers(self) -> bool:
        """`cosine_store.covers` of this view's folder (whether the saved index, and the associations
        beside it, still cover the journal), from two `stat`s: the manifest read and the journal's ends
        hashed again only when the manifest (a save, a discard) or the journal's file (a compaction, a
        restore) changed since, when its mtime moved with its size unchanged (bytes rewritten in place),
        or when the journal is now shorter than what is saved. An append (the size grew) changes none of
        that: the journal is append-only in place, and a view trusts that for its own rows too."""
        if self.index_dir is None:
            return False
        try:
            manifest = os.stat(self.index_dir / cosine_store.MANIFEST)
            journal = os.stat(self.journal.path)
        except OSError:
            return False
        key = (manifest.st_ino, manifest.st_size, manifest.st_mtime_ns, journal.st_dev, journal.st_ino)
        kept = self._covered
        if (kept is None or kept.key != key
                or (journal.st_size == kept.size and journal.st_mtime_ns != kept.mtime_ns)):
            kept = _Covered(key, cosine_store.covered(self.index_dir, self.journal))
        self._covered = kept._replace(size=journal.st_size, mtime_ns=journal.st_mtime_ns)
        return kept.offset is not None and journal.st_size >= kept.offset

    def _reset(self) -> None:
        self.index = TokenCosineIndex()
        self.offsets = RowOffsets()
        self.next_offset = 0
        self._saved = (-1, -1)
        self._generation += 1
        self._handle = None


    # ---- persistence ------------------------------------------------------------------------
    def _open(self) -> None:
        self._opened = True
        if self.index_dir is None:
            return
        loaded = self._load_saved()
        if loaded is None:
            return
        index, saved = loaded
        index.assoc = assoc.load(assoc.path_beside(self.index_dir))
        self._install(index, saved)
        _release_free_memory()      # the load's temporaries, as after a swap

    def _install(self, index: TokenCosineIndex, saved: cosine_store.Saved) -> None:
        """Make a loaded index this view's, at the journal offset and file it was saved at."""
        self.index = index
        self.offsets = RowOffsets(saved.offsets.astype(np.int64, copy=False))   # the saved map, not a copy
        self.next_offset = saved.mark.offset
        self._identity = (saved.mark.device, saved.mark.inode)
        self._saved = (len(index), saved.mark.offset)
        self._reuse = saved.reuse
        self.loaded_from_disk = True

    def _load_saved(self) -> tuple[TokenCosineIndex, cosine_store.Saved] | None:
        """The saved index, loaded (None: none, or unusable: why is in `rebuild_reason`)."""
        assert self.index_dir is not None
        try:
            saved = cosine_store.load(self.index_dir, self.journal.path)
            index = TokenCosineIndex.from_state(saved.state)
            cosine_store.release(saved)
        except Exception as exc:  # noqa: BLE001 - a derived view: whatever is wrong with it, rebuild
            if (self.index_dir / "manifest.json").exists():
                log.warning("token-cosine: saved index not used (%s); rebuilding from the journal", exc)
                self.rebuild_reason = str(exc)
            return None
        return index, saved


    def release_pages(self, idle_s: float) -> int:
        """After `idle_s` without a query: the saved index's read-only maps leave this process's
        resident set (`TokenCosineIndex.release_pages`); skipped while the view is busy."""
        if self._used is None or time.monotonic() - self._used < idle_s or not self._lock.acquire(blocking=False):
            return 0
        try:
            self._used = None
            released = self.index.release_pages() + release_pages(self.offsets.base)
        finally:
            self._lock.release()
        # and the free space the queries' temporaries left in malloc's arenas, which glibc keeps resident
        # (3M events, after the bench's hot cells: ~90-140 MB of the daemon's RSS); once per idle spell
        _release_free_memory()
        return released


def _release_free_memory() -> None:
    """Give the heap a bulk build freed back to the OS (glibc keeps it otherwise: ~1/3 of the peak)."""
    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl): nothing to do
        pass
