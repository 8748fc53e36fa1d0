"""One read-only descriptor on the journal file a view follows, kept between queries: a query reads its
hits' lines with `pread` on it instead of opening the journal once a hit (~20 opens a ranked query).

A view keeps the handle of the file it indexed (its device and inode): a replaced journal (a forget's
compaction, a `redact --rewrite`, a restore) is another file, so the view's next catch-up, which starts
over, opens a new handle. A query still reading the old file's hits keeps the old handle alive; it is
closed when the last of them drops it, so a descriptor is never closed under a reader (nor its number
reused by another file meanwhile).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from urchin.fileio import line_at
from urchin.journal import HARD_LINE_LIMIT

__all__ = ["JournalHandle"]


class JournalHandle:
    """An open journal file and its (device, inode); `line_at` reads a line as `Journal.read_line_at`."""

    __slots__ = ("fd", "identity")

    def __init__(self, fd: int, identity: tuple[int, int]) -> None:
        self.fd = fd
        self.identity = identity

    @classmethod
    def open(cls, path: Path) -> JournalHandle | None:
        """The journal file at `path` now, opened read-only (None: there is none, or it cannot be read)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        return cls(fd, (info.st_dev, info.st_ino))

    def line_at(self, offset: int) -> bytes | None:
        """The complete line at `offset` without its newline (None: none there, or an error)."""
        try:
            return line_at(self.fd, offset, HARD_LINE_LIMIT)
        except OSError:
            return None

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # closed when no view and no query holds it any more (see the module's docstring); `os.close`
        # bound at definition, as the interpreter's exit may have cleared module globals by then
        try:
            _close(self.fd)
        except OSError:
            pass
