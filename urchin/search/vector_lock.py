"""The writers' lock of one model's vector cache (urchin/search/vectors.py): an exclusive `flock` on
`<cache>/lock` across processes, and a re-entrant lock across this process's threads.

Two processes may write one cache (the daemon's embedder loop and its index process); appends, drops
and repairs hold this lock. A query's inline catch-up does not wait for it (`CacheBusy`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from urchin.errors import EmbedderError
from urchin.fileio import ensure_private_dir

__all__ = ["CacheBusy", "WritersLock"]


class CacheBusy(EmbedderError):
    """Another writer holds the cache's lock (a query does not wait for it; see `WritersLock.hold`)."""


class WritersLock:
    """The lock of the cache folder `path`; construction does no I/O (the folder is made when first held)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = threading.RLock()   # this process's half
        self._fd = -1
        self._depth = 0
        self._owner = 0                    # the thread holding it

    def held_here(self) -> bool:
        """Whether this thread holds it (its files are then its own to follow and repair)."""
        return self._owner == threading.get_ident()

    @contextlib.contextmanager
    def hold(self, wait: bool = True) -> Iterator[None]:
        """Across processes (`flock`) and threads; re-entrant in one thread. `wait=False` raises
        `CacheBusy` instead of waiting for another writer."""
        if not self._writer.acquire(blocking=wait):
            raise CacheBusy(f"vector cache {self.path}: another writer is embedding")
        try:
            if self._depth == 0:
                ensure_private_dir(self.path.parent)     # <root>/vectors too, if it was made loose
                ensure_private_dir(self.path)
                fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise CacheBusy(f"vector cache {self.path}: another writer is embedding") from None
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
                self._owner = threading.get_ident()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = 0
                    os.close(self._fd)     # releases the flock
                    self._fd = -1
        finally:
            self._writer.release()
