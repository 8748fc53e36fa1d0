"""A derived on-disk view of the journal for substring search: zone maps and trigram bitmaps.

The journal is cut into blocks of complete lines (~64 KiB). Per block the view keeps its byte
range, the min/max event timestamp (zone map) and a bitmap of hashed trigrams of its events'
casefolded content. It lives in `<journal>.sidx/`, is caught up from the last indexed offset
under an exclusive `flock` (other processes append at any time), never indexes a partial last
line, and rebuilds itself from the first damaged block when missing, corrupt or when the journal
shrank. Queries read it under a shared lock. The query path is numpy-free (cold-start cost);
only bulk catch-up imports numpy.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from urchin.fileio import ensure_private_dir
from urchin.journal import Journal
from urchin.processes import Pool, WorkerError
from urchin.search.blockbuild import (
    BITS_LOG2,
    BLOCK_TARGET,
    FAR,
    ROW,
    Block,
    bitmap_py,
    bitmaps_numpy,
    query_hashes,
    scan_lines,
    tail_crc,
    unframe,
    zone_record,
)
from urchin.search.blockbuild import ZONE as _ZONE

__all__ = ["BlockIndex", "CatchUp", "View", "query_hashes", "BLOCK_TARGET", "BITS_LOG2"]

_MAGIC = b"URSIDX01"
_HEADER = struct.Struct("<8sIIQQI")  # magic, bits_log2, block_target, n_blocks, indexed_end, head_crc
_HEADER_SIZE = 64
_HEAD = 4096
_READ = 16 << 20
_NUMPY_FROM = 1 << 20  # below this many new bytes, hashing in pure Python beats importing numpy
_EAGER = 48  # newest blocks checked row by row before one AND over all
_SPARSE = 4  # blocks the AND passes under 1/_SPARSE of the window's rest: only they are visited
_COLUMNS = 2048  # bitmap columns a view keeps as ints between queries (n bytes each)
_PARALLEL_FROM = 64 << 20  # a build this big is shared out to worker processes (one per core)
_TASK_BLOCKS = 128


class CatchUp:
    """What one catch-up did: bytes, blocks and events indexed, whether it rebuilt, how long it took."""

    __slots__ = ("bytes", "blocks", "events", "rebuilt", "seconds")

    def __init__(self, bytes: int, blocks: int, events: int, rebuilt: bool, seconds: float) -> None:
        self.bytes, self.blocks, self.events, self.rebuilt, self.seconds = bytes, blocks, events, rebuilt, seconds

    def __repr__(self) -> str:
        return (f"CatchUp(bytes={self.bytes}, blocks={self.blocks}, events={self.events}, rebuilt={self.rebuilt}, "
                f"seconds={self.seconds:.3f})")

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


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


class BlockIndex:
    """The `<journal>.sidx/` view of one journal. Construction does no I/O; one instance per process."""

    def __init__(self, journal: Journal, directory: Path | None = None) -> None:
        self.journal = journal
        self.dir = Path(directory) if directory else journal.path.with_name(journal.path.name + ".sidx")
        self.zones_path = self.dir / "zones"
        self.bits_path = self.dir / "bits"
        self.lock_path = self.dir / "lock"
        self._mutex = threading.Lock()  # flock does not exclude threads sharing one descriptor
        self._lock_fd: int | None = None
        self._cached: tuple[int, int, int] | None = None
        self._view: View | None = None
        self._bits_map: Any = None
        self._used: float | None = None   # when a query last read the bits map (None: released since)
        self._ts_cache: dict[str, int] = {}
        self.parallel_blocks = 0  # blocks built by worker processes so far (observability, tests)

    # ---- public ---------------------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator[View]:
        """Catch up with the journal, then yield a view held under a shared lock."""
        with self._mutex:
            fd = self._lock()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                self._catch_up_locked(None)
                fcntl.flock(fd, fcntl.LOCK_SH)  # writers wait for this query; readers do not
                self._used = time.monotonic()
                yield self._load_view()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def catch_up(self, on_progress: Callable[[int], None] | None = None) -> CatchUp:
        """Index what the journal gained since the last catch-up (all of it the first time)."""
        with self._mutex:
            fd = self._lock()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                return self._catch_up_locked(on_progress)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    @contextmanager
    def held_before(self, offset: int) -> Iterator[None]:
        """Drop every block reaching past `offset` and hold the index's lock until the block exits.

        Compaction calls this just before it renames a rewritten journal into place: the bytes
        before `offset` are identical in both files, so what is kept stays valid, and no catch-up
        can index the old file's tail while the lock is held.
        """
        with self._mutex:
            fd = self._lock()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                self._truncate_past(offset)
                yield
            finally:
                self._cached = None
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _truncate_past(self, offset: int) -> None:
        if not self.zones_path.exists():
            return
        zfd = os.open(self.zones_path, os.O_RDWR, 0o600)
        bfd = os.open(self.bits_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            raw = os.pread(zfd, _HEADER.size, 0)
            n = _HEADER.unpack(raw)[3] if len(raw) == _HEADER.size and raw[:8] == _MAGIC else 0
            keep = 0
            while keep < n:
                end = _ZONE.unpack(os.pread(zfd, _ZONE.size, _HEADER_SIZE + keep * _ZONE.size))[1]
                if end > offset:
                    break
                keep += 1
            new_end = _ZONE.unpack(os.pread(zfd, _ZONE.size, _HEADER_SIZE + (keep - 1) * _ZONE.size))[1] if keep else 0
            self._truncate(zfd, bfd, keep)
            with self.journal.path.open("rb") as jf:
                self._write_header(zfd, keep, new_end, jf.fileno())
            os.fdatasync(zfd)
        finally:
            os.close(zfd)
            os.close(bfd)

    def state(self) -> dict[str, Any]:
        """For `urchin status`: where the index stands against the journal, without catching up."""
        try:
            raw = self.zones_path.read_bytes()[:_HEADER.size]
            size = sum(p.stat().st_size for p in (self.zones_path, self.bits_path))
        except OSError:
            raw, size = b"", 0
        valid = len(raw) == _HEADER.size and raw[:8] == _MAGIC
        blocks, end = _HEADER.unpack(raw)[3:5] if valid else (0, 0)
        return {"path": str(self.dir), "blocks": blocks, "indexedBytes": end,
                "lagBytes": max(0, self.journal.size() - end), "sizeBytes": size}

    def close(self) -> None:
        with self._mutex:
            if self._bits_map is not None:
                self._bits_map.close()
                self._bits_map = None
            self._view = None
            self._cached = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # ---- catch-up -------------------------------------------------------------------------
    def _lock(self) -> int:
        if self._lock_fd is None:
            ensure_private_dir(self.dir)
            self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._lock_fd

    def _catch_up_locked(self, on_progress: Callable[[int], None] | None) -> CatchUp:
        started = time.perf_counter()
        zfd = os.open(self.zones_path, os.O_RDWR | os.O_CREAT, 0o600)
        bfd = os.open(self.bits_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            with self.journal.path.open("rb") as jf:
                jfd = jf.fileno()
                size = os.fstat(jfd).st_size
                n, end, rebuilt = self._validate(zfd, bfd, jfd, size)
                if end >= size:
                    return CatchUp(0, 0, 0, rebuilt, time.perf_counter() - started)
                n2, end2, events = self._index_range(zfd, bfd, jfd, n, end, size, on_progress)
                if end2 == end:  # only a partial last line so far
                    return CatchUp(0, 0, 0, rebuilt, time.perf_counter() - started)
                os.fdatasync(bfd)  # the header is the commit point: data first
                os.fdatasync(zfd)
                self._write_header(zfd, n2, end2, jfd)
                return CatchUp(end2 - end, n2 - n, events, rebuilt, time.perf_counter() - started)
        except FileNotFoundError:
            return CatchUp(0, 0, 0, False, time.perf_counter() - started)
        finally:
            os.close(zfd)
            os.close(bfd)

    def _validate(self, zfd: int, bfd: int, jfd: int, size: int) -> tuple[int, int, bool]:
        """Blocks and offset still valid for this journal: keep what checks, drop the rest."""
        raw = os.pread(zfd, _HEADER.size, 0)
        ok = len(raw) == _HEADER.size
        if ok:
            magic, bits_log2, target, n, end, head_crc = _HEADER.unpack(raw)
            ok = (magic == _MAGIC and bits_log2 == BITS_LOG2 and target == BLOCK_TARGET
                  and os.fstat(zfd).st_size >= _HEADER_SIZE + n * _ZONE.size
                  and os.fstat(bfd).st_size >= n * ROW and (n == 0) == (end == 0))
            ok = ok and head_crc == zlib.crc32(os.pread(jfd, min(_HEAD, end), 0))
        if not ok:
            self._truncate(zfd, bfd, 0)
            self._write_header(zfd, 0, 0, jfd)
            return 0, 0, True
        keep = n
        while keep:
            record = os.pread(zfd, _ZONE.size, _HEADER_SIZE + (keep - 1) * _ZONE.size)
            start, block_end, _, _, packed = _ZONE.unpack(record)
            block_end = min(block_end, end)
            if block_end <= size and tail_crc(jfd, start, block_end) == packed & 0xFFFFFFFF:
                break
            keep -= 1  # past the journal's end, or rewritten: index again from this block
        if keep == n and end <= size:
            return n, end, False
        new_end = 0
        if keep:
            new_end = min(_ZONE.unpack(os.pread(zfd, _ZONE.size, _HEADER_SIZE + (keep - 1) * _ZONE.size))[1], end)
        self._truncate(zfd, bfd, keep)
        self._write_header(zfd, keep, new_end, jfd)
        return keep, new_end, True

    def _truncate(self, zfd: int, bfd: int, n: int) -> None:
        os.ftruncate(zfd, _HEADER_SIZE + n * _ZONE.size)
        os.ftruncate(bfd, n * ROW)
        self._cached = None

    def _write_header(self, zfd: int, n: int, end: int, jfd: int) -> None:
        head_crc = zlib.crc32(os.pread(jfd, min(_HEAD, end), 0))
        header = _HEADER.pack(_MAGIC, BITS_LOG2, BLOCK_TARGET, n, end, head_crc)
        os.pwrite(zfd, header.ljust(_HEADER_SIZE, b"\0"), 0)

    def _index_range(self, zfd: int, bfd: int, jfd: int, n: int, end: int, size: int,
                     on_progress: Callable[[int], None] | None) -> tuple[int, int, int]:
        """Index complete lines in [end, size): extend the open last block, then add new ones."""
        use_numpy = size - end >= _NUMPY_FROM
        block: Block
        if n:
            start, _, lo, hi, packed = _ZONE.unpack(os.pread(zfd, _ZONE.size, _HEADER_SIZE + (n - 1) * _ZONE.size))
            if end - start < BLOCK_TARGET:
                n -= 1  # reopen the last block: its bitmap only gains bits
                block = Block(start, end, lo, hi, packed >> 32, reopened=True)
            else:
                block = Block(end, end)
        else:
            block = Block(end, end)
        done: list[Block] = []
        events = 0
        offset = end
        if not block.reopened and size - end >= _PARALLEL_FROM and (os.cpu_count() or 1) > 1:
            n, offset, events = self._build_parallel(zfd, bfd, jfd, n, end, size, on_progress)
            block = Block(offset, offset)
        while offset < size:
            data = os.pread(jfd, min(_READ, size - offset), offset)
            cut = data.rfind(b"\n")
            if cut < 0:
                if offset + len(data) >= size:
                    break  # only a partial last line is left: never index it
                data = os.pread(jfd, size - offset, offset)
                cut = data.rfind(b"\n")
                if cut < 0:
                    break
            pos = 0
            while pos <= cut:
                # cut blocks with one find per block, not per line
                stop = data.find(b"\n", pos + BLOCK_TARGET - (offset + pos - block.start) - 1)
                full = 0 <= stop <= cut
                if not full:
                    stop = cut
                events += scan_lines(data[pos:stop].split(b"\n"), block, self._ts_cache)
                pos = stop + 1
                block.end = offset + pos
                if full:
                    done.append(block)
                    block = Block(block.end, block.end)
            offset += cut + 1
            if len(done) >= 256:
                n = self._flush(zfd, bfd, jfd, n, done, use_numpy)
                done = []
            if on_progress:
                on_progress(cut + 1)
        if offset == end:
            return n + (1 if block.reopened else 0), end, 0
        if block.end > block.start:
            done.append(block)
        n = self._flush(zfd, bfd, jfd, n, done, use_numpy)
        return n, offset, events

    def _build_parallel(self, zfd: int, bfd: int, jfd: int, n: int, end: int, size: int,
                        on_progress: Callable[[int], None] | None) -> tuple[int, int, int]:
        """Whole blocks from `end` on, built by one worker process per core; the caller finishes.

        Blocks are cut exactly where the sequential path would cut them. On any failure the
        blocks written so far stand and the sequential path carries on from there.
        """
        import mmap

        with mmap.mmap(jfd, size, access=mmap.ACCESS_READ) as view:
            ranges: list[tuple[int, int]] = []
            pos = end
            while True:
                stop = view.find(b"\n", pos + BLOCK_TARGET - 1)
                if stop < 0:
                    break  # the rest is the open last block: the sequential path takes it
                ranges.append((pos, stop + 1))
                pos = stop + 1
        tasks = [ranges[i:i + _TASK_BLOCKS] for i in range(0, len(ranges), _TASK_BLOCKS)]
        if len(tasks) < 2:
            return n, end, 0
        done_to, events = end, 0
        path = str(self.journal.path)
        try:
            with Pool("urchin.search.blockbuild:worker", min(os.cpu_count() or 2, 4, len(tasks))) as pool:
                results = pool.ordered(orjson.dumps([path, task]) for task in tasks)
                for task, result in zip(tasks, results, strict=True):
                    zones, rows, count = unframe(result)
                    os.pwrite(bfd, rows, n * ROW)
                    os.pwrite(zfd, zones, _HEADER_SIZE + n * _ZONE.size)
                    n += len(task)
                    events += count
                    if on_progress:
                        on_progress(task[-1][1] - done_to)
                    done_to = task[-1][1]
        except (OSError, ValueError, WorkerError, struct.error):
            pass  # keep what is written; the sequential path goes on from `done_to`
        self.parallel_blocks += len(ranges) if done_to == ranges[-1][1] else 0
        return n, done_to, events

    def _flush(self, zfd: int, bfd: int, jfd: int, n: int, blocks: list[Block], use_numpy: bool) -> int:
        if not blocks:
            return n
        rows = bitmaps_numpy([b.text() for b in blocks]) if use_numpy else [bitmap_py(b.text()) for b in blocks]
        if blocks[0].reopened:
            old = os.pread(bfd, ROW, n * ROW)
            rows[0] = (int.from_bytes(old, "little") | int.from_bytes(rows[0], "little")).to_bytes(ROW, "little")
        zones = b"".join(zone_record(b, tail_crc(jfd, b.start, b.end)) for b in blocks)
        os.pwrite(bfd, b"".join(rows), n * ROW)
        os.pwrite(zfd, zones, _HEADER_SIZE + n * _ZONE.size)
        return n + len(blocks)

    def release_pages(self, idle_s: float) -> bool:
        """After `idle_s` without a query: drop the bits map's pages from this process (they stay in
        the page cache; the next query maps them again, a minor fault per 64 KB); skipped while a
        query or a catch-up runs. True if released."""
        if self._used is None or time.monotonic() - self._used < idle_s or not self._mutex.acquire(blocking=False):
            return False
        try:
            if self._bits_map is not None:
                release_map(self._bits_map)
            self._used = None
            return True
        finally:
            self._mutex.release()

    # ---- reading --------------------------------------------------------------------------
    def _load_view(self) -> View:
        """The current snapshot; reloaded only when another catch-up moved the header."""
        import mmap

        with self.zones_path.open("rb") as zf:
            raw = zf.read(_HEADER.size)
            if len(raw) < _HEADER.size:
                return View(0, 0, array("q"), None)
            _, _, _, n, end, _ = _HEADER.unpack(raw)
            # the change time too: a compaction elsewhere may cut blocks and rebuild to the same (n, end)
            changed = os.fstat(zf.fileno()).st_mtime_ns
            if self._view is not None and self._cached == (n, end, changed):
                return self._view
            zf.seek(_HEADER_SIZE)
            zones = array("q")
            zones.frombytes(zf.read(n * _ZONE.size))
        if self._bits_map is not None:
            self._bits_map.close()
            self._bits_map = None
        if n:
            with self.bits_path.open("rb") as bf:
                self._bits_map = mmap.mmap(bf.fileno(), n * ROW, access=mmap.ACCESS_READ)
        self._view = View(n, end, zones, self._bits_map)
        self._cached = (n, end, changed)
        return self._view


def release_map(mapping: Any) -> None:
    """MADV_DONTNEED on a read-only map: its pages leave the process's resident set, not the page
    cache. Never on a writable private map (it would drop what was written)."""
    import mmap

    with contextlib.suppress(ValueError, OSError, AttributeError):   # closed, or not Linux
        mapping.madvise(mmap.MADV_DONTNEED)
