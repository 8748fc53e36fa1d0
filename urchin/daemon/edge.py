"""The daemon's HTTP edge bounds: how long and how many bytes each phase of a request may take, and how
many connections may be open, so that no client (any process of any user can reach loopback) holds the
daemon's connections or memory by being slow, and `/health` and the hooks are answered while it tries.

A connection waits on its client in four phases, each with a deadline set when the phase begins (never
pushed back by a byte that arrives): `idle` (before a request's first byte, after a response), `head`
(the request line and headers, at most `head_bytes`), `body` (until the body is whole) and `send` (a
response the client does not read). While the daemon answers, nothing is awaited from the client and no
deadline runs. `Edge` keeps the open connections, sweeps their deadlines a few times per shortest
deadline, and when `connections` are open makes room for a new one by closing the one that has waited
longest on its client: an attacker's connections are always the ones waiting, a hook's never for long.
The HTTP protocol (daemon/uvicorn_protocol.py) sets the phases and answers what can still be answered.
"""

from __future__ import annotations

import asyncio
import resource
from dataclasses import dataclass, replace
from typing import Protocol

__all__ = ["Edge", "EdgeLimits", "Waiting", "IDLE", "HEAD", "BODY", "ANSWER", "SEND"]

IDLE, HEAD, BODY, ANSWER, SEND = "idle", "head", "body", "answer", "send"
FD_RESERVE = 128    # descriptors kept for the daemon's own files, pipes and database connections


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    """The edge's bounds. The defaults leave a legitimate local client (which sends its request in one
    write, in microseconds) a wide margin on a machine loaded 40 deep, and bound what a hostile one holds:
    `idle_s` is uvicorn's keep-alive; `head_s` and `body_s` are what a client stalled by the scheduler
    can still meet (nginx waits 60 s, Apache 20-40 s, for clients across a network); `send_s` lets a
    reader that stopped reading go; 64 KiB of head holds any browser's cookies (nginx allows 32 KiB);
    256 connections are ten times what a few agents, their hooks, CLIs and one viewer open, and stay far
    below the 1,024 descriptors most systems give a process (`for_process` lowers it under a smaller
    limit); 16 requests pipelined behind one in flight is more than any client sends."""

    idle_s: float = 5.0
    head_s: float = 10.0
    body_s: float = 30.0
    send_s: float = 30.0
    head_bytes: int = 64 << 10
    connections: int = 256
    pipelined: int = 16

    def for_process(self) -> EdgeLimits:
        """These limits with `connections` below this process's soft limit on open descriptors."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or soft - FD_RESERVE >= self.connections:
            return self
        return replace(self, connections=max(16, soft - FD_RESERVE))

    def deadlines(self) -> dict[str, float | None]:
        """Each phase's deadline in seconds; None: nothing is awaited from the client (`ANSWER`)."""
        return {IDLE: self.idle_s, HEAD: self.head_s, BODY: self.body_s, ANSWER: None, SEND: self.send_s}


class Waiting(Protocol):
    """What `Edge` needs of a connection: the phase it is in, since when, until when (None: nothing is
    awaited from its client), and what to do when the deadline passes or it must make room."""

    phase: str
    since: float
    until: float | None

    def expired(self, now: float) -> None: ...

    def evicted(self) -> None: ...


class Edge:
    """The open connections of one server and the sweep of their deadlines (on the server's loop)."""

    def __init__(self, limits: EdgeLimits) -> None:
        self.limits = limits
        self.open: dict[Waiting, None] = {}
        self.evictions = 0          # connections closed to make room (tests and logs read it)
        self.expirations = 0        # deadlines passed (a phase the daemon itself held up is given another)
        self.deadlines = limits.deadlines()
        shortest = min(limits.idle_s, limits.head_s, limits.body_s, limits.send_s)
        self.period = min(1.0, max(0.01, shortest / 4))
        self._sweep: asyncio.TimerHandle | None = None

    def opened(self, connection: Waiting, loop: asyncio.AbstractEventLoop) -> bool:
        """Count a new connection in; False when every open one is being answered and none can make room."""
        if len(self.open) >= self.limits.connections and not self._evict():
            return False
        self.open[connection] = None
        if self._sweep is None:
            self._sweep = loop.call_later(self.period, self._swept, loop)
        return True

    def closed(self, connection: Waiting) -> None:
        self.open.pop(connection, None)

    def _evict(self) -> bool:
        waiting = [c for c in self.open if c.until is not None]
        if not waiting:
            return False
        longest = min(waiting, key=lambda c: c.since)
        self.open.pop(longest, None)
        self.evictions += 1
        longest.evicted()
        return True

    def _swept(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for connection in [c for c in self.open if c.until is not None and c.until <= now]:
            self.expirations += 1
            connection.expired(now)
        self._sweep = loop.call_later(self.period, self._swept, loop) if self.open else None
