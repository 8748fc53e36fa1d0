"""The timeline: events newest first by event time, paged by a (timestamp, id) cursor, the events
that arrived since a page (live updates), and activity per day per source.

A page walks the time-ordered index (`timeorder.py`: every line's timestamp and offset, sorted,
in memory) down from the cursor, reading `limit` + 1 lines, those sharing the last one's
timestamp, and the ones a filter skips (at most MAX_SCAN_LINES, then a cursor to go on): an import
or a backfill of old events lands in its place, not on top. `newer` is another cursor, by arrival: the
journal offset a page was taken at (`g<generation>.<offset>`, mapped across compactions), from
which `after=` reads what was appended since, whatever its timestamps. Forgotten events never show.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from urchin.errors import QueryError
from urchin.event import Event
from urchin.journal import Journal
from urchin.search.query import Filters, check_limit
from urchin.tombstones import ForgetLog
from urchin.value_checks import check_number

if TYPE_CHECKING:
    from urchin.facade.hot import HotViews
    from urchin.facade.timeorder import TimeOrder

__all__ = ["Timeline", "TimelinePage", "MAX_SCAN_LINES", "MAX_ACTIVITY_DAYS"]

MAX_SCAN_LINES = 20_000  # a filtered page stops after this many lines and hands back a cursor to go on
MAX_ACTIVITY_DAYS = 366
_FORWARD_BYTES = 4 << 20
_MAX_CURSOR = 8192   # an id is at most 1,024 characters: its base64 fits well within


@dataclass(slots=True)
class TimelinePage:
    events: list[Event]
    older: str | None  # the (timestamp, id) cursor of the next (older) page; None: no older event
    newer: str  # where events that arrived after this page begin (poll with `after=`)
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


def time_cursor(ts_ms: int, event_id: str) -> str:
    """The opaque cursor of the page below (ts_ms, id), base64url; id "": below ts_ms itself."""
    raw = f"{ts_ms}:{event_id}".encode("utf-8", "surrogatepass")
    return "t" + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _read_time_cursor(cursor: object, name: str) -> tuple[int, str]:
    rule = f"must be the `older` cursor of an earlier timeline page, got {cursor!r}"[:200]
    if not (isinstance(cursor, str) and cursor.startswith("t") and 1 < len(cursor) <= _MAX_CURSOR):
        raise QueryError(name, rule)
    try:
        text = base64.urlsafe_b64decode(cursor[1:] + "=" * (-len(cursor[1:]) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise QueryError(name, rule) from None
    stamp, colon, event_id = text.partition(":")
    digits = stamp[1:] if stamp.startswith("-") else stamp
    if not (colon and digits.isdigit() and digits.isascii() and len(digits) <= 19):
        raise QueryError(name, rule)
    return int(stamp), event_id


class Timeline:
    """`Memory`'s timeline part: pages in event-time order and the activity counts, hiding forgotten events."""

    def __init__(self, journal: Journal, forget_log: ForgetLog, hot: HotViews) -> None:
        self.journal = journal
        self.forget_log = forget_log
        self._hot = hot    # caught up before a page
        self._order_made: TimeOrder | None = None   # numpy, imported on the first page: not by a search
        self._order_lock = threading.Lock()
        self._activity = _Activity()

    @property
    def _order(self) -> TimeOrder:
        with self._order_lock:
            if self._order_made is None:
                from urchin.facade.timeorder import TimeOrder

                self._order_made = TimeOrder(self.journal)
            return self._order_made

    def timeline(self, *, before: str | None = None, after: str | None = None, limit: int = 50,
                 source: str | None = None, workspace: str | None = None, session: str | None = None,
                 kind: str | None = None) -> TimelinePage:
        """One page of events, newest first by time: the newest (no cursor), those older than `before`
        (a page's `older`), or those that arrived after `after` (a page's `newer`)."""
        if before is not None and after is not None:
            raise QueryError("after", "give `before` or `after`, not both")
        limit = check_limit(limit, 500)
        filters = Filters.of(source, workspace, session, kind)
        below = None if before is None else _read_time_cursor(before, "before")
        self._hot.catch_up()
        if after is not None:
            return self._arrived(self._cursor_offset(after, "after"), limit, filters)
        head = self._head()
        return self._page(below, limit, filters, head)

    def _page(self, below: tuple[int, str] | None, limit: int, filters: Filters, head: int) -> TimelinePage:
        hides = self.forget_log.hides
        found: list[Event] = []
        scanned, last, tie = 0, None, None
        with self._order.lock:
            self._order.catch_up()
            for ts, offset in self._order.below(None if below is None else below[0]):
                if tie is not None and ts < tie:
                    break       # limit + 1 found, and every event sharing the last one's timestamp
                if tie is None and last is not None and ts < last and scanned >= MAX_SCAN_LINES:
                    found.sort(key=lambda e: (e.ts_ms, e.id), reverse=True)   # a filter skipped too many
                    return TimelinePage(found, time_cursor(last, ""), self._cursor(head), scanned)
                scanned, last = scanned + 1, ts
                line = self.journal.read_line_at(offset)
                event = self.journal.event(line) if line is not None else None
                if (event is None or not filters.match(event) or hides(event.id)
                        or (below is not None and (event.ts_ms, event.id) >= below)):
                    continue
                found.append(event)
                if tie is None and len(found) > limit:
                    tie = ts
        found.sort(key=lambda e: (e.ts_ms, e.id), reverse=True)
        older = time_cursor(found[limit - 1].ts_ms, found[limit - 1].id) if len(found) > limit else None
        return TimelinePage(found[:limit], older, self._cursor(head), scanned)

    def _head(self) -> int:
        """The end of the journal's last complete line: where the next arrival will begin."""
        for offset, line in self.journal.reverse_lines(None):
            return offset + len(line) + 1
        return 0

    def _arrived(self, start: int, limit: int, filters: Filters) -> TimelinePage:
        """Events appended from `start` on, newest first by time (the page places each by its time)."""
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
        events.sort(key=lambda e: (e.ts_ms, e.id), reverse=True)
        return TimelinePage(events, None, self._cursor(position), scanned)

    def _cursor(self, offset: int) -> str:
        return f"g{self.forget_log.generation()}.{offset}"

    def _cursor_offset(self, cursor: str, name: str) -> int:
        """The offset a cursor names, in today's journal (mapped across compactions since it was made)."""
        generation, dot, offset = cursor[1:].partition(".") if isinstance(cursor, str) else ("", "", "")
        if not (isinstance(cursor, str) and cursor.startswith("g") and dot and generation.isdigit()
                and offset.isdigit() and len(cursor) <= 40):
            raise QueryError(name, f"must be the `newer` cursor of an earlier page (g<generation>.<offset>), "
                                   f"got {cursor!r}")
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
        for lines, next_offset in self.journal.chunks(state.offset, size, _FORWARD_BYTES):
            for _, line in lines:
                key = _day_and_source(self.journal, line)
                if key is not None:
                    counts[key] = counts.get(key, 0) + 1
            state.offset = next_offset



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
