"""Hot views: in-memory views a long-lived process (the daemon) keeps current by following the journal.

Also the count of the journal's lines (the daemon's `/health`): a backlog of more than COUNT_INLINE
bytes (a daemon's start on a large journal) is counted by a thread of its own, so neither the start nor
a read waits for a scan that grows with the journal; until it is done the count is a lower bound.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from urchin.errors import JournalError
from urchin.journal import Journal, JournalMark
from urchin.requests_first import give_way, lower_thread_priority

__all__ = ["HotView", "HotViews"]

_FOLLOW_CHUNK = 8 << 20
_TAIL_STEP = 64 << 10


@runtime_checkable
class HotView(Protocol):
    """An in-memory view a long-lived process keeps current by following the journal.

    `feed` gets complete raw lines `(offset, bytes)` in file order and the offset they end at; it
    must be quick (queue slow work, like embeddings, to a thread of its own). `reset` drops
    everything when the journal was replaced or truncated; feeding then restarts at offset 0.
    """

    def feed(self, lines: Sequence[tuple[int, bytes]], next_offset: int) -> None: ...

    def reset(self) -> None: ...


class HotViews:
    """The fed views and how far they got. Part of `Memory`; `start()` switches reads to catching up."""

    COUNT_INLINE = 16 << 20    # a longer stretch of uncounted lines is counted in the background

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._views: list[HotView] = []
        self._offsets: list[int] = []
        self._followed = 0
        self._lines = 0           # lines ending at or before _counted
        self._counted = 0         # how far lines are counted (behind _followed while the counter runs)
        self._era = 0             # bumped when the journal is replaced: a running count is void
        self._counter: threading.Thread | None = None
        self._mark = JournalMark(0, 0, "", 0)
        self._lock = threading.Lock()
        self.hot = False

    def add(self, view: HotView) -> None:
        """Keep `view` current from the next `refresh` on; it is fed from offset 0 first."""
        with self._lock:
            self._views.append(view)
            self._offsets.append(0)

    @property
    def followed(self) -> tuple[int, int]:
        """(offset, complete lines) that `refresh` has reached; while `counting`, the lines counted so far."""
        return self._followed, self._lines

    @property
    def counting(self) -> bool:
        """Whether lines before `followed`'s offset are still being counted (in the background)."""
        return self._counted < self._followed

    def catch_up(self) -> None:
        """Before a hot read: bring the fed views to the journal's end (reads see their own writes)."""
        if self.hot:
            self.refresh()

    def refresh(self) -> int:
        """Feed every view to the journal's end; a replaced or cut journal (its mark) restarts them all."""
        with self._lock:
            end = self._journal.size()
            if self._journal.replaced(self._mark) is not None:
                for view in self._views:
                    view.reset()
                self._offsets = [0] * len(self._views)
                self._followed = self._lines = self._counted = 0
                self._era += 1
            for index, view in enumerate(self._views):
                self._offsets[index] = self._feed(view.feed, self._offsets[index], end)
            self._followed = self._line_end(end)
            self._mark = self._journal.mark(self._followed)
            if self._followed - self._counted <= self.COUNT_INLINE and self._counter is None:
                self._count(self._era, self._followed)
            elif self._counter is None:
                self._counter = threading.Thread(target=self._count_behind, name="urchin-line-count", daemon=True)
                self._counter.start()
            return self._followed

    def _feed(self, feed: Callable[[Sequence[tuple[int, bytes]], int], None], offset: int, end: int) -> int:
        while offset < end:
            result = self._journal.read_from(offset, _FOLLOW_CHUNK)
            if result.next_offset == offset:
                break  # only a partial line is left: a writer is mid-append
            feed(result.lines, result.next_offset)
            offset = result.next_offset
        return offset

    def _line_end(self, end: int) -> int:
        """The end of the last complete line up to `end` (not before `_followed`): a read of the tail."""
        if end <= self._followed:
            return self._followed
        try:
            with self._journal.path.open("rb") as handle:
                stop = end
                while stop > self._followed:
                    start = max(self._followed, stop - _TAIL_STEP)
                    handle.seek(start)
                    last = handle.read(stop - start).rfind(b"\n")
                    if last >= 0:
                        return start + last + 1
                    stop = start
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise JournalError(f"{self._journal.path}: cannot read: {exc.strerror}") from None
        return self._followed

    def _count_behind(self) -> None:
        """The background counter: until the count reaches the lines followed (which may move on)."""
        lower_thread_priority()
        try:
            while True:
                with self._lock:
                    era, target, start = self._era, self._followed, self._counted
                    if start >= target:
                        self._counter = None
                        return
                self._count(era, target, locked=False)
                with self._lock:
                    if self._era == era and self._counted == start:   # gone or cut: the next refresh sees it
                        self._counter = None
                        return
        except JournalError:
            with self._lock:
                self._counter = None

    def _count(self, era: int, end: int, locked: bool = True) -> None:
        """Count the newlines between `_counted` and `end` (a line end), chunk by chunk; each chunk's
        count is added only if the journal was not replaced meanwhile (`era`). `locked`: the caller
        holds the lock (inline); the background counter takes it per chunk only."""
        position = self._counted
        try:
            with self._journal.path.open("rb") as handle:
                handle.seek(position)
                while position < end:
                    if not locked:
                        give_way()       # the background counter: requests first
                    chunk = handle.read(min(_FOLLOW_CHUNK, end - position))
                    if not chunk:
                        break
                    lines = chunk.count(b"\n")     # outside the lock: reads refresh under it
                    with contextlib.nullcontext() if locked else self._lock:
                        if self._era != era:
                            return
                        self._lines += lines
                        position = self._counted = position + len(chunk)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self._journal.path}: cannot read: {exc.strerror}") from None
