"""Finding a running daemon, and `RemoteMemory`: the `Memory` read/write API over its HTTP API.

`open_memory(settings)` returns a `RemoteMemory` when `daemon.json` names a live daemon (its
flock is held), else an in-process `Memory`; both return the same result objects. Finding the
daemon is one `stat` when none runs; httpx is imported only when one does (it costs ~80 ms).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar, cast

import orjson

from urchin import daemon_http
from urchin.config import Settings
from urchin.daemon import answers
from urchin.delegation import Delegated
from urchin.errors import ConfigError, DaemonError
from urchin.event import Event, new_id

if TYPE_CHECKING:
    import httpx

    from urchin.contract.access import Where
    from urchin.facade import Memory
    from urchin.facade.api import Facade, RecallAnswer
    from urchin.facade.forgetting import ForgetResult, RewriteReport
    from urchin.facade.status import HomeStatus
    from urchin.hybrid.search_context import ContextResult
    from urchin.ingest import IngestResult
    from urchin.jsontypes import JSON, JSONObject
    from urchin.params.context import ContextParams
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.forget import ForgetParams
    from urchin.params.reading import (
        GetParams,
        RecentParams,
        SemanticParams,
    )
    from urchin.params.recall import RecallParams
    from urchin.params.search import SearchParams
    from urchin.search.query import SearchResult
    from urchin.tombstones import Compaction

__all__ = ["DaemonInfo", "RemoteMemory", "find_daemon", "daemon_alive", "open_memory", "login_url"]

if TYPE_CHECKING:
    _MEMORY = Memory
else:
    class _Names:
        """`Memory`'s methods by name only, at run time (`Delegated` needs no more): a client beside a daemon
        never imports `Memory` until a call runs in-process."""

        def __getattr__(self, name: str) -> Any:
            return SimpleNamespace(__name__=name, __doc__=None)

    _MEMORY = _Names()

_BATCH = 1000
# The contract's routed operations (`ACCESS`) this client runs in-process, not through their route, and why;
# it sends every other one (`RemoteMemory._send`), and tests/test_client_table.py holds the two to the table.
_AS_BEFORE = "not sent yet: in-process as before issue 35 (no behaviour change here); its route answers the same"
IN_PROCESS: dict[str, str] = {
    "get_file": "a workspace file on this machine, read the same in-process; the route answers no FileRange",
    "overview": "this home's workspace roots and curated memories: files read the same in-process",
    "memories": "curated memories are files of this home; the route answers their summaries, not MemoryDefs",
    "get_memory": "a curated memory is a file of this home, read the same in-process",
    "query_source": _AS_BEFORE,
    "fetch_document": _AS_BEFORE,
    "get_document": _AS_BEFORE,
    "ephemeral": "POST /ephemeral is the viewer's (on/off); the mode is a file of this home every writer reads",
}
R = TypeVar("R")


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
    return daemon_http.daemon_alive(str(settings.home))


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
    from urchin.facade import Memory

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
        self._client: httpx.Client | None = None
        self._local: Memory | None = None
        self.fell_back = False  # set when the daemon vanished and a call ran in-process

    # ---- the API ------------------------------------------------------------------------------
    def search(self, query: str | SearchParams, *, hours: float | None = None, limit: int | None = None,
               source: str | None = None, workspace: str | None = None, session: str | None = None,
               kind: str | None = None, scope: str | None = None, now: datetime | None = None) -> SearchResult:
        """`Memory.search` through the daemon: the typed parameters, sent as its route reads them."""
        from urchin.params.search import SearchParams

        p = query if isinstance(query, SearchParams) else SearchParams.of(
            query, hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind,
            scope=scope)
        if now is not None:  # the HTTP API always means "now"
            return self.local().search(p, now=now)
        return self._send("search", p, parse=answers.search_result, fallback=lambda m: m.search(p))

    def recent(self, params: RecentParams | None = None, /, *, hours: float | None = None, limit: int | None = None,
               source: str | None = None, workspace: str | None = None, session: str | None = None,
               kind: str | None = None, now: datetime | None = None) -> SearchResult:
        """`Memory.recent` through the daemon: the typed parameters, sent as its route reads them."""
        from urchin.params.reading import RecentParams

        p = params if params is not None else RecentParams(**_drop_none(
            hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind))
        if now is not None:
            return self.local().recent(p, now=now)
        return self._send("recent", p, parse=answers.search_result, fallback=lambda m: m.recent(p))

    def semantic(self, query: str | SemanticParams, *, hours: float | None = None, limit: int | None = None,
                 source: str | None = None, workspace: str | None = None, session: str | None = None,
                 kind: str | None = None, min_score: float | None = None, explain: bool | None = None,
                 now: datetime | None = None) -> SearchResult:
        """`Memory.semantic` through the daemon: the typed parameters, sent as its route reads them."""
        from urchin.params.reading import SemanticParams

        p = query if isinstance(query, SemanticParams) else SemanticParams(query, **_drop_none(
            hours=hours, limit=limit, source=source, workspace=workspace, session=session, kind=kind,
            min_score=min_score, explain=explain))
        if now is not None:
            return self.local().semantic(p, now=now)
        result: SearchResult = self._send("semantic", p, parse=answers.search_result, fallback=lambda m: m.semantic(p))
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
                **keywords: object) -> ContextResult:
        """`search_context` through the daemon, which holds the index connection."""
        if params is None:
            from urchin.params.context import ContextParams

            params = ContextParams.build(now=now, **keywords)
        elif keywords or now is not None:
            raise TypeError("context() takes ContextParams, or keywords, not both")
        if now is not None:  # the daemon's window is its own "now"
            return self.local().context(params)

        def parse(body: Any) -> ContextResult:
            from urchin.hybrid.search_context import ContextResult

            return ContextResult(body["query"], body["results"], body["coverage"], body["truncated"],
                                 body["tokensUsed"])

        typed = params
        return self._send("context", typed, parse=parse, fallback=lambda m: m.context(typed))

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
        answer: RecallAnswer = self._send("recall", p, parse=answers.RecallAnswer, fallback=run)
        return answer

    def document_search(self, params: DocumentSearchParams | Mapping[str, JSON]) -> JSONObject:
        """textrawl's `search` through the daemon, which holds the index connection."""
        from urchin.params.documents import DocumentSearchParams

        p = params if isinstance(params, DocumentSearchParams) else DocumentSearchParams.parse(params)
        return self._send("document_search", p, parse=lambda body: body, fallback=lambda m: m.document_search(p))

    def get(self, event_id: str | GetParams) -> Event:
        from urchin.params.reading import GetParams

        p = event_id if isinstance(event_id, GetParams) else GetParams(event_id)

        def parse(body: Any) -> Event:
            event = Event.from_record(body)
            if event is None:
                raise DaemonError("the daemon answered with something that is not an event")
            return event

        return self._send("get", p, parse=parse, fallback=lambda m: m.get(p))

    def forget(self, ids: ForgetParams | Sequence[str] | str | None = None, *, session: str | None = None,
               query: str | None = None, since: str | None = None, until: str | None = None,
               confirm: bool = False, purge: bool = False) -> ForgetResult:
        """`Memory.forget` through the daemon, so its hot views drop the events at once."""
        from urchin.facade.forgetting import ForgetResult
        from urchin.params.forget import ForgetParams

        p = ids if isinstance(ids, ForgetParams) else ForgetParams.parse(dict(
            ids=ids, session=session, query=query, since=since, until=until, confirm=confirm, purge=purge))
        return self._send("forget", p, parse=ForgetResult.from_dict, fallback=lambda m: m.forget(p))

    def finish_forget(self) -> Compaction | None:
        """The daemon finished any interrupted forget when it started; the journal's own check is
        cheap and a compaction is idempotent, so this asks the in-process memory too."""
        return self.local().finish_forget()

    def redact_rewrite(self, purge: bool = False) -> RewriteReport:
        """Rewrites in-process (the daemon follows the compaction), but only when the daemon redacts
        with the rules config.toml holds now: else its next writes and re-chunks would undo the rewrite."""
        answer = self._send("status", None, parse=lambda body: dict(body), fallback=lambda m: {})
        running = (answer.get("daemon") or {}).get("redactionFingerprint")
        current = self.local().redaction_fingerprint()
        if answer and running != current:
            raise ConfigError(f"the daemon (pid {answer['daemon'].get('pid')}) still redacts with the rules it started "
                              "with, not those config.toml holds now: restart it (stop it, then `urchin serve`), "
                              "then run `urchin redact --rewrite` again")
        return self.local().redact_rewrite(purge)

    def status(self) -> HomeStatus:
        # the daemon answers `Memory.status()`'s object, its own state in `daemon`
        return self._send("status", None, parse=lambda body: cast("HomeStatus", dict(body)),
                          fallback=lambda m: m.status())

    def ingest(self, items: Iterable[Mapping[str, JSON] | Event],
               defaults: Mapping[str, JSON] | None = None) -> list[IngestResult]:
        # An id chosen here makes a retry after a lost answer a duplicate, never a second copy.
        payload = [_with_id(item.to_dict() if isinstance(item, Event) else item) for item in items]
        out: list[IngestResult] = []
        for start in range(0, len(payload), _BATCH):
            chunk = payload[start:start + _BATCH]
            body: JSONObject = {"events": chunk}
            if defaults:
                body["defaults"] = dict(defaults)
            out.extend(self._send("ingest", body, where="batch", parse=answers.ingest_results,
                                  fallback=functools.partial(_ingest_in_process, chunk=chunk, defaults=defaults)))
        return out

    def ingest_one(self, item: Mapping[str, JSON] | Event, defaults: Mapping[str, JSON] | None = None) -> IngestResult:
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
            from urchin.facade import Memory

            self._local = Memory(self.settings)
        return self._local

    @property
    def _in_process(self) -> Memory:
        return self.local()

    # ---- run in-process: no route (the journal is the same; the daemon's views follow it) -------
    prepare = Delegated(_MEMORY.prepare, "_in_process")
    import_lines = Delegated(_MEMORY.import_lines, "_in_process")
    embed = Delegated(_MEMORY.embed, "_in_process")
    session_context = Delegated(_MEMORY.session_context, "_in_process")
    workspace_context = Delegated(_MEMORY.workspace_context, "_in_process")
    tail = Delegated(_MEMORY.tail, "_in_process")
    end_offset = Delegated(_MEMORY.end_offset, "_in_process")
    follow = Delegated(_MEMORY.follow, "_in_process")
    follow_events = Delegated(_MEMORY.follow_events, "_in_process")
    redact_check = Delegated(_MEMORY.redact_check, "_in_process")
    identity = Delegated(_MEMORY.identity, "_in_process")
    collect = Delegated(_MEMORY.collect, "_in_process")
    collectors_status = Delegated(_MEMORY.collectors_status, "_in_process")
    install_hooks = Delegated(_MEMORY.install_hooks, "_in_process")
    uninstall_hooks = Delegated(_MEMORY.uninstall_hooks, "_in_process")
    workspace_add = Delegated(_MEMORY.workspace_add, "_in_process")
    workspace_remove = Delegated(_MEMORY.workspace_remove, "_in_process")
    workspace_list = Delegated(_MEMORY.workspace_list, "_in_process")
    memory_create = Delegated(_MEMORY.memory_create, "_in_process")
    memory_edit = Delegated(_MEMORY.memory_edit, "_in_process")
    memory_delete = Delegated(_MEMORY.memory_delete, "_in_process")
    index = Delegated(_MEMORY.index, "_in_process")
    update_index = Delegated(_MEMORY.update_index, "_in_process")
    index_files = Delegated(_MEMORY.index_files, "_in_process")
    index_status = Delegated(_MEMORY.index_status, "_in_process")

    # Operations the daemon routes that run in-process here; why, in IN_PROCESS (the others: `_send`)
    get_file = Delegated(_MEMORY.get_file, "_in_process")
    overview = Delegated(_MEMORY.overview, "_in_process")
    memory_list = Delegated(_MEMORY.memory_list, "_in_process")
    memory_get = Delegated(_MEMORY.memory_get, "_in_process")
    query_source = Delegated(_MEMORY.query_source, "_in_process")
    fetch_source_document = Delegated(_MEMORY.fetch_source_document, "_in_process")
    get_document = Delegated(_MEMORY.get_document, "_in_process")
    ephemeral = Delegated(_MEMORY.ephemeral, "_in_process")

    # Local by nature: scoped tokens are a file of this home, roles are set up on the database directly.
    token_create = Delegated(_MEMORY.token_create, "_in_process")
    token_list = Delegated(_MEMORY.token_list, "_in_process")
    token_revoke = Delegated(_MEMORY.token_revoke, "_in_process")
    db_setup = Delegated(_MEMORY.db_setup, "_in_process")
    db_feeder = Delegated(_MEMORY.db_feeder, "_in_process")

    # ---- transport ----------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
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

    def _send(self, operation: str, params: object, *, parse: Callable[[Any], R], fallback: Callable[[Memory], R],
              where: Where = None) -> R:
        """The operation sent as the contract's table says its route reads it (method, path, query or body)."""
        from urchin.contract.routes import request

        method, path, query, body = request(operation, params, where)
        return self._call(method, path, params=query, json=body, parse=parse, fallback=fallback)

    def _call(self, method: str, path: str, *, parse: Callable[[Any], R], fallback: Callable[[Memory], R],
              params: dict[str, Any] | None = None, json: JSON = None) -> R:
        """`parse` of the route's JSON body, or `fallback` in-process when the daemon is gone: one type."""
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
            raise answers.error(response.status_code, body, self.info.address)
        return parse(body)


def _drop_none(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _with_id(item: Mapping[str, JSON]) -> Mapping[str, JSON]:
    if isinstance(item, Mapping) and item.get("id") is None:
        return {**item, "id": new_id()}
    return item


def _ingest_in_process(memory: Memory, chunk: list[Mapping[str, JSON]],
                       defaults: Mapping[str, JSON] | None) -> list[IngestResult]:
    return memory.ingest(chunk, defaults)
