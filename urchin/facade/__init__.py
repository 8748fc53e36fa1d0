"""`Memory`: the one facade every front end calls (CLI, MCP tools, HTTP routes, the daemon).

It owns the write path (`Ingestor`) and the read views, takes typed parameters checked when built,
and returns result objects the front ends only format. Construction does no I/O. It is a composition
of parts, one per noun (`urchin/facade/*.py`): the write path, the journal's events (search, by id,
tail, follow), hot views, ranked views, the workspace, the hybrid index, capture, forgetting, the
timeline, privacy, recall, upkeep. `Memory.__init__` wires them in one place, each given the parts
it calls (never a call back into `Memory`), so every call goes down; each sits behind thin methods
here and is private to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.delegation import Delegated
from urchin.errors import ValidationError
from urchin.event import Event
from urchin.facade.capture import Capture
from urchin.facade.events import JournalEvents
from urchin.facade.forgetting import ForgetResult, Forgetting
from urchin.facade.hot import HotView, HotViews
from urchin.facade.hybrid import MAX_DOCUMENT_BYTES, HybridIndex, IndexRun
from urchin.facade.semantic import SemanticViews
from urchin.facade.timeline import Timeline, TimelinePage
from urchin.facade.workspace import Workspace
from urchin.facade.writing import PreparedBatch, WritePath, import_lines, prepare_batch
from urchin.journal import Journal
from urchin.params import built, typed
from urchin.params.context import ContextParams
from urchin.params.reading import GetParams, RecentParams, SemanticParams, SessionParams, TailParams, WorkspaceParams
from urchin.params.search import SearchParams
from urchin.proof import LineProof
from urchin.search.query import Filters, SearchResult, window_start_ms
from urchin.search.substring import SubstringSearcher

if TYPE_CHECKING:
    # Imported where used: numpy and httpx cost ~0.3 s, the write path (redaction rules) ~15 ms and the
    # workspace modules ~8 ms, the typed parameters of the other operations ~7% of a cold `urchin search`
    # (8 dataclasses), tokens and ephemeral state ~0.2%, and a cold `urchin search` needs none of them.
    from urchin.api_tokens import NewToken, TokenRecord
    from urchin.collectors.base import CollectReport
    from urchin.ephemeral import EphemeralState
    from urchin.facade.api import EmbedReport
    from urchin.facade.privacy import Privacy
    from urchin.facade.recalling import Recalling
    from urchin.facade.reload import ConfigReload
    from urchin.facade.status import HomeStatus
    from urchin.facade.upkeep import Upkeep
    from urchin.facade.workspace import Overview
    from urchin.hybrid.search_context import ContextResult
    from urchin.hybrid.service import IndexService
    from urchin.ingest import BatchReport, Ingestor, IngestResult
    from urchin.jsontypes import JSON, JSONObject
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.ephemeral import EphemeralParams
    from urchin.params.forget import ForgetParams
    from urchin.params.recall import RecallParams
    from urchin.params.sources import DocumentParams, FetchParams, QuerySourceParams
    from urchin.params.workspace import CuratedMemoryParams, FileParams
    from urchin.recall import RecallResult
    from urchin.redact import Finding
    from urchin.tombstones import ForgetLog
    from urchin.workspace.access import FileAccess
    from urchin.workspace.curated import MemoryContents
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Root, Roots

__all__ = ["Memory", "ImportReport", "PreparedBatch", "HotView", "ForgetResult", "IndexRun", "TimelinePage",
           "MAX_DOCUMENT_BYTES"]

FOLLOW_POLL_S = 0.25


def __getattr__(name: str) -> Any:
    # `ImportReport` is the ingest layer's `BatchReport` (one tally for import, HTTP batches, the writer);
    # resolved lazily so that readers never load the write path.
    if name == "ImportReport":
        from urchin.ingest import BatchReport

        return BatchReport
    raise AttributeError(f"module 'urchin.facade' has no attribute {name!r}")


class Memory:
    """The one facade: a composition of parts, each behind thin methods here; a context manager
    (`with Memory(settings) as m:`) that releases the index connection and the embedded PostgreSQL it
    started on exit."""

    def __init__(self, settings: Settings) -> None:
        # The wiring, in one place: each part is given the parts it calls, built before it (a part
        # only a daemon or one command uses is built on first use, below).
        self._settings = settings
        self._proof = LineProof(settings)
        self._journal = journal = Journal(settings.journal_path, settings.durability, self._proof)
        self._write = WritePath(settings, journal)
        self._substring = SubstringSearcher(journal)
        self._hot = HotViews(journal)
        self._events = JournalEvents(journal, self._substring, self._hot, self._write)
        self._workspace = Workspace(settings, self._write, self._events)
        self._semantic = SemanticViews(settings, journal, self._events)
        self._index = HybridIndex(settings, journal, self._workspace, self._events, self._semantic)
        self._capture = Capture(settings, self._write)
        self._forgetting = Forgetting(settings, journal, self._substring, self._write, self._semantic, self._index)
        self._timeline = Timeline(journal, self._substring.forgotten, self._hot)

    @cached_property
    def _privacy(self) -> Privacy:
        from urchin.facade.privacy import Privacy

        return Privacy(self._settings, self._write)

    @cached_property
    def _upkeep(self) -> Upkeep:
        from urchin.facade.upkeep import Upkeep

        return Upkeep(self._journal, self._write, self._forgetting, self._substring, self._hot, self._semantic,
                      self._recalling)

    @cached_property
    def _recalling(self) -> Recalling:
        from urchin.facade.recalling import Recalling

        return Recalling(self._settings, self._substring, self._hot, self._semantic, self._workspace, self._write)

    @classmethod
    def open(cls, home: str | None = None, **overrides: Any) -> Memory:
        return cls(Settings.resolve(home, **overrides))

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    close = Delegated(HybridIndex.close, "_index")

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
        return self._write.ingestor

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
    def ingest(self, items: Iterable[Mapping[str, JSON] | Event],
               defaults: Mapping[str, JSON] | None = None) -> list[IngestResult]:
        return self.ingestor.ingest(items, defaults)

    def ingest_one(self, item: Mapping[str, JSON] | Event, defaults: Mapping[str, JSON] | None = None) -> IngestResult:
        return self.ingestor.ingest([item], defaults)[0]

    def prepare(self, item: Mapping[str, JSON], defaults: Mapping[str, JSON] | None = None) -> Event:
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
        """Literal, case-insensitive search over content; newest first; `scope="team"`: every device's
        events in the shared database. `query`: a `SearchParams`, or its text with the fields as keywords."""
        p = query if isinstance(query, SearchParams) else SearchParams.of(
            query, hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind,
            scope=scope)
        if p.scope == "team":
            return self._index.search_team(p, window_start_ms(p.hours, now))
        return self._events.search(p, now)

    def semantic(self, query: str | SemanticParams, *, hours: float | None = None, limit: int | None = None,
                 source: str | None = None, workspace: str | None = None, session: str | None = None,
                 kind: str | None = None, min_score: float | None = None, explain: bool | None = None,
                 now: datetime | None = None) -> SearchResult:
        """Ranked search for what a query is about, best first, each hit with its calibrated score
        (`SemanticViews.search`). `query`: a `SemanticParams`, or its text with the fields as keywords."""
        p = query if isinstance(query, SemanticParams) else built(
            SemanticParams, query=query, hours=hours, limit=limit, source=source, workspace=workspace,
            session=session, kind=kind, min_score=min_score, explain=explain)
        return self._semantic.search(p.query, window_start_ms(p.hours, now), p.limit,
                                     Filters(p.source, p.workspace, p.session, p.kind), min_score=p.min_score,
                                     explain=p.explain)

    embedding_view = Delegated(SemanticViews.embedding, "_semantic")
    cosine_view = Delegated(SemanticViews.cosine, "_semantic")
    def embed(self, progress: Callable[[int], None] | None = None, *, limit: int | None = None) -> EmbedReport:
        """Backfill the embedder's vector cache with every event it lacks (at most `limit` this call)."""
        report = self._semantic.embed(progress, limit)
        return {"embedded": report["embedded"], "cached": report["cached"], "model": report["model"],
                "fingerprint": report["fingerprint"]}

    embed_in_background = Delegated(SemanticViews.embed_in_background, "_semantic")

    def recent(self, params: RecentParams | None = None, /, *, hours: float | None = None, limit: int | None = None,
               source: str | None = None, workspace: str | None = None, session: str | None = None,
               kind: str | None = None, now: datetime | None = None) -> SearchResult:
        """The latest events of the window, newest first: `RecentParams`, or its fields as keywords."""
        p = params if params is not None else built(RecentParams, hours=hours, limit=limit, source=source,
                                                     workspace=workspace, session=session, kind=kind)
        return self._events.recent(p, now)

    def session_context(self, session: str | SessionParams, *, hours: float | None = None,
                        limit: int | None = None, now: datetime | None = None) -> SearchResult:
        """The session's latest events, oldest first."""
        p = session if isinstance(session, SessionParams) else built(SessionParams, session=session, hours=hours,
                                                                       limit=limit)
        return self._events.session(p, now)

    def workspace_context(self, workspace: str | WorkspaceParams, *, hours: float | None = None,
                          limit: int | None = None, now: datetime | None = None) -> SearchResult:
        p = workspace if isinstance(workspace, WorkspaceParams) else built(WorkspaceParams, workspace=workspace,
                                                                             hours=hours, limit=limit)
        return self._events.recent(RecentParams(p.hours, p.limit, workspace=p.workspace), now)

    def get(self, event_id: str | GetParams) -> Event:
        return self._events.get((event_id if isinstance(event_id, GetParams) else GetParams(event_id)).id)

    locate = Delegated(JournalEvents.locate, "_events")

    def tail(self, n: int | TailParams = 10) -> list[Event]:
        """The last `n` events in journal (arrival) order, oldest first."""
        return self._events.tail((n if isinstance(n, TailParams) else TailParams(n)).count)

    end_offset = Delegated(Journal.size, "_journal")

    def follow(self, offset: int) -> tuple[list[Event], int]:
        """Events appended at or after `offset`, and the offset to continue from (mapped across compactions)."""
        return self._events.follow(offset)

    def follow_events(self, stop: threading.Event | None = None, poll_s: float = FOLLOW_POLL_S) -> Iterator[Event]:
        """`tail -f`: every event appended from now on, as it lands, until `stop` is set."""
        return self._events.follow_events(self.end_offset(), stop, poll_s)

    # ---- privacy ------------------------------------------------------------------------------
    def ephemeral(self, action: str | EphemeralParams = "status", minutes: float | None = None) -> EphemeralState:
        """Turn ephemeral mode on (`start`, optionally for `minutes`; or `on`), off (`end`, `off`), or report it."""
        alias = {"on": "start", "off": "end"}.get(action) if isinstance(action, str) else None
        from urchin.params.ephemeral import EphemeralParams
        return self._privacy.ephemeral(typed(EphemeralParams, alias or action, minutes))

    def redact_check(self, path: str) -> Iterator[Finding]:
        """What redaction would remove from a file, by type, line and column; values are masked."""
        return self._privacy.redact_check(path)

    def redaction_fingerprint(self) -> str:
        """Which redaction rules this process applies (a daemon started before a rule change differs)."""
        return self._privacy.fingerprint()

    def reload_config(self, force: bool = False) -> ConfigReload | None:
        """Read config.toml again if it changed since the last look (`force`: anyway): its `[redact]` and
        `[recall]` tables apply from the next write or query; what it says of other keys is reported.
        One `stat` when nothing changed (a long-running process calls it before each request)."""
        change = self._privacy.poll(force)
        if change is not None and change.settings is not None:
            settings = self._settings = change.settings
            self._proof.use(settings)               # unproven lines are served through the new rules
            for part in (self._workspace, self._capture, self._recalling):
                part.use(settings)                   # workspace files, collectors and recall read them per call
            self._write.use(settings, change.redactor)
        return change

    def config_state(self) -> dict[str, Any]:
        """The redaction rules in force (in words, and their fingerprint), config.toml keys changed since
        start-up that need a restart, and why the last change was not applied (None: it was)."""
        return self._privacy.config_state()

    def identity(self) -> dict[str, str]:
        """Who this machine's events are stamped with, and where each value came from."""
        return {"account": self._settings.account, "device": self._settings.device}

    # ---- scoped API tokens of the daemon (urchin/api_tokens.py) ------------------------------------
    def token_create(self, scope: str, workspaces: Sequence[str] = (), expires: str | None = None,
                     name: str | None = None) -> NewToken:
        """A new token (in the result once; only its hash is kept) and its record."""
        from urchin.api_tokens import TokenStore

        token, record = TokenStore(self.settings.home).create(scope, workspaces, expires, name)
        return {"token": token, **record}

    def token_list(self) -> list[TokenRecord]:
        from urchin.api_tokens import TokenStore

        return TokenStore(self.settings.home).entries()

    def token_revoke(self, token_id: str) -> None:
        from urchin.api_tokens import TokenStore

        TokenStore(self.settings.home).revoke(token_id)

    def status(self) -> HomeStatus:
        from urchin.facade.status import home_status

        return home_status(self._settings, self._journal, self._write, self._substring, self._semantic, self._index)

    # ---- capture: collectors and hook installation ---------------------------------------------
    def collect(self, which: str = "all") -> list[CollectReport]:
        """Run one collector, or `all` whose folders exist; a `CollectReport` each."""
        return self._capture.collect(which)

    collectors_status = Delegated(Capture.status, "_capture")
    collector_changes = Delegated(Capture.changes, "_capture")
    install_hooks = Delegated(Capture.install_hooks, "_capture")
    uninstall_hooks = Delegated(Capture.uninstall_hooks, "_capture")

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

    memory_create = Delegated(Workspace.memory_create, "_workspace")
    memory_edit = Delegated(Workspace.memory_edit, "_workspace")
    memory_delete = Delegated(Workspace.memory_delete, "_workspace")
    memory_list = Delegated(Workspace.memory_list, "_workspace")

    def memory_get(self, slug: str | CuratedMemoryParams, token_budget: int = 8000) -> MemoryContents:
        """A curated memory with every member's current contents, and coverage notes (`CuratedMemoryParams`,
        or its fields)."""
        from urchin.params.workspace import CuratedMemoryParams
        return self._workspace.memory_get(typed(CuratedMemoryParams, slug, token_budget))

    def overview(self) -> Overview:
        """Where an agent new to a workspace starts: files, recent changes, sources, memories."""
        status = self.status()
        journal: JSONObject = {k: status[k] for k in ("events", "firstTimestamp", "lastTimestamp")}
        return self._workspace.overview(journal, self.collectors_status(), self._index)

    # ---- recall: what an agent is told without asking (urchin/recall/) -------------------------
    def recall(self, params: RecallParams | None = None, /, *, workspace: str | None = None, cwd: str | None = None,
               session: str | None = None, prompt: str | None = None, budget: int | None = None,
               now: datetime | None = None, audit: Callable[[Mapping[str, Any]], None] | None = None) -> RecallResult:
        """The session-start digest (no `prompt`) or the prompt's relevant records of one workspace, framed
        as quoted data; given to a `session`, recorded as an audit event (written before this returns, or
        handed to `audit`). `params`: a `RecallParams`, else built here from the keywords."""
        from urchin.params.recall import RecallParams

        p = params if params is not None else built(RecallParams, workspace=workspace, cwd=cwd, session=session,
                                                      prompt=prompt, budget=budget)
        return self._recalling.recall(p, now, audit)

    # ---- the Postgres hybrid index (extra `postgres`; the driver loads on first use) ----------
    def context(self, params: ContextParams | None = None, /, *, now: datetime | None = None,
                **keywords: Any) -> ContextResult:
        """`search_context`: its typed parameters, or `ContextParams`' snake_case keywords (built here, so
        checked the same way); the index first catches up with the journal when only a little behind."""
        if params is None:
            params = ContextParams.build(now=now, **keywords)
        elif keywords or now is not None or not isinstance(params, ContextParams):
            raise TypeError("context() takes ContextParams (wire names: ContextParams.parse(mapping)), or keywords")
        return self._index.context(params)

    index = Delegated(HybridIndex.feed, "_index")
    update_index = Delegated(HybridIndex.update, "_index")

    def query_source(self, source: str | QuerySourceParams, query: str = "", limit: int = 10,
                     min_score: float = 0.0) -> ContextResult:
        """`search_context` on one source only (`QuerySourceParams`, or its fields): see `HybridIndex.query_source`."""
        from urchin.params.sources import QuerySourceParams
        return self._index.query_source(typed(QuerySourceParams, source, query, limit, min_score))

    def fetch_source_document(self, source: str | FetchParams, doc_id: str = "", content_hash: str | None = None,
                              mode: str = "indexed") -> JSONObject:
        """One whole document, an event or a workspace file (`FetchParams`, or its fields): see
        `HybridIndex.fetch_source_document`."""
        from urchin.params.sources import FetchParams
        return self._index.fetch_source_document(typed(FetchParams, source, doc_id, mode, content_hash))

    def get_document(self, document_id: str | DocumentParams, include_chunks: bool = False) -> JSONObject:
        """textrawl's `get_document`: a search result's whole document at the version indexed (`DocumentParams`)."""
        from urchin.params.sources import DocumentParams
        return self._index.get_document(typed(DocumentParams, document_id, include_chunks))

    def document_search(self, params: DocumentSearchParams | Mapping[str, JSON]) -> JSONObject:
        """textrawl's `search` over the same hybrid query as `context`: `DocumentSearchParams`, or them by name."""
        from urchin.params.documents import DocumentSearchParams
        p = params if isinstance(params, DocumentSearchParams) else DocumentSearchParams.parse(params)
        return self._index.document_search(p, self.memory_list() if p.include_memories else [])

    index_files = Delegated(HybridIndex.index_files, "_index")
    index_status = Delegated(HybridIndex.status, "_index")
    db_setup = Delegated(HybridIndex.db_setup, "_index")
    db_feeder = Delegated(HybridIndex.db_feeder, "_index")

    # ---- hot views (long-lived processes: the daemon) ------------------------------------------
    add_view = Delegated(HotViews.add, "_hot")

    def warm(self) -> None:
        """Switch to hot mode (the daemon's start): `Upkeep.warm`."""
        self._upkeep.warm()

    def refresh(self) -> int:
        """Bring every view up to the journal's end (the daemon's follower); returns the offset reached."""
        return self._upkeep.refresh()

    def release_pages(self, idle_s: float = 2.0) -> None:
        """Views idle for `idle_s` unmap their read-only pages (the daemon's follower): `Upkeep.release_pages`."""
        self._upkeep.release_pages(idle_s)

    save_views = Delegated(SemanticViews.save, "_semantic")

    def loading(self) -> list[str]:
        """What a hot process is still loading in the background (`events`, `ids`)."""
        return self._upkeep.loading()

    @property
    def followed(self) -> tuple[int, int]:
        """(offset, complete lines) that `refresh` has reached: the hot views' position."""
        return self._hot.followed

    # ---- timeline (the viewer) -----------------------------------------------------------------
    timeline = Delegated(Timeline.timeline, "_timeline")
    activity = Delegated(Timeline.activity, "_timeline")

    # ---- forgetting ---------------------------------------------------------------------------
    def forget(self, ids: ForgetParams | Sequence[str] | str | None = None, *, session: str | None = None,
               query: str | None = None, since: str | None = None, until: str | None = None,
               confirm: bool = False, purge: bool = False) -> ForgetResult:
        """Forget the events matching every selector given (`ForgetParams`, or its fields): `Forgetting.forget`."""
        from urchin.params.forget import ForgetParams
        return self._forgetting.forget(ids if isinstance(ids, ForgetParams) else ForgetParams.parse(dict(
            ids=ids, session=session, query=query, since=since, until=until, confirm=confirm, purge=purge)))

    compact = Delegated(Forgetting.compact, "_forgetting")

    def open_home(self) -> str | None:
        """Check the home's format versions before anything reads it (facade/upgrade.py): an older one is
        upgraded and said once, a newer one refused. Every in-process command and the daemon call it first."""
        from urchin.facade.upgrade import open_home

        return open_home(self._settings)

    finish_forget = Delegated(Forgetting.finish, "_forgetting")
    redact_rewrite = Delegated(Forgetting.redact_rewrite, "_forgetting")
