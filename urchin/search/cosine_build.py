"""A token-cosine build in a process of its own, for a process that cannot wait for one.

A query in a short-lived process (the CLI) answers from the newest events (`TokenCosineView`'s tail)
and starts `python -P -m urchin.search.build_child INDEX_DIR JOURNAL [HOME]`, detached, at nice 10: it
builds the index from what is saved in INDEX_DIR to the journal's end, saving as it goes, so the
next process loads it (and resumes after a kill). One build per folder at a time: the builder holds
`building()`'s lock, which a daemon's build waits for (then resumes from its saves); so not the lowest
priority (SCHED_IDLE), under which a busy machine could starve it, and the daemon's build with it.
The daemon's own build (`build_beside`) is a child of its own at the lowest priority that ends with
it: the build's working set (~270 bytes an event) is then never the daemon's, which loads the result
mapped, as a restart would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from urchin.config import ensure_private_dir, exclusive_lock
from urchin.processes import lowest_priority, python_child

__all__ = ["NICENESS", "building", "busy", "spawn", "build_beside", "BuildFailed"]

NICENESS = 10
_BUSY_POLL_S = 0.5     # how often the daemon looks whether another process's build of its folder ended
_ROUNDS = 8            # children started in a row while each ends short of the journal's end (it grew)


class BuildFailed(RuntimeError):
    """The daemon's build child failed (its exit status, or its last line of stderr)."""

log = logging.getLogger(__name__)


def _lock_path(index_dir: Path) -> Path:
    return index_dir.parent / f".{index_dir.name}.build.lock"


@contextlib.contextmanager
def building(index_dir: Path | None, wait: bool = True) -> Iterator[bool]:
    """Hold the folder's build lock (waiting for another builder when `wait`); yields whether it is held."""
    if index_dir is None:
        yield True
        return
    ensure_private_dir(index_dir.parent)
    with exclusive_lock(_lock_path(index_dir), wait) as held:
        yield held


def busy(index_dir: Path) -> bool:
    """Whether a build of this folder runs now (in a child, or a daemon's thread)."""
    with building(index_dir, wait=False) as held:
        return not held


def spawn(index_dir: Path, journal: Path, home: Path | None) -> bool:
    """Start a detached builder for `index_dir` unless one runs; False when none was started."""
    if busy(index_dir):
        return False
    command, env = python_child("urchin.search.build_child")
    args = [str(index_dir), str(journal), *([str(home)] if home is not None else [])]
    try:
        subprocess.Popen([*command, *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)   # outlives this process
    except OSError as exc:
        log.warning("token-cosine: cannot start a background build (%s)", exc)
        return False
    return True


def build_beside(index_dir: Path, journal: Path, home: Path | None, done: Callable[[], bool]) -> None:
    """The daemon's build (called on a thread of its own, which waits here): a child builds and saves
    the index from what is saved in `index_dir`, `python -P -m urchin.search.build_child INDEX_DIR
    JOURNAL HOME --parent PID`, at the lowest priority, ending with this process (a kill -9 of either
    leaves saves the next build resumes from). Waits first for another process's build of the folder
    (a CLI's child) and returns once `done()` says the saves reach the journal's end (or near it: the
    caller reads the rest); raises BuildFailed when a child fails."""
    command, env = python_child("urchin.search.build_child")
    args = [str(index_dir), str(journal), *([str(home)] if home is not None else []), "--parent", str(os.getpid())]
    for _ in range(_ROUNDS):
        while busy(index_dir):
            time.sleep(_BUSY_POLL_S)
        if done():
            return
        try:
            child = subprocess.Popen([*command, *args], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     process_group=0)     # a terminal's Ctrl-C is the daemon's to handle
        except OSError as exc:
            raise BuildFailed(f"cannot start the build child ({exc})") from exc
        lowest_priority(child.pid)       # its start-up too; the child sets it again for itself
        _, err = child.communicate()
        if child.returncode != 0:
            last = err.decode("utf-8", "replace").strip().splitlines()[-1:]
            raise BuildFailed(last[0] if last else f"the build child's exit status {child.returncode}")
    if not done():
        raise BuildFailed(f"{_ROUNDS} build children in a row ended short of the journal's end")
