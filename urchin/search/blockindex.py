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

import fcntl
import os
import re
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from urchin.config import ensure_private_dir
from urchin.errors import ValidationError
from urchin.event import parse_timestamp
from urchin.journal import Journal

__all__ = ["BlockIndex", "CatchUp", "View", "query_hashes", "BLOCK_TARGET", "BITS_LOG2"]

BLOCK_TARGET = 64 << 10
BITS_LOG2 = 16
ROW = 1 << (BITS_LOG2 - 3)
_SHIFT = 32 - BITS_LOG2
_MULT = 0x9E3779B1
_MAGIC = b"URSIDX01"
_HEADER = struct.Struct("<8sIIQQI")  # magic, bits_log2, block_target, n_blocks, indexed_end, head_crc
_HEADER_SIZE = 64
_ZONE = struct.Struct("<qqqqq")  # start, end, min_ts, max_ts, lines << 32 | tail_crc
_TAIL = 32  # bytes before a block's end whose crc detects a replaced or rewritten journal
_HEAD = 4096
_READ = 16 << 20
_NUMPY_FROM = 1 << 20  # below this many new bytes, hashing in pure Python beats importing numpy
_EAGER = 48  # newest blocks checked row by row before one AND over all
_FAR = 1 << 62  # an empty block has min _FAR and max -_FAR, so no window overlaps it
_CANONICAL_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def query_hashes(folded: bytes) -> set[int]:
    """Hashed trigrams of a casefolded, UTF-8 encoded query (empty under 3 bytes: no filter)."""
    return {((int.from_bytes(folded[i:i + 3], "little") * _MULT) & 0xFFFFFFFF) >> _SHIFT
            for i in range(len(folded) - 2)}


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
        self._bits = bits
        if n:
            self.ends[n - 1] = min(self.ends[n - 1], end)

    def block_range(self, block: int) -> tuple[int, int]:
        return self.starts[block], self.ends[block]

    def candidates(self, hashes: set[int], since_ms: int, until_ms: int | None) -> Iterator[int]:
        """Blocks that may hold a match in the window, newest (by max timestamp) first, lazily.

        The newest blocks are checked one bitmap row at a time, so a common term stops after a
        few; past `_EAGER` blocks, one AND over every block's bitmap at once filters the rest.
        Zone maps are compared with 1 ms of slack: `Event.ts_ms` rounds through a float.
        """
        n = self.n
        if not n:
            return
        since = since_ms - 1
        until = until_ms + 1 if until_ms is not None else _FAR
        mins, maxs = self.mins, self.maxs
        window = [b for b in range(n) if maxs[b] >= since and mins[b] <= until]
        window.sort(key=maxs.__getitem__, reverse=True)
        if not hashes or self._bits is None:
            yield from window
            return
        masks = _byte_masks(hashes)
        bits = self._bits
        for b in window[:_EAGER]:
            base = b * ROW
            if all(bits[base + byte] & mask == mask for byte, mask in masks):
                yield b
        if len(window) > _EAGER:
            found = self._bitmap_and(masks)
            for b in window[_EAGER:]:
                if found[b]:
                    yield b

    def _bitmap_and(self, masks: list[tuple[int, int]]) -> bytes:
        """AND every block's bitmap at once: byte i of each row is `bits[i::ROW]` (one C call)."""
        n = self.n
        ones = int.from_bytes(b"\x01" * n, "little")
        acc = ones
        for byte, mask in masks:
            column = int.from_bytes(self._bits[byte:n * ROW:ROW], "little")
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
        self._cached: tuple[int, int] | None = None
        self._view: View | None = None
        self._bits_map: Any = None
        self._ts_cache: dict[str, int] = {}

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
            if block_end <= size and _tail_crc(jfd, start, block_end) == packed & 0xFFFFFFFF:
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
        block: _Block
        if n:
            start, _, lo, hi, packed = _ZONE.unpack(os.pread(zfd, _ZONE.size, _HEADER_SIZE + (n - 1) * _ZONE.size))
            if end - start < BLOCK_TARGET:
                n -= 1  # reopen the last block: its bitmap only gains bits
                block = _Block(start, end, lo, hi, packed >> 32, reopened=True)
            else:
                block = _Block(end, end)
        else:
            block = _Block(end, end)
        done: list[_Block] = []
        events = 0
        offset = end
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
                events += self._scan(data[pos:stop].split(b"\n"), block)
                pos = stop + 1
                block.end = offset + pos
                if full:
                    done.append(block)
                    block = _Block(block.end, block.end)
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

    def _flush(self, zfd: int, bfd: int, jfd: int, n: int, blocks: list[_Block], use_numpy: bool) -> int:
        if not blocks:
            return n
        rows = _bitmaps_numpy([b.text() for b in blocks]) if use_numpy else [_bitmap_py(b.text()) for b in blocks]
        if blocks[0].reopened:
            old = os.pread(bfd, ROW, n * ROW)
            rows[0] = (int.from_bytes(old, "little") | int.from_bytes(rows[0], "little")).to_bytes(ROW, "little")
        zones = b"".join(_ZONE.pack(b.start, b.end, b.lo, b.hi, b.lines << 32 | _tail_crc(jfd, b.start, b.end))
                         for b in blocks)
        os.pwrite(bfd, b"".join(rows), n * ROW)
        os.pwrite(zfd, zones, _HEADER_SIZE + n * _ZONE.size)
        return n + len(blocks)

    def _scan(self, lines: list[bytes], block: _Block) -> int:
        """Add the events among `lines` to `block`: a superset of what `Event.from_json` accepts."""
        loads, bad, cache, ts_ms = orjson.loads, orjson.JSONDecodeError, self._ts_cache, self._ts_ms
        parts = block.parts
        lo, hi, count = block.lo, block.hi, 0
        for line in lines:
            try:
                record = loads(line)
            except bad:
                continue
            if type(record) is not dict:
                continue
            content = record.get("content")
            ts = record.get("timestamp")
            if type(content) is not str or type(ts) is not str or not content:
                continue
            base = cache.get(ts[:13]) if len(ts) == 24 else None
            ms: int | None
            if base is None:
                ms = ts_ms(ts)
            else:
                try:
                    ms = base + int(ts[14:16]) * 60_000 + int(ts[17:19]) * 1000 + int(ts[20:23])
                except ValueError:
                    continue  # not canonical after all: `Event` would not read it either
            if ms is None:
                continue
            if ms < lo:
                lo = ms
            if ms > hi:
                hi = ms
            count += 1
            parts.append(content.casefold().encode("utf-8", "surrogatepass"))
        block.lo, block.hi = lo, hi
        block.lines += count
        return count

    def _ts_ms(self, ts: str) -> int | None:
        if _CANONICAL_TS.fullmatch(ts):
            base = self._ts_cache.get(ts[:13])
            if base is None:
                try:
                    base = int(datetime.fromisoformat(ts[:13] + ":00:00+00:00").timestamp()) * 1000
                except ValueError:
                    return None
                self._ts_cache[ts[:13]] = base
            minute, second, milli = int(ts[14:16]), int(ts[17:19]), int(ts[20:23])
            if minute > 59 or second > 59:
                return None
            return base + minute * 60_000 + second * 1000 + milli
        try:
            return int(parse_timestamp(ts).timestamp() * 1000)
        except ValidationError:
            return None

    # ---- reading --------------------------------------------------------------------------
    def _load_view(self) -> View:
        """The current snapshot; reloaded only when another catch-up moved the header."""
        import mmap

        with self.zones_path.open("rb") as zf:
            raw = zf.read(_HEADER.size)
            if len(raw) < _HEADER.size:
                return View(0, 0, array("q"), None)
            _, _, _, n, end, _ = _HEADER.unpack(raw)
            if self._view is not None and self._cached == (n, end):
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
        self._cached = (n, end)
        return self._view


