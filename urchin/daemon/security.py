"""What every request must pass before a route sees it: Host, Origin, bearer token, Content-Type, size.

`Guard` is a plain ASGI middleware around the whole app (mounts included, e.g. MCP at `/mcp`),
so no route can forget a check and a refused request never reaches `Memory` or the journal. It
also ends a server-sent-event stream (`GET /mcp`) that has carried no event for `sse_idle_s`.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio
import orjson

from urchin.api_tokens import ADMIN_GRANT, Grant, TokenStore
from urchin.config import Settings
from urchin.daemon.browser import CSRF_HEADER, SECURITY_HEADERS, BrowserSessions, cookie_name
from urchin.daemon.scopes import Refusal, check
from urchin.errors import ConfigError
from urchin.fileio import ensure_private_dir, write_private

__all__ = ["Guard", "Admitted", "Refused", "load_token", "ensure_token", "is_loopback_host", "own_origins",
           "EVENT_LIMIT", "BATCH_LIMIT", "SSE_IDLE_S", "AUTHORISED", "VIA", "SESSION", "GRANT"]

EVENT_LIMIT = 1 << 20  # one event: 1 MiB
BATCH_LIMIT = 16 << 20  # one request body of any kind: 16 MiB
OPEN_PATHS = frozenset({"/health", "/", "/login", "/favicon.ico"})  # the page shell holds no event content
OPEN_PREFIXES = ("/static/",)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SSE_IDLE_S = 300.0  # an event stream that carries no event (keep-alive pings aside) this long is ended
AUTHORISED = "urchin.authorised"  # scope key: did the request carry the right token (an open path may ask)
VIA = "urchin.via"  # scope key: "token", "cookie" (a signed-in viewer) or None
GRANT = "urchin.grant"  # scope key: the request's Grant (scope, workspaces), None when unauthorised
SESSION = "urchin.session"  # scope key: the browser session id a cookie named (for /auth routes)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Refused:
    """A refusal as it is answered: the status, and the JSON body `{"error": message, "field": field}`."""

    status: int
    message: str
    field: str
    extra: tuple[tuple[bytes, bytes], ...] = ()

    @property
    def body(self) -> bytes:
        return orjson.dumps({"error": self.message, "field": self.field})

    @property
    def headers(self) -> tuple[tuple[bytes, bytes], ...]:
        return ((b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode()),
                *self.extra)


@dataclass(frozen=True, slots=True)
class Admitted:
    """What a request passed `Guard.admit` with: its grant (None on an open path without a token), how it
    was authorised (`via`: token, cookie or None; the cookie's session), whether it may read everything
    (`authorised`), whether the route's scope is still to be checked (`scoped`), and its body's limit
    (None: a method without a body)."""

    grant: Grant | None
    via: str | None
    session: str | None
    authorised: bool
    scoped: bool
    limit: int | None


_HOST = Refused(403, "host: must be a loopback name or address (localhost, 127.0.0.1, ::1)", "host")
_ORIGIN = Refused(403, "origin: a browser page from another origin may not use this API "
                       "(only the daemon's own http://127.0.0.1:PORT or http://localhost:PORT)", "origin")
_UNAUTHORISED = Refused(401, "authorization: missing or wrong bearer token", "authorization",
                        ((b"www-authenticate", b'Bearer realm="urchin"'),))
_CONTENT_TYPE = Refused(415, "content-type: must be application/json", "content-type")


def _too_large(limit: int) -> Refused:
    return Refused(413, f"body: over the limit of {limit} bytes", "body")


def load_token(settings: Settings) -> str | None:
    """The API token: `URCHIN_INTAKE_TOKEN` (or config), else the token file; None when neither exists."""
    if settings.intake_token:
        return settings.intake_token
    try:
        return settings.token_path.read_text("utf-8").strip() or None
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{settings.token_path}: cannot read the token: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{settings.token_path}: the token file is not UTF-8 text (delete it and the daemon "
                          "makes a new one at its next start)") from None


def ensure_token(settings: Settings) -> str:
    """The API token, creating `$URCHIN_HOME/token` (0600, 256 random bits) at the first start."""
    token = load_token(settings)
    if token:
        return token
    ensure_private_dir(settings.home)
    token = secrets.token_urlsafe(32)
    # created whole or not at all: a process starting beside us reads our complete token or makes its own
    if not write_private(settings.token_path, (token + "\n").encode("ascii"), overwrite=False):
        return load_token(settings) or token   # another process made it first: use theirs
    return token


@functools.lru_cache(maxsize=256)   # one or two Host values per client, every request
def is_loopback_host(value: str) -> bool:
    """`localhost`, `127.x.y.z` or `::1`, with or without a port (`[::1]:8080`, `localhost:18799`)."""
    host, rest = value.strip().lower(), ""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return False
        host, rest = host[1:end], host[end + 1:]
    elif host.count(":") == 1:
        host, rest = host.split(":", 1)[0], host[host.index(":"):]
    if rest and not (rest[0] == ":" and rest[1:].isascii() and rest[1:].isdigit() and len(rest) <= 6):
        return False     # a port is digits: `localhost:80@evil.example` names another host
    if host in ("localhost", "localhost.") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def own_origins(server: tuple[str, int | None] | None) -> frozenset[str]:
    """The Origins of pages the daemon itself would serve on the socket `server` (host, port) accepted on.

    A browser sends `Origin` on cross-origin requests and on every POST; agents and curl send none.
    Any other origin is a web page on another site (or a DNS-rebinding one) and is refused. A
    Unix socket has no origin of its own: no browser reaches it, so any Origin there is refused.
    """
    if server is None or server[1] is None:
        return frozenset()
    host, port = server
    names = {"localhost", f"[{host}]" if ":" in host else host}
    suffixes = {f":{port}", ""} if port == 80 else {f":{port}"}
    return frozenset(f"http://{name}{suffix}" for name in names for suffix in suffixes)


class Guard:
    """Refuses bad requests before the app runs; buffers POST bodies within the size limit.

    Order: Host (DNS rebinding) -> Origin (a browser page of another site) -> bearer token
    (constant time; the single token is admin, others are scoped tokens) or a viewer's session
    cookie (admin, as only the admin token signs a browser in; on a state-changing call also its CSRF
    header and a same-origin Origin) -> Content-Type on POST -> body size (Content-Length and the
    bytes actually read) -> the grant's scope (scopes.py: ingest, read or admin per route; a route
    spanning every workspace refused to a workspace-bound token; the routes and the MCP dispatcher hold
    the workspace they parse to the grant, `contract.access`). A Unix-socket request carries no usable Host, so only the
    token and the Origin check apply to it (the socket itself is 0600). Open paths (`/health`, the
    page shell, static assets, `/login`) skip the token; the app sees how the request was authorised
    in `scope[AUTHORISED]` (it may read everything), `scope[VIA]` and `scope[GRANT]`. Every response
    carries the page security headers (CSP). The checks are `admit` (before the body) and `hold` (after
    it), which the HTTP protocol's direct answer to `POST /ingest` calls too (`direct`, set by
    `build_app`; daemon/uvicorn_protocol.py), so the two paths cannot drift.
    """

    def __init__(self, app: ASGIApp, token: str, limit_for: Callable[[str], int] | None = None,
                 sse_idle_s: float = SSE_IDLE_S, sessions: BrowserSessions | None = None,
                 tokens: TokenStore | None = None) -> None:
        self.app = app
        self.token = token.encode("utf-8")
        self.tokens = tokens          # scoped tokens (`urchin token create`); the single token is admin
        self.limit_for = limit_for or (lambda path: BATCH_LIMIT)
        self.sse_idle_s = sse_idle_s
        self.sessions = sessions
        self.direct: Any = None       # what the HTTP protocol may answer without the ASGI cycle (app.py)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self._guard(scope, receive, _with_security_headers(send))

    async def _guard(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        method, path = scope["method"], scope.get("path", "")
        verdict = self.admit(method, path, scope.get("server"), headers)
        if isinstance(verdict, Refused):
            await _refuse(send, verdict)
            return
        scope[VIA], scope[GRANT], scope[AUTHORISED] = verdict.via, verdict.grant, verdict.authorised
        if verdict.session is not None:
            scope[SESSION] = verdict.session
        if verdict.limit is None:     # a request without a body
            if verdict.scoped:
                held = self.hold(verdict, method, path, scope.get("query_string", b""), None)
                if isinstance(held, Refused):
                    await _refuse(send, held)
                    return
                scope["query_string"] = held[0]
            if "text/event-stream" in headers.get("accept", ""):
                await _idle_limited(self.app, scope, receive, send, self.sse_idle_s)
            else:
                await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(receive, verdict.limit)
        except _Gone:   # the client left before its body was whole: nothing of it reaches a route
            return
        held = self.hold(verdict, method, path, scope.get("query_string", b""), body)
        if isinstance(held, Refused):
            await _refuse(send, held)
            return
        scope["query_string"] = held[0]
        await self.app(scope, _replay(held[1] or b"", receive), send)

    def admit(self, method: str, path: str, server: tuple[str, int | None] | None,
              headers: Mapping[str, str]) -> Refused | Admitted:
        """Every check a request passes before its body is read (see the class), in that order: the
        first refusal, or what the request may do. `headers`: lower-case names, the last value of each.
        The ASGI middleware and the protocol's direct `POST /ingest` (daemon/uvicorn_protocol.py) both call it."""
        unix = server is None or server[1] is None  # uvicorn reports (path, None) for a Unix socket
        if not unix and not is_loopback_host(headers.get("host", "")):
            return _HOST
        origin = headers.get("origin")
        if origin is not None and origin.strip().lower() not in own_origins(None if unix else server):
            return _ORIGIN
        grant = self._grant(headers.get("authorization", ""))
        via = "token" if grant is not None else None
        session = None
        if grant is None and self.sessions is not None and not unix:
            refusal, session = self._cookie(method, server, headers, origin)
            if refusal:
                return Refused(403, refusal, "csrf")
            if session is not None:
                via, grant = "cookie", ADMIN_GRANT
        # an open path shows more to a grant that may read everything
        authorised = grant is not None and grant.allows("read") and not grant.workspaces
        open_path = path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)
        if not open_path and grant is None:
            return _UNAUTHORISED
        scoped = grant is not None and not open_path
        if method not in ("POST", "PUT", "PATCH"):
            return Admitted(grant, via, session, authorised, scoped, None)
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return _CONTENT_TYPE
        limit = self.limit_for(path)
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return _too_large(limit)
        return Admitted(grant, via, session, authorised, scoped, limit)

    def hold(self, admitted: Admitted, method: str, path: str, query: bytes,
             body: bytes | None) -> Refused | tuple[bytes, bytes | None]:
        """The checks after the body is read: its size (None: it passed the limit as it arrived), then
        the grant's scope for the route (scopes.py). The query string and body to pass on, or a refusal."""
        if admitted.limit is not None and (body is None or len(body) > admitted.limit):
            return _too_large(admitted.limit)
        if not admitted.scoped or admitted.grant is None:
            return query, body
        outcome = check(admitted.grant, method, path, query, body)
        if isinstance(outcome, Refusal):
            return Refused(403, outcome.message, outcome.field)
        return outcome

    def _cookie(self, method: str, server: tuple[str, int | None] | None, headers: Mapping[str, str],
                origin: str | None) -> tuple[str | None, str | None]:
        """(refusal, session id): authorise by a viewer's session cookie; a refusal message when a
        state-changing call lacks its CSRF token or Origin. No cookie (or a stale one): (None, None)."""
        assert self.sessions is not None
        session_id = _cookies(headers.get("cookie", "")).get(cookie_name(server[1] if server else None))
        session = self.sessions.session(session_id)
        if session is None:
            return None, None
        if method not in SAFE_METHODS:
            if origin is None:
                return "origin: a signed-in page's state-changing call must carry its Origin", None
            if not self.sessions.csrf_ok(session, headers.get(CSRF_HEADER)):
                return f"csrf: missing or wrong {CSRF_HEADER} header", None
        return None, session_id

    def _grant(self, header: str) -> Grant | None:
        """The single token is admin; otherwise a scoped token of the store, or None."""
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        given = given.strip()
        if hmac.compare_digest(given.encode("utf-8"), self.token):
            return ADMIN_GRANT
        return self.tokens.verify(given) if self.tokens is not None else None


