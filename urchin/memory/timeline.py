"""The timeline: the journal newest first, paged by byte offset, and activity per day per source.

A page reads backwards from a cursor (`g<generation>.<offset>`: a line boundary of the journal as
it was after that many compactions), so the first page and every later one cost the same at any
journal size; a cursor from before a forget is mapped onto the rewritten file. `newer` reads
forwards from the head cursor a page handed out (live updates). Forgotten events are never shown.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from urchin.checks import check_number
from urchin.errors import QueryError
from urchin.event import Event
from urchin.forget import ForgetLog
from urchin.journal import Journal
from urchin.search.query import Filters, check_limit

__all__ = ["Timeline", "TimelinePage", "MAX_SCAN_LINES", "MAX_ACTIVITY_DAYS"]

MAX_SCAN_LINES = 20_000  # a filtered page stops after this many lines and hands back a cursor to go on
MAX_ACTIVITY_DAYS = 366
_FORWARD_BYTES = 4 << 20


@dataclass(slots=True)
class TimelinePage:
    events: list[Event]
    older: str | None  # where the next (older) page starts; None at the journal's start
    newer: str  # where events newer than this page begin (poll with `after=`)
    scanned: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"events": [e.to_dict() for e in self.events], "older": self.older, "newer": self.newer,
                "scanned": self.scanned}


@dataclass(slots=True)
class _Activity:
    """Counts per (UTC day, source), caught up incrementally from `offset`; reset when the journal is rewritten."""

    offset: int = 0
    inode: int = 0
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Timeline:
    """`Memory`'s timeline part: pages over the journal and the activity counts, hiding forgotten events."""

    def __init__(self, journal: Journal, forget_log: Callable[[], ForgetLog], catch_up: Callable[[], None]) -> None:
        self.journal = journal
        self._forget_log = forget_log
        self._catch_up = catch_up
        self._activity = _Activity()

    @property
    def forget_log(self) -> ForgetLog:
        return self._forget_log()

    def timeline(self, *, before: str | None = None, after: str | None = None, limit: int = 50,
                 source: str | None = None, workspace: str | None = None, session: str | None = None,
                 kind: str | None = None) -> TimelinePage:
        """One page of events, newest first: the newest (no cursor), older than `before`, or newer than `after`."""
        if before is not None and after is not None:
            raise QueryError("after", "give `before` or `after`, not both")
        limit = check_limit(limit, 500)
        filters = Filters.of(source, workspace, session, kind)
        self._catch_up()
        if after is not None:
            return self._timeline_forward(self._cursor_offset(after, "after"), limit, filters)
        end = None if before is None else self._cursor_offset(before, "before")
        return self._timeline_back(end, limit, filters)

    def _timeline_back(self, end: int | None, limit: int, filters: Filters) -> TimelinePage:
        hides = self.forget_log.hides
        events: list[Event] = []
        newer: int | None = end
        older: int | None = None
        scanned = 0
        for offset, line in self.journal.reverse_lines(end):
            if newer is None:
                newer = offset + len(line) + 1
            scanned += 1
            older = offset
            event = self.journal.event(line)
            if event is not None and filters.match(event) and not hides(event.id):
                events.append(event)
                if len(events) >= limit:
                    break
            if scanned >= MAX_SCAN_LINES:
                break
        return TimelinePage(events, self._cursor(older) if older else None,
                            self._cursor(newer or 0), scanned)

    def _timeline_forward(self, start: int, limit: int, filters: Filters) -> TimelinePage:
        hides = self.forget_log.hides
        events: list[Event] = []
        position = start
        scanned = 0
        while len(events) < limit and scanned < MAX_SCAN_LINES:
            result = self.journal.read_from(position, _FORWARD_BYTES)
            if not result.lines:
                break
            for offset, line in result.lines:
                scanned += 1
                position = offset + len(line) + 1
                event = self.journal.event(line)
                if event is not None and filters.match(event) and not hides(event.id):
                    events.append(event)
                    if len(events) >= limit or scanned >= MAX_SCAN_LINES:
                        break
            else:
                position = result.next_offset
        events.reverse()
        return TimelinePage(events, None, self._cursor(position), scanned)

    def _cursor(self, offset: int) -> str:
        return f"g{self.forget_log.generation()}.{offset}"

    def _cursor_offset(self, cursor: str, name: str) -> int:
        """The offset a cursor names, in today's journal (mapped across compactions since it was made)."""
        generation, dot, offset = cursor[1:].partition(".") if isinstance(cursor, str) else ("", "", "")
        if not (isinstance(cursor, str) and cursor.startswith("g") and dot and generation.isdigit()
                and offset.isdigit() and len(cursor) <= 40):
            raise QueryError(name, f"must be a cursor from an earlier page (g<generation>.<offset>), got {cursor!r}")
        value, made = int(offset), int(generation)
        log = self.forget_log
        if made > log.generation():
            raise QueryError(name, f"names a journal generation that does not exist: {cursor!r}")
        for done in log.compactions_since(made):
            value = done.map_offset(value)
        return min(value, self.journal.size())

    # ---- activity ------------------------------------------------------------------------------
    def activity(self, *, days: int = 30, now: datetime | None = None) -> dict[str, Any]:
        """Events per UTC day per source over the last `days` days (for the overview's chart)."""
        days = int(check_number(days, "days", whole=True, low=1, high=MAX_ACTIVITY_DAYS))
        state = self._activity
        with state.lock:
            self._count_activity(state)
            counts = dict(state.counts)
        today = (now or datetime.now(UTC)).astimezone(UTC).date()
        labels = [(today - timedelta(days=back)).isoformat() for back in range(days - 1, -1, -1)]
        wanted = set(labels)
        sources = sorted({src for (day, src) in counts if day in wanted})
        per_day = [{src: counts[(day, src)] for src in sources if (day, src) in counts} for day in labels]
        return {"days": [{"day": day, "counts": c} for day, c in zip(labels, per_day, strict=True)],
                "sources": sources, "total": sum(sum(c.values()) for c in per_day)}

    def _journal_inode(self) -> int:
        try:
            return os.stat(self.journal.path).st_ino
        except FileNotFoundError:
            return 0

    def _count_activity(self, state: _Activity) -> None:
        inode = self._journal_inode()
        size = self.journal.size()
        if inode != state.inode or size < state.offset:  # rewritten (a forget) or replaced: count again
            state.offset, state.inode, state.counts = 0, inode, {}
        counts = state.counts
        for lines, next_offset in _chunks(self.journal, state.offset, size):
            for _, line in lines:
                key = _day_and_source(self.journal, line)
                if key is not None:
                    counts[key] = counts.get(key, 0) + 1
            state.offset = next_offset


