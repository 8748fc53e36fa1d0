"""MCP over stdio: the SDK's `stdio_server`, fed by a line guard of our own.

Why a wrapper: the SDK's stdio reader hands a line that fails to parse or validate to the session
as an exception, which the session only logs, so a client waiting on that line's id hangs (a
batch array, `"jsonrpc": "1.0"`, a lone surrogate, an id of 1.5 or null, a torn line). And at EOF
the session cancels the handlers still running, so a burst of calls followed by EOF loses answers
whose writes have landed. `LineGuard` keeps both promises that the SDK does not:

- every line gets exactly one answer: a bad one is answered here with the JSON-RPC error the HTTP
  transport would give (-32700 parse error with id null; -32600 invalid request, echoing the id
  when one can be read) and never reaches the SDK;
- at EOF the SDK's input stays open until every request already read has been answered (or
  cancelled by the client), so the session sees EOF with nothing in flight and every answer is
  written and flushed before the process exits.

Everything else (framing of answers, the stdout claim that keeps stray prints off the wire, the
protocol itself) stays the SDK's. Since the SDK claims stdin only when it reads it, `private_stdin`
does that part: the wire moves to a close-on-exec descriptor and fd 0 reads /dev/null, so a child
process (git, an embedded PostgreSQL) can neither read protocol bytes nor hold the pipe.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, BinaryIO, cast

import anyio
import mcp_types as types
import orjson
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["BadLine", "LineGuard", "parse_line", "serve_lines", "MAX_LINE_BYTES", "DRAIN_S"]

MAX_LINE_BYTES = 16 << 20  # one message: the same 16 MiB the HTTP API takes in one body
DRAIN_S = 120.0  # after EOF, how long answers still owed may take before the process gives up on them


class BadLine(Exception):
    """A line that is not one valid JSON-RPC 2.0 message: the error to answer, and the id if one was read."""

    def __init__(self, code: int, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    def answer(self) -> SessionMessage:
        error = types.ErrorData(code=self.code, message=self.message)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=self.request_id, error=error))


def parse_line(line: bytes) -> types.JSONRPCMessage:
    """One line of the wire as a JSON-RPC message, or `BadLine` saying what is wrong with it.

    Strict JSON first (orjson: UTF-8, no NaN, no lone surrogates, numbers that fit a double);
    JSON that only a lenient parser reads is an invalid request, so its id can still be echoed.
    """
    text = line.strip(b" \t\r\n")
    if not text:
        raise BadLine(types.PARSE_ERROR, "Parse error: empty line")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        data = _lenient(text)  # raises the parse error when even a lenient parser cannot read it
        raise BadLine(types.INVALID_REQUEST, f"Invalid request: not valid JSON text: {exc}", _id_of(data)) from None
    if isinstance(data, list):
        raise BadLine(types.INVALID_REQUEST, "Invalid request: batches are not supported; "
                                             "send one JSON-RPC object per line")
    if not isinstance(data, dict):
        raise BadLine(types.INVALID_REQUEST, f"Invalid request: a line must be a JSON-RPC object, "
                                             f"got {type(data).__name__}")
    request_id = _id_of(data)
    problem = _shape_problem(data)
    if problem:
        raise BadLine(types.INVALID_REQUEST, f"Invalid request: {problem}", request_id)
    try:  # the exact check the SDK's reader makes, so whatever passes here reaches the session
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "message"
        raise BadLine(types.INVALID_REQUEST, f"Invalid request: {where}: {first['msg']}", request_id) from None


def _lenient(text: bytes) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text.decode("utf-8"), parse_constant=refuse)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise BadLine(types.PARSE_ERROR, f"Parse error: {reason}") from None


def _id_of(data: Any) -> str | int | None:
    """The id to echo in an error: a string or an integer, else none can be read."""
    request_id = data.get("id") if isinstance(data, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return request_id


def _shape_problem(data: dict[str, Any]) -> str | None:
    """What makes `data` neither a request, a notification nor a response (None when it is one)."""
    if data.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if "id" in data and _id_of(data) is None:
        return '"id" must be a string or an integer'
    if "method" in data:
        if not isinstance(data["method"], str):
            return '"method" must be a string'
        if "params" in data and not isinstance(data["params"], dict):
            return '"params" must be an object'
        return None
    if "id" not in data or ("result" in data) == ("error" in data):
        return "must be a request, a notification, or a response with exactly one of result and error"
    return None


class _Answers:
    """The session's write stream, counting down the requests it answers."""

    def __init__(self, inner: Any, guard: LineGuard) -> None:
        self.inner = inner
        self.guard = guard

    async def send(self, item: SessionMessage) -> None:
        await self.inner.send(item)
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self.guard.settle(message.id)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _Answers:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class LineGuard:
    """The session's input: good lines pass through, bad ones are answered, EOF waits for the answers owed."""

    def __init__(self, source: BinaryIO, max_line: int = MAX_LINE_BYTES, drain_s: float = DRAIN_S) -> None:
        self.source = source
        self.max_line = max_line
        self.drain_s = drain_s
        self.owed: Counter[str] = Counter()
        self._changed = anyio.Event()
        self._answers: _Answers | None = None
        self._attached = anyio.Event()

    def attach(self, write_stream: Any) -> _Answers:
        """The write stream the session must use (it counts answers); bad lines are answered on it too."""
        self._answers = _Answers(write_stream, self)
        self._attached.set()
        return self._answers

    def settle(self, request_id: str | int) -> None:
        key = str(request_id)
        if self.owed[key] > 0:
            self.owed[key] -= 1
            self._changed.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        await self._attached.wait()
        assert self._answers is not None
        while line := await anyio.to_thread.run_sync(self.source.readline, self.max_line + 1):
            try:
                if len(line) > self.max_line and not line.endswith(b"\n"):
                    await self._skip_rest_of_line()
                    raise BadLine(types.INVALID_REQUEST, f"Invalid request: a line over {self.max_line} bytes")
                message = parse_line(line)
            except BadLine as bad:
                await self._answers.inner.send(bad.answer())
                continue
            self._note(message)
            yield line.decode("utf-8")
        await self._drain()

    async def _skip_rest_of_line(self) -> None:
        while (rest := await anyio.to_thread.run_sync(self.source.readline, self.max_line)) \
                and not rest.endswith(b"\n"):
            pass

    def _note(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self.owed[str(message.id)] += 1
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = (message.params or {}).get("requestId")  # a cancelled request is never answered
            if isinstance(cancelled, str | int):
                self.settle(cancelled)

    async def _drain(self) -> None:
        with anyio.move_on_after(self.drain_s):
            while sum(self.owed.values()) > 0:
                await self._changed.wait()
                self._changed = anyio.Event()


@contextmanager
def private_stdin() -> Iterator[BinaryIO]:
    """The client's pipe on a private descriptor for as long as we serve; fd 0 reads /dev/null meanwhile."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        # closefd=False: should a reader thread still block on it at exit, it must not be recycled under it
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


async def serve_lines(server: Server[Any], source: BinaryIO | None = None) -> None:
    """Serve `server` on stdin/stdout (or `source`/stdout) until EOF and every answer owed is written."""
    if source is None:
        with private_stdin() as stdin:
            await serve_lines(server, stdin)
        return
    guard = LineGuard(source)
    async with stdio_server(stdin=cast(anyio.AsyncFile[str], guard)) as (read_stream, write_stream):
        await server.run(read_stream, guard.attach(write_stream), server.create_initialization_options())
