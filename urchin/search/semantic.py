"""Ranked (semantic) search as a view that follows the journal by byte offset.

`TokenCosineView` keeps a `TokenCosineIndex` caught up with the journal and maps its rows back to
journal offsets, so it holds no event text: hits are read back from the journal (a few `pread`s).
"""

from __future__ import annotations

import threading
from array import array

from urchin.event import Event
from urchin.journal import Journal
from urchin.search.cosine import TokenCosineIndex
from urchin.search.query import Filters, Hit

__all__ = ["TokenCosineView"]

_CATCH_UP_BYTES = 16 << 20


class TokenCosineView:
    """Thread-safe: one lock serialises catch-up and queries (the index itself is not thread-safe)."""

    mode = "token-cosine"

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.index = TokenCosineIndex()
        self.offsets = array("q")
        self.next_offset = 0
        self._lock = threading.Lock()

    def catch_up(self) -> int:
        """Index every complete line appended since the last call; returns how many events were added."""
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> int:
        added = 0
        while True:
            result = self.journal.read_from(self.next_offset, _CATCH_UP_BYTES)
            if not result.lines:
                self.next_offset = result.next_offset
                return added
            batch: list[Event] = []
            for offset, line in result.lines:
                event = Event.from_json(line)
                if event is not None:
                    batch.append(event)
                    self.offsets.append(offset)
            self.index.add_many(batch)
            added += len(batch)
            self.next_offset = result.next_offset

    def search(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None) -> list[Hit]:
        with self._lock:
            self._catch_up()
            scored = self.index.search(query, since_ms=since_ms, until_ms=until_ms, source=filters.source,
                                       workspace=filters.workspace, session=filters.session, kind=filters.kind,
                                       limit=limit)
            offsets = [self.offsets[s.row] for s in scored]
        hits = []
        for s, offset in zip(scored, offsets, strict=True):
            line = self.journal.read_line_at(offset)
            event = Event.from_json(line) if line is not None else None
            if event is not None:
                hits.append(Hit(event, s.score))
        return hits
