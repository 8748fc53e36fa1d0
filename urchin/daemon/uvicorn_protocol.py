"""uvicorn's httptools protocol, with a response's writes sent as one and `POST /ingest` answered directly.

uvicorn writes a response's status line and headers, then its body, as two `transport.write` calls;
uvloop sends each at once, so every response cost two `send`s, and over loopback each one carries the
receiving side's TCP work too: ~40% of the event loop's time at 8 connections x 1 event per request
(py-spy, issue 16). Here the writes made during one event-loop step are joined and sent once, at the
end of that step (`loop.call_soon`), as one vectored write; a close sends what is pending first, and
64 KiB pending are sent at once, so a large or streamed body meets uvicorn's write flow control as
before. Nothing else changes: the same parser, the same bytes in the same order.

A plain `POST /ingest` (the hooks' and clients' one event per request: Content-Length, no query, no
`Expect`, nothing in flight before it on the connection) is answered from the parser's callbacks by
`DirectIngest` (daemon/intake.py): the Guard's checks as the headers complete, the event once
the body is whole, the response written in one piece after the fsync. No task, scope, `asyncio.Event`
or ASGI message is made for it. Everything else (other routes, chunked bodies, `Expect: 100-continue`,
a request pipelined behind one in flight, access logging) goes to the ASGI app as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from urchin.daemon.browser import SECURITY_HEADERS
from urchin.daemon.security import Refused

__all__ = ["JoinedWritesProtocol", "FLUSH_AT"]

FLUSH_AT = 64 << 10     # pending bytes sent at once, without waiting for the end of the step
_SECURITY_LINES = b"".join(name + b": " + value + b"\r\n" for name, value in SECURITY_HEADERS)


class _JoinedWrites:
    """A transport that joins the writes of one loop step; everything else is the wrapped transport's."""

    __slots__ = ("_transport", "_loop", "_pending", "_size")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))
        self._size += len(data)
        if self._size >= FLUSH_AT:
            self._flush()

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def write_whole(self, data: bytes) -> None:
        """A whole response made in one piece: sent now when nothing is pending (nothing to join it to)."""
        if self._pending:
            self.write(data)
        elif not self._transport.is_closing():
            self._transport.write(data)

    def _flush(self) -> None:
        if self._pending:
            pending, self._pending, self._size = self._pending, [], 0
            if self._transport.is_closing():
                return
            if len(pending) == 1:
                self._transport.write(pending[0])
            else:
                self._transport.writelines(pending)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Direct:
    """A request answered directly, standing where uvicorn keeps a request's cycle (`protocol.cycle`), so
    that its code sees one in flight: a request pipelined behind it waits, `connection_lost` marks it
    `disconnected`, `shutdown` turns its `keep_alive` off."""

    __slots__ = ("admitted", "body", "keep_alive", "disconnected", "response_complete")

    def __init__(self, keep_alive: bool) -> None:
        self.admitted: Any = None
        self.body = bytearray()
        self.keep_alive = keep_alive
        self.disconnected = False
        self.response_complete = False

    @property
    def message_event(self) -> _Direct:     # uvicorn's connection_lost sets a cycle's event
        return self

    def set(self) -> None:
        pass


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's private class (its range is pinned in pyproject.toml); what is used of it: the constructor
    as uvicorn calls it, `connection_made(transport)`, the parser callbacks, and the per-request state
    `cycle`, `url`, `headers`, `expect_100_continue`, `on_response_complete`. The loop is the running one
    (called in it)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._joined = _JoinedWrites(transport, asyncio.get_running_loop())
        super().connection_made(self._joined)  # type: ignore[arg-type]
        # uvicorn's access log (`serve --log-level debug`) and concurrency limit act in its cycle: with
        # either, every request takes it
        logged = self.config.access_log and self.access_log
        self._direct: Any = None if logged or self.limit_concurrency is not None else getattr(self.app, "direct", None)
        self._parsing: _Direct | None = None    # the request being parsed is answered directly

    def on_message_begin(self) -> None:
        # uvicorn's per-request state, but its ASGI scope only once the request is known to need it
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self._parsing = None

    def on_headers_complete(self) -> None:
        if (self._direct is not None and self.url == b"/ingest" and not self.expect_100_continue
                and (self.cycle is None or self.cycle.response_complete)
                and self.parser.get_method() == b"POST" and not self.parser.should_upgrade()):
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in self.headers}
            if "content-length" in headers and "transfer-encoding" not in headers:
                self._begin_direct(headers)
                return
        # the ASGI app's request: uvicorn's own start of a message (the scope), keeping what was parsed
        url, headers_seen, expect = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()
        self.url, self.expect_100_continue = url, expect
        self.headers.extend(headers_seen)       # the scope holds this same list
        super().on_headers_complete()

    def _begin_direct(self, headers: dict[str, str]) -> None:
        request = self._parsing = _Direct(self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive())
        self.cycle = request  # type: ignore[assignment]
        verdict = self._direct.admit(self.server, headers)
        if isinstance(verdict, Refused):    # refused before the body, as the Guard does: its body is dropped
            self._respond(request, verdict.status, verdict.headers, verdict.body)
            return
        request.admitted = verdict

    def on_body(self, body: bytes) -> None:
        request = self._parsing
        if request is None:
            super().on_body(body)
        elif not request.response_complete:
            request.body += body

    def on_message_complete(self) -> None:
        request = self._parsing
        if request is None:
            super().on_message_complete()
        elif not request.response_complete:
            self._direct.answer(request.admitted, bytes(request.body),
                                lambda status, headers, body: self._respond(request, status, headers, body), self.loop)

    def _respond(self, request: _Direct, status: int, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> None:
        """Write the response in one piece (uvicorn's default headers, then the route's, then the page
        security headers every response carries) and go on as uvicorn does after a response."""
        if request.response_complete:
            return
        request.response_complete = True
        request.body = bytearray()
        if not request.disconnected and not self.transport.is_closing():
            out = [STATUS_LINE[status]]
            for name, value in (*self.server_state.default_headers, *headers):
                out += (name, b": ", value, b"\r\n")
            out.append(_SECURITY_LINES if request.keep_alive else _SECURITY_LINES + b"connection: close\r\n")
            out += (b"\r\n", body)
            self._joined.write_whole(b"".join(out))
            if not request.keep_alive:
                self.transport.close()
        self.on_response_complete()
