# mypy: disable-error-code="attr-defined"
# (a mixin of `Memory`: the attributes and methods it uses are Memory's own)
"""Memory in a long-lived process (the daemon): views kept current by following the journal."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from urchin.config import Settings
from urchin.errors import JournalError
from urchin.journal import Journal

if TYPE_CHECKING:
    from urchin.search.substring import SubstringSearcher

_FOLLOW_CHUNK = 8 << 20


@runtime_checkable
class HotView(Protocol):
    """An in-memory view a long-lived process keeps current by following the journal.

    `feed` gets complete raw lines `(offset, bytes)` in file order and the offset they end at; it
    must be quick (queue slow work, like embeddings, to a thread of its own). `reset` drops
    everything when the journal was replaced or truncated; feeding then restarts at offset 0.
    """

    def feed(self, lines: Sequence[tuple[int, bytes]], next_offset: int) -> None: ...

    def reset(self) -> None: ...


class HotOps:
    """Mixed into `Memory`; uses its settings, journal and views."""

    settings: Settings
    journal: Journal
    substring: SubstringSearcher
    _views: list[HotView]
    _view_offsets: list[int]
    _hot: bool
    _followed: int
    _lines_followed: int
    _refresh_lock: threading.Lock
    _followed_inode: int | None

    # ---- hot views (long-lived processes: the daemon) ------------------------------------------
    def add_view(self, view: HotView) -> None:
        """Keep `view` current from the next `refresh` on; it is fed from offset 0 first."""
        with self._refresh_lock:
            self._views.append(view)
            self._view_offsets.append(0)

    def warm(self) -> None:
        """Switch to hot mode: ids in memory, every view fed to the journal's end, reads catch up first."""
        self.ingestor.keep_ids_in_memory()
        if self.forget_log.pending():  # a forget a crash interrupted: finish its compaction first
            self.compact()
        with self.journal.locked():  # load the id index now, not inside the first write's latency
            self.ingestor.ids.catch_up()
        # The substring block index follows the journal by itself; build what it lacks in the
        # background (about 15 s per million events) while everything else serves.
        threading.Thread(target=self.substring.catch_up, name="urchin-substring-index", daemon=True).start()
        self._refresh_views()
        # Created now, built by the follower's first refresh() in the background: a large journal
        # takes minutes to index, and the daemon should not wait for that to serve everything else.
        self.cosine_view()
        self._hot = True

    def refresh(self) -> int:
        """Bring every view up to the journal's end (whoever appended); returns the offset reached.

        Cheap when nothing changed (a `stat` or two). The daemon's follower calls it on every
        journal change and every half second; hot reads refresh the fed views first, so a client
        reads its own writes. The token-cosine view follows the journal by itself (its own lock).
        """
        end = self._refresh_views()
        if self._cosine is not None:
            self._cosine.catch_up()
        return end

    def save_views(self) -> bool:
        """Persist the views that keep a copy on disk (the token-cosine index); the daemon calls this
        at shutdown (catch-up also saves every so often by itself). False when nothing was written."""
        return self._cosine.save() if self._cosine is not None else False

    def _refresh_views(self) -> int:
        with self._refresh_lock:
            end = self.journal.size()
            inode = self._journal_inode()
            replaced = self._followed_inode is not None and inode != self._followed_inode
            self._followed_inode = inode
            if end < self._followed or replaced:  # replaced (compacted) or truncated: every view starts over
                for view in self._views:
                    view.reset()
                self._view_offsets = [0] * len(self._views)
                self._followed = self._lines_followed = 0
            for index, view in enumerate(self._views):
                self._view_offsets[index] = self._feed(view.feed, self._view_offsets[index], end)
            self._count_to(end)
            return self._followed

    def _journal_inode(self) -> int:
        try:
            return os.stat(self.journal.path).st_ino
        except FileNotFoundError:
            return 0

    @property
    def followed(self) -> tuple[int, int]:
        """(offset, complete lines) that `refresh` has reached: the hot views' position."""
        return self._followed, self._lines_followed

    def _feed(self, feed: Callable[[Sequence[tuple[int, bytes]], int], None], offset: int, end: int) -> int:
        while offset < end:
            result = self.journal.read_from(offset, _FOLLOW_CHUNK)
            if result.next_offset == offset:
                break  # only a partial line is left: a writer is mid-append
            feed(result.lines, result.next_offset)
            offset = result.next_offset
        return offset

    def _count_to(self, end: int) -> None:
        """Advance `followed` over complete lines up to `end`, counting newlines (fast: no splitting)."""
        if self._followed >= end:
            return
        try:
            with self.journal.path.open("rb") as handle:
                handle.seek(self._followed)
                position = self._followed
                while position < end:
                    chunk = handle.read(min(_FOLLOW_CHUNK, end - position))
                    if not chunk:
                        break
                    last = chunk.rfind(b"\n")
                    if last >= 0:
                        self._lines_followed += chunk.count(b"\n")
                        self._followed = position + last + 1
                    position += len(chunk)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.journal.path}: cannot read: {exc.strerror}") from None

    def _catch_up(self) -> None:
        if self._hot:
            self._refresh_views()
