"""Finding a running daemon, and `RemoteMemory`: the `Memory` read/write API over its HTTP API.

`open_memory(settings)` returns a `RemoteMemory` when `daemon.json` names a live daemon (its
flock is held), else an in-process `Memory`; both return the same result objects. Finding the
daemon is one `stat` when none runs; httpx is imported only when one does (it costs ~80 ms).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from urchin import wire
from urchin.config import Settings
from urchin.errors import (
    ConfigError,
    DaemonError,
    NotFoundError,
    QueryError,
    UrchinError,
    ValidationError,
)
from urchin.event import Event, new_id
from urchin.params.wire import to_wire

if TYPE_CHECKING:
    from urchin.collectors.base import CollectReport
    from urchin.collectors.install import InstallResult
    from urchin.collectors.uninstall import UninstallResult
    from urchin.ephemeral import EphemeralState
    from urchin.forget import Compaction
    from urchin.index.feeder import FeedReport
    from urchin.index.files import FileIndexReport
    from urchin.index.hybrid import ContextResult
    from urchin.ingest import BatchReport, IngestResult
    from urchin.memory import Memory
    from urchin.memory.facade import Facade, RecallAnswer
    from urchin.memory.forget import ForgetResult
    from urchin.memory.index import IndexRun
    from urchin.params.context import ContextParams
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.ephemeral import EphemeralParams
    from urchin.params.forget import ForgetParams
    from urchin.params.reading import (
        GetParams,
        RecentParams,
        SemanticParams,
        SessionParams,
        TailParams,
        WorkspaceParams,
    )
    from urchin.params.recall import RecallParams
    from urchin.params.search import SearchParams
    from urchin.params.sources import DocumentParams, FetchParams, QuerySourceParams
    from urchin.params.workspace import FileParams, MemoryParams
    from urchin.redact import Finding
    from urchin.search.query import SearchResult
    from urchin.workspace.memories import Member, MemoryDef
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Root

__all__ = ["DaemonInfo", "RemoteMemory", "find_daemon", "daemon_alive", "open_memory", "login_url"]

_BATCH = 1000


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    pid: int
    address: str
    started: str = ""
    version: str = ""
    token_path: str | None = None

    @property
    def uds(self) -> str | None:
        return self.address[5:] if self.address.startswith("unix:") else None


def daemon_alive(settings: Settings) -> bool:
    """True while some `urchin serve` holds this home's lock (exact, unlike a pid check)."""
    return wire.daemon_alive(str(settings.home))


def find_daemon(settings: Settings) -> DaemonInfo | None:
    """The live daemon serving this home, or None (no daemon.json, or a stale one)."""
    try:
        raw = orjson.loads(settings.daemon_file.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("address"), str) or not daemon_alive(settings):
        return None
    return DaemonInfo(pid=int(raw.get("pid") or 0), address=raw["address"], started=str(raw.get("started", "")),
                      version=str(raw.get("version", "")), token_path=raw.get("token_path"))


def open_memory(settings: Settings, *, use_daemon: bool | None = None) -> Facade:
    """The daemon's API when one runs for this home (and `use_daemon` allows), else in-process."""
    if settings.use_daemon if use_daemon is None else use_daemon:
        info = find_daemon(settings)
        if info is not None:
            return RemoteMemory(settings, info)
    from urchin.memory import Memory

    memory = Memory(settings)
    memory.open_home()        # an older home is upgraded (and said once), a newer one refused, before any read
    memory.finish_forget()    # a forget killed mid-compaction is finished by the next command, daemon or not
    return memory


