"""The token-cosine view's saves and the associations learned from what they saved: built inline for
a small index, by a child process at the lowest priority for the daemon's (`urchin.search.assoc_child`),
read back from beside the saved index for every other ranking.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time

from urchin.processes import python_child
from urchin.search import assoc, cosine_store
from urchin.search.cosine import IndexState, TokenCosineIndex
from urchin.search.cosine_view import CosineViewBase

__all__ = ["LearningView", "FIRST_SAVE", "INLINE_ASSOC_ROWS", "LEARN_IDLE_S", "LEARN_TIMEOUT_S", "LEARN_WAIT_S"]

log = logging.getLogger("urchin.search.semantic")   # the name these lines logged under before the split

FIRST_SAVE = 256     # ...but a young index saves at 256, 512, 1,024 ... rows first
INLINE_ASSOC_ROWS = 1_000  # up to this many events, associations are built for the rows a query sees; beyond, at save
LEARN_TIMEOUT_S = 600.0     # a child building the associations (learn_apart) is given up after this
# A learning child (~320 MB at 3M events) starts once no query has read the index for LEARN_IDLE_S, the
# pages the queries mapped released first, so it is never beside a daemon's first whole-index queries
# (~0.5-0.8 GB of mapped postings right after a first build's swap); after LEARN_WAIT_S of queries it
# starts anyway (a busy daemon's model is not left stale for long).
LEARN_IDLE_S = 0.5
LEARN_WAIT_S = 120.0


class LearningView(CosineViewBase):
    """`CosineViewBase` with its saves and learned associations; see `TokenCosineView`."""

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
                offsets = self.offsets.array(copy=not self._behind)
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
                self._until_idle()
                self._learn_once(generation)

    def _until_idle(self) -> None:
        """Wait until no query has read the index for LEARN_IDLE_S since this was asked and none runs
        (at most LEARN_WAIT_S), then drop the pages the queries mapped and malloc's free space
        (`release_pages`) before a child starts. (Right after a swap no query has read the index yet,
        but the first ones are coming, and may take seconds: hence the wait from now, and the lock.)"""
        asked = time.monotonic()
        while (now := time.monotonic()) - asked < LEARN_WAIT_S:
            used = self._used
            if now - max(asked, asked if used is None else used) >= LEARN_IDLE_S and self._lock.acquire(blocking=False):
                self._lock.release()
                self.release_pages(LEARN_IDLE_S)
                return
            time.sleep(min(0.25, LEARN_IDLE_S))

    def _learn_once(self, generation: int) -> None:
        """Build the associations of the index last saved in a child process at the lowest priority
        (`urchin.search.assoc_child`), then install them beside it, if this view has not started over since
        and the saved index still covers the journal; whatever fails leaves the old model in use."""
        folder = self.index_dir
        assert folder is not None
        for old in folder.parent.glob(f"*.{folder.name}.learned.*"):   # a dead child's (one daemon per home)
            old.unlink(missing_ok=True)
        out = folder.with_name(f".{folder.name}.learned.{os.getpid()}-{generation}.tmp")
        command, env = python_child("urchin.search.assoc_child")
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
            if not self.saved_covers():     # kept between queries: see `saved_covers`
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

    def _save_logged(self, learn: bool = True) -> bool:
        try:
            return self.save(learn)
        except OSError as exc:  # a view that cannot be saved still answers
            log.warning("token-cosine: cannot save the index to %s: %s", self.index_dir, exc)
            return False