class _Block:
    __slots__ = ("start", "end", "lo", "hi", "lines", "parts", "reopened")

    def __init__(self, start: int, end: int, lo: int = _FAR, hi: int = -_FAR, lines: int = 0,
                 reopened: bool = False) -> None:
        self.start, self.end, self.lo, self.hi, self.lines = start, end, lo, hi, lines
        self.parts: list[bytes] = []
        self.reopened = reopened

    def text(self) -> bytes:
        return b"\n".join(self.parts)


def _tail_crc(jfd: int, start: int, end: int) -> int:
    begin = max(start, end - _TAIL)
    return zlib.crc32(os.pread(jfd, end - begin, begin))


def _bitmap_py(data: bytes) -> bytes:
    bits = bytearray(ROW)
    for tri in {data[i:i + 3] for i in range(len(data) - 2)}:
        h = ((int.from_bytes(tri, "little") * _MULT) & 0xFFFFFFFF) >> _SHIFT
        bits[h >> 3] |= 1 << (h & 7)
    return bytes(bits)


def _bitmaps_numpy(texts: list[bytes]) -> list[bytes]:
    """The same bitmaps as `_bitmap_py`, for many blocks at once (bulk catch-up)."""
    import numpy as np

    width = 1 << BITS_LOG2
    flags = np.zeros((len(texts), width), dtype=np.bool_)
    for row, text in enumerate(texts):
        if len(text) < 3:
            continue
        a = np.frombuffer(text, dtype=np.uint8)
        keys = a[:-2].astype(np.uint32)
        keys |= a[1:-1].astype(np.uint32) << np.uint32(8)
        keys |= a[2:].astype(np.uint32) << np.uint32(16)
        keys *= np.uint32(_MULT)
        keys >>= np.uint32(_SHIFT)
        flags[row, keys] = True
    packed = np.packbits(flags, axis=1, bitorder="little")
    return [packed[i].tobytes() for i in range(len(texts))]
