"""URCHIN_TEST_CPU=1: per test module, the CPU (user+sys) of the worker and every process it started
(daemons, CLI runs, PostgreSQL, pip), and the wall time; a table sorted by CPU at the end.

The suite is CPU-bound on two cores, so CPU, not wall time, says which module to make cheaper (and
stays readable on a shared machine). A module's share is the growth, from its first test to the next
module's, of: the worker's own and reaped children's time, plus the cumulative time of every live
descendant (so a daemon or server alive across modules splits its time between them). The worker is a
child subreaper: a daemonized PostgreSQL or a watchdog whose parent exits is reparented to it, and is
reaped at the next module boundary, so its time is counted too. The shared embedder runs under the
controller and is in no module (scripts/cputime.py measures the whole run, it included).
URCHIN_TEST_CPU_OUT=FILE writes the module table as JSON; URCHIN_TEST_CPU_TESTS=FILE each test's
[CPU s, wall s, start (monotonic), xdist worker], its fixtures' set-up and teardown included.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_PR_SET_CHILD_SUBREAPER = 36


def _descendants(root: int) -> list[int]:
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:    # a process that exits meanwhile takes its /proc folder with it, glob included
            tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(k) for k in task.read_text().split()]
            except OSError:
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def _proc_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of a live process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(f) for f in fields[11:15]) / _TICK


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _reap_orphans() -> None:
    """Reap the zombie children no Popen object owns (orphans adopted as subreaper)."""
    zombies = [pid for pid in _descendants(os.getpid()) if _is_zombie(pid)]
    if not zombies:
        return
    owned = {p.pid for p in gc.get_objects() if isinstance(p, subprocess.Popen) and p.returncode is None}
    for pid in zombies:
        if pid not in owned:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _total() -> float:
    _reap_orphans()
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = sum(_proc_cpu(pid) for pid in _descendants(os.getpid()) if not _is_zombie(pid))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + live


class CpuMeter:
    def __init__(self) -> None:
        self.rows: dict[str, list[float]] = {}   # module -> [cpu s, wall s, tests]
        self.tests: dict[str, list[Any]] = {}  # test -> [cpu s, wall s, start, worker], set-up included
        self.module: str | None = None
        self.mark = (0.0, 0.0)
        self.started = (0.0, 0.0)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass

    def _close(self) -> None:
        now = (_total(), time.monotonic())
        if self.module is not None:
            row = self.rows.setdefault(self.module, [0.0, 0.0, 0])
            row[0] += now[0] - self.mark[0]
            row[1] += now[1] - self.mark[1]
        self.mark = now

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        module = item.nodeid.split("::", 1)[0]
        if module != self.module:
            self._close()
            if self.module is None:
                self.started = self.mark
            self.module = module
        self.rows.setdefault(module, [0.0, 0.0, 0])[2] += 1
        before = (_total(), time.monotonic())
        yield
        self.tests[item.nodeid] = [_total() - before[0], time.monotonic() - before[1], before[1],
                                   os.environ.get("PYTEST_XDIST_WORKER", "")]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._close()
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput["urchin_cpu"] = json.dumps(self.rows)
            workeroutput["urchin_cpu_tests"] = json.dumps(self.tests)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        rows = json.loads(getattr(node, "workeroutput", {}).get("urchin_cpu", "{}"))
        for module, (cpu, wall, tests) in rows.items():
            row = self.rows.setdefault(module, [0.0, 0.0, 0])
            row[0] += cpu
            row[1] += wall
            row[2] += tests
        self.tests.update(json.loads(getattr(node, "workeroutput", {}).get("urchin_cpu_tests", "{}")))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        write = terminalreporter.write_line
        write("")
        write(f"{'CPU s':>8} {'wall s':>8} {'tests':>6}  module   (URCHIN_TEST_CPU: worker + its processes)")
        for module, (cpu, wall, tests) in sorted(self.rows.items(), key=lambda kv: -kv[1][0]):
            write(f"{cpu:8.1f} {wall:8.1f} {int(tests):6d}  {module}")
        total = sum(r[0] for r in self.rows.values())
        write(f"{total:8.1f} {'':8} {sum(int(r[2]) for r in self.rows.values()):6d}  all modules")
        out = os.environ.get("URCHIN_TEST_CPU_OUT")
        if out:
            Path(out).write_text(json.dumps(self.rows, indent=1, sort_keys=True))
        out = os.environ.get("URCHIN_TEST_CPU_TESTS")   # each test's CPU and wall, its set-up included
        if out:
            Path(out).write_text(json.dumps(self.tests, indent=1, sort_keys=True))
