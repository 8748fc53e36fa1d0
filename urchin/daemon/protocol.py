"""uvicorn's httptools protocol, with a response's writes sent as one.

uvicorn writes a response's status line and headers, then its body, as two `transport.write` calls;
uvloop sends each at once, so every response cost two `send`s, and over loopback each one carries the
receiving side's TCP work too: ~40% of the event loop's time at 8 connections x 1 event per request
(py-spy, issue 16). Here the writes made during one event-loop step are joined and sent once, at the
end of that step (`loop.call_soon`), as one vectored write; a close sends what is pending first, and
64 KiB pending are sent at once, so a large or streamed body meets uvicorn's write flow control as
before. Nothing else changes: the same parser, the same bytes in the same order.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["JoinedWritesProtocol", "FLUSH_AT"]

FLUSH_AT = 64 << 10     # pending bytes sent at once, without waiting for the end of the step


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


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's private class (its range is pinned in pyproject.toml); what is used of it: the constructor
    as uvicorn calls it, and `connection_made(transport)`. The loop is the running one (called in it)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_JoinedWrites(transport, asyncio.get_running_loop()))  # type: ignore[arg-type]
