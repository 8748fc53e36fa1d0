"""`Memory`: the one facade every front end calls (CLI, MCP tools, HTTP routes, the daemon).

It owns the write path (`Ingestor`) and the read views, validates query parameters once, and
returns result objects the front ends only format. Construction does no I/O. It is composed of
parts, one per noun (`urchin/memory/*.py`): writing (batches, imports), the journal's events (by
id, tail, follow), hot views, semantic views, the hybrid index, workspace, capture, forgetting;
each sits behind thin methods here and is private to it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from urchin import requests_first
from urchin.config import Settings
from urchin.ephemeral import EphemeralState
from urchin.errors import NotFoundError, UrchinError, ValidationError
from urchin.event import Event, format_timestamp
from urchin.journal import Journal
from urchin.memory.capture import Capture
from urchin.memory.events import JournalEvents
from urchin.memory.forget import ForgetResult, Forgetting
from urchin.memory.hot import HotView, HotViews
from urchin.memory.index import MAX_DOCUMENT_BYTES, HybridIndex, IndexRun
from urchin.memory.semantic import SemanticViews
from urchin.memory.timeline import Timeline, TimelinePage
from urchin.memory.workspace import Workspace
from urchin.memory.writing import PreparedBatch, import_lines, prepare_batch
from urchin.params import built, typed
from urchin.params.context import ContextParams
from urchin.params.reading import GetParams, RecentParams, SemanticParams, SessionParams, TailParams, WorkspaceParams
from urchin.params.search import SearchParams
from urchin.proof import LineProof
from urchin.requests_first import give_way, lower_thread_priority
from urchin.search.query import (
    Filters,
    Hit,
    SearchResult,
    check_hours,
    older_hint,
    one_line,
    window_start_ms,
)
from urchin.search.substring import SubstringSearcher
from urchin.tokens import TokenStore

if TYPE_CHECKING:
    # Imported where used: numpy and httpx cost ~0.3 s, the write path (redaction rules) ~15 ms and the
    # workspace modules ~8 ms, the typed parameters of the other operations ~7% of a cold `urchin search`
    # (8 dataclasses), and a cold `urchin search` needs none of them.
    from urchin.collectors.base import CollectReport
    from urchin.collectors.install import InstallResult
    from urchin.collectors.uninstall import UninstallResult
    from urchin.forget import Compaction, ForgetLog
    from urchin.index.feeder import FeedReport
    from urchin.index.files import FileIndexReport
    from urchin.index.hybrid import ContextResult
    from urchin.index.service import IndexService
    from urchin.ingest import BatchReport, Ingestor, IngestResult
    from urchin.memory.reload import ConfigReload, ConfigWatch
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.ephemeral import EphemeralParams
    from urchin.params.forget import ForgetParams
    from urchin.params.recall import RecallParams
    from urchin.params.sources import DocumentParams, FetchParams, QuerySourceParams
    from urchin.params.workspace import FileParams, MemoryParams
    from urchin.recall import RecallResult
    from urchin.recall.reader import Reader
    from urchin.redact import Finding
    from urchin.search.semantic import EmbeddingView, TokenCosineView
    from urchin.workspace.access import FileAccess
    from urchin.workspace.memories import Member, MemoryDef
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Root, Roots

__all__ = ["Memory", "ImportReport", "PreparedBatch", "HotView", "ForgetResult", "IndexRun", "TimelinePage",
           "MAX_DOCUMENT_BYTES"]


log = logging.getLogger(__name__)

# After a daemon's start: the session-start digests of the workspaces in the newest WARM_SCAN events of
# the last WARM_DAYS days, at most WARM_WORKSPACES (each keeps up to 3 answers of the 64 the daemon keeps).
WARM_DAYS, WARM_SCAN, WARM_WORKSPACES = 7, 2000, 16

FOLLOW_POLL_S = 0.25


def __getattr__(name: str) -> Any:
    # `ImportReport` is the ingest layer's `BatchReport` (one tally for import, HTTP batches, the writer);
    # resolved lazily so that readers never load the write path.
    if name == "ImportReport":
        from urchin.ingest import BatchReport

        return BatchReport
    raise AttributeError(f"module 'urchin.memory' has no attribute {name!r}")


class Memory:
    """The one facade. Composed of parts (hot views, workspace, hybrid index, semantic views, capture,
    forgetting), each behind thin methods here; a context manager (`with Memory(settings) as m:`) that
    releases the index connection and the embedded PostgreSQL it started on exit."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._proof = LineProof(settings)
        self._journal = Journal(settings.journal_path, settings.durability, self._proof)
        self._ingestor: Ingestor | None = None
        self._config_watch: ConfigWatch | None = None   # a daemon's: config.toml read again when it changes
        self._substring = SubstringSearcher(self._journal)
        self._hot = HotViews(self._journal)
        self._ids_loading: threading.Thread | None = None
        self._workspace = Workspace(settings, lambda: self.ingestor.redactor)
        self._semantic = SemanticViews(settings, self._journal, self.locate)
        self._index = HybridIndex(settings, self._journal, self._workspace, self.get,
                                  lambda: self._semantic.cosine().associations())
        self._capture = Capture(settings, lambda: self.ingestor.ingest)
        self._forgetting = Forgetting(settings, self._journal, self._substring, lambda: self.ingestor,
                                      self._semantic, self._index)
        self._events = JournalEvents(self._journal, self._substring.forgotten, lambda: self.ingestor.ids)
        self._timeline = Timeline(self._journal, lambda: self.forget_log, self._hot.catch_up)

    @classmethod
    def open(cls, home: str | None = None, **overrides: Any) -> Memory:
        return cls(Settings.resolve(home, **overrides))

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the index connection and stop the embedded PostgreSQL this process started."""
        self._index.close()

    # ---- read-only handles (the daemon, tests and benchmarks look; nothing outside writes through them)
    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def journal(self) -> Journal:
        return self._journal

    @property
    def substring(self) -> SubstringSearcher:
        return self._substring

    @property
    def ingestor(self) -> Ingestor:
        """The write path, built on first use (readers never pay for the redaction rules)."""
        if self._ingestor is None:
            from urchin.ingest import Ingestor

            self._ingestor = Ingestor(self._settings, self._journal)
        return self._ingestor

    @property
    def forget_log(self) -> ForgetLog:
        return self._substring.forgotten

    @property
    def index_service(self) -> IndexService:
        return self._index.service

    @property
    def roots(self) -> Roots:
        return self._workspace.roots

    @property
    def files(self) -> FileAccess:
        """The one reader of workspace files (resolve, check, open what was checked, redact)."""
        return self._workspace.files

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

    def prepare_batch(self, items: Sequence[Any], defaults: Mapping[str, Any] | None = None) -> PreparedBatch:
        """Prepare every item of a batch; a refused one is answered, never costs the others."""
        return prepare_batch(self.ingestor, items, defaults)

    def ingest_prepared(self, events: Sequence[Event]) -> list[IngestResult]:
        """Append events from `prepare` in one locked write and one fsync (the daemon's group commit)."""
        return self.ingestor.append_prepared(events)

    def import_lines(self, lines: Iterable[bytes | str],
                     on_progress: Callable[[int], None] | None = None) -> BatchReport:
        """Import JSONL; a bad line is reported with its number and never stops the rest."""
        return import_lines(self.ingestor, self._substring, lines, on_progress)

    # ---- reading ------------------------------------------------------------------------------
    def search(self, query: str | SearchParams, *, hours: float | None = None, limit: int | None = None,
               source: str | None = None, workspace: str | None = None, session: str | None = None,
               kind: str | None = None, scope: str | None = None, now: datetime | None = None) -> SearchResult:
        """Literal, case-insensitive search over content; newest first. `scope="team"` searches every
        device's events in the shared database (URCHIN_DATABASE_URL) instead of this journal.

        `query` is a `SearchParams` (the front ends', checked when built), or its text with the other
        fields as keywords (built here, so checked the same way; those not given take its defaults).
        """
        p = query if isinstance(query, SearchParams) else SearchParams.of(
            query, hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind,
            scope=scope)
        since = window_start_ms(p.hours, now)
        filters = Filters(p.source, p.workspace, p.session, p.kind)
        if p.scope == "team":
            events = self.index_service.search_team(p.query, since, p.limit, {
                "source": p.source, "workspace": p.workspace, "session": p.session, "kind": p.kind})
            return SearchResult([Hit(e) for e in events], p.query, "team")   # literal, every device's
        self._hot.catch_up()
        events = self._substring.search(p.query, since_ms=since, limit=p.limit, filters=filters)
        older = None if events else self._substring.older_match(p.query, since, filters)   # "try --hours N"
        return SearchResult([Hit(e) for e in events], p.query, "substring",
                            older=older_hint(older, now) if older is not None else None)

    def semantic(self, query: str | SemanticParams, *, hours: float | None = None, limit: int | None = None,
                 source: str | None = None, workspace: str | None = None, session: str | None = None,
                 kind: str | None = None, min_score: float | None = None, explain: bool | None = None,
                 now: datetime | None = None) -> SearchResult:
        """Ranked search for what a query is about, best first, each hit with its calibrated score.

        Uses the embedder when one is configured; when it is down or misconfigured, falls back to
        token-cosine and says so in `mode` and `notes`. Scores of the two are never mixed. `min_score`
        keeps the hits scored at or above it (the list is sorted by that score); `explain` adds to each
        hit how its score was made. `query` is a `SemanticParams` (checked when built), or its text with
        the other fields as keywords (built here, so checked the same way).
        """
        p = query if isinstance(query, SemanticParams) else built(
            SemanticParams, query=query, hours=hours, limit=limit, source=source, workspace=workspace,
            session=session, kind=kind, min_score=min_score, explain=explain)
        return self._semantic.search(p.query, window_start_ms(p.hours, now), p.limit,
                                     Filters(p.source, p.workspace, p.session, p.kind), min_score=p.min_score,
                                     explain=p.explain)

    def embedding_view(self) -> EmbeddingView:
        """The embedder's view; raises `EmbedderError` when the embedder is not configured fully."""
        return self._semantic.embedding()

    def cosine_view(self) -> TokenCosineView:
        return self._semantic.cosine()

    def embed(self, progress: Callable[[int], None] | None = None, *, limit: int | None = None) -> dict[str, Any]:
        """Backfill the embedder's vector cache with every event it lacks (at most `limit` this call)."""
        return self._semantic.embed(progress, limit)

    def embed_in_background(self, on: bool = True) -> None:
        """Called by the daemon's embedder loop: queries leave a backlog of events to embed to it and
        answer from the vectors cached (saying so), and its requests stay small. Off: as without it."""
        self._semantic.embed_in_background(on)

    def recent(self, params: RecentParams | None = None, /, *, hours: float | None = None, limit: int | None = None,
               source: str | None = None, workspace: str | None = None, session: str | None = None,
               kind: str | None = None, now: datetime | None = None) -> SearchResult:
        """The latest events of the window, newest first: `RecentParams`, or its fields as keywords."""
        p = params if params is not None else built(RecentParams, hours=hours, limit=limit, source=source,
                                                     workspace=workspace, session=session, kind=kind)
        self._hot.catch_up()
        events = self._substring.search(None, since_ms=window_start_ms(p.hours, now), limit=p.limit,
                                        filters=Filters(p.source, p.workspace, p.session, p.kind))
        return SearchResult([Hit(e) for e in events], None, "recent")

    def session_context(self, session: str | SessionParams, *, hours: float | None = None,
                        limit: int | None = None, now: datetime | None = None) -> SearchResult:
        """The session's latest events, oldest first."""
        p = session if isinstance(session, SessionParams) else built(SessionParams, session=session, hours=hours,
                                                                       limit=limit)
        events = self._substring.search(None, since_ms=window_start_ms(p.hours, now), limit=p.limit,
                                        filters=Filters(session=p.session), oldest_first=True)
        return SearchResult([Hit(e) for e in events], None, "session")

    def workspace_context(self, workspace: str | WorkspaceParams, *, hours: float | None = None,
                          limit: int | None = None, now: datetime | None = None) -> SearchResult:
        p = workspace if isinstance(workspace, WorkspaceParams) else built(WorkspaceParams, workspace=workspace,
                                                                             hours=hours, limit=limit)
        return self.recent(RecentParams(p.hours, p.limit, workspace=p.workspace), now=now)

    def get(self, event_id: str | GetParams) -> Event:
        p = event_id if isinstance(event_id, GetParams) else GetParams(event_id)
        # an id that held a secret is stored, and named, as its keyed hash
        event_id = self.ingestor.redactor.redact_id(p.id)
        event = self.locate(event_id)
        if event is None:
            raise NotFoundError(f"no event with id {event_id!r}")
        return event

    def locate(self, event_id: str) -> Event | None:
        """The event with this id: through the id sidecar, then the tail it does not cover yet."""
        return self._events.locate(event_id)

    def tail(self, n: int | TailParams = 10) -> list[Event]:
        """The last `n` events in journal (arrival) order, oldest first."""
        return self._events.tail((n if isinstance(n, TailParams) else TailParams(n)).count)

    def end_offset(self) -> int:
        """Where the journal ends now: the offset a follower starts from."""
        return self._journal.size()

    def follow(self, offset: int) -> tuple[list[Event], int]:
        """Events appended at or after `offset`, and the offset to continue from.

        A compaction between two calls moves every offset: `offset` is mapped onto the new file.
        """
        return self._events.follow(offset)

    def follow_events(self, stop: threading.Event | None = None, poll_s: float = FOLLOW_POLL_S) -> Iterator[Event]:
        """`tail -f`: every event appended from now on, as it lands, until `stop` is set."""
        return self._events.follow_events(self.end_offset(), stop, poll_s)

    # ---- privacy ------------------------------------------------------------------------------
    def ephemeral(self, action: str | EphemeralParams = "status", minutes: float | None = None) -> EphemeralState:
        """Turn ephemeral mode on (`start`, optionally for `minutes`; or `on`), off (`end`, `off`), or report it."""
        alias = {"on": "start", "off": "end"}.get(action) if isinstance(action, str) else None
        from urchin.params.ephemeral import EphemeralParams
        p, flag = typed(EphemeralParams, alias or action, minutes), self.ingestor.ephemeral
        if p.action == "start":
            return flag.start(p.minutes)
        return flag.end() if p.action == "end" else flag.state()

    def redact_check(self, path: str) -> Iterator[Finding]:
        """What redaction would remove from a file, by type, line and column; values are masked."""
        try:
            handle = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise ValidationError("file", f"{path}: cannot read: {exc.strerror}") from None
        with handle:
            yield from self.ingestor.redactor.scan_lines(handle)

    def redaction_fingerprint(self) -> str:
        """Which redaction rules this process applies (a daemon started before a rule change differs)."""
        return str(self.ingestor.redactor.fingerprint)

    def reload_config(self, force: bool = False) -> ConfigReload | None:
        """Read config.toml again if it changed since the last look (`force`: anyway): its `[redact]` and
        `[recall]` tables apply from the next write or query; what it says of other keys is reported.
        One `stat` when nothing changed (a long-running process calls it before each request)."""
        if self._config_watch is None:
            from urchin.memory.reload import ConfigWatch

            self._config_watch = ConfigWatch(self._settings)
        change = self._config_watch.poll(force)
        if change is not None and change.settings is not None:
            settings = self._settings = change.settings
            self._proof.use(settings)               # unproven lines are served through the new rules
            for part in (self._workspace, self._capture):
                part._settings = settings            # workspace files and collectors read them per call
            if change.redactor is not None:
                self.ingestor.redactor = change.redactor
                self.ingestor.settings = settings
        return change

    def config_state(self) -> dict[str, Any]:
        """The redaction rules in force (in words, and their fingerprint), config.toml keys changed since
        start-up that need a restart, and why the last change was not applied (None: it was)."""
        watch = self._config_watch
        redactor = self.ingestor.redactor
        return {"redaction": redactor.describe(), "redactionFingerprint": redactor.fingerprint,
                "configRestartNeeded": list(watch.restart) if watch else [],
                "configReloadError": watch.error if watch else None}

    def identity(self) -> dict[str, str]:
        """Who this machine's events are stamped with, and where each value came from."""
        return {"account": self._settings.account, "device": self._settings.device}

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
        stats = self._journal.stats()
        out = {
            "journal": stats.path,
            "sizeBytes": stats.size_bytes,
            "events": stats.events,
            "firstTimestamp": stats.first_timestamp,
            "lastTimestamp": stats.last_timestamp,
            "invalidLines": stats.invalid_lines,
            "tornRecords": stats.torn_records,
            "ephemeral": self.ingestor.ephemeral.state().to_dict(),
            "substringIndex": self._substring.index_state(),
            "daemon": self._daemon_state(),
            "embedder": self._semantic.state(),
            "database": (("URCHIN_DATABASE_URL" if self._settings.database_url
                          else f"embedded ({self._settings.pg_dir})")
                         + "; `urchin index --status` for the hybrid index"),
            "home": str(self._settings.home),
            "now": format_timestamp(ms=False),
        }
        service = self._index.opened
        skipped = service.skipped_events() if service is not None else None
        if skipped:   # rows the index database refused while this process fed it
            out["indexSkippedEvents"] = skipped
        return out

    def _daemon_state(self) -> dict[str, Any] | None:
        """The daemon named in daemon.json, when its pid is alive (cheap: no connection)."""
        import os

        try:
            info = orjson.loads(self._settings.daemon_file.read_bytes())
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            return None
        return {"pid": info["pid"], "address": info.get("address"), "started": info.get("started")}

    # ---- capture: collectors and hook installation ---------------------------------------------
    def collect(self, which: str = "all") -> list[CollectReport]:
        """Run one collector, or `all` whose folders exist; a `CollectReport` each."""
        return self._capture.collect(which)

    def collectors_status(self) -> list[dict[str, Any]]:
        """Each collector: folders, found, events collected, last run, last error."""
        return self._capture.status()

    def collector_changes(self, stop: threading.Event) -> Iterator[set[str]]:
        """Names of collectors whose folders changed, batch by batch, until `stop` (the daemon runs them)."""
        return self._capture.changes(stop)

    def install_hooks(self, target: str, *, path: str | None = None, dry_run: bool = False,
                      shell: str | None = None) -> InstallResult:
        """Merge Urchin's hooks into an agent's (or shell's) config; an `InstallResult`."""
        return self._capture.install_hooks(target, path, dry_run, shell)

    def uninstall_hooks(self, target: str | None = None, *, path: str | None = None, dry_run: bool = False,
                        shell: str | None = None) -> list[UninstallResult]:
        """Remove Urchin's hooks from one agent's (or shell's) config, or (no target) from every default
        one; an `UninstallResult` each."""
        return self._capture.uninstall_hooks(target, path, dry_run, shell)

    # ---- workspace files and curated memories -------------------------------------------------
    def workspace_add(self, path: str, name: str | None = None, allow_secret_files: bool = False) -> Root:
        return self._workspace.roots.add(path, name, allow_secret_files)

    def workspace_remove(self, name: str) -> Root:
        return self._workspace.roots.remove(name)

    def workspace_list(self) -> list[Root]:
        return self._workspace.roots.list()

    def get_file(self, path: str | FileParams, from_line: int = 1, max_lines: int = 200) -> FileRange:
        """A window of numbered lines of a workspace file (`FileParams`, or its fields); outside the roots: refused."""
        from urchin.params.workspace import FileParams
        return self._workspace.get_file(typed(FileParams, path, from_line, max_lines))

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
                      replace: bool = False) -> MemoryDef:
        """Save a curated memory; a file or folder member must lie inside a root (it may not exist yet)."""
        return self._workspace.memory_create(slug, use_when, members, title, replace)

    def memory_edit(self, slug: str, *, use_when: str | None = None, members: list[Member] | None = None,
                    title: str | None = None) -> MemoryDef:
        """Change a curated memory: what is given replaces what it held (members as a whole list)."""
        return self._workspace.memory_edit(slug, use_when, members, title)

    def memory_delete(self, slug: str) -> MemoryDef:
        """Delete a curated memory; returns what it held."""
        return self._workspace.memory_delete(slug)

    def memory_list(self) -> list[MemoryDef]:
        return self._workspace.memory_list()

    def memory_get(self, slug: str | MemoryParams, token_budget: int = 8000) -> dict[str, Any]:
        """A curated memory with every member's current contents, and coverage notes (`MemoryParams`, or its fields)."""

        def run_query(member: Member) -> list[str]:
            # a saved window is held to the rule `memory create` holds it to (and its error), not search's
            hours = check_hours(member.hours or 24 * 365)
            result = self.search(member.query or "", hours=hours, limit=50, source=member.source)
            return [one_line(hit.event, width=2000) for hit in result.hits]

        from urchin.params.workspace import MemoryParams
        return self._workspace.memory_get(typed(MemoryParams, slug, token_budget), run_query)

    def overview(self) -> dict[str, Any]:
        """Where an agent new to a workspace starts: files, recent changes, sources, memories."""
        journal = {k: v for k, v in self.status().items() if k in ("events", "firstTimestamp", "lastTimestamp")}
        return self._workspace.overview(journal, self.collectors_status(), self.index_status)

    # ---- recall: what an agent is told without asking (urchin/recall/) -------------------------
    def recall(self, params: RecallParams | None = None, /, *, workspace: str | None = None, cwd: str | None = None,
               session: str | None = None, prompt: str | None = None, budget: int | None = None,
               now: datetime | None = None, audit: Callable[[Mapping[str, Any]], None] | None = None) -> RecallResult:
        """The session-start digest (no `prompt`) or the prompt's relevant records of one workspace,
        framed as quoted data; given to a `session`, recorded as an audit event (written before this
        returns, or handed to `audit` to write: the daemon's hook route writes it beside its answer).
        `params`: a `RecallParams` (the front ends', checked when built), else built here from the keywords."""
        from urchin.params.recall import RecallParams
        from urchin.recall import recall

        p = params if params is not None else built(RecallParams, workspace=workspace, cwd=cwd, session=session,
                                                      prompt=prompt, budget=budget)
        return recall(self._recall_reader(audit), workspace=p.workspace, cwd=p.cwd, session=p.session,
                      prompt=p.prompt, budget=p.budget, now=now)

    def _recall_reader(self, audit: Callable[[Mapping[str, Any]], None] | None = None) -> Reader:
        from urchin.recall.frame import remembered
        from urchin.recall.reader import Reader

        def recent(filters: Filters, since_ms: int, limit: int) -> list[Event]:
            if filters.session is not None:     # a session's own rows, not a scan of the window
                events = self._semantic.cosine().session_events(filters, since_ms, limit)
                if events is not None:
                    return events
            self._hot.catch_up()
            return self._substring.newest(filters, since_ms=since_ms, limit=limit)   # kept between digests

        def ranked(query: str, filters: Filters, since_ms: int, limit: int) -> Iterable[Hit]:
            return self._semantic.cosine().search_lazily(query, since_ms=since_ms, limit=limit, filters=filters)

        def record(item: Mapping[str, Any]) -> None:
            self.ingestor.ingest([item])

        return Reader(recent, ranked, lambda: [(m.slug, m.title, m.use_when) for m in self.memory_list()],
                      remembered(self.ingestor.redactor), audit or record,
                      lambda: self.ingestor.ephemeral.is_on(), self._settings.config)

    # ---- the Postgres hybrid index (extra `postgres`; the driver loads on first use) ----------
    def context(self, params: ContextParams | None = None, /, *, now: datetime | None = None,
                **keywords: Any) -> ContextResult:
        """`search_context`: its typed parameters (the front ends', checked when built), or `ContextParams`'
        snake_case keywords (built here, so checked the same way: `QueryError` naming the bad field).

        The index first catches up with the journal when it is only a little behind; the coverage block
        says when it is not.
        """
        if params is None:
            params = ContextParams.build(now=now, **keywords)
        elif keywords or now is not None or not isinstance(params, ContextParams):
            raise TypeError("context() takes ContextParams (wire names: ContextParams.parse(mapping)), or keywords")
        return self._index.context(params)

    def index(self, rebuild: bool = False, follow: bool = False,
              on_progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> FeedReport:
        """Feed the journal into the index; `rebuild` empties it first; `follow` runs until `stop` is set."""
        return self._index.feed(rebuild, follow, on_progress, stop)

    def update_index(self, rebuild: bool = False, follow: bool = False,
                     on_progress: Callable[[int, int], None] | None = None,
                     stop: threading.Event | None = None) -> IndexRun:
        """`urchin index`: the journal, then (when not following and roots exist) the workspace files."""
        return self._index.update(rebuild, follow, on_progress, stop)

    def query_source(self, source: str | QuerySourceParams, query: str = "", limit: int = 10,
                     min_score: float = 0.0) -> ContextResult:
        """`search_context` on one source only (`QuerySourceParams`, or its fields): see `HybridIndex.query_source`."""
        from urchin.params.sources import QuerySourceParams
        return self._index.query_source(typed(QuerySourceParams, source, query, limit, min_score))

    def fetch_source_document(self, source: str | FetchParams, doc_id: str = "", content_hash: str | None = None,
                              mode: str = "indexed") -> dict[str, Any]:
        """One whole document: an event by id (of that source), or a file of a workspace root (its whole text).

        For a root, `doc_id` is the path inside it (or `<root>/<path>`; source `files` takes `<root>/<path>`).
        A file the hybrid index holds comes from the index at the version indexed (`mode` "indexed"); one it
        does not hold, or any with `mode` "live", is read from disk: paths that leave the root are refused,
        files over MAX_DOCUMENT_BYTES too (read ranges instead). `content_hash` (a file result's
        `location.contentHash`) insists on that version.
        A collected event is the version indexed; it carries `upstream` (its transcript lines, and whether
        they still hold it), and `content_hash` must then be its `location.upstream.contentHash`. (`FetchParams`.)
        """
        from urchin.params.sources import FetchParams
        return self._index.fetch_source_document(typed(FetchParams, source, doc_id, mode, content_hash))

    def get_document(self, document_id: str | DocumentParams, include_chunks: bool = False) -> dict[str, Any]:
        """textrawl's `get_document`: a search result's whole document at the version indexed (`DocumentParams`)."""
        from urchin.params.sources import DocumentParams
        return self._index.get_document(typed(DocumentParams, document_id, include_chunks))

    def document_search(self, params: DocumentSearchParams | Mapping[str, Any]) -> dict[str, Any]:
        """textrawl's `search` over the same hybrid query as `context`: `DocumentSearchParams`, or them by name."""
        from urchin.params.documents import DocumentSearchParams
        p = params if isinstance(params, DocumentSearchParams) else DocumentSearchParams.parse(params)
        return self._index.document_search(p, self.memory_list() if p.include_memories else [])

    def index_files(self) -> FileIndexReport:
        """Index the workspace roots' files (changed ones re-chunked, vanished ones removed)."""
        return self._index.index_files()

    def index_status(self) -> dict[str, Any]:
        return self._index.status()

    def db_setup(self, owner_password: str | None = None, reader_password: str | None = None) -> dict[str, Any]:
        """`urchin db setup`: the shared server's roles (owner, reader, feeder group); needs an admin URL."""
        return self._index.db_setup(owner_password, reader_password)

    def db_feeder(self, device: str, password: str | None = None, account: str | None = None) -> dict[str, Any]:
        """`urchin db feeder DEVICE`: a role that may write only that device's rows, as `account`."""
        return self._index.db_feeder(device, password, account)

    # ---- hot views (long-lived processes: the daemon) ------------------------------------------
    def add_view(self, view: HotView) -> None:
        """Keep `view` current from the next `refresh` on; it is fed from offset 0 first."""
        self._hot.add(view)

    def warm(self) -> None:
        """Switch to hot mode: ids in memory, every view fed to the journal's end, reads catch up first."""
        self.ingestor.keep_ids_in_memory()
        self.finish_forget()
        # First what a first query waits for: the token-cosine view, made and opened (its saved index, or
        # the tail of the newest events) in a thread of its own, marked as a request; the rest of the
        # start-up work below gives way to it (`requests_first`), then follows.
        self._semantic.hot()
        # The id index is loaded now, not inside the first write's latency, but in a thread: it waits for
        # the journal's lock (an import may hold it) and grows with the journal, and the daemon serves
        # meanwhile (a write that comes first loads it itself, under the same lock).
        self._ids_loading = threading.Thread(target=self._load_ids, name="urchin-ids", daemon=True)
        self._ids_loading.start()
        # The substring block index follows the journal by itself; build what it lacks in the
        # background (about 15 s per million events) while everything else serves.
        threading.Thread(target=self._catch_up_substring, name="urchin-substring-index", daemon=True).start()
        self._hot.refresh()
        self._hot.hot = True
        threading.Thread(target=self._warm_digests, name="urchin-recall-warm", daemon=True).start()

    def _catch_up_substring(self) -> None:
        give_way(requests_first.STARTUP_WAIT_S)
        self._substring.catch_up()

    def _warm_digests(self) -> None:
        """A daemon's first session-start digest of a workspace reads the workspace's latest events from
        the journal's blocks (~100 ms at 1M events: a hook's whole budget); every later one reads only
        what the journal gained since (`SubstringSearcher.newest` keeps the reads). So after a start,
        the workspaces active in the last week are digested once here, in the background at nice 10,
        giving way to requests: the first hook of each then starts warm. No session, so nothing is
        recorded; nothing is shown."""
        lower_thread_priority()
        give_way(requests_first.STARTUP_WAIT_S)
        try:
            since_ms = int(time.time() * 1000) - WARM_DAYS * 86_400_000
            latest = self._substring.search(None, since_ms=since_ms, limit=WARM_SCAN)
            workspaces = dict.fromkeys(event.workspace for event in latest if event.workspace)
            for workspace in list(workspaces)[:WARM_WORKSPACES]:
                give_way(5.0)
                self.recall(workspace=workspace)
        except Exception as exc:  # noqa: BLE001 - a warm-up only saves the first hooks some time
            log.warning("warming the session-start digests failed: %s", exc)

    def _load_ids(self) -> None:
        give_way(requests_first.STARTUP_WAIT_S)   # after what a first query waits for (`warm`)
        try:
            with self._journal.locked():
                self.ingestor.ids.catch_up()
        except UrchinError as exc:      # the next write tries again, and says why
            log.warning("loading the id index failed: %s", exc.message)

    def refresh(self) -> int:
        """Bring every view up to the journal's end (whoever appended); returns the offset reached.

        Cheap when nothing changed (a `stat` or two). The daemon's follower calls it on every
        journal change and every half second; hot reads refresh the fed views first, so a client
        reads its own writes. The token-cosine view follows the journal by itself (its own lock).
        """
        end = self._hot.refresh()
        self._semantic.refresh()
        return end

    def release_pages(self, idle_s: float = 2.0) -> None:
        """The daemon's follower, now and then: views idle for `idle_s` drop the pages of their
        read-only maps (the block index's bits, the saved token-cosine postings and ids) from this
        process; the page cache keeps them, so the next query maps them again for a minor fault."""
        self._substring.index.release_pages(idle_s)
        self._semantic.release_pages(idle_s)

    def save_views(self) -> bool:
        """Persist the views that keep a copy on disk (the token-cosine index); the daemon calls this
        at shutdown (catch-up also saves every so often by itself). False when nothing was written."""
        return self._semantic.save()

    def loading(self) -> list[str]:
        """What a hot process is still loading in the background: `events` (the line count `followed`
        gives is so far a lower bound), `ids` (the id index: a write waits for it)."""
        loading = ["events"] if self._hot.counting else []
        if self._ids_loading is not None and self._ids_loading.is_alive():
            loading.append("ids")
        return loading

    @property
    def followed(self) -> tuple[int, int]:
        """(offset, complete lines) that `refresh` has reached: the hot views' position."""
        return self._hot.followed

    # ---- timeline (the viewer) -----------------------------------------------------------------
    def timeline(self, *, before: str | None = None, after: str | None = None, limit: int = 50,
                 source: str | None = None, workspace: str | None = None, session: str | None = None,
                 kind: str | None = None) -> TimelinePage:
        """One page of events, newest first by event time: the newest, older than `before` (a page's `older`), or
        those that arrived after `after` (a page's `newer`)."""
        return self._timeline.timeline(before=before, after=after, limit=limit, source=source,
                                       workspace=workspace, session=session, kind=kind)

    def activity(self, *, days: int = 30, now: datetime | None = None) -> dict[str, Any]:
        """Events per UTC day per source over the last `days` days (the overview's chart)."""
        return self._timeline.activity(days=days, now=now)

    # ---- forgetting ---------------------------------------------------------------------------
    def forget(self, ids: ForgetParams | Sequence[str] | str | None = None, *, session: str | None = None,
               query: str | None = None, since: str | None = None, until: str | None = None,
               confirm: bool = False, purge: bool = False) -> ForgetResult:
        """Forget the events matching every selector given (`ForgetParams`, or its fields): `Forgetting.forget`."""
        from urchin.params.forget import ForgetParams
        return self._forgetting.forget(ids if isinstance(ids, ForgetParams) else ForgetParams.parse(dict(
            ids=ids, session=session, query=query, since=since, until=until, confirm=confirm, purge=purge)))

    def compact(self) -> Compaction | None:
        """Rewrite the journal without forgotten events, if any are left in it; views follow."""
        return self._forgetting.compact()

    def open_home(self) -> str | None:
        """Check the home's format versions before anything reads it (memory/upgrade.py): what is older
        is upgraded and said once (returned, and logged); a newer one raises FormatError, untouched.
        Called first by every command opening the journal in-process, and by the daemon's start."""
        from urchin.memory.upgrade import open_home

        return open_home(self._settings)

    def finish_forget(self) -> Compaction | None:
        """Finish a forget a crash interrupted (cheap when there is none): every command opening the
        journal in-process, and the daemon's start, call this first."""
        return self._forgetting.finish()

    def redact_rewrite(self, purge: bool = False) -> dict[str, Any]:
        """Apply the current redaction rules to every journal line; lines they change are rewritten,
        every other line stays byte-identical, and every view is refreshed (`purge`: as for `forget`)."""
        return self._forgetting.redact_rewrite(purge)
