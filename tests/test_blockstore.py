"""The block index's files (`blockstore.py`): bitmaps column-major in segments, the newest as rows.

Segments are made tiny here (`SEGMENT` = 2 blocks, events of ~2 KB) so a few hundred events span
several; every answer is compared with a plain scan of the journal (`reference`).
"""

from __future__ import annotations

import os
import random
import struct
from datetime import timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from tests.test_substring import NOW, WORDS, add, reference, searched, stamp
from urchin.facade import Memory
from urchin.search import blockstore, blockview
from urchin.search.blockbuild import BLOCK_TARGET, ROW, bitmap_py, block_ranges, query_hashes
from urchin.search.blockindex import BlockIndex
from urchin.search.substring import SubstringSearcher

PER = 2
QUERIES = (None, "quokka", "STRASSE", "σίσυφος", "retry budget", "absent-term", "lph", "ß")


@pytest.fixture(autouse=True)
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blockstore, "SEGMENT", PER)


def big_events(memory: Memory, n: int, seed: int, tag: str = "e") -> None:
    """`n` events of ~2 KB over 10 days, out of order: ~30 a block."""
    rng = random.Random(seed)
    add(memory, *({"id": f"{tag}-{seed}-{i:04d}", "timestamp": stamp(rng.uniform(0, 10 * 24 * 60)),
                   "content": " ".join(rng.choices(WORDS, k=300)) + f" {tag}{i}"} for i in range(n)))


def answers_match(memory: Memory) -> None:
    every = [e for _, e in memory.journal.iter_events()]
    for query in QUERIES:
        for days, until, limit in ((1, None, 5), (11, None, 40), (11, 3, 1000)):
            since = int((NOW - timedelta(days=days)).timestamp() * 1000)
            until_ms = since + until * 86_400_000 if until else None
            assert searched(memory, query, since, limit, until_ms=until_ms) == \
                reference(memory, query, since, limit, every=every, until_ms=until_ms), (query, days, until)


def rows_of(directory: Path, blocks: int) -> list[bytes]:
    """Each block's bitmap row as the files hold it: from the segments' columns, then the rows."""
    columns, rows = (directory / "columns").read_bytes(), (directory / "rows").read_bytes()
    full = len(columns) // (PER * ROW)
    out = [bytes(columns[(k * ROW + j) * PER + i] for j in range(ROW)) for k in range(full) for i in range(PER)]
    return out + [rows[i * ROW:(i + 1) * ROW] for i in range(blocks - full * PER)]


@pytest.mark.parametrize("eager", [48, 0])  # 0: every block goes through the one AND over the columns
@freeze_time(NOW)
def test_segments_hold_each_blocks_bitmap_and_answers_match_a_full_scan(
        memory: Memory, eager: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blockview, "_EAGER", eager)
    big_events(memory, 330, seed=1)
    report = memory.substring.catch_up()
    assert report.blocks >= 4 * PER + 1
    answers_match(memory)
    with memory.substring.index.snapshot() as view, memory.journal.path.open("rb") as journal:
        texts = []
        for b in range(view.n):
            start, end = view.block_range(b)
            journal.seek(start)
            memory.substring.index._ts_cache.clear()
            texts.append(journal.read(end - start))
        assert view._segments is not None and view._segments.count == (view.n - 1) // PER
        held = rows_of(memory.substring.index.dir, view.n)
        for b, raw in enumerate(texts):   # the same bits a row-major build gives each block
            lines = [orjson_content(line) for line in raw.split(b"\n") if line]
            assert held[b] == bitmap_py(b"\n".join(lines)), b
        # the segments are read, never mapped; at most one segment's rows are
        maps = Path("/proc/self/maps").read_text()
        assert str(memory.substring.index.columns_path) not in maps
        assert (memory.substring.index.rows_path.stat().st_size) <= PER * ROW


def orjson_content(line: bytes) -> bytes:
    import orjson

    return str(orjson.loads(line)["content"]).casefold().encode()


