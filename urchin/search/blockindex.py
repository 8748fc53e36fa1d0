"""A derived on-disk view of the journal for substring search: zone maps and trigram bitmaps.

The journal is cut into blocks of complete lines (~64 KiB). Per block the view keeps its byte
range, the min/max event timestamp (zone map) and a bitmap of hashed trigrams of its events'
casefolded content. It lives in `<journal>.sidx/`, is caught up from the last indexed offset
under an exclusive `flock` (other processes append at any time), never indexes a partial last
line, and rebuilds itself from the first damaged block when missing, corrupt or when the journal
shrank, and whole when the journal was written to in place with nothing appended (its mtime moved:
which block changed is not known, the zones keep only each block's tail CRC). Queries read it
under a shared lock. Its files' layout is `blockstore.py`'s (bitmaps column-major, so a query
reads only its trigrams' bytes). The query path is numpy-free
(cold-start cost); only bulk catch-up imports numpy. An index of another version's format found
there (an older daemon still running beside a newer CLI, or the other way round) is that version's:
it is left alone, and this version's is kept beside it in `<journal>.sidx-<format>/`, so that the two
never rebuild one folder in turn.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson

from urchin.fileio import ensure_private_dir
from urchin.journal import Journal
from urchin.processes import Pool, WorkerError
from urchin.search.blockbuild import (
    BITS_LOG2,
    BLOCK_TARGET,
    ROW,
    Block,
    bitmap_py,
    bitmaps_numpy,
    block_ranges,
    query_hashes,
    scan_lines,
    tail_crc,
    unframe,
    zone_record,
)
from urchin.search.blockbuild import ZONE as _ZONE
from urchin.search.blockstore import HEADER_SIZE as _HEADER_SIZE
from urchin.search.blockstore import MAGIC, Store, read_header, rewritten
from urchin.search.blockview import BlockSnapshot, Segments, release_map

__all__ = ["BlockIndex", "CatchUp", "query_hashes", "BLOCK_TARGET", "BITS_LOG2"]

_READ = 16 << 20
_ZONE_WORDS = _ZONE.size // 8   # a zone record's int64s in the `zones` array
_NUMPY_FROM = 1 << 20  # below this many new bytes, hashing in pure Python beats importing numpy
_PARALLEL_FROM = 64 << 20  # a build this big is shared out to worker processes (one per core)
_TASK_BLOCKS = 128
_FAMILY = b"URSIDX"     # every format of this index starts its header so; the last two bytes are its version
_T = TypeVar("_T")


class _Foreign(Exception):
    """The index at the usual place is another version's format: left to it."""


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


