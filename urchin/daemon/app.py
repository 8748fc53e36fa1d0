"""The intake HTTP API: Starlette routes that parse input, call `Memory`, and format the result.

No query logic lives here. Errors become `{"error": message, "field": name}` with the status of
the `UrchinError` raised; an unknown route (404) or method (405) gets the same shape. `build_app`
wraps everything in `security.Guard`, including routes and mounts a caller adds (the MCP server
mounts streamable HTTP at `/mcp` this way). `POST /ingest` is answered in front of the routes
(urchin/daemon/intake.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from urchin.api_tokens import TokenStore
from urchin.contract import OPERATIONS, OPERATIONS_BY_NAME
from urchin.contract.access import hold
from urchin.daemon.browser import BrowserSessions
from urchin.daemon.hook_route import hook_routes
from urchin.daemon.intake import DirectIngest, Intake, crash_body, error_body, ingest_one, reader
from urchin.daemon.security import (
    AUTHORISED,
    BATCH_LIMIT,
    EVENT_LIMIT,
    GRANT,
    SSE_IDLE_S,
    ASGIApp,
    Guard,
)
from urchin.daemon.viewer_routes import viewer_routes
from urchin.daemon.workspace_routes import held, request_args, request_params, workspace_routes
from urchin.daemon.writer import GroupWriter
from urchin.errors import ConfigError, NotFoundError, QueryError, TooLarge, UrchinError, ValidationError
from urchin.facade import Memory
from urchin.ingest import BatchReport, IngestResult
from urchin.redact import redact_message

__all__ = ["build_app", "DaemonState", "MAX_BATCH_EVENTS", "VERSION"]

MAX_BATCH_EVENTS = 1000
log = logging.getLogger("urchin.daemon.app")

try:
    VERSION = metadata.version("urchin-memory")
except metadata.PackageNotFoundError:  # running from a source tree
    VERSION = "0+source"


@dataclass
class DaemonState:
    """What the routes share: the one hot `Memory`, the group writer, and facts for /status."""

    memory: Memory
    writer: GroupWriter
    address: str = ""
    started: float = field(default_factory=time.monotonic)

    def uptime_s(self) -> float:
        return round(time.monotonic() - self.started, 3)


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


def build_app(state: DaemonState, token: str, *, extra_routes: Sequence[BaseRoute] = (),
              lifespans: Sequence[Lifespan] = ()) -> ASGIApp:
    """The daemon's ASGI app behind the Guard.

    `extra_routes` are added after the built-in ones (e.g. `Mount("/mcp", app=...)`) and pass the
    same Host, token, Content-Type and size checks. `lifespans` are entered in order at start-up
    and left in reverse at shutdown (an MCP session manager's `run()` goes here).
    """
    sessions = BrowserSessions()  # the viewer's sign-ins: in memory, so a restart signs every browser out
    routes: list[BaseRoute] = [
        Route("/health", _health, methods=["GET"]),
        Route("/ingest", _ingest, methods=["POST"]),
        Route("/ingest/batch", _ingest_batch, methods=["POST"]),
        Route("/search", _search, methods=["GET"]),
        Route("/semantic", _semantic, methods=["GET"]),
        Route("/recent", _recent, methods=["GET"]),
        Route("/events/{event_id:path}", _event, methods=["GET", "DELETE"]),
        Route("/forget", _forget, methods=["POST"]),
        Route("/status", _status, methods=["GET"]),
        Route("/context", _context, methods=["POST"]),
        Route("/recall", _recall, methods=["POST"]),
        Route("/documents/search", _document_search, methods=["POST"]),
        *hook_routes(_state),
        *workspace_routes(JSON, lambda request: _state(request).memory),
        *viewer_routes(JSON, lambda request: _state(request).memory, sessions),
        *extra_routes,
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for enter in lifespans:
                await stack.enter_async_context(enter(app))
            yield

    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={UrchinError: _error, HTTPException: _http_error, Exception: _crash})
    app.router.redirect_slashes = False  # an API answers the path it was given: 404, not a 307 to a guess
    app.state.daemon = state
    guard = Guard(Intake(app, state), token, limit_for=lambda path: EVENT_LIMIT if path == "/ingest" else BATCH_LIMIT,
                  sse_idle_s=sse_idle_seconds(state.memory.settings.section("daemon")), sessions=sessions,
                  tokens=TokenStore(state.memory.settings.home))
    guard.direct = DirectIngest(guard, state)
    return guard


def sse_idle_seconds(daemon_config: Mapping[str, Any]) -> float:
    """`[daemon] sse_idle_timeout_s` in config.toml: how long an event stream (`GET /mcp`) may stay idle."""
    value = daemon_config.get("sse_idle_timeout_s", SSE_IDLE_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
        raise ConfigError(f"daemon.sse_idle_timeout_s: must be a number of seconds in (0, 86400], got {value!r}")
    return float(value)


# ---- errors -------------------------------------------------------------------------------------
async def _error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, UrchinError)
    return JSON(error_body(exc), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (no route, wrong method), in the shape of every other error."""
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 404:
        body = {"error": f"path: no such route: {where}", "field": "path"}
    elif exc.status_code == 405:
        methods = [m.strip() for m in (exc.headers or {}).get("Allow", "").split(",") if m.strip()]
        allowed = ", ".join(sorted(methods, key=lambda m: (m == "HEAD", m)))   # a stable order, HEAD last
        body = {"error": f"method: not allowed: {where} (allowed: {allowed})", "field": "method"}
    else:
        body = {"error": f"request: {exc.detail}", "field": "request"}
    body = {k: redact_message(v) for k, v in body.items()}
    return JSON(body, status_code=exc.status_code, headers=exc.headers)


async def _crash(request: Request, exc: Exception) -> Response:
    return JSON(crash_body(exc), status_code=500)


# ---- helpers ------------------------------------------------------------------------------------
def _state(request: Request) -> DaemonState:
    state: DaemonState = request.app.state.daemon
    return state


params = request_args   # the query string, checked by the operation's one validator, defaults filled


async def _json_body(request: Request) -> Any:
    body = await request.body()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise QueryError("body", f"not valid JSON: {exc}") from None


def _size(item: Any) -> int:
    try:
        return len(orjson.dumps(item))
    except TypeError:   # nested too deep to write back: `prepare` refuses it, naming the field
        return 0


# ---- routes -------------------------------------------------------------------------------------
async def _health(request: Request) -> Response:
    """Alive, to anyone on this machine; counts, version and uptime only to a holder of the token."""
    if not request.scope.get(AUTHORISED):
        return JSON({"status": "ok"})
    state = _state(request)
    _, lines = state.memory.followed
    answer = {"status": "ok", "version": VERSION, "events": lines, "uptime_s": state.uptime_s()}
    loading = state.memory.loading()
    if loading:     # serving already; these are still loaded in the background (see Memory.loading)
        answer["loading"] = loading
    return JSON(answer)


async def _ingest(request: Request) -> Response:
    """`POST /ingest` in the route table (a GET gets its 405 from it); `Intake` answers POSTs before the router."""
    return JSON(await ingest_one(_state(request), await request.body(), request.scope))


async def _ingest_batch(request: Request) -> Response:
    body = await _json_body(request)
    defaults = None
    if isinstance(body, Mapping):
        defaults = body.get("defaults")
        if defaults is not None and not isinstance(defaults, Mapping):
            raise ValidationError("defaults", "must be a JSON object")
        body = body.get("events")
    if not isinstance(body, list):
        raise ValidationError("events", "must be a JSON array of events (or {\"events\": [...]})")
    if len(body) > MAX_BATCH_EVENTS:
        raise TooLarge("events", f"at most {MAX_BATCH_EVENTS} per batch, got {len(body)}")
    for index, item in enumerate(body):
        if _size(item) > EVENT_LIMIT:
            raise TooLarge(f"events[{index}]", f"over the limit of {EVENT_LIMIT} bytes per event")
    body = _held_batch(request.scope.get(GRANT), body, defaults)
    state = _state(request)
    batch = state.memory.prepare_batch(body, defaults)
    appended: list[IngestResult] = await state.writer.append(batch.events) if batch.events else []
    results = batch.merge(appended)
    if not reader(request.scope):
        results = [result.for_writer() for result in results]
    return JSON({"results": [r.to_dict() for r in results], **BatchReport.of(results).counts()})


async def _run(request: Request, operation: str, params: Any) -> Any:
    """The operation's one run on the daemon's `Memory`, with parameters parsed here, in a worker thread."""
    return await run_in_threadpool(OPERATIONS_BY_NAME[operation].run, _state(request).memory, params)


def _held_batch(grant: Any, events: list[Any], defaults: Mapping[str, Any] | None) -> list[Any]:
    """Each event of a batch held to a workspace-bound grant (its `defaults` workspace counts as named);
    one refused refuses the batch (`Forbidden`: 403), before anything is stored."""
    if grant is None or not grant.workspaces:
        return events
    fallback = (defaults or {}).get("workspace")
    out = []
    for i, item in enumerate(events):
        if isinstance(item, dict):
            named = item if item.get("workspace") is not None or fallback is None else {**item, "workspace": fallback}
            item = hold(grant, named, f"POST /ingest/batch events[{i}]")
        out.append(item)
    return out


async def _search(request: Request) -> Response:
    return JSON((await _run(request, "search", request_params(request, "search"))).to_dict())


async def _semantic(request: Request) -> Response:
    return JSON((await _run(request, "semantic", request_params(request, "semantic"))).to_dict())


async def _context(request: Request) -> Response:
    """`search_context` over HTTP: the same parameters (camelCase) and result object as the MCP tool."""
    body = await _json_body(request)
    if not isinstance(body, Mapping):
        raise ValidationError("body", "must be a JSON object of search_context parameters")
    params = OPERATIONS["context"].build(held(request, "context", body), "wire")
    return JSON((await _run(request, "context", params)).to_dict())


async def _recall(request: Request) -> Response:
    """`recall` over HTTP: the contract's parameters in a JSON body, the same object as the MCP tool."""
    body = await _json_body(request)
    if not isinstance(body, Mapping):
        raise ValidationError("body", "must be a JSON object of recall parameters")
    params = OPERATIONS["recall"].build(held(request, "recall", body), "wire")
    result = await run_in_threadpool(lambda: OPERATIONS["recall"].run(_state(request).memory, params))
    return JSON(result.to_dict())


async def _document_search(request: Request) -> Response:
    """textrawl's `search` over HTTP: the same parameters and result object as the MCP tool `search`."""
    body = await _json_body(request)
    if not isinstance(body, Mapping):
        raise ValidationError("body", "must be a JSON object of search parameters")
    return JSON(await _run(request, "document_search", OPERATIONS["document_search"].build(body, "wire")))


async def _recent(request: Request) -> Response:
    return JSON((await _run(request, "recent", request_params(request, "recent"))).to_dict())


async def _event(request: Request) -> Response:
    if request.method == "DELETE":  # forget this one event, everywhere, for good
        forget = OPERATIONS["forget"].build({"ids": [request.path_params["event_id"]], "confirm": True}, "wire")
        result = await _run(request, "forget", forget)
        if not result.matched:
            raise NotFoundError(f"no event with id {request.path_params['event_id']!r}")
        return JSON(result.to_dict())
    event = await _run(request, "get", request_params(request, "get", id=request.path_params["event_id"]))
    return JSON(event.to_dict())


async def _forget(request: Request) -> Response:
    """Forget by ids, session, query and/or time range; `confirm: true` acts, anything else previews."""
    body = await _json_body(request)
    if not isinstance(body, Mapping):
        raise QueryError("body", "must be a JSON object with ids, session, query, since, until, confirm")
    return JSON((await _run(request, "forget", OPERATIONS["forget"].build(body, "wire"))).to_dict())


async def _status(request: Request) -> Response:
    state = _state(request)
    params(request, "status")
    info = await run_in_threadpool(state.memory.status)
    offset, lines = state.memory.followed
    info["daemon"] = {"pid": os.getpid(), "address": state.address, "version": VERSION,
                      **state.memory.config_state(),
                      "uptimeS": state.uptime_s(),
                      "followed": {"offset": offset, "lines": lines}, "writer": state.writer.stats.to_dict()}
    return JSON(info)
