"""A token-cosine build in a process of its own, for a process that cannot wait for one (the CLI).

A query in a short-lived process answers from the newest events (`TokenCosineView`'s tail) and
starts `python -P -m urchin.search.build_child INDEX_DIR JOURNAL [HOME]`, detached, at nice 10: it
builds the index from what is saved in INDEX_DIR to the journal's end, saving as it goes, so the
next process loads it (and resumes after a kill). One build per folder at a time: the builder holds
`building()`'s lock, which the daemon's build thread waits for (then resumes from its saves); so not
the lowest priority (SCHED_IDLE), under which a busy machine could starve it, and the daemon with it.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

from urchin.children import python_child
from urchin.config import ensure_private_dir, exclusive_lock

__all__ = ["NICENESS", "building", "busy", "spawn"]

NICENESS = 10

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
