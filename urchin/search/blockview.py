"""The read side of the substring block index: a snapshot's zone maps and trigram bitmaps.

A `BlockSnapshot` is what a query reads under the index's shared lock: it yields the blocks that may hold
a literal, newest first, from the zone maps and the bitmaps (`blockstore.py` has their layout).
The segments' columns are read with `pread` and kept as ints by `Segments`, which outlives views;
only the newest blocks' rows are mapped. Numpy-free (the CLI's cold start).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from array import array
from collections.abc import Iterator
from typing import Any

from urchin.search.blockbuild import FAR, ROW

__all__ = ["BlockSnapshot", "Segments", "release_map"]

_EAGER = 48  # newest blocks checked row by row before one AND over all
_SPARSE = 4  # blocks the AND passes under 1/_SPARSE of the window's rest: only they are visited
_COLUMNS = 2048  # bitmap columns kept as ints between queries (a byte per block each)


class Segments:
    """The index's full segments, read with `pread` from the `columns` file open at `fd`, their
    columns kept as ints between queries and views (a segment does not change once written).

    Never mapped: touching one page of a mapped file maps its neighbours too (fault-around, large
    folios: ~600 KB a touch measured here), so a column read through a map would make much of the
    file resident, which the column-major layout is there to avoid."""

    def __init__(self, fd: int, count: int, per: int, identity: tuple[int, ...], zones: array) -> None:
        self.fd, self.count, self.per, self.identity = fd, count, per, identity
        self.zones = zones   # the segments' blocks' zone records: what their columns were read for
        self.blocks = count * per
        self.ones = int.from_bytes(b"\x01" * self.blocks, "little")
        self._columns: dict[int, int] = {}      # bitmap byte -> that byte of every block in a segment
        self._parts: dict[tuple[int, int], bytes] = {}   # (segment, byte) -> its blocks' bytes

    def column(self, byte: int) -> int:
        column = self._columns.get(byte)
        if column is None:
            if len(self._columns) >= _COLUMNS:
                self._columns.clear()
            fd, per, at = self.fd, self.per, byte * self.per
            column = self._columns[byte] = int.from_bytes(
                b"".join([os.pread(fd, per, k * per * ROW + at) for k in range(self.count)]), "little")
        return column

    def cell(self, block: int, byte: int) -> int:
        """Byte `byte` of one block's bitmap (for the few newest blocks checked one by one)."""
        per = self.per
        segment, i = divmod(block, per)
        part = self._parts.get((segment, byte))
        if part is None:
            if len(self._parts) >= _COLUMNS:
                self._parts.clear()
            part = self._parts[segment, byte] = os.pread(self.fd, per, (segment * ROW + byte) * per)
        return part[i]

    def close(self) -> None:
        os.close(self.fd)

class BlockSnapshot:
    """A consistent snapshot of the index, read under a shared lock: zone arrays, the full segments'
    columns, and the bitmap rows of the blocks after them (`bits`, row-major)."""

    def __init__(self, n: int, end: int, zones: array, bits: Any, segments: Segments | None = None) -> None:
        self.n = n
        self.end = end
        self.starts = zones[0::5]
        self.ends = zones[1::5]
        self.mins = zones[2::5]
        self.maxs = zones[3::5]
        self.stamps = zones[4::5]  # lines << 32 | tail CRC: with the range, names a block's bytes
        self._bits = bits
        self._segments = segments
        self._first = segments.blocks if segments is not None else 0   # the first block kept as a row
        if n:
            self.ends[n - 1] = min(self.ends[n - 1], end)
        self._order: list[int] | None = None  # blocks by max timestamp, newest first (built on first use)
        self._columns: dict[int, int] = {}  # bitmap byte -> that byte of every row, as one int

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
        bits, first, cell = self._bits, self._first, self._segments.cell if self._segments is not None else None
        eager = order[:min(lo, _EAGER)]
        for b in eager:
            if mins[b] > until:
                continue
            if b >= first:
                base = (b - first) * ROW
                if all(bits[base + byte] & mask == mask for byte, mask in masks):
                    yield b
            elif cell is not None and all(cell(b, byte) & mask == mask for byte, mask in masks):
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
        """AND every block's bitmap at once, a byte per block: the segments' columns, then the rows'
        (byte i of each row is `bits[i::ROW]`, one C call)."""
        segments, first = self._segments, self._first
        found = _and(segments.column, segments.ones, masks).to_bytes(first, "little") if segments else b""
        rows = self.n - first
        if rows:
            found += _and(self._row_column, int.from_bytes(b"\x01" * rows, "little"), masks).to_bytes(rows, "little")
        return found

    def _row_column(self, byte: int) -> int:
        columns = self._columns
        column = columns.get(byte)
        if column is None:
            if len(columns) >= _COLUMNS:
                columns.clear()
            column = columns[byte] = int.from_bytes(self._bits[byte:(self.n - self._first) * ROW:ROW], "little")
        return column


def _and(column_of: Any, ones: int, masks: list[tuple[int, int]]) -> int:
    acc = ones
    for byte, mask in masks:
        column = column_of(byte)
        for bit in range(8):
            if mask >> bit & 1:
                acc &= column >> bit
        acc &= ones
        if not acc:
            break
    return acc


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
