"""Urchin's own child processes: how to start one (`python -P -m urchin...`), its lowest priority, its
end with its parent, and `Pool`, the one way to share work out to worker processes.

The daemon runs its heavy background work in long-lived children: the PostgreSQL feed
(`urchin.daemon.indexer`), the first token-cosine build after an import (`urchin.search.build_child
--parent`) and the learned associations' build (`urchin.search.assoc_child`), after it. They run at the
lowest CPU priority and end on their own when their parent is gone. Every holder of the embedded
PostgreSQL has a watchdog child (`urchin.hybrid.pgwatch`) that waits for its parent's death the same way.

A `Pool`'s workers are spawned (`python -P -m urchin.processes ENTRY`: safe in a threaded daemon, and no
re-run of the caller's `__main__`), or with `start="fork"` forked from a caller with no other thread (no
interpreter to start, the caller's imports and open files inherited). `ENTRY` is `module:function`; the
worker calls `function(init)` once and the function it returns on each task. Tasks and results are
bytes, framed by an 8-byte length over two pipes either way: each caller keeps its own encoding, so
the pool knows nothing of journals or arrays.
"""

from __future__ import annotations

import importlib
import os
import queue
import signal
import site
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, BinaryIO, Literal, Protocol

__all__ = ["NICENESS", "PARENT_POLL_S", "python_child", "lowest_priority", "wait_for_parent", "end_with_parent",
           "can_fork", "Pool", "WorkerError"]

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


def can_fork() -> bool:
    """Whether this process may fork a worker: it can (not Windows), and no other thread runs here (a
    forked child would inherit that thread's locks, held mid-use, and never see them released)."""
    return hasattr(os, "fork") and threading.active_count() == 1


class WorkerError(Exception):
    """A pool's worker could not start, died, or sent a short frame; the caller goes on its own way."""


class _Worker(Protocol):
    """What a pool holds of a worker, spawned (`subprocess.Popen`) or forked (`_Forked`)."""

    pid: int
    stdin: IO[bytes] | None
    stdout: IO[bytes] | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


