"""The files of the substring block index, in their one layout (format `URSIDX02`).

`zones`: a 64-byte header, the commit point, then one zone record per block (`blockbuild.ZONE`).
The bitmaps (one `ROW`-byte row of hashed trigram bits per block) are stored column-major in
segments of `SEGMENT` blocks in `columns`: byte j of every block of segment k lies together, at
`(k * ROW + j) * SEGMENT`, so a query reads only the bytes of its own trigrams. The newest
blocks (at most one segment's worth) are rows in `rows`; once they fill a segment and a block
follows them they become the next segment, committed before a row is written over them. A block
in a segment is never reopened (the block after it exists); a cut inside a segment drops it whole.
The header also names the journal file (inode, mtime) as the catch-up that committed it found it:
a journal of that inode whose mtime moved with nothing appended was rewritten in place (`rewritten`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import zlib
from pathlib import Path

import orjson

from urchin.journal import Journal
from urchin.search.blockbuild import BITS_LOG2, BLOCK_TARGET, ROW, ZONE

__all__ = ["Store", "Header", "read_header", "rewritten", "SEGMENT", "MAGIC", "HEADER_SIZE"]

MAGIC = b"URSIDX02"
# magic, bits_log2, block_target, n_blocks, indexed_end, head_crc, segments, blocks per segment, and the
# journal's inode and mtime (ns) when it was last caught up with (zeros in a header older versions wrote)
_HEADER = struct.Struct("<8sIIQQIQIQq")
HEADER_SIZE = 64
SEGMENT = 512  # blocks per column-major segment (32 MB of journal, 4 MB of bitmaps); `rows` holds at most this many
_HEAD = 4096   # journal bytes whose CRC the header keeps: a replaced journal is not trusted
_LEGACY = ("bits",)   # URSIDX01's block-major bitmaps
_REPAIR_S = 60        # a crash repair's torn record and its cut are this close (an fsync between them)


class Header:
    """What the header says: blocks, the journal offset indexed to, and how many blocks are in segments."""

    __slots__ = ("n", "end", "segments", "head_crc", "inode", "mtime_ns")

    def __init__(self, n: int, end: int, segments: int, head_crc: int, inode: int = 0, mtime_ns: int = 0) -> None:
        self.n, self.end, self.segments, self.head_crc = n, end, segments, head_crc
        self.inode, self.mtime_ns = inode, mtime_ns

    def rewritten(self, journal: os.stat_result) -> bool:
        """Whether the journal, the file this header names, was written to with nothing appended past
        what is indexed: bytes changed in place (a tool, an editor, a restore onto the same inode), in
        blocks the zones' tail CRCs need not reach. A line appended with it is caught by those only."""
        return (journal.st_ino == self.inode and journal.st_mtime_ns != self.mtime_ns
                and journal.st_size == self.end and self.n > 0)

    @property
    def tail(self) -> int:
        """Blocks kept as rows (the newest)."""
        return self.n - self.segments * SEGMENT


def read_header(raw: bytes) -> Header | None:
    """The header if it is this format's, with this build's parameters; None otherwise."""
    if len(raw) < _HEADER.size:
        return None
    magic, bits_log2, target, n, end, head_crc, segments, per, inode, mtime_ns = _HEADER.unpack(raw[:_HEADER.size])
    if (magic, bits_log2, target, per) != (MAGIC, BITS_LOG2, BLOCK_TARGET, SEGMENT) or (n == 0) != (end == 0):
        return None
    header = Header(n, end, segments, head_crc, inode, mtime_ns)
    return header if 0 <= header.tail <= SEGMENT else None


