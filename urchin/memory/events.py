"""Memory's events part: the journal's events by id, its last ones, and following it (`tail -f`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from urchin.event import Event
from urchin.forget import ForgetLog, line_id
from urchin.journal import Journal

if TYPE_CHECKING:
    from urchin.idindex import IdIndex  # comes with the write path, built on first use

__all__ = ["JournalEvents"]


class JournalEvents:
    """Reads of the journal that skip forgotten events. Part of `Memory`."""

    def __init__(self, journal: Journal, forgotten: ForgetLog, ids: Callable[[], IdIndex]) -> None:
        self._journal = journal
        self._forgotten = forgotten
        self._ids = ids
        self._follow_generation: int | None = None

    def locate(self, event_id: str) -> Event | None:
        if self._forgotten.hides(event_id):
            return None
        ids = self._ids()
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
