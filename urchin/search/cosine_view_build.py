"""The token-cosine view's build in the background: while a large backlog (an import, a first start) is
indexed by a thread or a child process, queries answer from a `Tail` of the newest events; the build
saves as it goes, and its index (or the saved copy) is swapped in once it has caught up.
"""

from __future__ import annotations

import logging
import pickle
import threading
import time
import weakref
from collections.abc import Iterator

import numpy as np

from urchin.requests_first import give_way, lower_thread_priority
from urchin.search import assoc, cosine_store
from urchin.search.cosine import TokenCosineIndex
from urchin.search.cosine_extract import Batch, WorkerError, extract_parallel, line_aligned_end
from urchin.search.cosine_tail import Tail, identity_of
from urchin.search.cosine_view import _CATCH_UP_BYTES, BUILD_RETRY_S, _release_free_memory
from urchin.search.cosine_view_learn import LearningView
from urchin.search.postings import Blob, RowOffsets, Segment, SplitColumn

__all__ = ["BuildingView"]

log = logging.getLogger("urchin.search.semantic")   # the name these lines logged under before the split

_SWAP_BYTES = 256 << 10  # a build swaps its index in once it is this close to the journal's end
_SPILL_POSTINGS = 1 << 20   # a build writes a frozen segment this large to disk at once (`_spill`)
_GROW_STEP = 256 << 10      # a tail grown in the background reads this much between requests (~20 ms of CPU)
_ROWS_BYTES = 1 << 20       # a build writes its rows' ids out once this many bytes of them are held (`_spill_rows`)


class BuildingView(LearningView):
    """`LearningView` with its build in the background; see `TokenCosineView`."""

    _rows: tuple[weakref.ref[TokenCosineIndex], cosine_store.RowFiles] | None = None   # see `_spill_rows`

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

        def done() -> bool:    # a saved index of another journal (a copied home's, a replaced one) is none
            return (self.journal.size() - cosine_store.saved_offset(folder) <= _SWAP_BYTES
                    and cosine_store.covers(folder, self.journal))

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
            self._spill_rows(force=True)
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
            self._spill_rows(force=True)
            self._save_logged(learn)     # the few rows read since (a child's build: for the next process)
        if self._rows is not None:
            self._rows[1].close()
            self._rows = None
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
                    self._spill_rows(force=True)
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

        written = []

        def spilled(segment: Segment) -> Segment:
            if not segment.rows.flags.writeable or segment.nnz < _SPILL_POSTINGS:
                return segment      # mapped already (spilled, or loaded), or small: merged again soon
            try:
                written.append(segment.nnz)
                return Segment(*cosine_store.spill(folder, (segment.indptr, segment.rows, segment.tf), self._reuse))
            except OSError as exc:
                if self._spilling:
                    log.warning("token-cosine: cannot write a segment to %s (%s); this build keeps its segments "
                                "in memory", folder, exc)
                self._spilling = False
                return segment

        self.index.swap_segments(spilled)
        self._spill_rows()
        if written:
            # the segment's arrays and the batches' temporaries since the last spill, freed: glibc keeps
            # such space resident (heap chunks under its ~32 MB mmap threshold), ~0.1-0.2 GB at 3M events
            _release_free_memory()

    def _spill_rows(self, force: bool = False) -> None:
        """A build from scratch keeps its rows' ids, their ends and journal offsets in files as they
        grow (`cosine_store.RowFiles`), the bytes added since held until there are `_ROWS_BYTES` of
        them (`force`: all, before a save, which then copies the files). A build resumed from a save
        keeps them in memory (their start is the saved generation's map), as does one whose files
        cannot be written (`_spill`'s warning)."""
        index, folder = self.index, self.index_dir
        ids = index._id_bytes
        if folder is None or not self.save_every or not self._spilling or not ids.tail:
            return
        if len(ids.tail) < _ROWS_BYTES and not force:
            return
        rows = self._rows
        if rows is None or rows[0]() is not index:
            if len(ids.base):
                return   # resumed: its rows start in the saved generation
            if rows is not None:
                rows[1].close()
            rows = self._rows = (weakref.ref(index), cosine_store.RowFiles(folder))
        files = rows[1]
        ends = index._id_end
        try:
            id_map = files.append("ids", np.frombuffer(ids.tail, dtype=np.uint8), np.dtype(np.uint8))
            tail_ends = ends.tail.view() if isinstance(ends, SplitColumn) else ends.view()
            end_map = files.append("id_end", tail_ends, np.dtype(np.int64))
            offset_map = files.append("offsets", np.frombuffer(self.offsets.tail, dtype=np.int64), np.dtype(np.int64))
        except OSError as exc:
            log.warning("token-cosine: cannot write rows to %s (%s); this build keeps them in memory", folder, exc)
            self._spilling = False
            return
        index._id_bytes, index._id_end = Blob(id_map), SplitColumn(end_map)
        self.offsets = RowOffsets(offset_map)

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
