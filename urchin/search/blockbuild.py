"""Building blocks of the substring index: parse a block's lines, hash its trigrams, pack its zone.

Pure functions shared by the in-process catch-up and the worker processes of a bulk build
(`build_ranges`), so both produce byte-identical blocks. Trigrams are of the UTF-8 bytes of the
casefolded content; each is hashed to one of 2^16 bits (multiplicative hashing).
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable
from datetime import datetime

import orjson

from urchin.errors import ValidationError
from urchin.fileio import next_newline
from urchin.timestamps import parse_timestamp

__all__ = ["Block", "BLOCK_TARGET", "BITS_LOG2", "ROW", "ZONE", "FAR", "query_hashes", "scan_lines",
           "bitmap_py", "bitmaps_numpy", "tail_crc", "zone_record", "block_ranges", "build_ranges", "worker", "unframe"]

BLOCK_TARGET = 64 << 10
BITS_LOG2 = 16
ROW = 1 << (BITS_LOG2 - 3)
ZONE = struct.Struct("<qqqqq")  # start, end, min_ts, max_ts, lines << 32 | tail_crc
FAR = 1 << 62  # an empty block has min FAR and max -FAR, so no window overlaps it
_SHIFT = 32 - BITS_LOG2
_MULT = 0x9E3779B1
_TAIL = 32  # bytes before a block's end whose crc detects a replaced or rewritten journal
_CANONICAL_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def query_hashes(folded: bytes) -> set[int]:
    """Hashed trigrams of a casefolded, UTF-8 encoded query (empty under 3 bytes: no filter)."""
    return {((int.from_bytes(folded[i:i + 3], "little") * _MULT) & 0xFFFFFFFF) >> _SHIFT
            for i in range(len(folded) - 2)}


class Block:
    """A block being built: byte range, timestamp range, event count, folded contents."""

    __slots__ = ("start", "end", "lo", "hi", "lines", "parts", "reopened")

    def __init__(self, start: int, end: int, lo: int = FAR, hi: int = -FAR, lines: int = 0,
                 reopened: bool = False) -> None:
        self.start, self.end, self.lo, self.hi, self.lines = start, end, lo, hi, lines
        self.parts: list[bytes] = []
        self.reopened = reopened

    def text(self) -> bytes:
        return b"\n".join(self.parts)


def scan_lines(lines: list[bytes], block: Block, cache: dict[str, int]) -> int:
    """Add the events among `lines` to `block`: a superset of what `Event.from_json` accepts."""
    loads, bad = orjson.loads, orjson.JSONDecodeError
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
            ms = ts_ms(ts, cache)
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


def ts_ms(ts: str, cache: dict[str, int]) -> int | None:
    """Milliseconds of an event timestamp as `Event` reads it (within 1 ms: it rounds via float)."""
    if _CANONICAL_TS.fullmatch(ts):
        base = cache.get(ts[:13])
        if base is None:
            try:
                base = int(datetime.fromisoformat(ts[:13] + ":00:00+00:00").timestamp()) * 1000
            except ValueError:
                return None
            cache[ts[:13]] = base
        minute, second, milli = int(ts[14:16]), int(ts[17:19]), int(ts[20:23])
        if minute > 59 or second > 59:
            return None
        return base + minute * 60_000 + second * 1000 + milli
    try:
        return int(parse_timestamp(ts).timestamp() * 1000)
    except ValidationError:
        return None


def tail_crc(jfd: int, start: int, end: int) -> int:
    begin = max(start, end - _TAIL)
    return zlib.crc32(os.pread(jfd, end - begin, begin))


def zone_record(block: Block, crc: int) -> bytes:
    return ZONE.pack(block.start, block.end, block.lo, block.hi, block.lines << 32 | crc)


def bitmap_py(data: bytes) -> bytes:
    bits = bytearray(ROW)
    for tri in {data[i:i + 3] for i in range(len(data) - 2)}:
        h = ((int.from_bytes(tri, "little") * _MULT) & 0xFFFFFFFF) >> _SHIFT
        bits[h >> 3] |= 1 << (h & 7)
    return bytes(bits)


def bitmaps_numpy(texts: list[bytes]) -> list[bytes]:
    """The same bitmaps as `bitmap_py`, for many blocks at once (bulk catch-up)."""
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


def block_ranges(fd: int, start: int, size: int) -> list[tuple[int, int]]:
    """The whole blocks of the file open at `fd` from `start` to `size`, cut where the sequential
    catch-up cuts them (at the first newline `BLOCK_TARGET` bytes or more past a block's start); the
    rest, the open last block, is left out. A piece is read at each block's end (`next_newline`), not
    the file mapped: a map's reads would make the file's pages this process's RSS (the whole journal,
    1.4 GB at 3M events, at the end of `urchin import`)."""
    ranges: list[tuple[int, int]] = []
    while (stop := next_newline(fd, start + BLOCK_TARGET - 1, size)) >= 0:
        ranges.append((start, stop + 1))
        start = stop + 1
    return ranges


def build_ranges(path: str, ranges: list[tuple[int, int]]) -> tuple[bytes, bytes, int]:
    """Worker of a bulk build: zone records, bitmap rows and event count of whole blocks."""
    cache: dict[str, int] = {}
    blocks = []
    events = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        zones = []
        for start, end in ranges:
            block = Block(start, end)
            events += scan_lines(os.pread(fd, end - start - 1, start).split(b"\n"), block, cache)
            blocks.append(block)
            zones.append(zone_record(block, tail_crc(fd, start, end)))
    finally:
        os.close(fd)
    return b"".join(zones), b"".join(bitmaps_numpy([b.text() for b in blocks])), events


def worker(init: bytes) -> Callable[[bytes], bytes]:
    """A bulk build's pool worker: a task `[path, ranges]` (JSON) -> its blocks, framed for `unframe`."""
    def build(task: bytes) -> bytes:
        path, ranges = orjson.loads(task)
        zones, rows, events = build_ranges(path, [(start, end) for start, end in ranges])
        return _FRAME.pack(len(zones), len(rows), events) + zones + rows
    return build


def unframe(result: bytes) -> tuple[bytes, bytes, int]:
    """A worker's result -> zone records, bitmap rows, event count (ValueError when cut short)."""
    zone_len, row_len, events = _FRAME.unpack_from(result)
    if len(result) != _FRAME.size + zone_len + row_len:
        raise ValueError("a bulk-build worker's result is cut short")
    return result[_FRAME.size:_FRAME.size + zone_len], result[_FRAME.size + zone_len:], events


_FRAME = struct.Struct("<QQQ")
