"""What every request must pass before a route sees it: Host, bearer token, Content-Type, size.

`Guard` is a plain ASGI middleware around the whole app (mounts included, e.g. MCP at `/mcp`),
so no route can forget a check and a refused request never reaches `Memory` or the journal.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from urchin.config import Settings, ensure_private_dir
from urchin.errors import ConfigError

__all__ = ["Guard", "load_token", "ensure_token", "is_loopback_host", "EVENT_LIMIT", "BATCH_LIMIT"]

EVENT_LIMIT = 1 << 20  # one event: 1 MiB
BATCH_LIMIT = 16 << 20  # one request body of any kind: 16 MiB
OPEN_PATHS = frozenset({"/health"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


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


def ensure_token(settings: Settings) -> str:
    """The API token, creating `$URCHIN_HOME/token` (0600, 256 random bits) at the first start."""
    token = load_token(settings)
    if token:
        return token
    ensure_private_dir(settings.home)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(settings.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return load_token(settings) or token
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def is_loopback_host(value: str) -> bool:
    """`localhost`, `127.x.y.z` or `::1`, with or without a port (`[::1]:8080`, `localhost:18799`)."""
    host = value.strip().lower()
    if host.startswith("["):
        host = host[1:host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if host in ("localhost", "localhost.") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """Refuses bad requests before the app runs; buffers POST bodies within the size limit.

    Order: Host (DNS rebinding) -> bearer token (constant time) -> Content-Type on POST ->
    body size (Content-Length and the bytes actually read). A Unix-socket request carries no
    usable Host, so only the token applies to it (the socket itself is 0600).
    """

    def __init__(self, app: ASGIApp, token: str, limit_for: Callable[[str], int] | None = None) -> None:
        self.app = app
        self.token = token.encode("utf-8")
        self.limit_for = limit_for or (lambda path: BATCH_LIMIT)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path = scope.get("path", "")
        server = scope.get("server")
        unix = server is None or server[1] is None  # uvicorn reports (path, None) for a Unix socket
        if not unix and not is_loopback_host(headers.get("host", "")):
            await _refuse(send, 403, "host: must be a loopback name or address (localhost, 127.0.0.1, ::1)",
                          "host")
            return
        if path not in OPEN_PATHS and not self._authorised(headers.get("authorization", "")):
            await _refuse(send, 401, "authorization: missing or wrong bearer token", "authorization",
                          [(b"www-authenticate", b'Bearer realm="urchin"')])
            return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            await _refuse(send, 415, "content-type: must be application/json", "content-type")
            return
        limit = self.limit_for(path)
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _refuse(send, 413, f"body: over the limit of {limit} bytes", "body")
            return
        body = await _read_body(receive, limit)
        if body is None:
            await _refuse(send, 413, f"body: over the limit of {limit} bytes", "body")
            return
        await self.app(scope, _replay(body, receive), send)

    def _authorised(self, header: str) -> bool:
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode("utf-8"), self.token)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes `limit` (whatever Content-Length claimed)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(parts)
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


async def _refuse(send: Send, status: int, message: str, field: str,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = orjson.dumps({"error": message, "field": field})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