@freeze_time(NOW)
def test_catch_ups_across_segments_write_what_one_build_writes(memory: Memory, tmp_path: Path) -> None:
    for i in range(12):   # many small catch-ups: blocks reopened, rows turned into segments on the way
        big_events(memory, 28, seed=i, tag=f"b{i}")
        memory.substring.catch_up()
        answers_match(memory) if i in (5, 11) else None
    whole = SubstringSearcher(memory.journal, tmp_path / "whole")
    whole.catch_up()
    index = memory.substring.index
    with index.snapshot() as a, whole.index.snapshot() as b:
        assert a.n == b.n > 4 * PER and list(a.starts) == list(b.starts) and list(a.maxs) == list(b.maxs)
        pairs = list(zip(rows_of(index.dir, a.n), rows_of(tmp_path / "whole", b.n), strict=True))
    # a reopened block ORs the bitmap of its new lines: only trigrams across a newline between two
    # events' contents (no query can match one) are missing, as before segments
    pairs_ = [(x, y) for x in range(256) for y in range(256)]
    across = {h for shape in ((10, 0, 1), (0, 10, 1), (0, 1, 10)) for x, y in pairs_
              for h in query_hashes(bytes(10 if c == 10 else (x, y)[c] for c in shape))}
    allowed = sum(1 << h for h in across)
    for mine, built in pairs:
        mine_bits, built_bits = int.from_bytes(mine, "little"), int.from_bytes(built, "little")
        assert mine_bits & ~built_bits == 0 and (built_bits & ~mine_bits) & ~allowed == 0


