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

Every phase of a request is bounded in time and bytes (daemon/edge.py): the protocol tells its `Edge`
which phase the connection is in, and answers what can still be answered when a bound is passed, as JSON
like every other refusal: 408 (head or body too slow), 431 (head too large), 503 (no room: this
connection waited longest on its client), 400 (not HTTP). At most `pipelined` requests wait behind one
in flight; past that the connection is closed after their answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from urchin.daemon.browser import SECURITY_HEADERS
from urchin.daemon.edge import ANSWER, BODY, HEAD, IDLE, SEND, Edge
from urchin.daemon.security import Refused

__all__ = ["JoinedWritesProtocol", "FLUSH_AT", "protocol_for"]

FLUSH_AT = 64 << 10     # pending bytes sent at once, without waiting for the end of the step
LINGER_S = 2.0          # after a refusal that ends a connection, what the client still sends is dropped this long
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


class _Stop(Exception):
    """Raised from a parser callback to stop parsing what the connection already sent."""


def protocol_for(edge: Edge) -> type[JoinedWritesProtocol]:
    """The protocol class uvicorn instantiates per connection, bound to one server's `Edge`."""
    return type("EdgeProtocol", (JoinedWritesProtocol,), {"edge": edge})


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's private class (its range is pinned in pyproject.toml); what is used of it: the constructor
    as uvicorn calls it, `connection_made(transport)`, `data_received`, the parser callbacks, `flow`,
    `pipeline`, `send_400_response`, `pause_writing`/`resume_writing`, and the per-request state `cycle`,
    `url`, `headers`, `expect_100_continue`, `on_response_complete`. The loop is the running one (called
    in it). `edge` is set by `protocol_for`."""

    edge: Edge

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._joined = _JoinedWrites(transport, asyncio.get_running_loop())
        super().connection_made(self._joined)  # type: ignore[arg-type]
        # uvicorn's access log (`serve --log-level debug`) and concurrency limit act in its cycle: with
        # either, every request takes it
        logged = self.config.access_log and self.access_log
        self._direct: Any = None if logged or self.limit_concurrency is not None else getattr(self.app, "direct", None)
        self._parsing: _Direct | None = None    # the request being parsed is answered directly
        self._limits = self.edge.limits
        self._deadlines = self.edge.deadlines
        self._head_bytes = 0        # bytes received since the last request's headers were complete
        self._stopped = False       # parsing stopped: the requests in flight are answered, then it closes
        self._then: tuple[int, str, str] | None = None     # and then this refusal is answered
        self._lingering = False     # a refusal was sent and the stream ended: what comes is dropped
        self._enter(IDLE)
        if not self.edge.opened(self, self.loop):
            self._close_with(503, f"connections: the daemon is answering its limit of {self._limits.connections} "
                                  "open connections; try again", "connections", linger=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.edge.closed(self)
        super().connection_lost(exc)

    # ---- the edge's bounds (daemon/edge.py) ---------------------------------------------------------
    def _enter(self, phase: str) -> None:
        self.phase = phase
        self.since = now = self.loop.time()
        limit = self._deadlines[phase]
        self.until = None if limit is None else now + limit

    def _in_flight(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def expired(self, now: float) -> None:
        """The phase's deadline passed: answer what can be answered (a 408), and close."""
        phase = self.phase
        if self.transport.is_closing():             # a response or a close the client never read
            self._joined.abort()
        elif phase in (HEAD, BODY) and self.flow.read_paused:   # the daemon paused reading, not the client
            self._enter(phase)
        elif phase == HEAD and not self._in_flight():
            self._close_with(408, f"request: its line and headers did not arrive within {self._limits.head_s:g} s",
                             "request")
        elif phase == HEAD:                         # behind one in flight: that one is answered, then it closes
            self._stop()
        elif phase == BODY and self._in_flight():
            self._close_with(408, f"body: it did not arrive whole within {self._limits.body_s:g} s", "body")
        elif phase == SEND:
            self._joined.abort()
        else:                                       # idle, or a body whose request was already answered
            self.transport.close()
            self._enter(SEND)

    def evicted(self) -> None:
        """Another connection needs this one's place (it waited longest on its client)."""
        answerable = (self.phase == HEAD and not self._in_flight()) or (self.phase == BODY and self._in_flight())
        if answerable:
            self._close_with(503, f"connections: the daemon holds its limit of {self._limits.connections} open "
                                  "connections, and this one waited longest on its client", "connections",
                             linger=False)      # its place is needed now
        elif self.phase == SEND:
            self._joined.abort()
        else:
            self.transport.close()
            self._enter(SEND)

    def _close_with(self, status: int, message: str, field: str, linger: bool = True) -> None:
        """Answer `status` as JSON (the shape of every refusal) and close. Lingering (nginx's lingering
        close), the answer is followed by the end of the stream and what the client still sends is read
        and dropped for up to `LINGER_S`: closed at once, its unread bytes would reset the connection,
        and the client's system would drop the answer before the client reads it."""
        if not self.transport.is_closing():
            refused = Refused(status, message, field)
            self._joined.write_whole(self._response(status, refused.headers, refused.body, keep_alive=False))
            if linger and self.transport.can_write_eof():
                self._lingering = True
                self._joined.write_eof()
                self._enter(SEND)
                self.until = self.since + min(LINGER_S, self._limits.send_s)
                return
            self.transport.close()
        self._enter(SEND)           # a client that never reads the answer is let go after send_s

    def send_400_response(self, msg: str) -> None:
        if self._stopped:
            return
        refusal = (400, "request: not valid HTTP/1.1 (a malformed line or header, or more body than its "
                        "Content-Length)", "request")
        if self._in_flight():       # answered after what is in flight, never in the middle of it
            self._stop(refusal)
        else:
            self._close_with(*refusal)

    def _stop(self, then: tuple[int, str, str] | None = None) -> None:
        """Read no more: the requests in flight and queued are answered, then `then` (status, message,
        field) if given, and the connection closes."""
        self._stopped = True
        self._then = then
        self.flow.pause_reading()
        if then is None:
            (self.pipeline[0][0] if self.pipeline else self.cycle).keep_alive = False
        self._enter(ANSWER)

    def data_received(self, data: bytes) -> None:
        phase = self.phase
        if phase is SEND and self._lingering:
            return
        if phase is IDLE or phase is HEAD:
            room = self._limits.head_bytes - self._head_bytes
            if len(data) > room:
                super().data_received(data[:room])
                if self.transport.is_closing() or self._stopped:
                    return
                if self.phase is IDLE or self.phase is HEAD:
                    self._close_with(431, f"request: its line and headers are over the limit of "
                                          f"{self._limits.head_bytes} bytes", "request")
                    return
                data = data[room:]
            else:
                self._head_bytes += len(data)
        HttpToolsProtocol.data_received(self, data)

    def eof_received(self) -> bool:  # type: ignore[override]  # asyncio: bool | None; uvicorn says None
        """The client ended its side of the stream (`shutdown(SHUT_WR)` after its request, as `nc -N`
        and some HTTP/1.0 clients do): the requests it sent whole are answered, then the connection
        closes. RFC 9112 (9.6): a half-close "does not imply that the client is no longer interested in
        a response"; Node's http.Server is half-open for this, Apache and Varnish answer. A request
        left unfinished gets nothing (a head is dropped; with a body begun, the connection closes now:
        its app would wait for the rest with no deadline). (uvicorn closed the transport at once,
        dropping an answer in flight, or one written but still waiting to be joined to the next write.)"""
        if self._in_flight() and (self.phase is ANSWER or self.phase is HEAD):
            self._stop()
            return True     # the transport stays open for the answers
        self._joined.close()    # an answer written in this loop step is sent first (the transport drops it)
        return False

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.until is None:      # an answer the client does not read
            self._enter(SEND)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.phase is SEND and not self.transport.is_closing():
            self._enter(ANSWER if self._in_flight() else IDLE)

    # ---- the parser's callbacks ---------------------------------------------------------------------
    def on_message_begin(self) -> None:
        # uvicorn's per-request state, but its ASGI scope only once the request is known to need it
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self._parsing = None
        self.phase = HEAD           # `_enter(HEAD)` inline, as for BODY and IDLE below: every request passes here
        self.since = now = self.loop.time()
        self.until = now + self._limits.head_s

    def on_headers_complete(self) -> None:
        self._head_bytes = 0
        self.phase = BODY
        self.since = now = self.loop.time()
        self.until = now + self._limits.body_s
        if len(self.pipeline) >= self._limits.pipelined and self._in_flight():
            self._stop()
            raise _Stop
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
        self.phase, self.until = ANSWER, None   # `_enter(ANSWER)`, without reading the clock (every request)
        request = self._parsing
        if request is None:
            super().on_message_complete()
        elif not request.response_complete:
            self._direct.answer(request.admitted, bytes(request.body),
                                lambda status, headers, body: self._respond(request, status, headers, body), self.loop)
        if self.phase is ANSWER and self.cycle.response_complete:     # refused before its body
            self._enter(IDLE)

    def on_response_complete(self) -> None:
        HttpToolsProtocol.on_response_complete(self)
        if self.phase is ANSWER and self.cycle.response_complete:
            if self._stopped and self._then is not None and not self.pipeline:
                self._close_with(*self._then)
            else:
                self.phase = IDLE
                self.since = now = self.loop.time()
                self.until = now + self._limits.idle_s

    def _respond(self, request: _Direct, status: int, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> None:
        """Write the response in one piece (uvicorn's default headers, then the route's, then the page
        security headers every response carries) and go on as uvicorn does after a response."""
        if request.response_complete:
            return
        request.response_complete = True
        request.body = bytearray()
        if not request.disconnected and not self.transport.is_closing():
            self._joined.write_whole(self._response(status, headers, body, request.keep_alive))
            if not request.keep_alive:
                self.transport.close()
        self.on_response_complete()

    def _response(self, status: int, headers: Sequence[tuple[bytes, bytes]], body: bytes, keep_alive: bool) -> bytes:
        out = [STATUS_LINE[status]]
        for name, value in (*self.server_state.default_headers, *headers):
            out += (name, b": ", value, b"\r\n")
        out.append(_SECURITY_LINES if keep_alive else _SECURITY_LINES + b"connection: close\r\n")
        out += (b"\r\n", body)
        return b"".join(out)
