"""Urchin's own child processes: how to start one (`python -P -m urchin...`), its lowest priority, its
end with its parent, and `Pool`, the one way to share work out to worker processes.

The daemon runs its heavy background work in long-lived children: the PostgreSQL feed
(`urchin.daemon.indexer`), the first token-cosine build after an import (`urchin.search.build_child
--parent`) and the learned associations' build (`urchin.search.assoc_child`), after it. They run at the
lowest CPU priority and end on their own when their parent is gone. Every holder of the embedded
PostgreSQL has a watchdog child (`urchin.hybrid.pgwatch`) that waits for its parent's death the same way.

A `Pool`'s workers are spawned (`python -P -m urchin.processes ENTRY`), never forked: safe in a threaded
daemon, and no re-run of the caller's `__main__`. `ENTRY` is `module:function`; the worker calls
`function(init)` once and the function it returns on each task. Tasks and results are bytes, framed by
an 8-byte length: each caller keeps its own encoding, so the pool knows nothing of journals or arrays.
"""

from __future__ import annotations

import importlib
import os
import queue
import site
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, BinaryIO

__all__ = ["NICENESS", "PARENT_POLL_S", "python_child", "lowest_priority", "wait_for_parent", "end_with_parent",
           "Pool", "WorkerError"]

NICENESS = 19
PARENT_POLL_S = 0.5
_EXIT_S = 1.0   # how long a closed pool waits for an idle worker to end by itself
_LENGTH = struct.Struct("<Q")