@freeze_time(NOW)
def test_a_catch_up_killed_between_segments_leaves_a_usable_index(memory: Memory,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    big_events(memory, 200, seed=2)
    made = []

    def dies_at_the_third(rows: bytes, bulk: bool = False) -> bytes:
        made.append(1)
        if len(made) == 3:
            raise KeyboardInterrupt("killed")   # what a SIGKILL leaves: files as written so far
        return real(rows, bulk)

    real = blockstore.to_columns
    monkeypatch.setattr(blockstore, "to_columns", dies_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        memory.substring.catch_up()
    monkeypatch.setattr(blockstore, "to_columns", real)
    zones = memory.substring.index.zones_path.read_bytes()
    header = blockstore.read_header(zones)
    assert header is not None and header.segments == 2 and 0 < header.n < 200   # the last commit stands
    fresh = Memory(memory.settings)
    report = fresh.substring.catch_up()
    assert not report.rebuilt and report.bytes == memory.journal.size() - header.end   # it goes on from there
    answers_match(fresh)


@freeze_time(NOW)
def test_a_torn_segment_and_a_shrunk_journal_rebuild(memory: Memory) -> None:
    big_events(memory, 260, seed=3)
    memory.substring.catch_up()
    index = memory.substring.index
    memory.substring.close()
    with index.columns_path.open("r+b") as handle:   # a segment torn short: never trusted
        handle.truncate(index.columns_path.stat().st_size - 1)
    assert memory.substring.catch_up().rebuilt
    answers_match(memory)
    # the journal shrinks into the middle of a segment, then other lines are written
    size = memory.journal.size()
    with memory.journal.path.open("r+b") as handle:
        handle.seek(size // 3)
        handle.truncate(size // 3 + handle.read().index(b"\n") + 1)
    big_events(memory, 40, seed=4, tag="new")
    answers_match(memory)
    assert index.rows_path.stat().st_size <= PER * ROW and os.path.getsize(index.columns_path) % (PER * ROW) == 0


def _written_by_an_older_version(index: BlockIndex, tag: bytes) -> bytes:
    """An URSIDX01 index (block-major `bits`) written over `.sidx`, as an older daemon running beside does."""
    zones = index.zones_path.read_bytes()
    n, end = struct.unpack_from("<QQ", zones, 16)
    old = struct.pack("<8sIIQQI", b"URSIDX01", 16, 64 << 10, n, end, 0).ljust(64, b"\0") + zones[64:] + tag
    index.zones_path.write_bytes(old)
    (index.dir / "bits").write_bytes(bytes(n * ROW))
    return old


@freeze_time(NOW)
def test_another_versions_index_is_left_to_it_and_this_ones_kept_beside_it(memory: Memory) -> None:
    """An older daemon and a newer CLI (or the reverse) on one home: neither rebuilds the other's index."""
    big_events(memory, 120, seed=5)
    memory.substring.catch_up()
    index = memory.substring.index
    primary = index.dir
    memory.substring.close()
    theirs = _written_by_an_older_version(index, b"")
    answers_match(memory)
    assert (primary / "zones").read_bytes() == theirs and (primary / "bits").exists()
    beside = primary.with_name(primary.name + "-ursidx02")
    assert index.dir == beside and (beside / "zones").read_bytes().startswith(b"URSIDX02")
    assert memory.substring.index.state()["path"] == str(beside)
    # the older one catches up again in its format; this one's is not rebuilt, and follows the journal
    (primary / "zones").write_bytes(theirs + b"more")
    big_events(memory, 30, seed=6, tag="later")
    assert not memory.substring.catch_up().rebuilt
    answers_match(memory)
    assert (primary / "zones").read_bytes() == theirs + b"more"
    # a new process (the next CLI call) goes beside it at once, without rebuilding
    again = BlockIndex(memory.journal)
    assert not again.catch_up().rebuilt and again.dir == beside
    again.close()


@freeze_time(NOW)
def test_a_parallel_build_writes_the_segments_one_process_writes(memory: Memory, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from urchin.search import blockindex

    big_events(memory, 330, seed=5)
    serial = SubstringSearcher(memory.journal, tmp_path / "serial")
    serial.catch_up()
    monkeypatch.setattr(blockindex, "_PARALLEL_FROM", 1)
    monkeypatch.setattr(blockindex, "_TASK_BLOCKS", 3)   # tasks that straddle the segments
    parallel = SubstringSearcher(memory.journal, tmp_path / "parallel")
    assert parallel.catch_up().events == 330 and parallel.index.parallel_blocks >= 4
    for name in ("zones", "rows", "columns"):
        assert (tmp_path / "parallel" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes(), name


def test_numpy_and_python_make_the_same_columns() -> None:
    rows = os.urandom(PER * ROW)
    columns = blockstore.to_columns(rows, bulk=True)
    assert columns == blockstore.to_columns(rows, bulk=False)
    assert columns[5 * PER + 1] == rows[ROW + 5]   # byte 5 of the second row


@freeze_time(NOW)
def test_a_segments_header_is_durable_before_its_rows_are_written_over(memory: Memory,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """After a power loss the zones file may hold an older header, naming rows a later catch-up
    overwrote: so a header that adds a segment is synced before any row is written over."""
    written, synced = [0], [0]   # segments named by the last header written, and by the last one synced
    real_pwrite, real_sync = os.pwrite, os.fdatasync

    def name(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if name(fd) == "zones" and offset == 0 and data[:8] == blockstore.MAGIC:
            written[0] = blockstore.read_header(data).segments   # type: ignore[union-attr]
        elif name(fd) == "rows":
            assert synced[0] == written[0], "rows written over while the header naming them may be lost"
        return real_pwrite(fd, data, offset)

    def fdatasync(fd: int) -> None:
        real_sync(fd)
        if name(fd) == "zones":
            synced[0] = written[0]

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    for i in range(4):   # catch-ups small and large: rows turned into segments on the way
        big_events(memory, 40 + 60 * i, seed=20 + i, tag=f"d{i}")
        memory.substring.catch_up()
    assert written[0] >= 4
    size = memory.journal.size()   # a cut (the journal shrank into a segment) is durable before rows follow it
    with memory.journal.path.open("r+b") as handle:
        handle.seek(size // 3)
        handle.truncate(size // 3 + handle.read().index(b"\n") + 1)
    big_events(memory, 40, seed=30, tag="after")
    assert memory.substring.catch_up().rebuilt
    answers_match(memory)


@freeze_time(NOW)
def test_columns_kept_between_views_are_not_reused_after_a_compaction_rebuilt_their_segments(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forget's compaction cuts into a segment and the next catch-up rebuilds it from the shifted lines:
    the `columns` file ends as long as before, and a clock that ticks coarsely (a jiffy before Linux 6.13)
    may give it the same mtime, so the kept columns are told from new ones by the segments' zones."""
    monkeypatch.setattr(blockview, "_EAGER", 0)   # every block through the columns kept as ints
    big_events(memory, 200, seed=6)
    every = [e for _, e in memory.journal.iter_events()]
    tags = [f"e{i}" for i in range(0, 200, 3)]
    for tag in tags:   # every column these queries need is read and kept
        searched(memory, tag, 0, 100)
    columns = memory.substring.index.columns_path
    before = columns.stat()
    memory.forget([e.id for e in every[3:6]], confirm=True)
    memory.compact()
    memory.substring.catch_up()
    assert columns.stat().st_size == before.st_size
    os.utime(columns, ns=(before.st_atime_ns, before.st_mtime_ns))   # rewritten within one clock tick
    every = [e for _, e in memory.journal.iter_events()]
    assert [searched(memory, tag, 0, 100) for tag in tags] == [reference(memory, tag, 0, 100, every=every)
                                                               for tag in tags]


@freeze_time(NOW)
def test_the_index_dropped_under_a_process_still_excludes_a_second_one(memory: Memory, tmp_path: Path) -> None:
    """Another process's upgrade (or a user) drops `<journal>.sidx/` while this one keeps its lock file
    open: the next catch-up locks the new directory's file, so two catch-ups never run at once."""
    import fcntl
    import shutil
    import threading

    big_events(memory, 60, seed=7)
    memory.substring.catch_up()   # this process's lock file is open
    shutil.rmtree(memory.substring.index.dir)
    other = SubstringSearcher(memory.journal)   # a second process, on the new directory
    held = other.index._lock()
    fcntl.flock(held, fcntl.LOCK_EX)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (memory.substring.catch_up(), done.set()))
    worker.start()
    try:
        assert not done.wait(0.3), "a catch-up ran while another process held the index's lock"
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        worker.join(10)
    assert done.is_set()
    other.close()
    answers_match(memory)


def test_a_block_rewritten_in_place_with_nothing_appended_is_indexed_again(memory: Memory) -> None:
    """A same-length change inside a middle block leaves the head and every block's tail as they
    were: the journal's mtime moved with nothing appended is what shows it, and the index is built
    again (the new word was a missed hit: its block's bitmap lacked its trigrams)."""
    big_events(memory, 200, seed=5)
    memory.substring.catch_up()
    memory.substring.close()
    data = memory.journal.path.read_bytes()
    before = os.stat(memory.journal.path).st_mtime_ns
    with memory.journal.path.open("r+b") as handle:   # "e100" -> "zq00": the line keeps its length
        handle.seek(data.index(b' e100"') + 1)
        handle.write(b"zq00")
    os.utime(memory.journal.path, ns=(before + 10**9, before + 10**9))   # a later tick than the catch-up's
    done = memory.substring.catch_up()
    assert len(searched(memory, "zq00", 0, 10)) == 1 and done.rebuilt
    answers_match(memory)
    assert not memory.substring.catch_up().rebuilt     # the header names the mtime it was built at


def test_an_append_in_flight_is_not_taken_for_a_rewrite_in_place(memory: Memory) -> None:
    """A write(2) moves the journal's mtime before its first byte lands: a catch-up between the two
    (a search beside a writer: ~1 stat in 200 during steady appends on ext4) saw the mtime moved with
    nothing appended and rebuilt the whole index (~70 s at 3M events). The writer holds the journal's
    lock through its write: with it held, no rewrite is assumed; with it free, the mtime still moved
    with nothing appended is one."""
    big_events(memory, 60, seed=9)
    memory.substring.catch_up()
    before = os.stat(memory.journal.path).st_mtime_ns
    with memory.journal.locked():   # the writer's state between its mtime and its bytes
        os.utime(memory.journal.path, ns=(before + 10**9, before + 10**9))
        assert not memory.substring.catch_up().rebuilt
    big_events(memory, 3, seed=10)   # the append lands
    assert not memory.substring.catch_up().rebuilt
    answers_match(memory)
    mtime = os.stat(memory.journal.path).st_mtime_ns
    os.utime(memory.journal.path, ns=(mtime + 10**9, mtime + 10**9))   # moved with no writer: a rewrite
    assert memory.substring.catch_up().rebuilt


def test_a_torn_tail_cut_back_to_the_indexed_end_keeps_the_index(memory: Memory) -> None:
    """A writer killed mid-line leaves a torn tail; a catch-up indexes up to it; the next holder of the
    journal's lock (a daemon's start, an ingest of duplicates only) cuts it: the journal is then exactly
    what is indexed, with a later mtime. The torn record naming that offset proves the cut: no rebuild
    (it was a whole one, ~70 s at 3M). A cut elsewhere proves nothing."""
    big_events(memory, 60, seed=11)
    memory.substring.catch_up()
    with memory.journal.path.open("ab") as handle:
        handle.write(b'{"id":"torn-1","timestamp":"2026-')   # the kill
    memory.substring.catch_up()
    with memory.journal.locked():   # repair_tail: the torn record, then the cut
        pass
    assert memory.journal.torn_records() == 1
    assert not memory.substring.catch_up().rebuilt
    answers_match(memory)
    big_events(memory, 3, seed=12)
    assert not memory.substring.catch_up().rebuilt
    answers_match(memory)
    with memory.journal.torn_path.open("ab") as handle:   # a torn record naming another offset
        handle.write(b'{"offset":1,"length":3,"detected_at":"2026-12-06T11:00:00Z","data_b64":"YWJj"}\n')
    mtime = os.stat(memory.journal.path).st_mtime_ns
    os.utime(memory.journal.path, ns=(mtime + 10**9, mtime + 10**9))
    assert memory.substring.catch_up().rebuilt


def _ranges_by_find(data: bytes, start: int) -> list[tuple[int, int]]:
    """The whole blocks as the sequential catch-up cuts them: the first newline BLOCK_TARGET - 1 bytes
    or more past a block's start ends it."""
    ranges = []
    while (stop := data.find(b"\n", start + BLOCK_TARGET - 1)) >= 0:
        ranges.append((start, stop + 1))
        start = stop + 1
    return ranges


def test_block_ranges_are_cut_where_the_sequential_catch_up_cuts_them(tmp_path: Path) -> None:
    """Lines short and long (past the first piece read, past 1 MiB), one ending right at a block's
    target, a last line without its newline, a start inside the file and an end short of it."""
    rng = random.Random(3)
    lines = [b"x" * rng.choice((10, 300, 5000, 70_000)) for _ in range(300)]
    lines[40] = b"y" * (3 << 20)
    data = b"a" * (BLOCK_TARGET - 1) + b"\n" + b"\n".join(lines) + b"\n" + b"tail without its newline"
    (tmp_path / "journal").write_bytes(data)
    fd = os.open(tmp_path / "journal", os.O_RDONLY)
    try:
        for start, size in ((0, len(data)), (BLOCK_TARGET - 1, len(data)), (12_345, len(data) - 999_999), (0, 100)):
            found = block_ranges(fd, start, size)
            assert found == _ranges_by_find(data[:size], start), (start, size)
        assert block_ranges(fd, 0, len(data))[0] == (0, BLOCK_TARGET) and len(found) == 0
    finally:
        os.close(fd)


def _peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_finding_a_bulk_builds_blocks_holds_a_piece_not_the_journal(disk_path: Path) -> None:
    """`urchin import`'s catch-up finds its blocks' ends before its workers build them: reading each end,
    not the journal mapped, whose every page a map's `find` makes this process's (RSS, at 3M events
    1.4 GB). A journal just written (its pages in the page cache, as after an import)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")    # VmHWM back to VmRSS
    except OSError:
        pytest.skip("no /proc/self/clear_refs")
    line = b"z" * 999 + b"\n"
    with (disk_path / "journal").open("wb") as handle:
        for _ in range(32):
            handle.write(line * 1024)     # 32 MB
    fd = os.open(disk_path / "journal", os.O_RDONLY)
    try:
        Path("/proc/self/clear_refs").write_text("5")
        before = _peak_kib()
        ranges = block_ranges(fd, 0, 32 << 20)      # past the end: read to it
        grown = _peak_kib() - before
    finally:
        os.close(fd)
    assert ranges == [(i * 66_000, (i + 1) * 66_000) for i in range(496)]    # 66 lines a block
    assert grown < 4096, grown   # KiB: under 4 MB of the 32 (the map: all 32)
