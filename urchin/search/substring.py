"""Literal, case-insensitive (Unicode casefold) search over event content, newest first.

This is the straightforward scanner: it folds the journal in large chunks, finds candidate lines
by position, and only parses those. Results are ordered by event timestamp, not file order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from urchin.errors import JournalError
from urchin.event import Event
from urchin.journal import Journal
from urchin.search.query import Filters

__all__ = ["SubstringSearcher"]

_CHUNK = 8 << 20


class SubstringSearcher:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def search(self, query: str | None, *, since_ms: int, limit: int, filters: Filters = Filters(),
               until_ms: int | None = None, oldest_first: bool = False) -> list[Event]:
        """The `limit` newest events in the window whose content contains `query` (None: any)."""
        folded = query.casefold() if query is not None else None
        best: list[tuple[int, str, Event]] = []
        candidates = self._candidates(folded) if folded is not None else self._all()
        for event in candidates:
            if event.ts_ms < since_ms or (until_ms is not None and event.ts_ms > until_ms):
                continue
            if not filters.match(event):
                continue
            if folded is not None and folded not in event.content.casefold():
                continue
            item = (event.ts_ms, event.id, event)
            if len(best) < limit:
                heapq.heappush(best, item)
            elif item[:2] > best[0][:2]:
                heapq.heapreplace(best, item)
        best.sort(key=lambda item: (item[0], item[1]), reverse=not oldest_first)
        return [item[2] for item in best]

    def _all(self) -> Iterator[Event]:
        for chunk in self._chunks():
            for line in chunk.split(b"\n"):
                event = Event.from_json(line)
                if event is not None:
                    yield event

    def _candidates(self, folded: str) -> Iterator[Event]:
        """Events whose line contains the folded query somewhere (content is checked after)."""
        for chunk in self._chunks():
            text = chunk.decode("utf-8", "replace")
            haystack = text.casefold()
            pos = haystack.find(folded)
            if pos < 0:
                continue
            lines = text.split("\n")
            line_no = 0
            counted = 0
            while pos >= 0:
                line_no += haystack.count("\n", counted, pos)
                counted = pos
                event = Event.from_json(lines[line_no])
                if event is not None:
                    yield event
                nl = haystack.find("\n", pos)
                if nl < 0:
                    break
                pos = haystack.find(folded, nl + 1)

    def _chunks(self) -> Iterator[bytes]:
        """The journal in large pieces that end on a line boundary; a partial tail is left out."""
        try:
            handle = self.journal.path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.journal.path}: cannot read the journal: {exc.strerror}") from None
        with handle:
            carry = b""
            while True:
                data = handle.read(_CHUNK)
                if not data:
                    return
                data = carry + data
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry = data
                    continue
                carry = data[cut + 1 :]
                yield data[:cut]