def python_child(module: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run `module` in a child: `python -P -m module` (-P: never the
    working directory's modules), with this package on PYTHONPATH when it runs from a source checkout."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    if package_root not in {*site.getsitepackages(), site.getusersitepackages()}:   # a source checkout
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return [sys.executable, "-P", "-m", module], env


def lowest_priority(pid: int = 0) -> None:
    """nice 19, and on Linux the SCHED_IDLE class: the kernel runs this process only on a core nothing
    else wants (it still gets a trickle under constant load, so its work is slowed, never stopped). With
    nice 19 alone, 0 of 6 busy runs kept every query cell within 1.5x of idle; with SCHED_IDLE, 3 of 5.
    `pid` 0 is this process (call it first, before any thread starts: they all inherit it); a parent
    calls it with a child's pid as soon as it is spawned, so the child's start-up runs low too."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, NICENESS)
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):   # no such class (macOS), or not allowed: as low as it got
        pass


def wait_for_parent(parent: int) -> None:
    """Return once `parent` is no longer this process's parent: it died, even by SIGKILL (which runs
    no clean-up of its own), and the kernel gave this process to another."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)


def end_with_parent(parent: int) -> None:
    """Exit this process (status 1) as soon as `parent` is no longer its parent (it died, even by
    SIGKILL): a watch on a thread of its own, so the work on the others need not look."""
    def watch() -> None:
        wait_for_parent(parent)
        os._exit(1)

    threading.Thread(target=watch, name="urchin-parent-watch", daemon=True).start()


class WorkerError(Exception):
    """A pool's worker could not start, died, or sent a short frame; the caller goes on its own way."""


class Pool:
    """`workers` worker processes running `entry` (`module:function`); a context manager, and nothing
    outlives it: closing it closes every worker's stdin, kills and waits for it. `ordered` sends the
    tasks round-robin, at most `in_flight` unanswered per worker, and yields the results in task
    order. With `low_priority`, the workers run at `lowest_priority` from their start."""

    def __init__(self, entry: str, workers: int, *, init: bytes = b"", low_priority: bool = False,
                 in_flight: int = 2) -> None:
        if workers < 1 or in_flight < 1:
            raise ValueError(f"a pool needs workers >= 1 and in_flight >= 1 (got {workers}, {in_flight})")
        self.entry, self.workers, self.init = entry, workers, init
        self.low_priority, self.in_flight = low_priority, in_flight
        self._procs: list[subprocess.Popen[bytes]] = []
        self._unanswered = 0   # tasks sent and not yet answered

    def __enter__(self) -> Pool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

    def start(self) -> None:
        command, env = python_child(__name__)
        command += [self.entry, str(os.getpid()), "low" if self.low_priority else "normal"]
        try:
            for _ in range(self.workers):
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                self._procs.append(proc)
                if self.low_priority:
                    lowest_priority(proc.pid)
                self._send(proc, self.init)
        except OSError as exc:
            self.close()
            raise WorkerError(f"{self.entry}: cannot start a worker ({exc})") from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Every worker's stdin closed: an idle one (each task answered) ends by itself, as a process
        should (its exit handlers run); any other, or one not gone within a second, is killed."""
        procs, self._procs = self._procs, []
        for proc in procs:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:   # a write still buffered to a dead worker
                        pass
        for proc in procs:
            if self._unanswered:
                proc.kill()
            try:
                proc.wait(timeout=_EXIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._unanswered = 0

    def ordered(self, tasks: Iterable[bytes]) -> Iterator[bytes]:
        """The result of each task, in task order; memory bounded by workers x in_flight."""
        procs = self._procs
        if not procs:
            raise WorkerError(f"{self.entry}: the pool is not started")
        pending = iter(tasks)
        sent = done = 0

        def send_next() -> None:
            nonlocal sent
            task = next(pending, None)
            if task is not None:
                self._send(procs[sent % len(procs)], task)
                sent += 1
                self._unanswered += 1

        for _ in range(len(procs) * self.in_flight):
            send_next()
        while done < sent:
            result = self._receive(procs[done % len(procs)])
            done += 1
            self._unanswered -= 1
            send_next()   # before the caller takes the result: the worker works meanwhile
            yield result

    def _send(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(_LENGTH.pack(len(data)))
            proc.stdin.write(data)
            proc.stdin.flush()
        except OSError as exc:
            raise WorkerError(f"{self.entry}: worker {proc.pid} stopped ({exc})") from None

    def _receive(self, proc: subprocess.Popen[bytes]) -> bytes:
        assert proc.stdout is not None
        data = _read_frame(proc.stdout)
        if data is None:
            raise WorkerError(f"{self.entry}: worker {proc.pid} stopped (exit {proc.poll()})")
        return data


def _read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame, or None at the end of the stream or when it stops mid-frame."""
    head = stream.read(_LENGTH.size)
    if len(head) != _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    return data if len(data) == size else None


def _worker(entry: str, parent: int, priority: str) -> None:
    """A pool's worker: frames in on stdin (init, then tasks), one frame out on stdout a task. A thread
    reads the tasks (the parent's writes never wait on this worker's work) and another writes the
    results (the next task is worked while one is written). Ends with its parent, even a SIGKILLed one."""
    if priority == "low":
        lowest_priority()
    end_with_parent(parent)
    out: BinaryIO = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)   # a stray print goes to stderr, never into a frame
    sys.stdout = sys.stderr
    stdin = sys.stdin.buffer
    init = _read_frame(stdin)
    if init is None:
        return
    module, _, name = entry.partition(":")
    handle: Callable[[bytes], bytes] = getattr(importlib.import_module(module), name)(init)
    tasks: queue.Queue[bytes | None] = queue.Queue()
    results: queue.Queue[bytes | None] = queue.Queue(maxsize=1)

    def read() -> None:
        while (task := _read_frame(stdin)) is not None:
            tasks.put(task)
        tasks.put(None)

    def send() -> None:
        try:
            while (frame := results.get()) is not None:
                out.write(_LENGTH.pack(len(frame)))
                out.write(frame)
                out.flush()
        except OSError:   # the reader is gone
            os._exit(1)

    threading.Thread(target=read, name="urchin-pool-read", daemon=True).start()
    sender = threading.Thread(target=send, name="urchin-pool-send", daemon=True)
    sender.start()
    while (task := tasks.get()) is not None:
        results.put(handle(task))
    results.put(None)
    sender.join()


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]), sys.argv[3])