class BlockIndex:
    """The `<journal>.sidx/` view of one journal. Construction does no I/O; one instance per process."""

    def __init__(self, journal: Journal, directory: Path | None = None) -> None:
        self.journal = journal
        self._place(Path(directory) if directory else journal.path.with_name(journal.path.name + ".sidx"))
        self._aside = self.dir.with_name(f"{self.dir.name}-{MAGIC.decode('ascii').lower()}")
        self._mutex = threading.Lock()  # flock does not exclude threads sharing one descriptor
        self._lock_fd: int | None = None
        self._cached: tuple[int, int, int] | None = None
        self._view: BlockSnapshot | None = None
        self._bits_map: Any = None     # the rows (newest blocks) mapped; the segments are read, not mapped
        self._segments: Segments | None = None
        self._used: float | None = None   # when a query last read the bits map (None: released since)
        self._ts_cache: dict[str, int] = {}
        self.parallel_blocks = 0  # blocks built by worker processes so far (observability, tests)

    def _place(self, directory: Path) -> None:
        self.dir = directory
        self.zones_path = directory / "zones"
        self.rows_path = directory / "rows"
        self.columns_path = directory / "columns"
        self.lock_path = directory / "lock"

    # ---- public ---------------------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator[BlockSnapshot]:
        """Catch up with the journal, then yield a view held under a shared lock."""
        with self._mutex:
            fd, _ = self._exclusive(lambda: self._catch_up_locked(None))
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)  # writers wait for this query; readers do not
                self._used = time.monotonic()
                yield self._load_view()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def catch_up(self, on_progress: Callable[[int], None] | None = None) -> CatchUp:
        """Index what the journal gained since the last catch-up (all of it the first time)."""
        with self._mutex:
            fd, done = self._exclusive(lambda: self._catch_up_locked(on_progress))
            fcntl.flock(fd, fcntl.LOCK_UN)
            return done

    @contextmanager
    def held_before(self, offset: int) -> Iterator[None]:
        """Drop every block reaching past `offset` and hold the index's lock until the block exits.

        Compaction calls this just before it renames a rewritten journal into place: the bytes
        before `offset` are identical in both files, so what is kept stays valid, and no catch-up
        can index the old file's tail while the lock is held.
        """
        with self._mutex:
            fd, _ = self._exclusive(lambda: self._truncate_past(offset))
            try:
                yield
            finally:
                self._cached = None
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _truncate_past(self, offset: int) -> None:
        if not self.zones_path.exists():
            return
        with self.journal.path.open("rb") as jf:
            store = Store(self.dir, jf.fileno())
            try:
                header = store.header()
                if header is None:
                    self._refuse_foreign(store)
                n, keep = header.n if header else 0, 0
                while keep < n and store.zone(keep)[1] <= offset:
                    keep += 1
                keep = store.truncate(keep)
                store.commit(keep, store.zone(keep - 1)[1] if keep else 0)
                store.sync(rows=False)
            finally:
                store.close()
                self._cached = None

    def state(self) -> dict[str, Any]:
        """For `urchin status`: where the index stands against the journal, without catching up."""
        directory = self.dir
        try:
            raw = (directory / "zones").read_bytes()[:_HEADER_SIZE]
            if raw.startswith(_FAMILY) and not raw.startswith(MAGIC) and directory != self._aside:
                directory = self._aside     # another version's: this one's is beside it
                raw = (directory / "zones").read_bytes()[:_HEADER_SIZE]
            size = sum((directory / name).stat().st_size for name in ("zones", "rows", "columns"))
        except OSError:
            raw, size = b"", 0
        header = read_header(raw)
        blocks, end = (header.n, header.end) if header else (0, 0)
        return {"path": str(directory), "blocks": blocks, "indexedBytes": end,
                "lagBytes": max(0, self.journal.size() - end), "sizeBytes": size}

    def close(self) -> None:
        with self._mutex:
            self._drop_maps()
            self._view = None
            self._cached = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # ---- catch-up -------------------------------------------------------------------------
    def _exclusive(self, work: Callable[[], _T]) -> tuple[int, _T]:
        """Hold the index's lock exclusively and do `work` under it: the lock's descriptor (still held)
        and what `work` returned. When `work` finds another version's index at the usual place, this
        version's is used beside it from then on (`_aside`) and `work` is done there."""
        while True:
            fd = self._lock_exclusive()
            try:
                return fd, work()
            except _Foreign:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                self._lock_fd = None
                self._drop_maps()
                self._view = self._cached = None
                self._place(self._aside)
            except BaseException:
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise

    def _refuse_foreign(self, store: Store) -> None:
        """Raise `_Foreign` when the header that did not read is another format of this index (an older
        or newer Urchin's, whose process rebuilds it in turn if this one did), at the usual place."""
        magic = os.pread(store.zfd, len(MAGIC), 0)
        if magic.startswith(_FAMILY) and magic != MAGIC and self.dir != self._aside:
            raise _Foreign

    def _lock(self) -> int:
        if self._lock_fd is None:
            ensure_private_dir(self.dir)
            self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._lock_fd

    def _lock_exclusive(self) -> int:
        """The index's lock, held exclusively. The file held is checked to be the one at its path: when
        the directory was dropped (an upgrade in another process, or by hand) it is opened again, or this
        process and the next would lock different files and catch up at once."""
        while True:
            fd = self._lock()
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                current = os.stat(self.lock_path)
            except FileNotFoundError:
                current = None
            if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
                return fd
            os.close(fd)   # closing it releases its lock
            self._lock_fd = None

    def _catch_up_locked(self, on_progress: Callable[[int], None] | None) -> CatchUp:
        started = time.perf_counter()
        try:
            with self.journal.path.open("rb") as jf:
                store = Store(self.dir, jf.fileno())
                try:
                    size = store.journal.st_size
                    n, end, rebuilt = self._validate(store, size)
                    if end >= size:
                        return CatchUp(0, 0, 0, rebuilt, time.perf_counter() - started)
                    n2, end2, events = self._index_range(store, n, end, size, on_progress)
                    if end2 == end:  # only a partial last line so far
                        return CatchUp(0, 0, 0, rebuilt, time.perf_counter() - started)
                    store.finish(n2, end2)
                    return CatchUp(end2 - end, n2 - n, events, rebuilt, time.perf_counter() - started)
                finally:
                    store.close()
        except FileNotFoundError:
            return CatchUp(0, 0, 0, False, time.perf_counter() - started)

    def _validate(self, store: Store, size: int) -> tuple[int, int, bool]:
        """Blocks and offset still valid for this journal: keep what checks, drop the rest."""
        header = store.header()
        if header is None or rewritten(store, header, self.journal):   # which block changed is not known: all
            if header is None:
                self._refuse_foreign(store)
            self._cached = None
            store.truncate(0)
            store.commit_synced(0, 0)
            return 0, 0, True
        n, end = header.n, header.end
        keep = n
        while keep:
            start, block_end, _, _, packed = store.zone(keep - 1)
            block_end = min(block_end, end)
            if block_end <= size and tail_crc(store.jfd, start, block_end) == packed & 0xFFFFFFFF:
                break
            keep -= 1  # past the journal's end, or rewritten: index again from this block
        if keep == n and end <= size:
            return n, end, False
        self._cached = None
        keep = store.truncate(keep)
        new_end = min(store.zone(keep - 1)[1], end) if keep else 0
        store.commit_synced(keep, new_end)
        return keep, new_end, True

    def _index_range(self, store: Store, n: int, end: int, size: int,
                     on_progress: Callable[[int], None] | None) -> tuple[int, int, int]:
        """Index complete lines in [end, size): extend the open last block, then add new ones."""
        use_numpy = store.bulk = size - end >= _NUMPY_FROM
        block: Block
        jfd = store.jfd
        if n:
            start, _, lo, hi, packed = store.zone(n - 1)
            if end - start < BLOCK_TARGET and n > store.first_row:  # a segment's block stays shut
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
            n, offset, events = self._build_parallel(store, n, end, size, on_progress)
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
                n = self._flush(store, n, done, use_numpy)
                done = []
            if on_progress:
                on_progress(cut + 1)
        if offset == end:
            return n + (1 if block.reopened else 0), end, 0
        if block.end > block.start:
            done.append(block)
        n = self._flush(store, n, done, use_numpy)
        return n, offset, events

    def _build_parallel(self, store: Store, n: int, end: int, size: int,
                        on_progress: Callable[[int], None] | None) -> tuple[int, int, int]:
        """Whole blocks from `end` on, built by one worker process per core; the caller finishes.

        Blocks are cut exactly where the sequential path would cut them. On any failure the
        blocks written so far stand and the sequential path carries on from there.
        """
        ranges = block_ranges(store.jfd, end, size)   # the rest is the open last block: the sequential path's
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
                    store.put_zones(n, zones)
                    store.put_rows(n, rows, [start for start, _ in task])
                    n += len(task)
                    events += count
                    if on_progress:
                        on_progress(task[-1][1] - done_to)
                    done_to = task[-1][1]
        except (OSError, ValueError, WorkerError, struct.error):
            pass  # keep what is written; the sequential path goes on from `done_to`
        self.parallel_blocks += len(ranges) if done_to == ranges[-1][1] else 0
        return n, done_to, events

    def _flush(self, store: Store, n: int, blocks: list[Block], use_numpy: bool) -> int:
        if not blocks:
            return n
        rows = bitmaps_numpy([b.text() for b in blocks]) if use_numpy else [bitmap_py(b.text()) for b in blocks]
        if blocks[0].reopened:
            old = store.row(n)
            rows[0] = (int.from_bytes(old, "little") | int.from_bytes(rows[0], "little")).to_bytes(ROW, "little")
        store.put_zones(n, b"".join(zone_record(b, tail_crc(store.jfd, b.start, b.end)) for b in blocks))
        store.put_rows(n, b"".join(rows), [b.start for b in blocks])
        return n + len(blocks)

    def release_pages(self, idle_s: float) -> bool:
        """After `idle_s` without a query: drop the rows map's pages from this process (they stay in
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
    def _load_view(self) -> BlockSnapshot:
        """The current snapshot; reloaded only when another catch-up moved the header."""
        import mmap

        with self.zones_path.open("rb") as zf:
            header = read_header(zf.read(_HEADER_SIZE))
            if header is None:
                return BlockSnapshot(0, 0, array("q"), None)
            n, end = header.n, header.end
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
        rows: Any = b""
        if header.tail:
            with self.rows_path.open("rb") as rf:
                rows = self._bits_map = mmap.mmap(rf.fileno(), header.tail * ROW, access=mmap.ACCESS_READ)
        segments = self._segments_of(header.segments, zones[:(n - header.tail) * _ZONE_WORDS])
        self._view = BlockSnapshot(n, end, zones, rows, segments)
        self._cached = (n, end, changed)
        return self._view

    def _segments_of(self, count: int, zones: array) -> Segments | None:
        """The segments a header names: the ones read before (and their columns) while the file and
        their blocks' zones are unchanged. Not its mtime: a cut segment rebuilt within one tick of a
        coarse clock leaves the file as long and as old; the zones name the blocks' bytes."""
        if not count:
            return None
        fd = os.open(self.columns_path, os.O_RDONLY)
        stat = os.fstat(fd)
        identity = (stat.st_dev, stat.st_ino, stat.st_size)
        kept = self._segments
        if kept is not None and kept.count == count and kept.identity == identity and kept.zones == zones:
            os.close(fd)
            return kept
        if kept is not None:
            kept.close()
        self._segments = Segments(fd, count, len(zones) // _ZONE_WORDS // count, identity, zones)
        return self._segments

    def _drop_maps(self) -> None:
        if self._bits_map is not None:
            self._bits_map.close()
            self._bits_map = None
        if self._segments is not None:
            self._segments.close()
            self._segments = None

