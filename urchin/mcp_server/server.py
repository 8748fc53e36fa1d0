"""The MCP server over the SDK's low-level `Server`: stdio for `urchin mcp`, streamable HTTP for the daemon.

Tool calls run `run_tool` in a worker thread, because `Memory` does blocking file I/O and the
daemon's event loop serves other requests meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.responses import Response
from starlette.routing import Route

from urchin.api_tokens import Grant
from urchin.contract.access import needs_refusal, spans_refusal
from urchin.mcp_server.schemas import SERVER_INSTRUCTIONS
from urchin.mcp_server.stdio import MAX_LINE_BYTES, BadLine, parse_line, serve_lines
from urchin.mcp_server.tools import run_tool, short, tool_error, tool_list

if TYPE_CHECKING:
    from urchin.facade.api import Facade

__all__ = ["build_server", "serve_stdio", "streamable_http_app", "McpHttp", "LOOPBACK"]


def build_server(memory: Facade) -> Server[Any]:
    """An MCP server whose tools call `memory` (a `Memory`, or anything with the same methods)."""

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments if params.arguments is not None else {}
        # Memory does blocking file I/O: keep it off the event loop (the daemon serves other requests).
        return await anyio.to_thread.run_sync(run_tool, memory, params.name, args, _reader(ctx), _grant(ctx))

    server: Server[Any] = Server("urchin", version=_version(), title="Urchin", instructions=SERVER_INSTRUCTIONS,
                                 on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(_arguments_guard)
    server.middleware.append(_methods_guard)
    return server


def _reader(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the caller may read every event: over stdio yes (the user's own process); over the
    daemon's HTTP, what its Guard decided for the request's token (`urchin.authorised` in the scope)."""
    scope = getattr(ctx.request, "scope", None)
    return not isinstance(scope, Mapping) or bool(scope.get(_AUTHORISED, True))


_AUTHORISED = "urchin.authorised"   # daemon/security.py sets it on every request it lets through
_GRANT = "urchin.grant"             # and the request's token's grant (scope, workspaces)
_OPEN_METHODS = frozenset({"initialize", "ping", "tools/list"})   # plus notifications/*


def _grant(ctx: ServerRequestContext[Any]) -> Grant | None:
    """The daemon's grant for this request; None over stdio (the user's own process: no token)."""
    scope = getattr(ctx.request, "scope", None)
    grant = scope.get(_GRANT) if isinstance(scope, Mapping) else None
    return grant if isinstance(grant, Grant) else None


async def _methods_guard(ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
    """A method other than the open ones and `tools/call` (whose tool the dispatcher admits, `run_tool`)
    reads across workspaces: only a token that may read every workspace calls it."""
    grant = _grant(ctx)
    if grant is not None and ctx.method not in _OPEN_METHODS and ctx.method != "tools/call" \
            and not ctx.method.startswith("notifications/"):
        what = f"MCP {ctx.method}"
        refusal = needs_refusal(grant, "read", what) or (spans_refusal(grant, what) if grant.workspaces else None)
        if refusal is not None:
            raise MCPError(types.INVALID_REQUEST, refusal.message)
    return await call_next(ctx)


async def _arguments_guard(ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
    """`arguments` that are not an object would be a protocol error in the SDK; make it a tool error."""
    if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
        args = ctx.params.get("arguments")
        if args is not None and not isinstance(args, Mapping):
            return tool_error(f"arguments: must be an object, got {short(args)}")
    return await call_next(ctx)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("urchin-memory")
    except PackageNotFoundError:
        return "0.0.0+source"


async def serve_stdio(memory: Facade) -> None:
    """Serve the tools on this process's stdin/stdout until the client closes stdin.

    Every line gets one answer and every request read before EOF is answered before this returns
    (see `urchin.mcp_server.stdio` for why that takes a guard around the SDK's transport).
    """
    await serve_lines(build_server(memory))


# ---- streamable HTTP, for the daemon to mount at /mcp ----------------------------------------------
LOOPBACK = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)


@dataclass
class McpHttp:
    """The streamable-HTTP endpoint: an ASGI app plus the lifespan its session manager needs.

    A Starlette route does not run a sub-app's lifespan, so whoever serves `routes()` must enter
    `lifespan()` in its own lifespan, once (e.g. `Starlette(routes=..., lifespan=mcp_http.lifespan)`).
    """

    session_manager: StreamableHTTPSessionManager
    app: OneMessage

    def lifespan(self, app: Any = None) -> AbstractAsyncContextManager[None]:
        """The session manager's run(); takes (and ignores) the app, to serve as a Starlette lifespan."""
        return self.session_manager.run()

    def routes(self, path: str = "/mcp") -> list[Route]:
        return [Route(path, endpoint=self.app)]


def streamable_http_app(memory: Facade, *, host_check: bool = True, stateless: bool = True,
                        json_response: bool = True) -> McpHttp:
    """The tools over streamable HTTP.

    Stateless with plain JSON responses by default: no session survives to break across daemon
    restarts, and large results are not subject to clients' SSE event-size caps (the SDK's own
    client refuses SSE events over 1 MiB). `host_check` adds the SDK's loopback Host/Origin check
    (DNS-rebinding protection) on top of the daemon's.
    """
    manager = StreamableHTTPSessionManager(app=build_server(memory), stateless=stateless,
                                           json_response=json_response,
                                           security_settings=LOOPBACK if host_check else None)
    return McpHttp(manager, OneMessage(StreamableHTTPASGIApp(manager)))


class OneMessage:
    """POST bodies pass the stdio line rule (`stdio.parse_line`) before the SDK sees them.

    The SDK's HTTP transport answers an invalid message with -32602 and id null, and takes some
    (an id of 1.5 or true) for a notification: 202 and no answer. One rule for both transports:
    400 with -32700 (id null) or -32600 (the id echoed when readable).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        parts: list[bytes] = []
        size, more = 0, True
        while more and size <= MAX_LINE_BYTES:
            message = await receive()
            parts.append(message.get("body", b""))
            size += len(parts[-1])
            more = message.get("more_body", False) and message["type"] == "http.request"
        body = b"".join(parts)
        try:
            if size > MAX_LINE_BYTES:
                raise BadLine(types.INVALID_REQUEST, f"Invalid request: a body over {MAX_LINE_BYTES} bytes")
            parse_line(body)
        except BadLine as bad:
            text = bad.answer().message.model_dump_json(by_alias=True, exclude_unset=True)
            await Response(text, status_code=400, media_type="application/json")(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _replay(body: bytes, receive: Any) -> Any:
    """`receive` that gives the body already read once, then whatever the connection says next."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay

