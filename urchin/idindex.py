"""Dedupe state for the journal: which event ids it already holds, with bounded memory.

A sidecar `<journal>.ids` holds a 32-byte header (magic, journal offset covered, the journal file's
inode, the CRC-32 of the covered bytes) and one 16-byte record per event (64-bit hash of the id, the
line's journal offset). A hash hit is confirmed by reading that line, so a collision never drops an
event. The sidecar is derived: it is caught up from the journal under the journal's lock, in pieces
(bounded memory), trimmed when the journal is shorter, and rebuilt when lost. A journal that is
another file (a copied or restored home, a compaction, a replacement) keeps the sidecar only if the
bytes it covers are the same (their CRC, ~0.3 s a GB): a copy is re-stamped, anything else rebuilt.
A header naming the journal's own inode proves nothing by itself (an inode is reused): its first and
last records are checked against the lines they name, at every catch-up (~20 us); a mismatch rebuilds.
Memory: a short-lived process maps the file (16 bytes/event on disk, none resident beyond the page
cache); a long-lived one (`load()`) keeps each record's 32-bit hash prefix and its number in the file as
two sorted numpy arrays, 8 bytes/event (a prefix hit reads its record from the file for the whole hash and
the offset; whole hashes and offsets took 16 bytes/event, a dict of them ~150 and ~10 s of CPU to fill at
1M events), and the newest records in a small dict.
"""

from __future__ import annotations

import hashlib
import itertools
import mmap
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

import orjson

from urchin.fileio import line_at, line_chunks, replacing
from urchin.idmemo import IdMemo
from urchin.journal import Journal
from urchin.tombstones import line_id

__all__ = ["IdIndex", "id_hash"]

_MAGIC = b"URCHINI3"
_HEADER = struct.Struct("<8sQQQ")    # magic, journal offset covered, journal inode, CRC-32 of what is covered
_RECORD = struct.Struct("<QQ")
_HEADER_2 = struct.Struct("<8sQQ")   # format 2's header (magic URCHINI2): no CRC; the same records after it
_PIECE = 4 << 20        # journal bytes indexed at a time: a rebuild holds one piece's records, not all


def id_hash(event_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(event_id.encode("utf-8"), digest_size=8).digest(), "little")


