"""`Memory`: the one facade every front end calls (CLI, MCP tools, HTTP routes, hooks).

It owns the write path (`Ingestor`) and the read views, validates query parameters once, and
returns result objects the front ends only format. Construction does no I/O. The class is split by
noun: events (here), capture, workspace, the hybrid index and hot views (`urchin/memory/*.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from urchin.config import Settings
from urchin.ephemeral import EphemeralState
from urchin.errors import EmbedderError, NotFoundError, QueryError, ValidationError
from urchin.event import Event
from urchin.journal import Journal
from urchin.memory.capture import CaptureOps
from urchin.memory.forget import ForgetOps, ForgetResult
from urchin.memory.hot import HotOps, HotView
from urchin.memory.index import MAX_DOCUMENT_BYTES, IndexOps
from urchin.memory.workspace import WorkspaceOps
from urchin.search.query import (
    Filters,
    Hit,
    SearchResult,
    check_hours,
    check_limit,
    check_query,
    window_start_ms,
)
from urchin.search.substring import SubstringSearcher
from urchin.tokens import TokenStore

if TYPE_CHECKING:
    # Imported where used: numpy and httpx cost ~0.3 s, the write path (redaction rules) ~15 ms and the
    # workspace modules ~8 ms, and a cold `urchin search` needs none of them.
    from urchin.index.service import IndexService
    from urchin.ingest import Ingestor, IngestResult
    from urchin.redact import Finding
    from urchin.search.semantic import EmbeddingView, TokenCosineView

__all__ = ["Memory", "ImportReport", "HotView", "ForgetResult", "MAX_DOCUMENT_BYTES"]


IMPORT_BATCH = 4096


@dataclass(slots=True)
class ImportReport:
    appended: int = 0
    duplicate: int = 0
    suppressed: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)
    indexed_events: int = 0
    index_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"appended": self.appended, "duplicate": self.duplicate, "suppressed": self.suppressed,
                "rejected": [{"line": n, "reason": r} for n, r in self.rejected],
                "index": {"events": self.indexed_events, "seconds": round(self.index_seconds, 2)}}



class Memory(CaptureOps, WorkspaceOps, IndexOps, HotOps, ForgetOps):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.journal = Journal(settings.journal_path, settings.durability)
        self._ingestor: Ingestor | None = None
        self.substring = SubstringSearcher(self.journal)
        self._index: IndexService | None = None
        self._cosine: TokenCosineView | None = None
        self._embedding: EmbeddingView | None = None
        self._views: list[HotView] = []
        self._view_offsets: list[int] = []
        self._hot = False
        self._followed = 0
        self._lines_followed = 0
        self._followed_inode: int | None = None
        self._follow_generation: int | None = None
        self._refresh_lock = threading.Lock()

    @classmethod
    def open(cls, home: str | None = None, **overrides: Any) -> Memory:
        return cls(Settings.resolve(home, **overrides))

    @property
    def ingestor(self) -> Ingestor:
        """The write path, built on first use (readers never pay for the redaction rules)."""
        if self._ingestor is None:
            from urchin.ingest import Ingestor

            self._ingestor = Ingestor(self.settings, self.journal)
        return self._ingestor

    # ---- writing ------------------------------------------------------------------------------
    def ingest(self, items: Iterable[Mapping[str, Any] | Event],
               defaults: Mapping[str, Any] | None = None) -> list[IngestResult]:
        return self.ingestor.ingest(items, defaults)

    def ingest_one(self, item: Mapping[str, Any] | Event, defaults: Mapping[str, Any] | None = None) -> IngestResult:
        return self.ingestor.ingest([item], defaults)[0]

    def prepare(self, item: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Event:
        """Validate, redact and stamp one item without writing; raises `ValidationError` naming the field."""
        return self.ingestor.prepare(item, defaults)

    def rejected(self, item: Any, exc: ValidationError) -> IngestResult:
        """The result for an item `prepare` refused (the daemon's batches)."""
        return self.ingestor.rejected(item, exc)

    def ingest_prepared(self, events: Sequence[Event]) -> list[IngestResult]:
        """Append events from `prepare` in one locked write and one fsync (the daemon's group commit)."""
        return self.ingestor.append_prepared(events)

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
        if report.appended:
            # Index now, in one pass, rather than surprising the first search after a big import.
            caught = self.substring.catch_up()
            report.indexed_events, report.index_seconds = caught.events, caught.seconds
        return report

    def _import_batch(self, batch: list[Mapping[str, Any]], numbers: list[int], report: ImportReport,
                      on_progress: Callable[[int], None] | None) -> None:
        if not batch:
            return
        for number, result in zip(numbers, self.ingestor.ingest(batch), strict=False):
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
               scope: str = "local", now: datetime | None = None) -> SearchResult:
        """Literal, case-insensitive search over content; newest first. `scope="team"` searches every
        device's events in the shared database (URCHIN_DATABASE_URL) instead of this journal."""
        query = check_query(query)
        since = window_start_ms(check_hours(hours), now)
        if scope not in ("local", "team"):
            raise QueryError("scope", f"must be local or team, got {scope!r}")
        if scope == "team":
            flt = Filters.of(source, workspace, session, kind)
            events = self.index_service.search_team(query, since, check_limit(limit), {
                "source": flt.source, "workspace": flt.workspace, "session": flt.session, "kind": flt.kind})
            return SearchResult([Hit(e) for e in events], query, "substring")
        self._catch_up()
        events = self.substring.search(query, since_ms=since, limit=check_limit(limit),
                                       filters=Filters.of(source, workspace, session, kind))
        return SearchResult([Hit(e) for e in events], query, "substring")

    def semantic(self, query: str, *, hours: float = 168, limit: int = 10, source: str | None = None,
                 workspace: str | None = None, session: str | None = None, kind: str | None = None,
                 now: datetime | None = None) -> SearchResult:
        """Ranked search for what a query is about, best first, each hit with its score.

        Uses the embedder when one is configured; when it is down or misconfigured, falls back to
        token-cosine and says so in `mode` and `notes`. Scores of the two are never mixed.
        """
        query = check_query(query)
        since = window_start_ms(check_hours(hours), now)
        limit = check_limit(limit)
        filters = Filters.of(source, workspace, session, kind)
        from urchin.search.semantic import TokenCosineView

        mode = TokenCosineView.mode
        notes: list[str] = []
        if self.settings.embedder_url:
            try:
                view = self.embedding_view()
                hits, notes = view.search(query, since_ms=since, limit=limit, filters=filters)
                return SearchResult(hits, query, view.mode, notes)
            except EmbedderError as exc:
                mode = f"token-cosine (embedder unreachable: {exc.message})"
                notes = [f"embedder unreachable, fell back to token-cosine: {exc.message}"]
        hits = self.cosine_view().search(query, since_ms=since, limit=limit, filters=filters)
        return SearchResult(hits, query, mode, notes)

    def embedding_view(self) -> EmbeddingView:
        """The embedder's view; raises `EmbedderError` when the embedder is not configured fully."""
        if self._embedding is None:
            if not self.settings.embedder_model:
                raise EmbedderError("URCHIN_EMBEDDER_MODEL: must be set when URCHIN_EMBEDDER_URL is")
            from urchin.search.embedder import Embedder
            from urchin.search.semantic import EmbeddingView

            embedder = Embedder(self.settings.embedder_url or "", self.settings.embedder_model,
                                self.settings.embedder_api, timeout=self.settings.embedder_timeout_s)  # type: ignore[arg-type]
            self._embedding = EmbeddingView(self.journal, self.settings.home, embedder, self.locate)
        return self._embedding

    def embed(self, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Backfill the embedder's vector cache with every event it lacks."""
        if not self.settings.embedder_url:
            raise EmbedderError("no embedder configured: set URCHIN_EMBEDDER_URL and URCHIN_EMBEDDER_MODEL")
        view = self.embedding_view()
        added = view.catch_up(progress=progress)
        return {"embedded": added, "cached": len(view.cache()), "model": view.embedder.model,
                "fingerprint": view.embedder.fingerprint}

    def cosine_view(self) -> TokenCosineView:
        if self._cosine is None:
            from urchin.search.semantic import TokenCosineView

            self._cosine = TokenCosineView(self.journal, self.settings.index_dir / "cosine")
        return self._cosine

    def recent(self, *, hours: float = 24, limit: int = 20, source: str | None = None,
               workspace: str | None = None, session: str | None = None, kind: str | None = None,
               now: datetime | None = None) -> SearchResult:
        since = window_start_ms(check_hours(hours), now)
        self._catch_up()
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
        stored = self.ingestor.redactor.redact_id(event_id.strip())
        if stored != event_id.strip():
            event_id = stored  # an id that held a secret is stored, and named, as its keyed hash
        event = self.locate(event_id)
        if event is None:
            raise NotFoundError(f"no event with id {event_id!r}")
        return event

    def locate(self, event_id: str) -> Event | None:
        """The event with this id: through the id sidecar, then the tail it does not cover yet."""
        if self.forget_log.hides(event_id):
            return None
        ids = self.ingestor.ids
        offset = ids.lookup(event_id)
        if offset is not None:
            line = self.journal.read_line_at(offset)
            return Event.from_json(line) if line is not None else None
        needle = event_id.encode("utf-8")
        for _, line in self.journal.iter_lines(ids.covered()):
            if needle in line:
                event = Event.from_json(line)
                if event is not None and event.id == event_id:
                    return event
        return None

    def tail(self, n: int = 10) -> list[Event]:
        """The last `n` events in journal (arrival) order, oldest first."""
        n = check_limit(n, 100_000)
        out: list[Event] = []
        hides = self.forget_log.hides
        for _, line in self.journal.reverse_lines():
            event = Event.from_json(line)
            if event is not None and not hides(event.id):
                out.append(event)
                if len(out) >= n:
                    break
        out.reverse()
        return out

    def end_offset(self) -> int:
        """Where the journal ends now: the offset a follower starts from."""
        return self.journal.size()

    def follow(self, offset: int) -> tuple[list[Event], int]:
        """Events appended at or after `offset`, and the offset to continue from.

        A compaction between two calls moves every offset: `offset` is mapped onto the new file.
        """
        log = self.forget_log
        while True:
            generation = log.generation()
            if self._follow_generation is not None:
                for done in log.compactions_since(self._follow_generation):
                    offset = done.map_offset(offset)
            self._follow_generation = generation
            result = self.journal.read_from(offset)
            if log.generation() == generation:
                break  # else the journal was rewritten while we read: map and read again
        hides = self.forget_log.hides
        events = [e for e in (Event.from_json(line) for _, line in result.lines) if e is not None and not hides(e.id)]
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

    def redact_check(self, path: str) -> Iterator[Finding]:
        """What redaction would remove from a file, by type, line and column; values are masked."""
        try:
            handle = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise ValidationError("file", f"{path}: cannot read: {exc.strerror}") from None
        with handle:
            yield from self.ingestor.redactor.scan_lines(handle)

    def identity(self) -> dict[str, str]:
        """Who this machine's events are stamped with, and where each value came from."""
        return {"account": self.settings.account, "device": self.settings.device}

    # ---- scoped API tokens of the daemon (urchin/tokens.py) ------------------------------------
    def token_create(self, scope: str, workspaces: Sequence[str] = (), expires: str | None = None,
                     name: str | None = None) -> dict[str, Any]:
        """A new token (in the result once; only its hash is kept) and its record."""
        token, record = TokenStore(self.settings.home).create(scope, workspaces, expires, name)
        return {"token": token, **record}

    def token_list(self) -> list[dict[str, Any]]:
        return TokenStore(self.settings.home).entries()

    def token_revoke(self, token_id: str) -> None:
        TokenStore(self.settings.home).revoke(token_id)

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
            "substringIndex": self.substring.index_state(),
            "daemon": self._daemon_state(),
            "embedder": self._embedder_state(),
            "database": (("URCHIN_DATABASE_URL" if self.settings.database_url else f"embedded ({self.settings.pg_dir})")
                         + "; `urchin index --status` for the hybrid index"),
            "home": str(self.settings.home),
            "now": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    def _daemon_state(self) -> dict[str, Any] | None:
        """The daemon named in daemon.json, when its pid is alive (cheap: no connection)."""
        import os

        try:
            info = orjson.loads(self.settings.daemon_file.read_bytes())
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            return None
        return {"pid": info["pid"], "address": info.get("address"), "started": info.get("started")}

    def _embedder_state(self) -> dict[str, Any] | None:
        if not self.settings.embedder_url:
            return None
        out: dict[str, Any] = {"url": self.settings.embedder_url, "model": self.settings.embedder_model}
        if self._embedding is not None and self._embedding._cache is not None:
            out["embeddedEvents"] = len(self._embedding._cache)
        return out
