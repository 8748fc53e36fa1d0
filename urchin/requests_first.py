"""Requests first: a daemon's background work gives way to the requests it answers.

The daemon loads and builds in threads of the process that answers requests (the line count, the
token-cosine build after an import), and Python runs one thread at a time: a query racing two such
threads got a third of the interpreter, so the first query after a start at 3M events took 2.4 s for
0.5 s of work. The daemon marks each request with `serving()` until its response starts; background
loops call `give_way()` between steps (never while holding a lock a request may need), which waits
while a request is being answered and GRACE_S after (a client's next request follows within a millisecond
or two), at most `most` seconds a step so background work always advances.
Background threads also lower their own CPU priority (`lower_thread_priority`), which the worker
processes they start inherit, so a request's thread gets a core first.

A daemon's start-up work that a first request would wait for (the token-cosine view and the tail of
the newest events it answers from) is marked like a request (`Serving`), and the rest of the start-up
work (the id index's load, the digests' warm-up, the substring index's catch-up) begins with
`give_way(STARTUP_WAIT_S)`: it starts once that is done, or after STARTUP_WAIT_S at the latest, instead
of sharing the interpreter with it (at 3M events it used to cost the first `/semantic` ~1 s).

Across processes: the daemon's index process (the PostgreSQL feed) runs at the lowest CPU priority, yet
queries during its feed took up to 2x their idle time: what a query shares with it is not only CPU
time but the machine (caches, memory bandwidth, a sibling hyperthread) and the server processes. So
the daemon also keeps its count of requests in one shared page (`share()`, a memfd the child inherits;
the child `attach`es it), with the moment the last one ended; a child's `give_way` waits while a request
is answered there too, and GRACE_S after (a client's next request follows within a millisecond or two).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STARTUP_WAIT_S", "GRACE_S", "Serving", "asked_within", "attach", "give_way", "lower_thread_priority",
           "serving", "share", "shared_wait_s"]

# The longest the rest of a daemon's start-up waits for what a first request needs (see above).
STARTUP_WAIT_S = 10.0
GRACE_S = 0.01          # a child waits this long after the daemon's last request ended (see above)
# How often a waiting child looks at the shared page again: each look wakes it (two threads of the feed,
# ~40 us each); at 2 ms they were ~2.5% of a core beside the queries, the most of what the feed did then.
_POLL_S = 0.01

_lock = threading.Lock()
_serving = 0
_clear = threading.Event()
_clear.set()
_ended_ns = 0                    # CLOCK_MONOTONIC ns when this process's last request ended
_PAGE = struct.Struct("<qq")     # requests being answered, CLOCK_MONOTONIC ns when the last one ended


class _Page:
    """The shared page: one memfd mapped in the daemon (written) and in its children (read)."""

    def __init__(self, fd: int, writable: bool) -> None:
        self.fd = fd
        self.map = mmap.mmap(fd, mmap.PAGESIZE, prot=mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0))

    def asked_within(self, seconds: float) -> bool:
        """A request is being answered, or the last one ended less than `seconds` ago."""
        serving, ended = _PAGE.unpack_from(self.map, 0)
        return serving > 0 or (ended > 0 and time.monotonic_ns() - ended < seconds * 1e9)


_shared: _Page | None = None     # the daemon's, see share (written under _lock)
_attached: _Page | None = None   # a child's, see attach (read by give_way)
_waited_ns = 0                   # how long give_way waited on the attached page


def share() -> int | None:
    """In the daemon, before its children start: keep the count of requests in a shared page too, and
    return its file descriptor for a child to inherit (`attach`), or None where there is no memfd."""
    global _shared
    with _lock:
        if _shared is None:
            try:
                fd = os.memfd_create("urchin-requests", os.MFD_CLOEXEC)
                os.ftruncate(fd, mmap.PAGESIZE)
                _shared = _Page(fd, writable=True)
            except (AttributeError, OSError):
                return None
            _PAGE.pack_into(_shared.map, 0, _serving, 0)
        return _shared.fd


def attach(fd: int | None) -> bool:
    """In a child: `give_way` waits for the requests of the daemon whose page `fd` is (`share`), None
    for this process's own again. Returns whether the page could be read."""
    global _attached
    try:
        _attached = None if fd is None else _Page(fd, writable=False)
    except (OSError, ValueError):
        _attached = None
        return False
    return True


def asked_within(seconds: float) -> bool:
    """Whether the daemon whose page this child attached is answering a request, or ended one in the
    last `seconds` (False when none is attached)."""
    page = _attached
    return page is not None and page.asked_within(seconds)


def shared_wait_s() -> float:
    """Seconds `give_way` has waited for the requests of the daemon this child attached to."""
    return _waited_ns / 1e9


class Serving:
    """One request being answered, from its construction until `done()` (which may be called again)."""

    def __init__(self) -> None:
        global _serving
        with _lock:
            _serving += 1
            _clear.clear()
            if _shared is not None:
                _PAGE.pack_into(_shared.map, 0, _serving, 0)
        self._open = True

    def done(self) -> None:
        global _serving, _ended_ns
        with _lock:
            if not self._open:
                return
            self._open = False
            _serving -= 1
            now = time.monotonic_ns()
            if not _serving:
                _ended_ns = now
                _clear.set()
            if _shared is not None:
                _PAGE.pack_into(_shared.map, 0, _serving, now)


@contextmanager
def serving() -> Iterator[None]:
    """Mark a request being answered for the block (nested and concurrent marks count)."""
    mark = Serving()
    try:
        yield
    finally:
        mark.done()


def give_way(most: float = 0.25) -> bool:
    """Between steps of background work: wait while a request is being answered (in this process, or
    in the daemon whose page this child attached) and GRACE_S after, at most `most` seconds. Returns
    whether it waited. (The grace: a client's requests one after another leave gaps of a millisecond
    or two, and a step begun in one held the interpreter against the next request.)"""
    page = _attached
    if page is not None:
        return _give_way_shared(page, most)
    if _clear.is_set() and not _ended_within(GRACE_S):
        return False
    deadline = time.monotonic() + most
    while (left := deadline - time.monotonic()) > 0:
        if not _clear.wait(left):
            break
        since = (time.monotonic_ns() - _ended_ns) / 1e9
        if since >= GRACE_S:
            if _clear.is_set():
                break
            continue
        time.sleep(min(GRACE_S - since, left))
    return True


def _ended_within(seconds: float) -> bool:
    return _ended_ns > 0 and time.monotonic_ns() - _ended_ns < seconds * 1e9


def _give_way_shared(page: _Page, most: float) -> bool:
    global _waited_ns
    if not page.asked_within(GRACE_S):
        return False
    started = time.monotonic_ns()
    deadline = started + most * 1e9
    while page.asked_within(GRACE_S) and time.monotonic_ns() < deadline:
        time.sleep(_POLL_S)
    with _lock:
        _waited_ns += time.monotonic_ns() - started
    return True


def lower_thread_priority(niceness: int = 10) -> None:
    """Run the calling thread at a lower CPU priority (Linux: each thread has its own nice value, and
    threads and processes it starts inherit it). Never raises the priority: a thread already nicer
    stays so. Elsewhere, or when not allowed, nothing changes."""
    try:
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
            os.setpriority(os.PRIO_PROCESS, tid, niceness)
    except (AttributeError, OSError):
        pass
