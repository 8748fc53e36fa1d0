"""Entries for `urchin.processes.Pool` in tests/test_processes.py: real modules a spawned worker imports."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def echo(init: bytes) -> Callable[[bytes], bytes]:
    """Each task back, reversed, behind the init and this worker's pid; a task `fail` kills the worker."""
    def run(task: bytes) -> bytes:
        if task == b"fail":
            raise RuntimeError("asked to fail")
        return init + b"|" + str(os.getpid()).encode() + b"|" + task[::-1]
    return run


def sleepy(init: bytes) -> Callable[[bytes], bytes]:
    """A task that takes the rest of the test: its worker is busy when its parent is killed."""
    def run(task: bytes) -> bytes:
        time.sleep(600)
        return task
    return run


def chatty(init: bytes) -> Callable[[bytes], bytes]:
    """Prints (a stray print must never reach a frame or the caller's output) and echoes each task."""
    print("stray print from a worker", flush=True)

    def run(task: bytes) -> bytes:
        return task
    return run
