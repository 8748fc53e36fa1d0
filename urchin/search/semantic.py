"""Ranked (semantic) search as views that follow the journal by byte offset.

`TokenCosineView` keeps a `TokenCosineIndex` caught up with the journal and maps its rows back to
journal offsets, so it holds no event text: hits are read back from the journal (a few `pread`s).
With an index directory it is saved there now and then and loaded at start (then only the journal's
tail is indexed); a saved index that does not match the journal is rebuilt, never trusted.
`EmbeddingView` does the same with a remote embedder's vectors, cached on disk per model.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from urchin.children import python_child
from urchin.event import Event
from urchin.forget import ForgetLog
from urchin.journal import Journal
from urchin.requests_first import give_way, lower_thread_priority
from urchin.search import assoc, cosine_store
from urchin.search.cosine import IndexState, Scored, TokenCosineIndex
from urchin.search.cosine_tail import FIRST_TAIL_BYTES, TAIL_BYTES, Tail, identity_of
from urchin.search.embedder import Embedder
from urchin.search.extract import Batch, WorkerError, extract_parallel, line_aligned_end
from urchin.search.postings import RowOffsets, Segment, release_pages
from urchin.search.query import Filters, Hit
from urchin.search.score import EMBEDDER, TOKEN_COSINE, Z_SPAN, Evidence, z_unit
from urchin.search.tokens import terms_of, tokenize
from urchin.search.vectors import BACKGROUND_CHUNK, CacheBusy, VectorCache, embed_events
from urchin.search.websearch import parse

__all__ = ["TokenCosineView", "EmbeddingView", "SAVE_EVERY", "BULK_BYTES", "WEAK_SCORE", "weakness"]

log = logging.getLogger(__name__)

_CATCH_UP_BYTES = 4 << 20
_PENDING_CHUNK = 64 << 10   # the first read of `EmbeddingView.pending` (a query's): then 4x each time
SAVE_EVERY = 10_000  # events indexed since the last save (and 5% of the saved) that make `catch_up` save
FIRST_SAVE = 256     # ...but a young index saves at 256, 512, 1,024 ... rows first
BULK_BYTES = 64 << 20  # a backlog this large is tokenised by worker processes, in bulk mode
BUILD_SAVE_S = 60.0    # a background build saves at least this often (a kill -9 loses no more of it)
BUILD_RETRY_S = 60.0   # after a failed build, the next starts no sooner than this
_SWAP_BYTES = 256 << 10  # a build swaps its index in once it is this close to the journal's end
_SPILL_POSTINGS = 1 << 20   # a build writes a frozen segment this large to disk at once (`_spill`)
_GROW_STEP = 256 << 10      # a tail grown in the background reads this much between requests (~20 ms of CPU)
# Below this best token-cosine score (calibrated, urchin.search.score) a match is weak: on LoCoMo, a
# sixth of the questions, whose top 10 holds evidence at R@10 0.55 against the rest's 0.80.
WEAK_SCORE = 0.085
INLINE_ASSOC_ROWS = 1_000  # up to this many events, associations are built for the rows a query sees; beyond, at save
LEARN_TIMEOUT_S = 600.0     # a child building the associations (learn_apart) is given up after this
# Beside the daemon's embedder loop a query embeds at most this many new events itself (one small
# request); a longer backlog is the loop's, which sends BACKGROUND_CHUNK texts per request.
INLINE_BESIDE_LOOP = 16


def weakness(hits: list[Hit], mode: str) -> str | None:
    """A hint when ranked search found nothing or only a poor match (None: the results look sound)."""
    if hits and (not mode.startswith("token-cosine") or (hits[0].score or 0.0) >= WEAK_SCORE):
        return None
    found = "no match" if not hits else "only weak matches"
    if mode.startswith("token-cosine"):
        return (f"{found}: token-cosine finds events that share words with the query, or words related to them "
                "(a thesaurus of software work, and words the journal uses alongside them); try `urchin search` for "
                "an exact word or phrase, or configure an embedder "
                "(URCHIN_EMBEDDER_URL) to search by meaning")
    return f"{found}: try `urchin search` for an exact word or phrase"


class TokenCosineView:
    """Thread-safe: one lock serialises catch-up and queries (the index itself is not thread-safe).

    For a daemon: call `catch_up()` on every journal change (it saves by itself once `save_every`
    events, and 5% of the saved ones, have been indexed since the last save) and `save()` at
    shutdown. Construction does no I/O; the first `catch_up` or `search` loads the saved index.

    With `background` set, no caller waits for a build: a backlog over `tail_bytes` (an import, a
    first start) is left to a build ("thread": one of this process's; "child": a child this process
    waits for, then loads what it saved, the daemon's; "process": a detached child that saves it for
    the next process; `urchin.search.cosine_build`), and until that is done queries answer from a
    `Tail` of the newest events, saying how much they left out. The build owns the index meanwhile
    (nothing else reads it), saves it every `save_every_s` (a kill resumes from there) and swaps it
    in when it has caught up: the same index a build without a tail makes.
    """

    mode = "token-cosine"

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
        self._saved = (-1, -1)  # (rows, next_offset) of the index on disk
        self._reuse: cosine_store.Reuse = {}
        self._learned: tuple[tuple[int, int, int], assoc.Associations | None] | None = None  # see associations()
        # The daemon: associations are built by a child process at the lowest priority, never in this
        # one (see urchin/search/learn.py), and only at saves, never before a query.
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

    # ---- following the journal --------------------------------------------------------------
    def catch_up(self) -> int:
        """Index every complete line appended since the last call; returns how many events were added."""
        with self._lock:
            added = self._catch_up()
        self._save_if_due()
        return added

    def ready(self) -> int:
        """What a first query does before it answers, done ahead of it (a daemon's start): the saved
        index loaded and caught up, or, behind a large backlog with `background` set, the tail of the
        newest events built and the build started. Never saves (the follower's catch-up does)."""
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> int:
        if not self._opened:
            self._open()
        if self._behind:
            if self.background == "child":
                self._start_build()     # again, once BUILD_RETRY_S after a failed one
            return self._follow_tail()
        self._check_journal()
        backlog = self.journal.size() - self.next_offset
        if self.background is not None and backlog > self.tail_bytes:
            self._behind = True
            added = self._follow_tail()
            self._start_build()
            return added
        if backlog < BULK_BYTES:
            return self._read_tail()
        with self.index.bulk():
            added = self._build_parallel() if self.workers > 1 else 0
            added += self._read_tail()
        _release_free_memory()
        return added

    # ---- building in the background ---------------------------------------------------------
    def _follow_tail(self) -> int:
        """Keep the tail of the newest events current (built again when it fell too far behind)."""
        tail = self._tail
        if tail is None or tail.stale(self.journal, self.tail_bytes):
            # a build this process waits for: the first one small (a first query waits for it), grown
            # by the build (`_grow_tail`); a CLI's child leaves the tail as it is, so it is made whole
            first = tail is None and self.background in ("thread", "child")
            size = min(self.first_tail_bytes, self.tail_bytes) if first else self.tail_bytes
            self._tail = tail = Tail.newest(self.journal, size)
            self._assoc_if_stale(tail.index)
            return len(tail)
        added = tail.catch_up(self.journal)
        if added:
            self._assoc_if_stale(tail.index)
        return added

    def _start_build(self) -> None:
        if time.monotonic() - self._build_failed_at < BUILD_RETRY_S:
            return      # a build just failed (logged): queries go on from the tail meanwhile
        if self.background in ("thread", "child") and (self._build_thread is None or
                                                        not self._build_thread.is_alive()):
            target = self._build_logged if self.background == "thread" else self._build_in_child
            self._build_thread = threading.Thread(target=target, name="urchin-cosine-build", daemon=True)
            self._build_thread.start()
        elif self.background == "process" and self.index_dir is not None and self.save_every:
            from urchin.search import cosine_build

            try:
                cosine_build.spawn(self.index_dir, self.journal.path, self.home)
            except OSError as exc:      # e.g. the index folder cannot be made: answer from the tail
                log.warning("token-cosine: cannot start a background build (%s)", exc)
                self._build_failed_at = time.monotonic()

    def _build_logged(self) -> None:
        lower_thread_priority()      # and the worker processes it starts: requests get a core first
        try:
            self.build()
        except Exception:   # noqa: BLE001 - queries go on from the tail; the next catch-up starts another
            log.exception("token-cosine: the background build failed")
            with self._lock:   # what the build left may be half a batch: start over, from the saved index
                self._builder, self._behind, self._opened = None, False, False
                self._build_failed_at = time.monotonic()
                self._reset()

    def _build_in_child(self) -> None:
        """The build thread of "child": a child builds and saves the index (`cosine_build.build_beside`,
        waited for here), then the saved copy is loaded (mapped) and swapped in for the tail, and the
        associations are learned by a child of their own, after the build's, never beside it. A failed
        build leaves queries on the tail; the next catch-up after BUILD_RETRY_S starts another, which
        resumes from what was saved."""
        from urchin.search import cosine_build

        assert self.index_dir is not None
        folder = self.index_dir

        def done() -> bool:
            return self.journal.size() - cosine_store.saved_offset(folder) <= _SWAP_BYTES

        try:
            self._grow_tail()       # the first tail, small for the first query, before the child starts
            cosine_build.build_beside(folder, self.journal.path, self.home, done)
            loaded = self._load_saved()        # outside the lock: queries answer from the tail meanwhile
            if loaded is None:
                raise RuntimeError(f"the index the build child saved does not load ({self.rebuild_reason})")
            index, saved = loaded
            index.assoc = assoc.load(assoc.path_beside(folder))
            with self._lock:
                self._install(index, saved)
                self._read_tail()
                self.index.refresh_if_stale()
                self._behind, self._tail = False, None
            _release_free_memory()      # the load's temporaries
        except Exception as exc:   # noqa: BLE001 - queries go on from the tail; a later catch-up starts another
            log.warning("token-cosine: the background build failed: %s", exc)
            self._build_failed_at = time.monotonic()
            return
        if self.learn_apart and self.index.expand:
            with self._save_lock:
                self._learn_soon()

    def build(self, learn: bool = True) -> int:
        """Index the journal to its end while queries answer from the tail; returns how many events
        were added. Saves every `save_every_s` (without the associations, a partial index's) and at
        the end (with them unless `learn` is False). Waits first for another process's build of the
        same folder (it saves: resumed here)."""
        from urchin.search import cosine_build

        self._grow_tail()
        with cosine_build.building(self.index_dir):
            with self._lock:
                self._builder = threading.get_ident()
                self._behind = True
                self._spilling = True
                self._reopen()
            added, saved_at = 0, time.monotonic()
            while True:
                with self._lock:
                    self._check_journal()
                    if self.journal.size() - self.next_offset <= _SWAP_BYTES:
                        break
                added, saved_at = self._build_step(added, saved_at)
            self.index.refresh_if_stale()   # outside the lock: O(postings) at the end of a large build
            # The builder's save writes the columns as they are (no copy of each: nothing else changes
            # them while the build owns the index); a daemon learns the associations after the swap.
            apart = not learn or (self.background == "thread" and self.learn_apart)
            if not self._save_logged(learn=not apart) and not apart:
                self._learn_saved()     # a partial save covered it all (they learn nothing): learn now
            if self.background == "thread" and self._saved == (len(self.index), self.next_offset):
                self._swap_saved()
            with self._lock:
                added += self._read_tail()
                self.index.refresh_if_stale()
                self._behind, self._tail, self._builder = False, None, None
        if learn and apart and self.index_dir is not None and self.index.expand:
            with self._save_lock:
                self._learn_soon()
        elif self.background != "thread":
            self._save_logged(learn)     # the few rows read since (a child's build: for the next process)
        return added

    def _grow_tail(self) -> None:
        """Before a build indexes the journal: the tail queries answer from, when it holds less than
        `tail_bytes` (the first after a start), is built again at that size outside the lock, in steps
        that give way to requests, and swapped in caught up."""
        tail = self._tail
        if tail is None or tail.holds(self.tail_bytes):
            return
        grown = Tail.newest(self.journal, self.tail_bytes, step=_GROW_STEP, between=give_way)
        with self._lock:
            if self._tail is not tail or not self._behind or grown.stale(self.journal, self.tail_bytes):
                return      # replaced meanwhile (a compaction: the next catch-up builds it again) or done
            grown.catch_up(self.journal)
            self._tail = grown
            self._assoc_if_stale(grown.index)

    def _swap_saved(self) -> None:
        """Swap the index a thread just built and saved for the saved copy: the same rows, with their
        postings, columns and ids memory-mapped (file pages, released when idle) instead of the build's
        anonymous arrays. A daemon after its first build then holds what a restart on the saved index
        would. Queries answer from the tail meanwhile, so the built index goes first: the two are never
        held at once. A copy that does not load fails the build (`_build_logged`: the next one resumes
        from what is saved, or rebuilds)."""
        assert self.index_dir is not None
        model = self.index.assoc
        with self._lock:
            self.index = TokenCosineIndex()
        _release_free_memory()
        loaded = self._load_saved()
        if loaded is None:
            raise RuntimeError(f"the index just saved does not load ({self.rebuild_reason})")
        index, saved = loaded
        index.assoc = model
        with self._lock:
            self._install(index, saved)
        _release_free_memory()      # the load's temporaries

    def _reopen(self) -> None:
        """Load the saved index again when another process saved more of the journal than this holds."""
        if self.index_dir is None or not self._opened:
            if not self._opened:
                self._open()
            return
        if cosine_store.saved_offset(self.index_dir) > self.next_offset:
            self._reset()
            self._open()

    def _build_step(self, added: int, saved_at: float) -> tuple[int, float]:
        """Index up to the journal's end now, outside the lock (the build owns the index), saving on the way."""
        stop = line_aligned_end(self.journal.path, self.next_offset, self.journal.size())
        identity = self._identity
        with self.index.bulk():
            for batch in self._batches(stop):
                if identity_of(self.journal) != identity:
                    break      # replaced (a forget's compaction): the loop starts over
                give_way()
                self.index.add_batch(batch)
                self._spill()
                self.offsets.frombytes(batch.offsets.tobytes())
                self.next_offset = batch.end
                added += len(batch)
                if time.monotonic() - saved_at >= self.save_every_s:
                    self._save_logged(learn=False)
                    saved_at = time.monotonic()
        _release_free_memory()
        return added, saved_at

    def _spill(self) -> None:
        """A build keeps no frozen segment in memory: each is written to the index folder as it fills
        (`cosine_store.spill`, the bytes the next save links) and read back through a read-only map,
        whose pages are not this process's until a query reads them (3M events: ~0.5 GB of postings).
        A segment that cannot be written stays in memory (the save writes it), and so do the next ones
        of this build (a full disk is not tried again at every batch)."""
        folder = self.index_dir
        if folder is None or not self.save_every or not self._spilling:
            return

        def spilled(segment: Segment) -> Segment:
            if not segment.rows.flags.writeable or segment.nnz < _SPILL_POSTINGS:
                return segment      # mapped already (spilled, or loaded), or small: merged again soon
            try:
                return Segment(*cosine_store.spill(folder, (segment.indptr, segment.rows, segment.tf), self._reuse))
            except OSError as exc:
                if self._spilling:
                    log.warning("token-cosine: cannot write a segment to %s (%s); this build keeps its segments "
                                "in memory", folder, exc)
                self._spilling = False
                return segment

        self.index.swap_segments(spilled)

    def _batches(self, stop: int) -> Iterator[Batch]:
        """The journal's lines from `next_offset` to `stop` as batches: by worker processes when there
        is much (and they start), else in this process."""
        if self.workers > 1 and stop - self.next_offset >= self.bulk_bytes:
            try:
                yield from extract_parallel(self.journal.path, self.next_offset, stop, self.workers,
                                            chunk=self.build_chunk, home=self.home)
                return
            except (OSError, WorkerError, RuntimeError, pickle.UnpicklingError) as exc:
                log.warning("token-cosine: parallel build failed (%s); continuing in-process", exc)
        while self.next_offset < stop:
            result = self.journal.read_from(self.next_offset, min(self.build_chunk or _CATCH_UP_BYTES,
                                                                  stop - self.next_offset))
            if not result.lines:
                return
            batch = self.index.extract_lines(result.lines, self.journal.proof)
            batch.end = result.next_offset
            if len(batch):
                yield batch
            else:
                self.next_offset = result.next_offset

    def _save_logged(self, learn: bool = True) -> bool:
        try:
            return self.save(learn)
        except OSError as exc:  # a view that cannot be saved still answers
            log.warning("token-cosine: cannot save the index to %s: %s", self.index_dir, exc)
            return False

    def coverage(self) -> str | None:
        """While a build runs, what a query searched and left out (None: the whole journal)."""
        tail = self._tail
        if not self._behind or tail is None:
            return None
        size = max(self.journal.size(), 1)
        covered = max(tail.next_offset - tail.start, 1)
        older = round(tail.start * len(tail) / covered)
        if self.background == "thread":
            who, reached = "the daemon is indexing them", self.next_offset
        else:   # a child's build: how far its last save got
            who = ("the daemon's build process is indexing them" if self.background == "child"
                   else "a background process is indexing them")
            reached = cosine_store.saved_offset(self.index_dir) if self.index_dir is not None else 0
        done = min(99, 100 * reached // size)
        return (f"about {older:,} older events are not indexed yet and were not searched (only the newest "
                f"{len(tail):,} were, the last {max(1, round(100 * covered / size))}% of the journal): "
                f"{who}, {done}% done")

    def _read_tail(self) -> int:
        added = 0
        while True:
            result = self.journal.read_from(self.next_offset, _CATCH_UP_BYTES)
            if not result.lines:
                self.next_offset = result.next_offset
                return added
            batch = self.index.extract_lines(result.lines, self.journal.proof)
            self.index.add_batch(batch)
            self.offsets.frombytes(batch.offsets.tobytes())
            added += len(batch)
            self.next_offset = result.next_offset

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

    def _check_journal(self) -> None:
        """Start over when the journal was replaced or cut below what is indexed."""
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
        self._identity = identity

    def _reset(self) -> None:
        self.index = TokenCosineIndex()
        self.offsets = RowOffsets()
        self.next_offset = 0
        self._saved = (-1, -1)
        self._generation += 1

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

    def save(self, learn: bool = True) -> bool:
        """Persist the index now (False: no index directory, or nothing new since the last save).

        The copy is taken under the lock (O(rows + terms)); the writing happens outside it, so
        queries and catch-up go on meanwhile. Stale associations are rebuilt after (with
        `learn_apart`, by a child, unless `learn` is False: a daemon's last save does not start one)."""
        if self.index_dir is None:
            return False
        with self._save_lock:
            with self._lock:
                if not self._opened or not self.next_offset or (len(self.index), self.next_offset) == self._saved:
                    return False
                if self._behind and self._builder != threading.get_ident():
                    return False   # the build owns the index (and saves it)
                if not self._behind:   # saved norms are fresh: a load needs no O(postings) pass
                    self.index.refresh_if_stale()
                # the builder saving (behind): nothing else changes the index until this returns
                state = self.index.state(copy=not self._behind)
                offsets = self.offsets.array()
                covered = (len(self.index), self.next_offset)
                mark = self.journal.mark(self.next_offset)
            if (mark.device, mark.inode) != self._identity:
                return False  # replaced under us: the next catch-up rebuilds
            self._reuse = cosine_store.save(self.index_dir, state, offsets, mark, self._reuse)
            self._saved = covered
            self._save_assoc(state, learn)
            return True

    def _learn_saved(self) -> None:
        """The associations of the index as last saved, when that is the whole index (the builder's)."""
        with self._save_lock:
            with self._lock:
                if self._saved != (len(self.index), self.next_offset):
                    return
                state = self.index.state(copy=not self._behind)
            self._save_assoc(state)

    def _save_assoc(self, state: IndexState, learn: bool = True) -> None:
        """Rebuild the associations from the saved copy when they are stale (outside the lock: queries
        go on with the old ones), then save them beside the index. Not when `learn` is False (a build's
        partial saves: a whole index's model, learned again at every save, was a build child's peak)."""
        current, folder = self.index.assoc, self.index_dir
        rows = int(state.meta["rows"])
        if folder is None or not self.index.expand:
            return
        if current is not None and not current.stale(rows):
            if not assoc.path_beside(folder).exists():
                current.save(assoc.path_beside(folder))
            return
        if self.learn_apart or not learn:
            if learn:
                self._learn_soon()
            return
        model = assoc.build(TokenCosineIndex.from_state(state))
        model.save(assoc.path_beside(folder))
        with self._lock:
            self.index.assoc = model

    def _learn_soon(self) -> None:
        """Ask for the associations of the index last saved, built by a child (`_learn`): one child at a
        time; a request made while one runs starts the next after it. Under `_save_lock`."""
        self._learn_pending = True
        if self._learning is None:
            self._learning = threading.Thread(target=self._learn, name="urchin-learn", daemon=True)
            self._learning.start()

    def _learn(self) -> None:
        """The learning thread: a child for each request, the newest index each time, until none is left."""
        while True:
            with self._save_lock:
                if not self._learn_pending:
                    self._learning = None
                    return
                self._learn_pending = False
                generation, current, rows = self._generation, self.index.assoc, max(self._saved[0], 0)
            if current is None or current.stale(rows):   # the last child's model may already do
                self._learn_once(generation)

    def _learn_once(self, generation: int) -> None:
        """Build the associations of the index last saved in a child process at the lowest priority
        (`urchin.search.learn`), then install them beside it, if this view has not started over since
        and the saved index still covers the journal; whatever fails leaves the old model in use."""
        folder = self.index_dir
        assert folder is not None
        for old in folder.parent.glob(f"*.{folder.name}.learned.*"):   # a dead child's (one daemon per home)
            old.unlink(missing_ok=True)
        out = folder.with_name(f".{folder.name}.learned.{os.getpid()}-{generation}.tmp")
        command, env = python_child("urchin.search.learn")
        try:
            done = subprocess.run([*command, str(folder), str(self.journal.path), str(out), str(os.getpid())],
                                  env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, timeout=LEARN_TIMEOUT_S, check=False,
                                  process_group=0)    # a terminal's Ctrl-C is the daemon's to handle
            failed = None if done.returncode == 0 else (
                done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {done.returncode}"])
        except (OSError, subprocess.SubprocessError) as exc:
            failed = [str(exc) or type(exc).__name__]
        try:
            if failed:
                log.warning("token-cosine: learning the associations failed: %s", failed[0])
                return
            model = assoc.load(out)
            with self._save_lock:       # not beside a save; the same lock order as save()
                if model is None or generation != self._generation:
                    return
                if cosine_store.install_beside(folder, self.journal, out):
                    with self._lock:
                        if generation == self._generation:
                            self.index.assoc = model
        finally:
            out.unlink(missing_ok=True)

    def _assoc_if_stale(self, index: TokenCosineIndex | None = None) -> None:
        """The associations a query ranks with are a function of the index, not of the process that
        asks, so the daemon and an in-process CLI answer alike: up to INLINE_ASSOC_ROWS rows (a build
        costs at most ~0.15 s there), the model of exactly the rows indexed, built when a row was added;
        beyond, the model saved beside the index (read again when a save or the daemon's learning child
        rewrote it). A view with no folder (benchmarks, tests) builds when stale, as it has no other."""
        index = self.index if index is None else index
        if not index.expand:
            return
        rows = len(index)
        if rows <= INLINE_ASSOC_ROWS:
            if index.assoc is None or index.assoc.rows != rows:
                index.assoc = assoc.build(index)
        elif self.index_dir is not None:
            index.assoc = self.associations()
        elif index.assoc is None or index.assoc.stale(rows):
            index.assoc = assoc.build(index)

    def associations(self) -> assoc.Associations | None:
        """The learned associations saved beside this view's index, for another ranking (the token-
        cosine leg of `search_context`), while that saved index still covers the journal (not after a
        compaction, which deletes both, or a replaced journal). Read from the file and kept until it
        changes; never built, caught up or waited for here, so a question never waits on this view and
        a daemon and a CLI get the same model. None until a save wrote one (catch-up saves every
        SAVE_EVERY events, the daemon at its exit)."""
        if not self.index.expand or self.index_dir is None:
            return None
        path = assoc.path_beside(self.index_dir)
        try:
            info = path.stat()
            if not cosine_store.covers(self.index_dir, self.journal):
                return None
        except OSError:
            return None
        key = (info.st_mtime_ns, info.st_size, info.st_ino)
        cached = self._learned
        if cached is None or cached[0] != key:
            cached = self._learned = (key, assoc.load(path))
        return cached[1]

    def _save_if_due(self) -> None:
        if self._behind:
            return   # the build saves
        saved = max(self._saved[0], 0)
        # a young index saves at doubling sizes from FIRST_SAVE rows (search_context reads the learned
        # associations a save writes), then every save_every events, and a large one at most every 5%
        step = max(min(self.save_every, max(saved, FIRST_SAVE)), saved // 20)
        due = len(self.index) - saved >= step
        if self.save_every and self.index_dir is not None and due:
            try:
                self.save()
            except OSError as exc:  # a view that cannot be saved still answers
                log.warning("token-cosine: cannot save the index to %s: %s", self.index_dir, exc)

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

    # ---- querying -----------------------------------------------------------------------------
    def search(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None, explain: bool = False) -> list[Hit]:
        return self.ranked(query, since_ms=since_ms, limit=limit, filters=filters, until_ms=until_ms,
                           explain=explain)[0]

    def ranked(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None, explain: bool = False) -> tuple[list[Hit], list[str]]:
        """The hits (each with how its score was made, with `explain`), and notes: what was left out
        while the index builds (`coverage`)."""
        hits, notes = self._ranked(query, since_ms, limit, filters, until_ms, explain)
        return list(hits), notes

    def search_lazily(self, query: str, *, since_ms: int | None, limit: int, filters: Filters) -> Iterator[Hit]:
        """`search`'s hits, each read from the journal when it is taken: a prompt's recall takes the
        few its budget holds of the `limit` ranked (bench/RESULTS.md, round sixteen)."""
        return self._ranked(query, since_ms, limit, filters, None, False)[0]

    def _ranked(self, query: str, since_ms: int | None, limit: int, filters: Filters, until_ms: int | None,
                explain: bool) -> tuple[Iterator[Hit], list[str]]:
        original = query
        query, holds = constraints(query)
        hidden = self.forgotten.hashes()
        # until a compaction drops them, forgotten rows may hold some of the top places: ask for more
        wanted = limit + min(len(hidden), 1000) if hidden else limit
        if holds is not None:
            wanted += CONSTRAINED_EXTRA     # phrases and -words filter the ranked candidates
        params = {"since_ms": since_ms, "until_ms": until_ms, "source": filters.source, "limit": wanted,
                  "workspace": filters.workspace, "session": filters.session, "kind": filters.kind,
                  "exclude": terms_of(parse(original).excluded),
                  "groups": [[tokenize(alt) for alt in group] for group in parse(original).groups]}
        with self._lock:
            self._catch_up()
            scored, offsets = self._ranking(query, params)
            note = self.coverage()
        if self.save_in_queries:
            self._save_if_due()
        return self._hits(scored, offsets, limit, filters, holds, explain), [note] if note else []

    def _ranking(self, query: str, params: dict[str, Any]) -> tuple[list[Scored], list[int]]:
        """Under the lock, caught up: the ranking and its rows' offsets, from the tail of the newest
        events while a build owns the index, else from the index."""
        if self._behind and self._tail is not None:
            scored = self._tail.index.search(query, **params)
            return scored, [self._tail.offsets[s.row] for s in scored]
        self._assoc_if_stale()
        self._used = time.monotonic()
        try:
            scored = self.index.search(query, **params)
            return scored, [self.offsets[s.row] for s in scored]
        except IndexError as exc:
            if not self.loaded_from_disk:
                raise
            # Loading checks shapes and bounds of everything but the postings (that would read
            # them all); a damaged posting surfaces here: rebuild from the journal, once.
            log.warning("token-cosine: saved index damaged (%s); rebuilding", exc)
            self.rebuild_reason, self.loaded_from_disk = f"damaged postings: {exc}", False
            self._reset()
            self._catch_up()
            return self._ranking(query, params)

    def _hits(self, scored: list[Scored], offsets: list[int], limit: int, filters: Filters,
              holds: Callable[[Event], bool] | None, explain: bool = False) -> Iterator[Hit]:
        """The first `limit` of `scored` that may be served, read from the journal one by one."""
        forgotten = self.forgotten
        hidden = forgotten.hashes()

        def each() -> Iterator[Hit]:
            given = 0
            for s, offset in zip(scored, offsets, strict=True):
                if given >= limit:
                    return
                event = self.journal.event(self.journal.read_line_at(offset))
                if (event is not None and not (hidden and forgotten.hides(event.id))
                        and (holds is None or holds(event)) and not filters.hides(event)):
                    given += 1
                    yield Hit(event, s.score, cosine_explain(s) if explain else None)

        return each()


    def session_events(self, filters: Filters, since_ms: int, limit: int) -> list[Event] | None:
        """What substring search's `search(None, ...)` gives for a session filter, the newest `limit`
        events of `filters.session` from `since_ms` on that pass `filters`, newest first, from the
        session's own rows (`TokenCosineIndex.session_rows`) instead of a scan of the window. None
        while a build owns the index (the tail may not hold the session's older events)."""
        labels = filters.to_dict()
        session = labels.pop("session")
        forgotten = self.forgotten
        hidden = forgotten.hashes()
        wanted = limit + min(len(hidden), 1000)       # forgotten rows, until a compaction drops them
        with self._lock:
            self._catch_up()
            if self._behind:
                return None      # a build owns the index: the caller scans the window instead
            offsets = [self.offsets[row] for row in
                       itertools.islice(self.index.session_rows(session, since_ms, labels), wanted)]
        events = []
        for offset in offsets:
            event = self.journal.event(self.journal.read_line_at(offset))
            if event is not None and not (hidden and forgotten.hides(event.id)) and filters.match(event):
                events.append(event)
        return sorted(events, key=lambda e: e.ts_ms, reverse=True)[:limit]


class EmbeddingView:
    """Vectors from a remote embedder, cached on disk per model and following the journal.

    Each event is embedded once, ever (the cache is keyed by event id). A short-lived process
    embeds at most `sync_limit` missing events before answering and says how many it left for
    `urchin embed` or the daemon; the daemon calls `catch_up()` in the background.
    """

    def __init__(self, journal: Journal, home: Path, embedder: Embedder, locate: Callable[[str], Event | None],
                 sync_limit: int = 2000) -> None:
        self.journal = journal
        self.home = home
        self.embedder = embedder
        self.locate = locate
        self.sync_limit = sync_limit
        # The daemon's embedder loop follows the journal (`SemanticViews.embed_in_background`): queries
        # then leave backlogs to it, and it embeds BACKGROUND_CHUNK texts per request.
        self.background = False
        self._cache: VectorCache | None = None
        self._lock = threading.Lock()
        self._forgotten = ForgetLog(journal)
        self.backlog = 0

    @property
    def mode(self) -> str:
        return f"embedder ({self.embedder.model})"

    def cache(self) -> VectorCache:
        if self._cache is None:
            self._cache = VectorCache(self.home, self.embedder.fingerprint, self.embedder.dim).open()
        return self._cache

    def _offset_file(self) -> Path:
        return self.cache().path / "journal.offset"

    def pending(self, limit: int | None = None) -> tuple[list[Event], int]:
        """Events the cache lacks (oldest first, at most `limit`), and the offset they reach. Lines are
        read in growing chunks and only the ids parsed, but for the events missing: a query asks for a
        few, and a backlog's first ones are near its start."""
        cache = self.cache()
        cache.refresh()      # another process's appends, or its drop (a compaction's)
        start = self._checked_to()
        missing: list[Event] = []
        end, chunk = start, _PENDING_CHUNK
        while True:
            result = self.journal.read_from(end, chunk)
            if result.next_offset == end:
                return missing, end
            for offset, line in result.lines:
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                event_id = record.get("id") if isinstance(record, dict) else None
                if isinstance(event_id, str) and event_id in cache:
                    continue
                event = self.journal.event(line)     # what is embedded (and cached) is redacted
                if event is not None and event.id not in cache:
                    missing.append(event)
                    if limit is not None and len(missing) >= limit:
                        return missing, offset + len(line) + 1
            end, chunk = result.next_offset, min(chunk * 4, _CATCH_UP_BYTES)

    def _checked_to(self) -> int:
        """Where `pending` starts: `journal.offset` holds "OFFSET GENERATION", the journal offset up to
        which every event is cached, in the journal its forget generation names. Another generation
        (a compaction rewrote the journal since), a journal shorter than the offset (replaced or
        repaired), or no file: every event is checked again."""
        try:
            offset, _, generation = self._offset_file().read_text("ascii").partition(" ")
            start, seen = int(offset or 0), int(generation or 0)
        except (OSError, ValueError):      # none, not a file, not ASCII digits: check every event
            return 0
        if seen != self._forgotten.generation() or not 0 < start <= self.journal.size():
            return 0
        try:      # the start of a line, or the journal is not the one the record was made in
            with self.journal.path.open("rb") as handle:
                handle.seek(start - 1)
                return start if handle.read(1) == b"\n" else 0
        except OSError:
            return 0

    def _checked(self, end: int, generation: int, stamp: tuple[int, ...], wait: bool) -> None:
        """Record that every event before `end` is cached, as `pending` found in the journal of forget
        `generation` while the cache had `stamp`. Under the writers' lock, and only if no drop came
        between: a drop takes vectors out (rewritten lines) and resets the record after it."""
        cache = self.cache()
        with contextlib.suppress(CacheBusy), cache.exclusive(wait):
            if cache.stamp() == stamp:
                try:
                    _write_private(self._offset_file(), f"{end} {generation}".encode())
                except OSError as exc:   # e.g. a folder in its place: the next pass checks every event
                    log.warning("%s not written (%s); every event is checked again", self._offset_file(), exc)

    def catch_up(self, limit: int | None = None, progress: Callable[[int], None] | None = None,
                 wait: bool = True) -> int:
        """Embed what the cache lacks (up to `limit` events); returns how many were embedded.
        `wait=False`: `CacheBusy` rather than wait for another writer of the cache (a query)."""
        with self._lock:
            return self._catch_up(limit, progress, wait)

    def _catch_up(self, limit: int | None, progress: Callable[[int], None] | None, wait: bool) -> int:
        generation, stamp = self._forgotten.generation(), self.cache().stamp()
        events, end = self.pending(limit)
        chunk = BACKGROUND_CHUNK if self.background else 512
        added = embed_events(self.embedder, self.cache(), events, chunk=chunk, progress=progress, wait=wait,
                             keep=self._forgotten.keep_current(generation)) if events else 0
        self._checked(end, generation, stamp, wait)
        return added

    def _embed_for_query(self) -> bool:
        """What a query embeds before it answers, never waiting for anyone: not for the embedder loop
        (this view's lock), nor for another writer of the cache (the index process mid-request). A
        process on its own (the CLI) embeds up to `sync_limit` events; beside the daemon's loop a query
        embeds a few new events (one small request), and none of a backlog: the loop is working through
        it, and the query answers from what is cached. Returns whether events are left not embedded."""
        if not self._lock.acquire(blocking=False):
            return bool(self.pending(1)[0])
        try:
            if not self.background:
                with contextlib.suppress(CacheBusy):
                    self._catch_up(self.sync_limit, None, wait=False)
                return bool(self.pending(1)[0])
            generation, stamp = self._forgotten.generation(), self.cache().stamp()
            missing, end = self.pending(INLINE_BESIDE_LOOP + 1)
            if len(missing) > INLINE_BESIDE_LOOP:
                return True
            if missing:     # (none: the offset is the loop's to move, a query writes nothing)
                try:
                    embed_events(self.embedder, self.cache(), missing, wait=False,
                                 keep=self._forgotten.keep_current(generation))
                except CacheBusy:
                    return True
                self._checked(end, generation, stamp, wait=False)
            return False
        finally:
            self._lock.release()

    def search(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None, explain: bool = False) -> tuple[list[Hit], list[str]]:
        notes: list[str] = []
        if self._embed_for_query():
            notes.append("some events are not embedded yet and were not searched: "
                         + ("the daemon is embedding them" if self.background else "run `urchin embed`"))
        query, holds = constraints(query)
        vector = self.embedder.embed_query(query)
        events: dict[str, Event | None] = {}

        def accept(event_id: str) -> bool:
            if event_id not in events:
                events[event_id] = self.locate(event_id)
            event = events[event_id]
            return event is not None and filters.match(event) and (holds is None or holds(event))

        cache = self.cache()
        ranked = cache.search(vector, since_ms=since_ms, until_ms=until_ms, accept=accept, limit=limit)
        # The score shown is the cosine measured against the query's own background (score.EMBEDDER):
        # a per-query increasing map of the cosine, so it keeps the cosine's order and ties.
        mean, spread = cache.background(vector)
        hits = [Hit(event, embedder_score(cosine, mean, spread),
                    embedder_explain(cosine, mean, spread) if explain else None)
                for event_id, cosine in ranked if (event := events.get(event_id)) is not None]
        return hits, notes


CONSTRAINED_EXTRA = 500   # token-cosine candidates ranked beyond `limit` when phrases or -words filter them


def embedder_evidence(cosine: float, mean: float, spread: float) -> Evidence:
    """A cosine's evidence for score.EMBEDDER: its z-score against the query's background, in 0-1."""
    return Evidence(share=0.0, every=False, dense=z_unit((cosine - mean) / spread))


def embedder_score(cosine: float, mean: float, spread: float) -> float:
    """The calibrated score `urchin semantic` shows for an embedder's cosine (score.EMBEDDER)."""
    return EMBEDDER.score(embedder_evidence(cosine, mean, spread))


def embedder_explain(cosine: float, mean: float, spread: float) -> dict[str, Any]:
    """How an embedder hit's score was made: its cosine, the query's background, and score.EMBEDDER's parts."""
    out = EMBEDDER.explain(embedder_evidence(cosine, mean, spread))
    out["cosine"] = {"value": round(cosine, 6), "backgroundMean": round(mean, 6), "backgroundSpread": round(spread, 6),
                     "z": round((cosine - mean) / spread, 6), "dense": f"z / {Z_SPAN:g}, within 0-1"}
    return out


_CAPPED = "a session-leg pick: capped at the score above it, so scores never rise down the list"


def cosine_explain(s: Scored) -> dict[str, Any]:
    """How a token-cosine hit's score was made (score.TOKEN_COSINE's parts add up to `raw`): `rank` is
    the context-smoothed cosine with its priors (decisions, a named source, learned associations), at
    most 1; `every` the tier of a hit holding every word. `raw` is the ranker's own float32 sum."""
    every = s.raw - TOKEN_COSINE.rank * s.match > TOKEN_COSINE.every / 2
    out = TOKEN_COSINE.explain(Evidence(share=0.0, every=every, rank=s.match))
    out["raw"] = round(s.raw + TOKEN_COSINE.bias, 6)
    if s.score < TOKEN_COSINE.shown_raw(s.raw):
        out["capped"] = _CAPPED
    out["score"] = s.score
    return out


def constraints(query: str) -> tuple[str, Callable[[Event], bool] | None]:
    """(what to rank by: the query without -words and OR, a test every hit must pass or None).

    The websearch language of every leg: a "phrase" must occur (case and spacing aside), an -excluded
    word must not (as a term, so `-deploy` drops "deploys" too).
    """
    q = parse(query)
    if not q.phrases and not q.excluded and not q.excluded_phrases:
        return q.positive or query, None
    phrases = [" ".join(p.lower().split()) for p in q.phrases]
    out_phrases = [" ".join(p.lower().split()) for p in q.excluded_phrases]
    excluded = terms_of(q.excluded)

    def holds(event: Event) -> bool:
        text = f"{event.title or ''} {event.content}"
        flat = " ".join(text.lower().split())
        return (all(p in flat for p in phrases) and not any(p in flat for p in out_phrases)
                and not (excluded & set(tokenize(text))))

    return q.positive or query, holds


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _release_free_memory() -> None:
    """Give the heap a bulk build freed back to the OS (glibc keeps it otherwise: ~1/3 of the peak)."""
    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl): nothing to do
        pass
