"""`urchin.processes.Pool`: real spawned workers (tests/pool_entries.py), results in task order, failures
as one `WorkerError`, and no worker outliving its pool or its parent (even a SIGKILLed one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from urchin.processes import Pool, WorkerError


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_results_come_in_task_order_from_every_worker_with_large_frames_both_ways() -> None:
    tasks = [bytes([65 + i % 26]) * (i * 40_000 % 300_000) + str(i).encode() for i in range(40)]
    with Pool("tests.pool_entries:echo", 3, init=b"setup", in_flight=3) as pool:
        results = list(pool.ordered(iter(tasks)))
        pids = pool.pids
    assert [r.split(b"|", 2)[2] for r in results] == [t[::-1] for t in tasks]
    assert {r.split(b"|", 2)[0] for r in results} == {b"setup"}
    assert {int(r.split(b"|", 2)[1]) for r in results} == set(pids) and len(pids) == 3
    assert not any(_alive(pid) for pid in pids)   # nothing outlives the pool


def test_a_worker_that_fails_is_one_worker_error_and_the_pool_leaves_nothing() -> None:
    with pytest.raises(WorkerError, match="stopped"), Pool("tests.pool_entries:echo", 2) as pool:
        pids = pool.pids
        list(pool.ordered([b"a", b"b", b"fail", b"c"]))
    assert not any(_alive(pid) for pid in pids)


def test_a_worker_that_cannot_start_is_a_worker_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(WorkerError, match="cannot start"):
        Pool("tests.pool_entries:echo", 2).start()


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="workers >= 1"):
        Pool("tests.pool_entries:echo", 0)


def test_a_parent_killed_by_sigkill_leaves_no_worker_within_seconds() -> None:
    """SIGKILL runs no clean-up of the parent's: each worker's own watch ends it (within its poll)."""
    script = ("import sys, time\n"
              "from urchin.processes import Pool\n"
              "pool = Pool('tests.pool_entries:sleepy', 2, low_priority=True).__enter__()\n"
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
    deadline = time.monotonic() + 5
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [pid for pid in workers if _alive(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"workers left running after their parent's SIGKILL: {alive}"
