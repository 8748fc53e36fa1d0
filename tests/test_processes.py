"""`urchin.processes.Pool`: real spawned and forked workers (tests/pool_entries.py), results in task order,
failures as one `WorkerError`, and no worker outliving its pool or its parent (even a SIGKILLed one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

from tests.pool_entries import in_a_fresh_python
from urchin.processes import Pool, WorkerError


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _each(check: Callable[[Literal["spawn", "fork"]], None], start: Literal["spawn", "fork"]) -> None:
    """A check of a spawned pool here, of a forked one in a fresh interpreter (`in_a_fresh_python`)."""
    if start == "fork":
        in_a_fresh_python(check, start)
    else:
        check(start)


def _in_order(start: Literal["spawn", "fork"]) -> None:
    tasks = [bytes([65 + i % 26]) * (i * 40_000 % 300_000) + str(i).encode() for i in range(40)]
    with Pool("tests.pool_entries:echo", 3, init=b"setup", in_flight=3, start=start) as pool:
        results = list(pool.ordered(iter(tasks)))
        pids = pool.pids
    assert [r.split(b"|", 2)[2] for r in results] == [t[::-1] for t in tasks]
    assert {r.split(b"|", 2)[0] for r in results} == {b"setup"}
    assert {int(r.split(b"|", 2)[1]) for r in results} == set(pids) and len(pids) == 3
    assert not any(_alive(pid) for pid in pids)   # nothing outlives the pool
    assert os.getpid() not in pids


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_results_come_in_task_order_from_every_worker_with_large_frames_both_ways(start: Literal["spawn", "fork"]) \
        -> None:
    _each(_in_order, start)


def _one_failure(start: Literal["spawn", "fork"]) -> None:
    with pytest.raises(WorkerError, match="stopped"), Pool("tests.pool_entries:echo", 2, start=start) as pool:
        pids = pool.pids
        list(pool.ordered([b"a", b"b", b"fail", b"c"]))
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_worker_that_fails_is_one_worker_error_and_the_pool_leaves_nothing(start: Literal["spawn", "fork"]) \
        -> None:
    _each(_one_failure, start)


def _killed_mid_task(start: Literal["spawn", "fork"]) -> None:
    began = time.monotonic()
    with pytest.raises(WorkerError, match="stopped"), \
            Pool("tests.pool_entries:sleepy", 2, start=start) as pool:
        pids = pool.pids
        results = pool.ordered([b"x", b"y", b"z"])
        killer = threading.Timer(0.2, os.kill, (pids[0], signal.SIGKILL))
        killer.start()
        next(results)
    killer.join()
    assert time.monotonic() - began < 10
    assert not any(_alive(pid) for pid in pids)


def test_a_forked_worker_killed_mid_task_is_one_worker_error_within_seconds() -> None:
    """A worker SIGKILLed while it holds a task: the caller waiting on its result gets `WorkerError`
    (its pipe's end closes with it), not a wait for ever; the other worker is ended with the pool."""
    _each(_killed_mid_task, "fork")


def test_fork_is_refused_while_another_thread_runs() -> None:
    """A forked child would inherit the other thread's locks mid-use: `start` refuses, naming why,
    and forks nothing."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    pool = Pool("tests.pool_entries:echo", 2, start="fork")
    try:
        with pytest.raises(WorkerError, match=r"cannot fork a worker here: [1-9]\d* other thread"):
            pool.start()
        assert pool.pids == []
    finally:
        stop.set()
        other.join()


def test_a_forked_worker_runs_none_of_its_parent_s_exit_work() -> None:
    """What the caller had buffered and its exit handlers are written once, by the caller (a forked
    worker ends by `os._exit`), and a worker's stray print goes to stderr, not the caller's output."""
    script = ("import atexit, sys\n"
              "from urchin.processes import Pool\n"
              "atexit.register(print, 'exit handler')\n"
              "sys.stdout.write('buffered before the fork;')\n"
              "with Pool('tests.pool_entries:chatty', 2, start='fork') as pool:\n"
              "    assert list(pool.ordered([b'a', b'b', b'c'])) == [b'a', b'b', b'c']\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "buffered before the fork;exit handler\n"
    assert done.stderr.count("stray print from a worker") == 2


def test_a_worker_that_cannot_start_is_a_worker_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(WorkerError, match="cannot start"):
        Pool("tests.pool_entries:echo", 2).start()


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="workers >= 1"):
        Pool("tests.pool_entries:echo", 0)
    with pytest.raises(ValueError, match="'spawn' or 'fork'"):
        Pool("tests.pool_entries:echo", 1, start="forkserver")  # type: ignore[arg-type]


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_parent_killed_by_sigkill_leaves_no_worker_within_seconds(start: str) -> None:
    """SIGKILL runs no clean-up of the parent's: each worker's own watch ends it (within its poll)."""
    script = ("import sys, time\n"
              "from urchin.processes import Pool\n"
              f"pool = Pool('tests.pool_entries:sleepy', 2, low_priority=True, start={start!r}).__enter__()\n"
              "results = pool.ordered([b'x', b'y', b'z'])\n"
              "print(*pool.pids, flush=True)\n"
              "next(results)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parent.parent)
    try:
        assert parent.stdout is not None
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(map(_alive, workers))
        assert all(os.getpriority(os.PRIO_PROCESS, pid) == 19 for pid in workers)
        time.sleep(0.3)   # the workers hold a task each
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 15   # a SCHED_IDLE worker on a loaded machine runs on a trickle (5 s: once missed)
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [pid for pid in workers if _alive(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"workers left running after their parent's SIGKILL: {alive}"


def _signals_of_a_worker(start: Literal["spawn", "fork"]) -> None:
    """The caller's handlers (as a daemon's or a CLI's) and wake-up fd, then a worker's own; a SIGTERM
    ends the worker by the default action, never by the caller's handler run on the caller's state."""
    import tempfile

    ran = tempfile.NamedTemporaryFile(prefix="urchin-signals-")     # noqa: SIM115 - read at the end

    def callers_handler(number: int, frame: object) -> None:
        os.write(os.open(ran.name, os.O_WRONLY | os.O_APPEND), f"{os.getpid()}\n".encode())

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1):
        signal.signal(number, callers_handler)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    with Pool("tests.pool_entries:dispositions", 1, start=start) as pool:
        answer = next(pool.ordered([b"SIGTERM SIGINT SIGHUP SIGCHLD SIGUSR1 SIGUSR2"])).decode()
        worker = pool._procs[0]
        os.kill(worker.pid, signal.SIGTERM)
        status = worker.wait(timeout=10)
    assert answer == "default int default default default ignore -1", answer
    assert status == -signal.SIGTERM and str(worker.pid) not in Path(ran.name).read_text().split()


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_worker_has_its_own_signal_handlers_not_its_callers(start: Literal["spawn", "fork"]) -> None:
    """A forked worker inherited the caller's signal handlers (and its event loop's wake-up fd): a
    SIGTERM to it ran the caller's shutdown on a copy of the caller's state. It has a spawned worker's."""
    _each(_signals_of_a_worker, start)


def _signal_at_the_fork(start: Literal["spawn", "fork"]) -> None:
    """A SIGTERM that reaches a worker between its fork and its handlers' reset (a `kill` of the process
    group as an import starts its pool: here sent by the child itself, right after the fork)."""
    import tempfile

    ran = tempfile.NamedTemporaryFile(prefix="urchin-signals-")     # noqa: SIM115 - read at the end

    def callers_handler(number: int, frame: object) -> None:
        os.write(os.open(ran.name, os.O_WRONLY | os.O_APPEND), f"{os.getpid()}\n".encode())

    signal.signal(signal.SIGTERM, callers_handler)
    os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGTERM))
    pool = Pool("tests.pool_entries:echo", 1, start=start)
    try:
        with pool:
            list(pool.ordered([b"a"]))
    except WorkerError:
        pass    # the worker ended by the SIGTERM's default action, as a spawned one would
    assert not Path(ran.name).read_text(), "the caller's handler ran in a worker"


def test_a_signal_between_fork_and_reset_does_not_run_the_callers_handler() -> None:
    _each(_signal_at_the_fork, "fork")
