"""`Memory`: the one facade every front end calls (CLI, MCP tools, HTTP routes, hooks).

It owns the write path (`Ingestor`) and the read views, validates query parameters once, and
returns result objects the front ends only format. Construction does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from urchin.config import Settings
from urchin.ephemeral import EphemeralState
from urchin.errors import NotFoundError, QueryError
from urchin.event import Event
from urchin.ingest import Ingestor, IngestResult
from urchin.journal import Journal
from urchin.search.query import (
    Filters,
    Hit,
    SearchResult,
    check_hours,
    check_limit,
    check_query,
    one_line,
    window_start_ms,
)
from urchin.search.semantic import TokenCosineView
from urchin.search.substring import SubstringSearcher
from urchin.workspace.memories import Member, MemoryDef, MemoryStore, gather
from urchin.workspace.overview import root_overview
from urchin.workspace.reader import FileRange, read_range
from urchin.workspace.roots import Root, Roots

__all__ = ["Memory", "ImportReport"]

IMPORT_BATCH = 4096


@dataclass(slots=True)
class ImportReport:
    appended: int = 0
    duplicate: int = 0
    suppressed: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"appended": self.appended, "duplicate": self.duplicate, "suppressed": self.suppressed,
                "rejected": [{"line": n, "reason": r} for n, r in self.rejected]}


class Memory:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.journal = Journal(settings.journal_path, settings.durability)
        self.ingestor = Ingestor(settings, self.journal)
        self.substring = SubstringSearcher(self.journal)
        self._cosine: TokenCosineView | None = None

    @classmethod
    def open(cls, home: str | None = None, **overrides: Any) -> Memory:
        return cls(Settings.resolve(home, **overrides))

    # ---- writing ------------------------------------------------------------------------------
    def ingest(self, items: Iterable[Mapping[str, Any] | Event],
               defaults: Mapping[str, Any] | None = None) -> list[IngestResult]:
        return self.ingestor.ingest(items, defaults)

    def ingest_one(self, item: Mapping[str, Any] | Event, defaults: Mapping[str, Any] | None = None) -> IngestResult:
        return self.ingestor.ingest([item], defaults)[0]

    def import_lines(self, lines: Iterable[bytes | str],
                     on_progress: Callable[[int], None] | None = None) -> ImportReport:
        """Import JSONL; a bad line is reported with its number and never stops the rest."""
        self.ingestor.keep_ids_in_memory()
        report = ImportReport()
        batch: list[Mapping[str, Any]] = []
        numbers: list[int] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                report.rejected.append((number, f"not valid JSON: {exc}"))
                continue
            if not isinstance(record, dict):
                report.rejected.append((number, "event: must be a JSON object"))
                continue
            batch.append(record)
            numbers.append(number)
            if len(batch) >= IMPORT_BATCH:
                self._import_batch(batch, numbers, report, on_progress)
                batch, numbers = [], []
        self._import_batch(batch, numbers, report, on_progress)
        report.rejected.sort()
        return report

    def _import_batch(self, batch: list[Mapping[str, Any]], numbers: list[int], report: ImportReport,
                      on_progress: Callable[[int], None] | None) -> None:
        if not batch:
            return
        for number, result in zip(numbers, self.ingestor.ingest(batch)):
            if result.status == "appended":
                report.appended += 1
            elif result.status == "duplicate":
                report.duplicate += 1
            elif result.status == "suppressed":
                report.suppressed += 1
            else:
                report.rejected.append((number, result.reason or "rejected"))
        if on_progress:
            on_progress(len(batch))

    # ---- reading ------------------------------------------------------------------------------
    def search(self, query: str, *, hours: float = 168, limit: int = 20, source: str | None = None,
               workspace: str | None = None, session: str | None = None, kind: str | None = None,
               now: datetime | None = None) -> SearchResult:
        """Literal, case-insensitive search over content; newest first."""
        query = check_query(query)
        since = window_start_ms(check_hours(hours), now)
        events = self.substring.search(query, since_ms=since, limit=check_limit(limit),
                                       filters=Filters.of(source, workspace, session, kind))
        return SearchResult([Hit(e) for e in events], query, "substring")

    def semantic(self, query: str, *, hours: float = 168, limit: int = 10, source: str | None = None,
                 workspace: str | None = None, session: str | None = None, kind: str | None = None,
                 now: datetime | None = None) -> SearchResult:
        """Ranked search for what a query is about, best first, each hit with its score."""
        query = check_query(query)
        since = window_start_ms(check_hours(hours), now)
        limit = check_limit(limit)
        filters = Filters.of(source, workspace, session, kind)
        hits = self.cosine_view().search(query, since_ms=since, limit=limit, filters=filters)
        return SearchResult(hits, query, TokenCosineView.mode)

    def cosine_view(self) -> TokenCosineView:
        if self._cosine is None:
            self._cosine = TokenCosineView(self.journal, self.settings.index_dir / "cosine")
        return self._cosine

    def recent(self, *, hours: float = 24, limit: int = 20, source: str | None = None,
               workspace: str | None = None, session: str | None = None, kind: str | None = None,
               now: datetime | None = None) -> SearchResult:
        since = window_start_ms(check_hours(hours), now)
        events = self.substring.search(None, since_ms=since, limit=check_limit(limit),
                                       filters=Filters.of(source, workspace, session, kind))
        return SearchResult([Hit(e) for e in events], None, "recent")

    def session_context(self, session: str, *, hours: float = 168, limit: int = 50,
                        now: datetime | None = None) -> SearchResult:
        """The session's latest events, oldest first."""
        if not isinstance(session, str) or not session.strip():
            raise QueryError("session", "must not be empty")
        since = window_start_ms(check_hours(hours), now)
        events = self.substring.search(None, since_ms=since, limit=check_limit(limit),
                                       filters=Filters.of(session=session), oldest_first=True)
        return SearchResult([Hit(e) for e in events], None, "session")

    def workspace_context(self, workspace: str, *, hours: float = 168, limit: int = 40,
                          now: datetime | None = None) -> SearchResult:
        if not isinstance(workspace, str) or not workspace.strip():
            raise QueryError("workspace", "must not be empty")
        return self.recent(hours=hours, limit=limit, workspace=workspace, now=now)

    def get(self, event_id: str) -> Event:
        if not isinstance(event_id, str) or not event_id.strip():
            raise QueryError("id", "must not be empty")
        for _, line in self.journal.reverse_lines():
            if event_id.encode("utf-8") not in line:
                continue
            event = Event.from_json(line)
            if event is not None and event.id == event_id:
                return event
        raise NotFoundError(f"no event with id {event_id!r}")

    def tail(self, n: int = 10) -> list[Event]:
        """The last `n` events in journal (arrival) order, oldest first."""
        n = check_limit(n, 100_000)
        out: list[Event] = []
        for _, line in self.journal.reverse_lines():
            event = Event.from_json(line)
            if event is not None:
                out.append(event)
                if len(out) >= n:
                    break
        out.reverse()
        return out

    def end_offset(self) -> int:
        """Where the journal ends now: the offset a follower starts from."""
        return self.journal.size()

    def follow(self, offset: int) -> tuple[list[Event], int]:
        """Events appended at or after `offset`, and the offset to continue from."""
        result = self.journal.read_from(offset)
        events = [e for e in (Event.from_json(line) for _, line in result.lines) if e is not None]
        return events, result.next_offset

    # ---- privacy ------------------------------------------------------------------------------
    def ephemeral(self, action: str = "status", minutes: float | None = None) -> EphemeralState:
        """Turn ephemeral mode on (`start`, optionally for `minutes`), off (`end`), or report it."""
        flag = self.ingestor.ephemeral
        if action in ("start", "on"):
            if minutes is not None and not (isinstance(minutes, (int, float)) and 0 < minutes <= 7 * 24 * 60):
                raise QueryError("minutes", f"must be a number from 1 to {7 * 24 * 60}, got {minutes!r}")
            return flag.start(minutes)
        if action in ("end", "off"):
            return flag.end()
        if action == "status":
            return flag.state()
        raise QueryError("action", f"must be start, end or status, got {action!r}")

    def identity(self) -> dict[str, str]:
        """Who this machine's events are stamped with, and where each value came from."""
        return {"account": self.settings.account, "device": self.settings.device}

    # ---- workspace files and curated memories -------------------------------------------------
    @property
    def roots(self) -> Roots:
        return Roots(self.settings.home)

    def workspace_add(self, path: str, name: str | None = None) -> Root:
        return self.roots.add(path, name)

    def workspace_remove(self, name: str) -> Root:
        return self.roots.remove(name)

    def workspace_list(self) -> list[Root]:
        return self.roots.list()

    def get_file(self, path: str, from_line: int = 1, max_lines: int = 200) -> FileRange:
        """A window of numbered lines of a workspace file; paths outside the roots are refused."""
        return read_range(self.roots, path, from_line, max_lines)

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
                      replace: bool = False) -> MemoryDef:
        return MemoryStore(self.settings.home).create(slug, use_when, members, title, replace)

    def memory_list(self) -> list[MemoryDef]:
        return MemoryStore(self.settings.home).list()

    def memory_get(self, slug: str, token_budget: int = 8000) -> dict[str, Any]:
        """A curated memory with every member's current contents, and coverage notes."""
        budget = check_limit(token_budget, 200_000) if token_budget != 8000 else token_budget
        definition = MemoryStore(self.settings.home).get(slug)

        def run_query(member: Member) -> list[str]:
            result = self.search(member.query or "", hours=member.hours or 24 * 365, limit=50, source=member.source)
            return [one_line(hit.event, width=2000) for hit in result.hits]

        return gather(definition, self.roots, run_query, budget)

    def overview(self) -> dict[str, Any]:
        """Where an agent new to a workspace starts: files, recent changes, sources, memories."""
        out: dict[str, Any] = {
            "roots": [root_overview(root) for root in self.roots.list()],
            "memories": [m.summary() for m in self.memory_list()],
            "journal": {k: v for k, v in self.status().items() if k in ("events", "firstTimestamp", "lastTimestamp")},
        }
        return out

    def status(self) -> dict[str, Any]:
        stats = self.journal.stats()
        return {
            "journal": stats.path,
            "sizeBytes": stats.size_bytes,
            "events": stats.events,
            "firstTimestamp": stats.first_timestamp,
            "lastTimestamp": stats.last_timestamp,
            "invalidLines": stats.invalid_lines,
            "tornRecords": stats.torn_records,
            "ephemeral": self.ingestor.ephemeral.state().to_dict(),
            "home": str(self.settings.home),
            "now": datetime.now(UTC).isoformat(timespec="seconds"),
        }