class _Forked:
    """A forked worker as `Popen` shows a spawned one: its pid, the two pipes' ends, its exit status."""

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:   # reaped by another's wait: gone, its status unknown (as Popen says)
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Pool:
    """`workers` worker processes running `entry` (`module:function`); a context manager, and nothing
    outlives it: closing it closes every worker's stdin, kills and waits for it. `ordered` sends the
    tasks round-robin, at most `in_flight` unanswered per worker, and yields the results in task
    order. With `low_priority`, the workers run at `lowest_priority` from their start.

    `start="spawn"` starts each worker as a new interpreter; `start="fork"` forks it from this process
    (which must have no other thread: `can_fork`, else `start` raises `WorkerError`), so it begins
    with this process's imports, state and open file descriptors, but a spawned worker's signal
    handlers, and ends by `os._exit`: no exit handler of this process runs in it, no buffer it
    inherited is flushed twice."""

    def __init__(self, entry: str, workers: int, *, init: bytes = b"", low_priority: bool = False,
                 in_flight: int = 2, start: Literal["spawn", "fork"] = "spawn") -> None:
        if workers < 1 or in_flight < 1:
            raise ValueError(f"a pool needs workers >= 1 and in_flight >= 1 (got {workers}, {in_flight})")
        if start not in ("spawn", "fork"):
            raise ValueError(f"a pool's start must be 'spawn' or 'fork' (got {start!r})")
        self.entry, self.workers, self.init = entry, workers, init
        self.low_priority, self.in_flight, self.start_method = low_priority, in_flight, start
        self._procs: list[_Worker] = []
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
        if self.start_method == "fork" and not can_fork():
            others = threading.active_count() - 1
            raise WorkerError(f"{self.entry}: cannot fork a worker here: {others} other "
                              f"thread{'' if others == 1 else 's'} running (a forked child would inherit their "
                              "locks mid-use); use start='spawn'")
        command, env = python_child(__name__)
        command += [self.entry, str(os.getpid()), "low" if self.low_priority else "normal"]
        try:
            for _ in range(self.workers):
                proc: _Worker
                if self.start_method == "fork":
                    proc = self._fork()
                else:
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

    def _fork(self) -> _Forked:
        """One worker forked from here, talking over two new pipes; it closes every other worker's
        pipe ends it inherited (a worker holding another's stdin open would keep that one waiting)."""
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        theirs = [stream.fileno() for proc in self._procs for stream in (proc.stdin, proc.stdout) if stream]
        priority, parent = "low" if self.low_priority else "normal", os.getpid()
        for stream in (sys.stdout, sys.stderr):   # nothing buffered here is written again by the child
            if stream is not None:
                stream.flush()
        pid = -1     # signals wait until the child's reset: one between fork and reset ran the caller's handler
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            pid = os.fork()
        finally:
            if pid != 0:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if pid == 0:   # the worker: it never returns into the caller's code
            status = 1
            try:
                _default_signals()
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)   # one that came meanwhile acts now
                for fd in (tasks_write, results_read, *theirs):
                    os.close(fd)
                _forked_worker(self.entry, parent, priority, tasks_read, results_write)
                status = 0
            except KeyboardInterrupt:   # Ctrl-C reached the whole process group: the caller reports it
                pass
            except BaseException:   # what a spawned worker's interpreter would print, then its status
                traceback.print_exc()
            finally:
                try:
                    sys.stderr.flush()
                finally:
                    os._exit(status)
        os.close(tasks_read)
        os.close(results_write)
        return _Forked(pid, os.fdopen(tasks_write, "wb"), os.fdopen(results_read, "rb"))

    def _send(self, proc: _Worker, data: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(_LENGTH.pack(len(data)))
            proc.stdin.write(data)
            proc.stdin.flush()
        except OSError as exc:
            raise WorkerError(f"{self.entry}: worker {proc.pid} stopped ({exc})") from None

    def _receive(self, proc: _Worker) -> bytes:
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
    """A spawned pool worker: frames in on stdin, frames out on stdout (`_serve`); it ends with its
    parent, even a SIGKILLed one."""
    if priority == "low":
        lowest_priority()
    end_with_parent(parent)
    out: BinaryIO = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)   # a stray print goes to stderr, never into a frame
    sys.stdout = sys.stderr
    _serve(entry, sys.stdin.buffer, out)


def _forked_worker(entry: str, parent: int, priority: str, tasks_fd: int, results_fd: int) -> None:
    """A forked pool worker: frames in and out on its two pipes (`_serve`); it ends with its parent, as
    a spawned one does."""
    if priority == "low":
        lowest_priority()
    end_with_parent(parent)
    os.dup2(2, 1)   # a stray print goes to stderr, as a spawned worker's, not into the caller's output
    sys.stdout = sys.stderr
    _serve(entry, os.fdopen(tasks_fd, "rb"), os.fdopen(results_fd, "wb"))


def _default_signals() -> None:
    """A forked worker's signal dispositions made a spawned one's: the caller's Python handlers (a
    daemon's shutdown, a CLI's clean-up, run in the worker on its caller's state) back to the default,
    SIGINT to Python's own (KeyboardInterrupt), what the caller ignores still ignored (as across exec),
    and no wake-up fd (the caller's event loop would read the worker's signals as its own)."""
    signal.set_wakeup_fd(-1)
    for number in signal.valid_signals():
        try:
            handler = signal.getsignal(number)
        except ValueError:     # a number this platform lists but cannot name
            continue
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)


def _serve(entry: str, stdin: BinaryIO, out: BinaryIO) -> None:
    """A pool worker's loop: the init frame, then one frame out a task in. A thread reads the tasks
    (the parent's writes never wait on this worker's work) and another writes the results (the next
    task is worked while one is written)."""
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