async def _idle_limited(app: ASGIApp, scope: Scope, receive: Receive, send: Send, idle_s: float) -> None:
    """Run `app`; if it answers with an event stream, end the stream once no event came for `idle_s`.

    Keep-alive comments (`: ping`) do not count as events, so an abandoned client cannot hold a
    connection forever with them. A stream that is ended gets its closing chunk when the client
    still reads; one that does not read has its connection dropped.
    """
    streaming = timed_out = False
    last_event = anyio.current_time()

    async def watched(message: Message) -> None:
        nonlocal streaming, last_event
        if message["type"] == "http.response.start":
            streaming = _header(message, b"content-type").startswith(b"text/event-stream")
            last_event = anyio.current_time()
        elif message["type"] == "http.response.body" and _carries_event(message.get("body", b"")):
            last_event = anyio.current_time()
        await send(message)

    async with anyio.create_task_group() as group:
        async def watchdog() -> None:
            nonlocal timed_out
            while (left := last_event + idle_s - anyio.current_time() if streaming else idle_s) > 0:
                await anyio.sleep(max(left, 0.05))
            timed_out = True
            group.cancel_scope.cancel()

        group.start_soon(watchdog)
        await app(scope, receive, watched)
        group.cancel_scope.cancel()
    if timed_out:
        with anyio.move_on_after(1), suppress(OSError, RuntimeError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _with_security_headers(send: Send) -> Send:
    async def secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {k.lower() for k, _ in message.get("headers", [])}
            message["headers"] = [*message.get("headers", []), *(h for h in SECURITY_HEADERS if h[0] not in present)]
        await send(message)

    return secured


def _cookies(header: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in header.split(";"):
        name, eq, value = part.strip().partition("=")
        if eq and name not in out:
            out[name] = value.strip()
    return out


def _header(message: Message, name: bytes) -> bytes:
    return next((v.lower() for k, v in message.get("headers", []) if k.lower() == name), b"")


def _carries_event(body: bytes) -> bool:
    """Whether an SSE chunk holds anything but comment lines (keep-alive pings start with `:`)."""
    return any(line and not line.startswith(b":") for line in body.splitlines())


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


class _Gone(Exception):
    """The client disconnected before its request's body was whole."""


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes `limit` (whatever Content-Length claimed); `_Gone`
    when the client disconnects first: what came of the body is dropped, never passed on as if whole
    (a chunked body cut before its last chunk, or a shorter one than its Content-Length, may still
    parse as JSON), as the direct `POST /ingest` (daemon/uvicorn_protocol.py) never answers a body that did
    not complete."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(send: Send, refused: Refused) -> None:
    await send({"type": "http.response.start", "status": refused.status, "headers": list(refused.headers)})
    await send({"type": "http.response.body", "body": refused.body})
