"""Urchin's own child processes (`python -P -m urchin...`): how to start one, and its lowest priority.

The daemon runs its heavy background work in children: the PostgreSQL feed (`urchin.daemon.indexer`),
the first token-cosine build after an import (`urchin.search.build_child --parent`) and the learned
associations' build (`urchin.search.learn`), after it. They run at the lowest CPU priority and end on
their own when their parent is gone. Every holder of the embedded PostgreSQL has a watchdog
child (`urchin.index.pgwatch`) that waits for its parent's death the same way, then stops the server.
"""

from __future__ import annotations

import os
import site
import sys
import threading
import time
from pathlib import Path

__all__ = ["NICENESS", "PARENT_POLL_S", "python_child", "lowest_priority", "wait_for_parent", "end_with_parent"]

NICENESS = 19
PARENT_POLL_S = 0.5


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
