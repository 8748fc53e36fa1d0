"""Hot views: in-memory views a long-lived process (the daemon) keeps current by following the journal."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from urchin.errors import JournalError
from urchin.journal import Journal, JournalMark

__all__ = ["HotView", "HotViews"]

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


class HotViews:
    """The fed views and how far they got. Part of `Memory`; `start()` switches reads to catching up."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._views: list[HotView] = []
        self._offsets: list[int] = []
        self._followed = 0
        self._lines = 0
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
        """(offset, complete lines) that `refresh` has reached."""
        return self._followed, self._lines

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
                self._followed = self._lines = 0
            for index, view in enumerate(self._views):
                self._offsets[index] = self._feed(view.feed, self._offsets[index], end)
            self._count_to(end)
            self._mark = self._journal.mark(self._followed)
            return self._followed

    def _feed(self, feed: Callable[[Sequence[tuple[int, bytes]], int], None], offset: int, end: int) -> int:
        while offset < end:
            result = self._journal.read_from(offset, _FOLLOW_CHUNK)
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
            with self._journal.path.open("rb") as handle:
                handle.seek(self._followed)
                position = self._followed
                while position < end:
                    chunk = handle.read(min(_FOLLOW_CHUNK, end - position))
                    if not chunk:
                        break
                    last = chunk.rfind(b"\n")
                    if last >= 0:
                        self._lines += chunk.count(b"\n")
                        self._followed = position + last + 1
                    position += len(chunk)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self._journal.path}: cannot read: {exc.strerror}") from None
