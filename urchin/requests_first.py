"""Requests first: a daemon's background work gives way to the requests it answers.

The daemon loads and builds in threads of the process that answers requests (the line count, the
token-cosine build after an import), and Python runs one thread at a time: a query racing two such
threads got a third of the interpreter, so the first query after a start at 3M events took 2.4 s for
0.5 s of work. The daemon marks each request with `serving()` until its response starts; background
loops call `give_way()` between steps (never while holding a lock a request may need), which waits
while a request is being answered, at most `most` seconds a step so background work always advances.
Background threads also lower their own CPU priority (`lower_thread_priority`), which the worker
processes they start inherit, so a request's thread gets a core first.

A daemon's start-up work that a first request would wait for (the token-cosine view and the tail of
the newest events it answers from) is marked like a request (`Serving`), and the rest of the start-up
work (the id index's load, the digests' warm-up, the substring index's catch-up) begins with
`give_way(STARTUP_WAIT_S)`: it starts once that is done, or after STARTUP_WAIT_S at the latest, instead
of sharing the interpreter with it (at 3M events it used to cost the first `/semantic` ~1 s).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STARTUP_WAIT_S", "Serving", "give_way", "lower_thread_priority", "serving"]

# The longest the rest of a daemon's start-up waits for what a first request needs (see above).
STARTUP_WAIT_S = 10.0

_lock = threading.Lock()
_serving = 0
_clear = threading.Event()
_clear.set()


class Serving:
    """One request being answered, from its construction until `done()` (which may be called again)."""

    def __init__(self) -> None:
        global _serving
        with _lock:
            _serving += 1
            _clear.clear()
        self._open = True

    def done(self) -> None:
        global _serving
        with _lock:
            if not self._open:
                return
            self._open = False
            _serving -= 1
            if not _serving:
                _clear.set()


@contextmanager
def serving() -> Iterator[None]:
    """Mark a request being answered for the block (nested and concurrent marks count)."""
    mark = Serving()
    try:
        yield
    finally:
        mark.done()


def give_way(most: float = 0.25) -> bool:
    """Between steps of background work: wait while a request is being answered, at most `most`
    seconds. Returns whether it waited."""
    if _clear.is_set():
        return False
    _clear.wait(most)
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