def rewritten(store: Store, header: Header, journal: Journal) -> bool:
    """`header.rewritten`, told from an append in flight and from a crash repair. A write(2) moves the
    mtime before its first byte lands (the size follows page by page): writers append under the
    journal's lock, so with it free (taken shared, never waited for) a second stat is the journal as
    it is, and with it held no rewrite is assumed (the header keeps its mtime: the next catch-up checks
    again). A torn tail cut back to exactly the indexed end (`repair_tail`: its record in `<journal>.torn`
    names that offset, written after the header's catch-up and just before the cut) changed nothing."""
    if not header.rewritten(store.journal):
        return False
    try:
        lock = os.open(journal.lock_path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        lock = -1   # no writer ever took it
    try:
        if lock >= 0:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        store.journal = os.fstat(store.jfd)
        return header.rewritten(store.journal) and not _cut_back(journal, header, store.journal.st_mtime_ns)
    except BlockingIOError:
        return False   # a writer holds it: most likely its append is under way
    finally:
        if lock >= 0:
            os.close(lock)   # closing it releases the shared lock


def _cut_back(journal: Journal, header: Header, mtime_ns: int) -> bool:
    """Whether the journal's last change is a crash repair that cut a torn tail back to `header.end`."""
    try:
        with journal.torn_path.open("rb") as handle:
            torn = os.fstat(handle.fileno())
            if not header.mtime_ns <= torn.st_mtime_ns <= mtime_ns <= torn.st_mtime_ns + _REPAIR_S * 10**9:
                return False
            size = torn.st_size
            start, high = 0, size - 1   # the last record's start, before its newline (its data can be MBs)
            while high > 0:
                low = max(0, high - (1 << 16))
                newline = os.pread(handle.fileno(), high - low, low).rfind(b"\n")
                if newline >= 0:
                    start = low + newline + 1
                    break
                high = low
            record = orjson.loads(os.pread(handle.fileno(), size - start, start))
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(record, dict) and record.get("offset") == header.end


class Store:
    """The three files open for one catch-up or cut, with the journal they index (`jfd`)."""

    def __init__(self, directory: Path, jfd: int) -> None:
        self.jfd = jfd
        self.journal = os.fstat(jfd)   # before any of it is read: a write after it moves the mtime the header keeps
        self.segments = 0
        self.bulk = False   # a bulk catch-up: numpy turns rows into columns
        self.zfd = os.open(directory / "zones", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            self.rfd = os.open(directory / "rows", os.O_RDWR | os.O_CREAT, 0o600)
            self.cfd = os.open(directory / "columns", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            self.close()
            raise
        self.dir = directory

    def close(self) -> None:
        for name in ("zfd", "rfd", "cfd"):
            fd = getattr(self, name, None)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def header(self) -> Header | None:
        """The committed header, if it checks against the files and the journal's head; sets `segments`."""
        header = read_header(os.pread(self.zfd, _HEADER.size, 0))
        if header is None:
            return None
        size = os.fstat
        if (size(self.zfd).st_size < HEADER_SIZE + header.n * ZONE.size or size(self.rfd).st_size < header.tail * ROW
                or size(self.cfd).st_size < header.segments * SEGMENT * ROW
                or header.head_crc != self._head_crc(header.end)):
            return None
        self.segments = header.segments
        return header

    def zone(self, block: int) -> tuple[int, int, int, int, int]:
        """start, end, min_ts, max_ts, lines << 32 | tail CRC of one block."""
        return ZONE.unpack(os.pread(self.zfd, ZONE.size, HEADER_SIZE + block * ZONE.size))

    def commit(self, n: int, end: int) -> None:
        header = _HEADER.pack(MAGIC, BITS_LOG2, BLOCK_TARGET, n, end, self._head_crc(end), self.segments, SEGMENT,
                              self.journal.st_ino, self.journal.st_mtime_ns)
        os.pwrite(self.zfd, header.ljust(HEADER_SIZE, b"\0"), 0)

    def commit_synced(self, n: int, end: int) -> None:
        """Commit, durably: what is written next (rows, zones) goes over what an older header names."""
        self.commit(n, end)
        self.sync(rows=False)

    def finish(self, n: int, end: int) -> None:
        """Commit a catch-up: rows past the last block dropped (a segment took them), data synced first."""
        os.ftruncate(self.rfd, (n - self.segments * SEGMENT) * ROW)
        self.sync()
        self.commit(n, end)

    def sync(self, *, rows: bool = True, columns: bool = True) -> None:
        """Make what was written durable, the bitmaps before the zones, before a header names them."""
        for fd in (self.rfd if rows else None, self.cfd if columns else None, self.zfd):
            if fd is not None:
                os.fdatasync(fd)

    def truncate(self, n: int) -> int:
        """Keep the first `n` blocks, or fewer: a segment cut inside is dropped whole. The blocks kept."""
        if n < self.segments * SEGMENT:
            self.segments = n // SEGMENT
            n = self.segments * SEGMENT
        os.ftruncate(self.zfd, HEADER_SIZE + n * ZONE.size)
        os.ftruncate(self.rfd, (n - self.segments * SEGMENT) * ROW)
        os.ftruncate(self.cfd, self.segments * SEGMENT * ROW)
        if n == 0:
            for name in _LEGACY:   # an older format's files, left by a rebuild in place
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.dir / name)
        return n

    @property
    def first_row(self) -> int:
        """The first block kept as a row: the ones before it are in segments."""
        return self.segments * SEGMENT

    def row(self, block: int) -> bytes:
        """The bitmap row of a block kept as a row (the last block, when it is reopened)."""
        return os.pread(self.rfd, ROW, (block - self.segments * SEGMENT) * ROW)

    def put_zones(self, n: int, zones: bytes) -> None:
        os.pwrite(self.zfd, zones, HEADER_SIZE + n * ZONE.size)

    def put_rows(self, n: int, rows: bytes, starts: list[int]) -> None:
        """The bitmap rows of blocks n, n + 1, ... (`starts`: their journal offsets; their zones are
        written). A full set of rows followed by a block becomes a segment, committed at once."""
        count = len(rows) // ROW
        i = 0
        while i < count:
            at = n + i - self.segments * SEGMENT
            if at == SEGMENT:   # the rows fill a segment and a block follows them
                self._add_segment(os.pread(self.rfd, SEGMENT * ROW, 0), n + i, starts[i])
            elif at == 0 and count - i > SEGMENT:   # a whole segment and the block after it: no rows
                self._add_segment(rows[i * ROW:(i + SEGMENT) * ROW], n + i + SEGMENT, starts[i + SEGMENT])
                i += SEGMENT
            else:
                take = min(count - i, SEGMENT - at)
                os.pwrite(self.rfd, rows[i * ROW:(i + take) * ROW], at * ROW)
                i += take

    def _add_segment(self, rows: bytes, n: int, end: int) -> None:
        """Write `rows` (a segment's blocks) as columns and commit the first `n` blocks: the rows that
        follow overwrite those the previous header names."""
        os.pwrite(self.cfd, to_columns(rows, self.bulk), self.segments * SEGMENT * ROW)
        self.sync(rows=False)
        self.segments += 1
        self.commit_synced(n, end)   # before a row is written over: an older header names it

    def _head_crc(self, end: int) -> int:
        return zlib.crc32(os.pread(self.jfd, min(_HEAD, end), 0))


def to_columns(rows: bytes, bulk: bool = False) -> bytes:
    """A segment's rows, column-major: byte j of every row together (numpy in a bulk catch-up)."""
    if bulk:
        import numpy as np

        return np.frombuffer(rows, dtype=np.uint8).reshape(SEGMENT, ROW).T.tobytes()
    return b"".join(rows[j::ROW] for j in range(ROW))
