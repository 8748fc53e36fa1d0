"""Memory's events part: the journal's events by id, literal search and the latest events of a window,
its last ones, and following it (`tail -f`). Forgotten events never show."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from urchin.errors import NotFoundError
from urchin.event import Event
from urchin.facade.hot import HotViews
from urchin.facade.writing import WritePath
from urchin.journal import Journal
from urchin.search.query import Filters, Hit, SearchResult, older_hint, window_start_ms
from urchin.search.substring import SubstringSearcher
from urchin.tombstones import line_id

if TYPE_CHECKING:
    from urchin.params.reading import RecentParams, SessionParams
    from urchin.params.search import SearchParams

__all__ = ["JournalEvents"]


class JournalEvents:
    """Reads of the journal that skip forgotten events. Part of `Memory`, which passes the substring
    searcher, the hot views (caught up before a read) and the write path (its id index and redactor)."""

    def __init__(self, journal: Journal, substring: SubstringSearcher, hot: HotViews, write: WritePath) -> None:
        self._journal = journal
        self._substring = substring
        self._forgotten = substring.forgotten
        self._hot = hot
        self._write = write
        self._follow_generation: int | None = None

    # ---- searching (the typed parameters were checked when built) --------------------------------
    def search(self, p: SearchParams, now: datetime | None) -> SearchResult:
        """Literal, case-insensitive search over this journal's content; newest first."""
        since = window_start_ms(p.hours, now)
        filters = Filters(p.source, p.workspace, p.session, p.kind)
        self._hot.catch_up()
        events = self._substring.search(p.query, since_ms=since, limit=p.limit, filters=filters)
        older = None if events else self._substring.older_match(p.query, since, filters)   # "try --hours N"
        return SearchResult([Hit(e) for e in events], p.query, "substring",
                            older=older_hint(older, now) if older is not None else None)

    def recent(self, p: RecentParams, now: datetime | None) -> SearchResult:
        self._hot.catch_up()
        events = self._substring.search(None, since_ms=window_start_ms(p.hours, now), limit=p.limit,
                                        filters=Filters(p.source, p.workspace, p.session, p.kind))
        return SearchResult([Hit(e) for e in events], None, "recent")

    def session(self, p: SessionParams, now: datetime | None) -> SearchResult:
        events = self._substring.search(None, since_ms=window_start_ms(p.hours, now), limit=p.limit,
                                        filters=Filters(session=p.session), oldest_first=True)
        return SearchResult([Hit(e) for e in events], None, "session")

    # ---- by id ------------------------------------------------------------------------------------
    def get(self, event_id: str) -> Event:
        # an id that held a secret is stored, and named, as its keyed hash
        event_id = self._write.ingestor.redactor.redact_id(event_id)
        event = self.locate(event_id)
        if event is None:
            raise NotFoundError(f"no event with id {event_id!r}")
        return event

    def locate(self, event_id: str) -> Event | None:
        """The event with this id: through the id sidecar, then the tail it does not cover yet."""
        if self._forgotten.hides(event_id):
            return None
        ids = self._write.ingestor.ids
        offset = ids.lookup(event_id)
        if offset is not None:
            return self._journal.event(self._journal.read_line_at(offset))
        needle = event_id.encode("utf-8")
        for _, line in self._journal.iter_lines(ids.covered()):
            if needle in line and line_id(line) == event_id:
                return self._journal.event(line)
        return None

    def tail(self, n: int) -> list[Event]:
        out: list[Event] = []
        hides = self._forgotten.hides
        for _, line in self._journal.reverse_lines():
            event = self._journal.event(line)
            if event is not None and not hides(event.id):
                out.append(event)
                if len(out) >= n:
                    break
        out.reverse()
        return out

    def follow(self, offset: int) -> tuple[list[Event], int]:
        log = self._forgotten
        while True:
            generation = log.generation()
            if self._follow_generation is not None:
                for done in log.compactions_since(self._follow_generation):
                    offset = done.map_offset(offset)
            self._follow_generation = generation
            result = self._journal.read_from(offset)
            if log.generation() == generation:
                break  # else the journal was rewritten while we read: map and read again
        hides = log.hides
        events = [e for e in (self._journal.event(line) for _, line in result.lines)
                  if e is not None and not hides(e.id)]
        return events, result.next_offset

    def follow_events(self, offset: int, stop: threading.Event | None, poll_s: float) -> Iterator[Event]:
        while stop is None or not stop.is_set():
            events, offset = self.follow(offset)
            yield from events
            if not events:
                time.sleep(poll_s)