class IdIndex:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.path = journal.path.with_name(journal.path.name + ".ids")
        self._mem: IdMemo | None = None
        self._records_seen = _HEADER.size  # records before this position are in _mem
        self._last_seen = b""              # the record before it, as the sidecar held it then
        self._mem_inode = -1  # the journal file _mem describes (a compaction in any process replaces it)

    # ---- maintenance (call with the journal lock held) ------------------------------------
    def catch_up(self) -> str:
        """Index every journal line past the covered offset; trim records past the journal's end.
        Returns what it did to the sidecar: "caught up", "kept" (another journal file with the same
        covered bytes: re-stamped) or "rebuilt" (none, or it described other bytes)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            try:                    # one stat for the journal's identity and its size
                journal = os.stat(self.journal.path)
                inode, journal_size = journal.st_ino, journal.st_size
            except FileNotFoundError:
                inode = journal_size = 0
            if inode != self._mem_inode or size < self._records_seen or not self._memory_matches(fd):
                self._forget()  # another process compacted the journal and rebuilt the sidecar: reload it
                self._mem_inode = inode
            done, header = "caught up", _read_header(fd)
            if header is not None and header[1] != inode:
                done = "kept" if self._same_bytes(header[0], header[2], journal_size) else "rebuilt"
                header = (header[0], inode, header[2]) if done == "kept" else None
            stamp = done != "caught up" or header is None
            if header is None:
                done = "rebuilt" if journal_size else done
                header, size = (0, inode, 0), _HEADER.size
                os.ftruncate(fd, 0)
                self._forget()
            covered, _, crc = header
            records_end = _HEADER.size + (size - _HEADER.size) // _RECORD.size * _RECORD.size
            if covered > journal_size:
                records_end, covered, crc = self._trim(fd, records_end, journal_size)
            records_end = _before(fd, records_end, covered)   # records a kill left past the header's offset
            if not stamp and not self._proves(fd, records_end, covered):   # the inode reused (a second
                done, stamp, covered, crc, records_end = "rebuilt", True, 0, 0, _HEADER.size   # compaction, a
                self._forget()                                                  # restore): other bytes
            if records_end != size:
                os.ftruncate(fd, records_end)
            if self._records_seen > records_end:
                self._forget()
            if self._mem is not None and self._records_seen < records_end:
                self._load_records(fd, records_end)
            if stamp:
                os.pwrite(fd, _HEADER.pack(_MAGIC, covered, inode, crc), 0)
            first = records_end
            # covered == the journal's size (this process's own last write, the usual case): nothing to read
            for records, end, end_crc in self._pieces(covered, journal_size, crc):
                os.pwrite(fd, records, records_end)
                records_end += len(records)
                os.pwrite(fd, _HEADER.pack(_MAGIC, end, inode, end_crc), 0)   # after its records: a kill
            if self._mem is not None and first < records_end:                 # loses no piece it covers
                self._load_records(fd, records_end)
            last = os.pread(fd, _RECORD.size, records_end - _RECORD.size) if self._mem is not None else b""
            self._seen(records_end, last)
            return done
        finally:
            os.close(fd)

    def _pieces(self, start: int, end: int, crc: int) -> Iterator[tuple[bytes, int, int]]:
        """The packed records of the journal's lines from `start` to `end`, a piece at a time, each with
        the offset after it and the CRC-32 of the journal's bytes up to there."""
        if start >= end:
            return
        try:
            handle = self.journal.path.open("rb")
        except FileNotFoundError:
            return
        with handle:
            for base, piece in line_chunks(handle, start, _PIECE):
                if base >= end:
                    return
                crc = zlib.crc32(b"\n", zlib.crc32(piece, crc))
                records = array("Q")
                offset = base
                for line in piece.split(b"\n"):
                    event_id = line_id(line) if line else None
                    if event_id is not None:
                        records.append(id_hash(event_id))
                        records.append(offset)
                    offset += len(line) + 1
                if sys.byteorder != "little":
                    records.byteswap()
                yield records.tobytes(), offset, crc

    def _proves(self, fd: int, records_end: int, covered: int) -> bool:
        """Whether the journal holds the lines the sidecar's first and last records name (their ids'
        hashes, each at a line's start) and a line ends at `covered`: a bounded sample (a few preads)
        of the bytes a header naming this journal's inode covers. An inode is reused (a compaction
        after another with no catch-up between, a restore, a copy on another filesystem): the inode
        and the sizes alone do not prove the bytes, and a full CRC costs ~0.3 s a GB at every start."""
        if covered == 0:
            return records_end == _HEADER.size
        try:
            jfd = os.open(self.journal.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            if os.pread(jfd, 1, covered - 1) != b"\n":
                return False
            for position in {_HEADER.size, records_end - _RECORD.size} if records_end > _HEADER.size else ():
                h, offset = _RECORD.unpack(os.pread(fd, _RECORD.size, position))
                if offset >= covered or offset and os.pread(jfd, 1, offset - 1) != b"\n":
                    return False
                line = line_at(jfd, offset, covered - offset)
                event_id = line_id(line) if line is not None else None
                if event_id is None or id_hash(event_id) != h:
                    return False
            return True
        finally:
            os.close(jfd)

    def _memory_matches(self, fd: int) -> bool:
        """Whether the sidecar still holds the last record this process's memory took from it (another
        process rebuilt it, for a journal on a reused inode: the memory is dropped and reloaded)."""
        if self._mem is None or self._records_seen <= _HEADER.size:
            return True
        return os.pread(fd, _RECORD.size, self._records_seen - _RECORD.size) == self._last_seen

    def _seen(self, position: int, last: bytes | memoryview) -> None:
        self._records_seen, self._last_seen = position, bytes(last)

    def _same_bytes(self, covered: int, crc: int, journal_size: int) -> bool:
        """Whether the journal's first `covered` bytes are those the sidecar describes (their CRC-32):
        a copied home's journal is another file with the same bytes."""
        if covered > journal_size:
            return False
        try:
            with self.journal.path.open("rb") as handle:
                value, left = 0, covered
                while left:
                    data = handle.read(min(_PIECE, left))
                    if not data:
                        return False
                    value, left = zlib.crc32(data, value), left - len(data)
        except FileNotFoundError:
            return False
        return value == crc

    def record(self, entries: Iterable[tuple[str, int]], covered: int) -> None:
        """Add (id, offset) pairs just appended by this process, then mark `covered`."""
        self.record_hashed(((id_hash(event_id), offset) for event_id, offset in entries), covered)

    def record_hashed(self, entries: Iterable[tuple[int, int]], covered: int) -> None:
        """`record` with each id's `id_hash` already computed (bulk writers hash once)."""
        pairs = entries if isinstance(entries, list) else list(entries)
        # every record in one pack call (`_RECORD` repeated): a pack and a join each cost more
        self._write(lambda mem, first: mem.add_many(pairs, first),
                    struct.pack(f"<{2 * len(pairs)}Q", *itertools.chain.from_iterable(pairs)), covered)

    def record_new(self, hashes: Sequence[int], offsets: Sequence[int], covered: int) -> None:
        """`record_hashed` of ids that `held` found none of, none twice (a bulk writer's batch of new
        events): the records are packed and kept in memory by C-level steps, no Python step an event."""
        if len(hashes) != len(offsets):
            raise ValueError(f"{len(hashes)} hashes for {len(offsets)} offsets")
        records = array("Q", bytes(_RECORD.size * len(hashes)))
        records[0::2], records[1::2] = array("Q", hashes), array("Q", offsets)
        if sys.byteorder != "little":
            records.byteswap()
        self._write(lambda mem, first: mem.add_new(hashes, offsets, first), records, covered)

    def _write(self, remember: Callable[[IdMemo, int], None], records: bytes | array[int], covered: int) -> None:
        """Append packed records (kept in memory first, by `remember`) and mark `covered`."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            inode = self._journal_inode()
            header = _read_header(fd)     # `catch_up` just left it naming this journal: the CRC goes on from it
            start, crc = (header[0], header[2]) if header is not None and header[1] == inode else (0, 0)
            crc = self._crc(start, covered, crc)   # the lines just written, read back from the page cache
            if self._mem is not None:      # before the write, as ever: a reader may find them a moment early
                remember(self._mem, _number(size))
            os.pwrite(fd, records, size)
            os.pwrite(fd, _HEADER.pack(_MAGIC, covered, inode, crc), 0)
        finally:
            os.close(fd)
        if self._records_seen == size and memoryview(records).nbytes:
            self._seen(size + memoryview(records).nbytes, memoryview(records).cast("B")[-_RECORD.size:])

    def load(self) -> None:
        """Keep every id hash in memory: for importers and the daemon, which check many ids."""
        if self._mem is None:
            self._mem = IdMemo(self._records)
            self._records_seen = _HEADER.size

    def stamp(self) -> tuple[int, int] | None:
        """(offset covered, journal inode) as the sidecar's header records them; None without one."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            header = _read_header(fd)
        finally:
            os.close(fd)
        return None if header is None else header[:2]

    def upgrade_from_2(self) -> bool:
        """A format-2 sidecar naming this journal file brought to format 3 with its records kept: the
        CRC of the bytes it covers added (a read of them, ~0.3 s a GB), not a rebuild (~3.5 CPU-s a
        million events, the journal lock held throughout). False when there is nothing to keep (no
        sidecar, another format, another journal file, more covered than the journal holds): the caller
        drops it. Hold the journal lock."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            header = os.pread(fd, _HEADER_2.size, 0)
            if len(header) != _HEADER_2.size or header[:8] != b"URCHINI2":
                return False
            _, covered, inode = _HEADER_2.unpack(header)
            if inode != self._journal_inode() or covered > self.journal.size():
                return False
            records_end = _HEADER_2.size + (os.fstat(fd).st_size - _HEADER_2.size) // _RECORD.size * _RECORD.size
            with replacing(self.path, private_parent=False) as new:
                new.write(_HEADER.pack(_MAGIC, covered, inode, self._crc(0, covered, 0)))
                position = _HEADER_2.size
                while position < records_end:
                    data = os.pread(fd, min(_PIECE, records_end - position), position)
                    if not data:
                        break
                    new.write(data)
                    position += len(data)
        finally:
            os.close(fd)
        self._forget()
        return True

    def restamp(self) -> tuple[int, int] | None:
        """A journal that is another file with the bytes the sidecar covers (a copied home): name it in
        the header and return (offset covered, the inode it named before). Anything else is left to
        `catch_up` (a rebuild, which a daemon runs in the background): None. Hold the journal lock."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            header, inode = _read_header(fd), self._journal_inode()
            if header is None or header[1] == inode or not self._same_bytes(header[0], header[2], self.journal.size()):
                return None
            os.pwrite(fd, _HEADER.pack(_MAGIC, header[0], inode, header[2]), 0)
            return header[0], header[1]
        finally:
            os.close(fd)

    def _journal_inode(self) -> int:
        try:
            return os.stat(self.journal.path).st_ino
        except FileNotFoundError:
            return 0

    # ---- lookups --------------------------------------------------------------------------
    def contains(self, event_id: str, h: int | None = None) -> bool:
        """Whether the journal holds `event_id`; pass `h` when its `id_hash` is already known."""
        if h is None:
            h = id_hash(event_id)
        for offset in self._offsets(h):
            line = self.journal.read_line_at(offset)
            if line is not None and _line_id(line) == event_id:
                return True
        return False

    def held(self, hashes: Sequence[int]) -> set[int] | None:
        """Of `hashes`, those `contains` may find (every other is surely new), in one pass: a bulk
        writer checks thousands of ids at once, and a lookup each in the sorted arrays cost ~3 us.
        None when the records are not in memory (then every id is checked)."""
        return self._mem.held(hashes) if self._mem is not None else None

    def lookup(self, event_id: str) -> int | None:
        """The journal offset of the event with this id, as far as the sidecar covers (no lock needed).

        The in-memory copy only knows what this process caught up with; other processes may have
        appended since, so a miss there is checked against the sidecar file too.
        """
        h = id_hash(event_id)
        offsets = self._offsets(h)
        if not offsets and self._mem is not None:
            offsets = self._file_offsets(h)
        for offset in offsets:
            line = self.journal.read_line_at(offset)
            if line is not None and _line_id(line) == event_id:
                return offset
        return None

    def covered(self) -> int:
        """The journal offset up to which the sidecar has indexed ids."""
        try:
            with self.path.open("rb") as handle:
                header = handle.read(_HEADER.size)
        except FileNotFoundError:
            return 0
        if len(header) == _HEADER.size and header[:8] == _MAGIC and _HEADER.unpack(header)[2] == self._journal_inode():
            return min(_HEADER.unpack(header)[1], self.journal.size())   # another file (a copy): 0 until caught up
        return 0

    def _offsets(self, h: int) -> list[int]:
        if self._mem is not None:
            return self._mem.get(h)
        return self._file_offsets(h)

    def _file_offsets(self, h: int) -> list[int]:
        try:
            with self.path.open("rb") as handle:
                if os.fstat(handle.fileno()).st_size <= _HEADER.size:
                    return []
                with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                    return _scan(view, h)
        except FileNotFoundError:
            return []

    def _records(self, numbers: Sequence[int]) -> list[tuple[int, int]]:
        """The sidecar's records at these numbers, as stored (a number past its end: none)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            found = (os.pread(fd, _RECORD.size, _HEADER.size + n * _RECORD.size) for n in numbers)
            return [_RECORD.unpack(data) for data in found if len(data) == _RECORD.size]
        finally:
            os.close(fd)

    def _load_records(self, fd: int, records_end: int) -> None:
        """Add the sidecar's records from `_records_seen` to `records_end` to the memory, a million at a time."""
        import numpy as np

        assert self._mem is not None
        records = np.dtype([("hash", "<u8"), ("offset", "<u8")])   # _RECORD, as numpy reads it
        while self._records_seen < records_end:
            size = min(records_end - self._records_seen, _RECORD.size << 20)
            data = np.frombuffer(os.pread(fd, size, self._records_seen), dtype=records)
            first = _number(self._records_seen)
            self._mem.merge(data["hash"].copy(), np.arange(first, first + len(data), dtype=np.uint32))
            self._seen(self._records_seen + size, data[-1:].tobytes())
            del data

    def _forget(self) -> None:
        if self._mem is not None:
            self._mem = IdMemo(self._records)
        self._records_seen = _HEADER.size

    def _trim(self, fd: int, records_end: int, journal_size: int) -> tuple[int, int, int]:
        """The journal got shorter (tail repair): drop records of lines that are gone; returns the
        records' end, the offset now covered and the CRC-32 up to it."""
        records_end = _before(fd, records_end, journal_size)
        covered = 0
        if records_end > _HEADER.size:
            last_offset = _RECORD.unpack(os.pread(fd, _RECORD.size, records_end - _RECORD.size))[1]
            line = self.journal.read_line_at(last_offset)
            covered = last_offset + len(line) + 1 if line is not None else last_offset
        self._forget()
        return records_end, covered, self._crc(0, covered, 0)

    def _crc(self, start: int, end: int, crc: int) -> int:
        """The CRC-32 of the journal's bytes up to `end`, given `crc`, that of those up to `start` (of
        fewer when the journal is shorter: a CRC that matches nothing costs a copy its sidecar, no more)."""
        if start >= end:
            return crc
        try:
            with self.journal.path.open("rb") as handle:
                handle.seek(start)
                left = end - start
                while left and (data := handle.read(min(_PIECE, left))):
                    crc, left = zlib.crc32(data, crc), left - len(data)
        except FileNotFoundError:
            pass
        return crc


def _read_header(fd: int) -> tuple[int, int, int] | None:
    """(offset covered, journal inode, CRC-32) of a sidecar's header, None when it has none of this format."""
    header = os.pread(fd, _HEADER.size, 0)
    if len(header) != _HEADER.size or header[:8] != _MAGIC:
        return None
    _, covered, inode, crc = _HEADER.unpack(header)
    return covered, inode, crc


def _before(fd: int, records_end: int, limit: int) -> int:
    """The end of the records whose line starts before `limit` (records are in journal order: the
    later ones are read back from the end, a block at a time)."""
    if records_end <= _HEADER.size or _RECORD.unpack(os.pread(fd, _RECORD.size, records_end - _RECORD.size))[1] < limit:
        return records_end      # the usual case: one record read
    block = _RECORD.size << 12
    while records_end > _HEADER.size:
        start = max(_HEADER.size, records_end - block)
        data = os.pread(fd, records_end - start, start)
        keep = len(data) // _RECORD.size
        while keep and _RECORD.unpack_from(data, (keep - 1) * _RECORD.size)[1] >= limit:
            keep -= 1
        if keep:
            return start + keep * _RECORD.size
        records_end = start
    return _HEADER.size


def _number(position: int) -> int:
    """The number of the sidecar record at byte `position`."""
    return (position - _HEADER.size) // _RECORD.size


def _scan(view: mmap.mmap, h: int) -> list[int]:
    needle = struct.pack("<Q", h)
    found: list[int] = []
    pos = view.find(needle, _HEADER.size)
    while pos >= 0:
        if (pos - _HEADER.size) % _RECORD.size == 0:
            found.append(_RECORD.unpack_from(view, pos)[1])
        pos = view.find(needle, pos + 1)
    return found


def _line_id(line: bytes) -> str | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    event_id = record.get("id") if isinstance(record, dict) else None
    return event_id if isinstance(event_id, str) else None
