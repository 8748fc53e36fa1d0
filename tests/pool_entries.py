"""Entries for `urchin.processes.Pool` in tests/test_processes.py (real modules a spawned worker imports),
and `in_a_fresh_python`, where the tests that fork workers run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def in_a_fresh_python(check: Callable[..., None], *args: str) -> None:
    """`check(*args)` (a module-level function of a test module) run in a new interpreter: a pool forks
    only where no other thread runs, and a test process may hold threads other tests left behind."""
    code = f"from {check.__module__} import {check.__name__} as check; check(*{args!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-4000:]


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


def dispositions(init: bytes) -> Callable[[bytes], bytes]:
    """Each task names signals; the answer is this worker's disposition of each (default, ignore, int:
    Python's SIGINT handler, or the name of a Python function), and its wake-up fd."""
    import signal

    def run(task: bytes) -> bytes:
        names = []
        for name in task.decode().split():
            handler = signal.getsignal(getattr(signal, name))
            names.append({signal.SIG_DFL: "default", signal.SIG_IGN: "ignore",
                          signal.default_int_handler: "int"}.get(handler, getattr(handler, "__name__", "?")))
        wakeup = signal.set_wakeup_fd(-1)
        return " ".join([*names, str(wakeup)]).encode()
    return run
