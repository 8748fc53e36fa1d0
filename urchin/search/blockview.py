"""The read side of the substring block index: a snapshot's zone maps and trigram bitmaps.

A `View` is what a query reads under the index's shared lock: it yields the blocks that may hold
a literal, newest first, from the zone maps and the bitmaps. Numpy-free (the CLI's cold start).
"""

from __future__ import annotations

import contextlib
import itertools
from array import array
from collections.abc import Iterator
from typing import Any

from urchin.search.blockbuild import FAR, ROW

__all__ = ["View", "release_map"]

_EAGER = 48  # newest blocks checked row by row before one AND over all
_SPARSE = 4  # blocks the AND passes under 1/_SPARSE of the window's rest: only they are visited
_COLUMNS = 2048  # bitmap columns a view keeps as ints between queries (n bytes each)

class View:
    """A consistent snapshot of the index: zone arrays and the bitmap rows, read under a shared lock."""

    def __init__(self, n: int, end: int, zones: array, bits: Any) -> None:
        self.n = n
        self.end = end
        self.starts = zones[0::5]
        self.ends = zones[1::5]
        self.mins = zones[2::5]
        self.maxs = zones[3::5]
        self.stamps = zones[4::5]  # lines << 32 | tail CRC: with the range, names a block's bytes
        self._bits = bits
        if n:
            self.ends[n - 1] = min(self.ends[n - 1], end)
        self._order: list[int] | None = None  # blocks by max timestamp, newest first (built on first use)
        self._columns: dict[int, int] = {}  # bitmap byte -> that byte of every block, as one int

    def _newest_first(self) -> list[int]:
        if self._order is None:
            self._order = sorted(range(self.n), key=self.maxs.__getitem__, reverse=True)
        return self._order

    def block_range(self, block: int) -> tuple[int, int]:
        return self.starts[block], self.ends[block]

    def block_key(self, block: int) -> tuple[int, int, int]:
        """(start, end, lines and tail CRC): equal keys in one journal file mean equal bytes."""
        return self.starts[block], self.ends[block], self.stamps[block]

    def candidates(self, hashes: set[int], since_ms: int, until_ms: int | None) -> Iterator[int]:
        """Blocks that may hold a match in the window, newest (by max timestamp) first, lazily.

        The newest blocks are checked one bitmap row at a time, so a common term stops after a
        few; past `_EAGER` blocks, one AND over every block's bitmap at once finds the rest; when
        it passes few, only they are visited (a rare or absent term costs no walk of the window).
        The window's blocks are filtered by `until` as they are visited, not all first.
        Zone maps are compared with 1 ms of slack: `Event.ts_ms` rounds through a float.
        """
        n = self.n
        if not n:
            return
        since = since_ms - 1
        until = until_ms + 1 if until_ms is not None else FAR
        mins, maxs = self.mins, self.maxs
        # the view's blocks newest-max first (sorted once per view): the window is a prefix by max
        order = self._newest_first()
        lo, hi = 0, n
        while lo < hi:  # the first block whose max is older than the window
            mid = (lo + hi) // 2
            if maxs[order[mid]] >= since:
                lo = mid + 1
            else:
                hi = mid
        if not hashes or self._bits is None:
            yield from (b for b in itertools.islice(order, lo) if mins[b] <= until)
            return
        masks = _byte_masks(hashes)
        bits = self._bits
        eager = order[:min(lo, _EAGER)]
        for b in eager:
            base = b * ROW
            if mins[b] <= until and all(bits[base + byte] & mask == mask for byte, mask in masks):
                yield b
        if lo > _EAGER:
            found = self._bitmap_and(masks)
            if found.count(1) * _SPARSE >= lo - _EAGER:   # many pass: the rest of the window, in order
                rest = itertools.islice(order, _EAGER, lo)
                yield from (b for b in rest if found[b]) if until == FAR else \
                    (b for b in rest if found[b] and mins[b] <= until)
                return
            # few pass (a rare or absent term): only they are looked at, put in the window's order
            # (max newest first, then block), not every block of the window
            seen, later = set(eager), []
            b = found.find(1)
            while b >= 0:
                if maxs[b] >= since and mins[b] <= until and b not in seen:
                    later.append((-maxs[b], b))
                b = found.find(1, b + 1)
            later.sort()
            yield from (b for _, b in later)

    def _bitmap_and(self, masks: list[tuple[int, int]]) -> bytes:
        """AND every block's bitmap at once: byte i of each row is `bits[i::ROW]` (one C call)."""
        n = self.n
        ones = int.from_bytes(b"\x01" * n, "little")
        acc = ones
        columns = self._columns
        if len(columns) > _COLUMNS:
            columns.clear()
        for byte, mask in masks:
            column = columns.get(byte)
            if column is None:
                column = columns[byte] = int.from_bytes(self._bits[byte:n * ROW:ROW], "little")
            for bit in range(8):
                if mask >> bit & 1:
                    acc &= column >> bit
            acc &= ones
            if not acc:
                break
        return acc.to_bytes(n, "little")


def _byte_masks(hashes: set[int]) -> list[tuple[int, int]]:
    by_byte: dict[int, int] = {}
    for h in hashes:
        by_byte[h >> 3] = by_byte.get(h >> 3, 0) | 1 << (h & 7)
    return sorted(by_byte.items())


def release_map(mapping: Any) -> None:
    """MADV_DONTNEED on a read-only map: its pages leave the process's resident set, not the page
    cache. Never on a writable private map (it would drop what was written)."""
    import mmap

    with contextlib.suppress(ValueError, OSError, AttributeError):   # closed, or not Linux
        mapping.madvise(mmap.MADV_DONTNEED)