def _chunks(journal: Any, offset: int, end: int) -> Any:
    while offset < end:
        result = journal.read_from(offset, _FORWARD_BYTES)
        if result.next_offset == offset:
            return
        yield result.lines, result.next_offset
        offset = result.next_offset


def _day_and_source(journal: Journal, line: bytes) -> tuple[str, str] | None:
    """The UTC day and source of a journal line, as served.

    Lines Urchin writes begin `{"id":"…","timestamp":"YYYY-MM-DDT…Z","source":"…"` and end with
    their proof: read those by position (about twice as fast as a JSON parse over a 1M-event
    journal). Anything else, a line the write path did not prove above all (its source may hold a
    secret), is read through `Journal.event`, which redacts it.
    """
    if line.startswith(b'{"id":"') and journal.proof.proven(line):
        end_id = line.find(b'"', 7)
        if line.startswith(b'","timestamp":"', end_id):
            end_stamp = line.find(b'"', end_id + 15)
            if line.startswith(b'","source":"', end_stamp) and line[end_stamp - 1:end_stamp] == b"Z":
                end_source = line.find(b'"', end_stamp + 12)
                if end_source > 0 and b"\\" not in line[end_stamp + 12:end_source]:
                    return (line[end_id + 15:end_id + 25].decode("ascii", "replace"),
                            line[end_stamp + 12:end_source].decode("utf-8", "replace"))
    event = journal.event(line)
    return (event.timestamp[:10], event.source) if event is not None else None