def login_url(settings: Settings) -> tuple[str, float]:
    """A one-time viewer login URL from the running daemon (asked with the token), and its lifetime."""
    info = find_daemon(settings)
    if info is None:
        raise DaemonError("no daemon is running for this home: start it with `urchin serve`, then `urchin open`")
    if info.uds:
        raise DaemonError(f"the daemon listens on a Unix socket ({info.uds}); a browser needs it on TCP: "
                          "`urchin serve --port PORT`")
    remote = RemoteMemory(settings, info)
    body = remote._call("POST", "/auth/code", json={}, parse=lambda b: b, fallback=lambda _m: None)
    remote.close()
    if not isinstance(body, dict) or not isinstance(body.get("path"), str):
        raise DaemonError(f"the daemon at {info.address} did not hand out a login code (is it an older version?)")
    return info.address.rstrip("/") + body["path"], float(body.get("expiresInS", 60))


class RemoteMemory:
    """The `Memory` API through the daemon. Reads it has no route for, and any call made when the
    daemon has gone away, run in-process instead (same journal, same results)."""

    def __init__(self, settings: Settings, info: DaemonInfo, timeout_s: float = 30.0) -> None:
        self.settings = settings
        self.info = info
        self.timeout_s = timeout_s
        self._client: Any = None
        self._local: Memory | None = None
        self.fell_back = False  # set when the daemon vanished and a call ran in-process

    # ---- the API ------------------------------------------------------------------------------
    def search(self, query: str | SearchParams, *, hours: float | None = None, limit: int | None = None,
               source: str | None = None, workspace: str | None = None, session: str | None = None,
               kind: str | None = None, scope: str | None = None, now: datetime | None = None) -> SearchResult:
        """`Memory.search` through the daemon: the typed parameters, sent as `GET /search` names them."""
        from urchin.params.search import SearchParams

        p = query if isinstance(query, SearchParams) else SearchParams.of(
            query, hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind,
            scope=scope)
        if now is not None:  # the HTTP API always means "now"
            return self.local().search(p, now=now)
        return self._call("GET", "/search", params=to_wire(p), parse=_search_result,
                          fallback=lambda m: m.search(p))

    def recent(self, params: RecentParams | None = None, /, *, hours: float | None = None, limit: int | None = None,
               source: str | None = None, workspace: str | None = None, session: str | None = None,
               kind: str | None = None, now: datetime | None = None) -> SearchResult:
        """`Memory.recent` through the daemon: the typed parameters, sent as `GET /recent` names them."""
        from urchin.params.reading import RecentParams

        p = params if params is not None else RecentParams(**_drop_none(
            hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind))
        if now is not None:
            return self.local().recent(p, now=now)
        return self._call("GET", "/recent", params=to_wire(p), parse=_search_result,
                          fallback=lambda m: m.recent(p))

    def semantic(self, query: str | SemanticParams, *, hours: float | None = None, limit: int | None = None,
                 source: str | None = None, workspace: str | None = None, session: str | None = None,
                 kind: str | None = None, min_score: float | None = None, explain: bool | None = None,
                 now: datetime | None = None) -> SearchResult:
        """`Memory.semantic` through the daemon: the typed parameters, sent as `GET /semantic` names them."""
        from urchin.params.reading import SemanticParams

        p = query if isinstance(query, SemanticParams) else SemanticParams(query, **_drop_none(
            hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind,
            min_score=min_score, explain=explain))
        if now is not None:
            return self.local().semantic(p, now=now)
        result: SearchResult = self._call("GET", "/semantic", params=to_wire(p), parse=_search_result,
                                          fallback=lambda m: m.semantic(p))
        if not self.fell_back:
            result.notes.extend(self._settings_notes(result.mode))
        return result

    def _settings_notes(self, mode: str) -> list[str]:
        """The daemon searched with its own settings: say so when this shell's differ (else silently ignored)."""
        ours = self.settings.embedder_url
        used_embedder = mode.startswith("embedder")
        if ours and not used_embedder and "unreachable" not in mode:
            return [f"answered by the daemon (pid {self.info.pid}) with its own settings: it has no embedder, so "
                    f"URCHIN_EMBEDDER_URL in this shell is not used; restart `urchin serve` with it, or set "
                    f"URCHIN_NO_DAEMON=1 to search in-process"]
        if not ours and used_embedder:
            return [f"answered by the daemon (pid {self.info.pid}) with its embedder ({mode})"]
        return []

    def context(self, params: ContextParams | None = None, /, *, now: datetime | None = None,
                **keywords: Any) -> ContextResult:
        """`search_context` through the daemon, which holds the index connection."""
        if params is None:
            from urchin.params.context import ContextParams

            params = ContextParams.build(now=now, **keywords)
        elif keywords or now is not None:
            raise TypeError("context() takes ContextParams, or keywords, not both")
        if now is not None:  # the daemon's window is its own "now"
            return self.local().context(params)

        def parse(body: Any) -> ContextResult:
            from urchin.index.hybrid import ContextResult

            return ContextResult(body["query"], body["results"], body["coverage"], body["truncated"],
                                 body["tokensUsed"])

        typed = params
        return self._call("POST", "/context", json=to_wire(typed), parse=parse, fallback=lambda m: m.context(typed))

    def recall(self, params: RecallParams | None = None, /, *, workspace: str | None = None, cwd: str | None = None,
               session: str | None = None, prompt: str | None = None, budget: int | None = None,
               now: datetime | None = None) -> RecallAnswer:
        """`recall` through the daemon: its hot views answer, and its write path records the audit event."""
        from urchin.params.recall import RecallParams

        p = params if params is not None else RecallParams(**_drop_none(
            workspace=workspace, cwd=cwd, session=session, prompt=prompt, budget=budget))

        def run(m: Memory) -> RecallAnswer:
            return m.recall(p, now=now)

        if now is not None:
            return run(self.local())
        answer: RecallAnswer = self._call("POST", "/recall", json=to_wire(p), parse=_RecallAnswer, fallback=run)
        return answer

    def document_search(self, params: DocumentSearchParams | Mapping[str, Any]) -> dict[str, Any]:
        """textrawl's `search` through the daemon, which holds the index connection."""
        from urchin.params.documents import DocumentSearchParams

        p = params if isinstance(params, DocumentSearchParams) else DocumentSearchParams.parse(params)
        return self._call("POST", "/documents/search", json=to_wire(p), parse=lambda body: body,
                          fallback=lambda m: m.document_search(p))

    def get(self, event_id: str | GetParams) -> Event:
        from urchin.params.reading import GetParams

        p = event_id if isinstance(event_id, GetParams) else GetParams(event_id)

        def parse(body: Any) -> Event:
            event = Event.from_record(body)
            if event is None:
                raise DaemonError("the daemon answered with something that is not an event")
            return event

        return self._call("GET", "/events/" + quote(p.id, safe=""), parse=parse, fallback=lambda m: m.get(p))

    def forget(self, ids: ForgetParams | Sequence[str] | str | None = None, *, session: str | None = None,
               query: str | None = None, since: str | None = None, until: str | None = None,
               confirm: bool = False, purge: bool = False) -> ForgetResult:
        """`Memory.forget` through the daemon, so its hot views drop the events at once."""
        from urchin.memory.forget import ForgetResult
        from urchin.params.forget import ForgetParams

        p = ids if isinstance(ids, ForgetParams) else ForgetParams.parse(dict(
            ids=ids, session=session, query=query, since=since, until=until, confirm=confirm, purge=purge))
        return self._call("POST", "/forget", json=to_wire(p), parse=ForgetResult.from_dict,
                          fallback=lambda m: m.forget(p))

    def finish_forget(self) -> Compaction | None:
        """The daemon finished any interrupted forget when it started; the journal's own check is
        cheap and a compaction is idempotent, so this asks the in-process memory too."""
        return self.local().finish_forget()

    def redact_rewrite(self, purge: bool = False) -> dict[str, Any]:
        """Rewrites in-process (the daemon follows the compaction), but only when the daemon redacts
        with the rules config.toml holds now: else its next writes and re-chunks would undo the rewrite."""
        answer = self._call("GET", "/status", parse=lambda body: dict(body), fallback=lambda m: {})
        running = (answer.get("daemon") or {}).get("redactionFingerprint")
        current = self.local().redaction_fingerprint()
        if answer and running != current:
            raise ConfigError(f"the daemon (pid {answer['daemon'].get('pid')}) still redacts with the rules it started "
                              "with, not those config.toml holds now: restart it (stop it, then `urchin serve`), "
                              "then run `urchin redact --rewrite` again")
        return self.local().redact_rewrite(purge)

    def status(self) -> dict[str, Any]:
        return self._call("GET", "/status", parse=lambda body: dict(body), fallback=lambda m: m.status())

    def ingest(self, items: Iterable[Mapping[str, Any] | Event],
               defaults: Mapping[str, Any] | None = None) -> list[IngestResult]:
        # An id chosen here makes a retry after a lost answer a duplicate, never a second copy.
        payload = [_with_id(item.to_dict() if isinstance(item, Event) else item) for item in items]
        out: list[IngestResult] = []
        for start in range(0, len(payload), _BATCH):
            chunk = payload[start:start + _BATCH]
            body: dict[str, Any] = {"events": chunk}
            if defaults:
                body["defaults"] = dict(defaults)
            out.extend(self._call("POST", "/ingest/batch", json=body, parse=_ingest_results,
                                  fallback=lambda m, chunk=chunk: m.ingest(chunk, defaults)))
        return out

    def ingest_one(self, item: Mapping[str, Any] | Event, defaults: Mapping[str, Any] | None = None) -> IngestResult:
        return self.ingest([item], defaults)[0]

    def close(self) -> None:
        """Close the HTTP connection and the in-process `Memory` behind this client, if either was opened."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._local is not None:
            self._local.close()
            self._local = None

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def local(self) -> Memory:
        """The in-process `Memory` behind this client, opened on first use."""
        if self._local is None:
            from urchin.memory import Memory

            self._local = Memory(self.settings)
        return self._local

    # ---- run in-process: no route (the journal is the same; the daemon's views follow it) -------
    def prepare(self, item: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Event:
        return self.local().prepare(item, defaults)

    def import_lines(self, lines: Iterable[bytes | str],
                     on_progress: Callable[[int], None] | None = None) -> BatchReport:
        return self.local().import_lines(lines, on_progress)

    def embed(self, progress: Callable[[int], None] | None = None, *, limit: int | None = None) -> dict[str, Any]:
        return self.local().embed(progress, limit=limit)

    def session_context(self, session: str | SessionParams, *, hours: float | None = None,
                        limit: int | None = None, now: datetime | None = None) -> SearchResult:
        return self.local().session_context(session, hours=hours, limit=limit, now=now)

    def workspace_context(self, workspace: str | WorkspaceParams, *, hours: float | None = None,
                          limit: int | None = None, now: datetime | None = None) -> SearchResult:
        return self.local().workspace_context(workspace, hours=hours, limit=limit, now=now)

    def tail(self, n: int | TailParams = 10) -> list[Event]:
        return self.local().tail(n)

    def end_offset(self) -> int:
        return self.local().end_offset()

    def follow(self, offset: int) -> tuple[list[Event], int]:
        return self.local().follow(offset)

    def follow_events(self, stop: threading.Event | None = None, poll_s: float = 0.25) -> Iterator[Event]:
        return self.local().follow_events(stop, poll_s)

    def ephemeral(self, action: str | EphemeralParams = "status", minutes: float | None = None) -> EphemeralState:
        return self.local().ephemeral(action, minutes)

    def redact_check(self, path: str) -> Iterator[Finding]:
        return self.local().redact_check(path)

    def identity(self) -> dict[str, str]:
        return self.local().identity()

    def collect(self, which: str = "all") -> list[CollectReport]:
        return self.local().collect(which)

    def collectors_status(self) -> list[dict[str, Any]]:
        return self.local().collectors_status()

    def install_hooks(self, target: str, *, path: str | None = None, dry_run: bool = False,
                      shell: str | None = None) -> InstallResult:
        return self.local().install_hooks(target, path=path, dry_run=dry_run, shell=shell)

    def uninstall_hooks(self, target: str | None = None, *, path: str | None = None, dry_run: bool = False,
                        shell: str | None = None) -> list[UninstallResult]:
        return self.local().uninstall_hooks(target, path=path, dry_run=dry_run, shell=shell)

    def workspace_add(self, path: str, name: str | None = None, allow_secret_files: bool = False) -> Root:
        return self.local().workspace_add(path, name, allow_secret_files)

    def workspace_remove(self, name: str) -> Root:
        return self.local().workspace_remove(name)

    def workspace_list(self) -> list[Root]:
        return self.local().workspace_list()

    def get_file(self, path: str | FileParams, from_line: int = 1, max_lines: int = 200) -> FileRange:
        return self.local().get_file(path, from_line, max_lines)

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
                      replace: bool = False) -> MemoryDef:
        return self.local().memory_create(slug, use_when, members, title, replace)

    def memory_edit(self, slug: str, *, use_when: str | None = None, members: list[Member] | None = None,
                    title: str | None = None) -> MemoryDef:
        return self.local().memory_edit(slug, use_when=use_when, members=members, title=title)

    def memory_delete(self, slug: str) -> MemoryDef:
        return self.local().memory_delete(slug)

    def memory_list(self) -> list[MemoryDef]:
        return self.local().memory_list()

    def memory_get(self, slug: str | MemoryParams, token_budget: int = 8000) -> dict[str, Any]:
        return self.local().memory_get(slug, token_budget)

    def overview(self) -> dict[str, Any]:
        return self.local().overview()

    def index(self, rebuild: bool = False, follow: bool = False,
              on_progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> FeedReport:
        return self.local().index(rebuild, follow, on_progress, stop)

    def update_index(self, rebuild: bool = False, follow: bool = False,
                     on_progress: Callable[[int, int], None] | None = None,
                     stop: threading.Event | None = None) -> IndexRun:
        return self.local().update_index(rebuild, follow, on_progress, stop)

    def index_files(self) -> FileIndexReport:
        return self.local().index_files()

    def index_status(self) -> dict[str, Any]:
        return self.local().index_status()

    def query_source(self, source: str | QuerySourceParams, query: str = "", limit: int = 10,
                     min_score: float = 0.0) -> ContextResult:
        return self.local().query_source(source, query, limit, min_score)

    def fetch_source_document(self, source: str | FetchParams, doc_id: str = "", content_hash: str | None = None,
                              mode: str = "indexed") -> dict[str, Any]:
        return self.local().fetch_source_document(source, doc_id, content_hash, mode)

    def get_document(self, document_id: str | DocumentParams, include_chunks: bool = False) -> dict[str, Any]:
        return self.local().get_document(document_id, include_chunks)

    # Local by nature: scoped tokens are a file of this home, roles are set up on the database directly.
    def token_create(self, scope: str, workspaces: Sequence[str] = (), expires: str | None = None,
                     name: str | None = None) -> dict[str, Any]:
        return self.local().token_create(scope, workspaces, expires, name)

    def token_list(self) -> list[dict[str, Any]]:
        return self.local().token_list()

    def token_revoke(self, token_id: str) -> None:
        self.local().token_revoke(token_id)

    def db_setup(self, owner_password: str | None = None, reader_password: str | None = None) -> dict[str, Any]:
        return self.local().db_setup(owner_password, reader_password)

    def db_feeder(self, device: str, password: str | None = None, account: str | None = None) -> dict[str, Any]:
        return self.local().db_feeder(device, password, account)

    # ---- transport ----------------------------------------------------------------------------
    def _http(self) -> Any:
        if self._client is None:
            import httpx

            from urchin.daemon.security import load_token

            token = load_token(self.settings)
            if not token:
                raise DaemonError(f"the daemon at {self.info.address} needs a token: set URCHIN_INTAKE_TOKEN "
                                  f"or create {self.settings.token_path}")
            if self.info.uds:
                transport = httpx.HTTPTransport(uds=self.info.uds)
                base = "http://localhost"
            else:
                transport = httpx.HTTPTransport()
                base = self.info.address
            self._client = httpx.Client(base_url=base, transport=transport, timeout=self.timeout_s,
                                        headers={"authorization": f"Bearer {token}"}, trust_env=False)
        return self._client

    def _call(self, method: str, path: str, *, parse: Any, fallback: Any, params: dict[str, Any] | None = None,
              json: Any = None) -> Any:
        import httpx

        try:
            response = self._http().request(method, path, params=params, json=json)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            # The daemon went away (stopped, crashed, restarting): the journal is still here.
            if self.settings.daemon_file.exists() and daemon_alive(self.settings):
                raise DaemonError(f"the daemon at {self.info.address} did not answer: {exc}") from None
            self.fell_back = True
            return fallback(self.local())
        except httpx.TimeoutException:
            raise DaemonError(f"the daemon at {self.info.address} did not answer within {self.timeout_s:g}s") from None
        try:
            body = orjson.loads(response.content) if response.content else None
        except orjson.JSONDecodeError:
            body = None
        if response.status_code >= 400:
            raise _error(response.status_code, body, self.info.address)
        return parse(body)


def _drop_none(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _with_id(item: Any) -> Any:
    if isinstance(item, Mapping) and item.get("id") is None:
        return {**item, "id": new_id()}
    return item


class _RecallAnswer:
    """The daemon's `recall` answer, as the CLI formats it (`text`, `to_dict`)."""

    def __init__(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise DaemonError("the daemon answered recall with something that is not a recall result")
        self.text: str = body["text"]
        self._body = body

    def to_dict(self) -> dict[str, Any]:
        return dict(self._body)


def _search_result(body: Any) -> SearchResult:
    from urchin.search.query import Hit, SearchResult

    hits = []
    for record in body.get("events", []):
        record = dict(record)
        score = record.pop("score", None)
        explain = record.pop("explain", None)
        event = Event.from_record(record)
        if event is not None:
            hits.append(Hit(event, score, explain if isinstance(explain, dict) else None))
    return SearchResult(hits, body.get("query"), body.get("mode", "substring"), list(body.get("notes", [])),
                        weak=bool(body.get("weak", False)), hint=body.get("hint"),
                        older=body.get("olderMatch") if isinstance(body.get("olderMatch"), dict) else None)


def _ingest_results(body: Any) -> list[IngestResult]:
    from urchin.ingest import IngestResult

    out = []
    for item in body.get("results", []):
        status: Any = str(item.get("status", "rejected")).split(":", 1)[0]
        out.append(IngestResult(status, item.get("id"), item.get("reason")))
    return out


def _error(status: int, body: Any, address: str) -> UrchinError:
    """The daemon's JSON error as the same exception the in-process call would raise."""
    message = body.get("error") if isinstance(body, dict) else None
    field = body.get("field") if isinstance(body, dict) else None
    message = str(message or f"the daemon at {address} answered HTTP {status}")
    if status in (400, 413, 422) and field:
        rule = message[len(field) + 2:] if message.startswith(f"{field}: ") else message
        return (QueryError if status == 400 else ValidationError)(str(field), rule, message=message)
    if status == 404:
        return NotFoundError(message)
    if status == 401:
        return DaemonError(f"the daemon at {address} refused our token ({message}); check URCHIN_INTAKE_TOKEN "
                           "and $URCHIN_HOME/token")
    error = UrchinError(message)
    error.status = status
    return error
