"""The newest events of a journal in a token-cosine index of their own, answered from while the full
index builds (`TokenCosineView`): a query never waits for a build, and a user mostly asks about
recent work. Built in well under a second (`TAIL_BYTES` of the journal's end), then kept current.
The first tail after a start holds only `FIRST_TAIL_BYTES` (what a first query can wait for); the
build grows it to `TAIL_BYTES` before it starts.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from urchin.journal import Journal
from urchin.search.cosine import TokenCosineIndex

__all__ = ["FIRST_TAIL_BYTES", "TAIL_BYTES", "Tail", "identity_of"]

# The newest bytes of the journal a tail holds (~10,000 events of agent-like text, ~0.5 s of CPU to
# index); also the largest backlog a query indexes itself before it answers.
TAIL_BYTES = 4 << 20
# The first tail after a start: the newest ~2,300 events, ~0.07 s of CPU at 3M events (a 4 MB tail was
# ~0.28 s of the first /semantic's ~0.5 s of work), grown to TAIL_BYTES in the background after.
FIRST_TAIL_BYTES = 1 << 20
_READ_BYTES = 4 << 20


def identity_of(journal: Journal) -> tuple[int, int] | None:
    """(device, inode) of the journal file now; None when there is none."""
    try:
        info = os.stat(journal.path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


@dataclass(slots=True)
class Tail:
    """Rows for the journal's lines from `start` (a line start) to `next_offset`, in journal order."""

    start: int
    next_offset: int
    identity: tuple[int, int] | None
    size: int = 0       # the bytes of the journal's end it was made to hold (`newest`)
    index: TokenCosineIndex = field(default_factory=TokenCosineIndex)
    offsets: array = field(default_factory=lambda: array("q"))

    @classmethod
    def newest(cls, journal: Journal, size: int, *, step: int = _READ_BYTES,
               between: Callable[[], object] | None = None) -> Tail:
        """A tail over the lines that start in the last `size` bytes of the journal (read `step` bytes at
        a time, calling `between` before each read)."""
        tail = cls(0, 0, identity_of(journal), size)
        end = journal.size()
        start = max(0, end - size)
        if start:
            with journal.path.open("rb") as handle:   # the first line that starts at or after `start`
                handle.seek(start - 1)
                handle.readline()
                start = handle.tell()
        tail.start = tail.next_offset = start
        tail.catch_up(journal, step=step, between=between)
        return tail

    def stale(self, journal: Journal, size: int) -> bool:
        """Whether to build it again: another file, a shorter one, or more than `size` bytes behind."""
        end = journal.size()
        return identity_of(journal) != self.identity or end < self.next_offset or end - self.next_offset > size

    def catch_up(self, journal: Journal, *, step: int = _READ_BYTES,
                 between: Callable[[], object] | None = None) -> int:
        """Index the complete lines appended since; returns how many events were added."""
        added = 0
        while True:
            if between is not None:
                between()
            result = journal.read_from(self.next_offset, step)
            if not result.lines:
                self.next_offset = result.next_offset
                return added
            batch = self.index.extract_lines(result.lines, journal.proof)
            self.index.add_batch(batch)
            self.offsets.frombytes(batch.offsets.tobytes())
            added += len(batch)
            self.next_offset = result.next_offset

    def __len__(self) -> int:
        return len(self.index)

    def holds(self, size: int) -> bool:
        """Whether it was made to hold `size` bytes of the journal's end (or holds the whole journal)."""
        return self.start == 0 or self.size >= size
