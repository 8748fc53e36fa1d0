"""The id index (dedupe): what a long-lived process keeps of it in memory, and that it finds every id."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import orjson
import pytest

from urchin import idindex
from urchin.idindex import IdIndex, id_hash
from urchin.idmemo import Records
from urchin.journal import Journal


def _journal(path: Path, ids: list[str]) -> Journal:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps({"id": i, "content": "x", "timestamp": "2026-01-01T00:00:00.000Z"}) + b"\n"
                              for i in ids))
    return Journal(path)


def _caught_up(tmp_path: Path, ids: list[str]) -> tuple[Journal, IdIndex]:
    """A journal of `ids` and its id index, caught up as every writer leaves it."""
    journal = _journal(tmp_path / "journal" / "events.jsonl", ids)
    index = IdIndex(journal)
    with journal.locked():
        index.catch_up()
    return journal, index


def _loaded_and_caught_up(journal: Journal) -> tuple[IdIndex, tuple[int, int]]:
    """An index loaded (as a daemon's) and caught up, with the memory traced meanwhile (held, peak)."""
    index = IdIndex(journal)
    index.load()
    tracemalloc.start()
    try:
        with journal.locked():
            index.catch_up()
        return index, tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()


def test_a_loaded_id_index_holds_about_8_bytes_an_event(tmp_path: Path) -> None:
    """A daemon keeps every id's 32-bit hash prefix and record number as packed arrays: not a Python
    object per event (a dict took ~150 bytes an event: 450 MB at 3M events), nor the whole hash and
    offset (16 bytes: 46 MB at 3M), which a hit reads back from the sidecar."""
    ids = [f"evt-{i:06d}" for i in range(40_000)]
    journal = _journal(tmp_path / "journal" / "events.jsonl", ids)
    with journal.locked():
        IdIndex(journal).catch_up()      # the sidecar, as every writer leaves it
    index, (held, _) = _loaded_and_caught_up(journal)
    assert held <= 10 * len(ids), f"{held / len(ids):.1f} bytes an event"
    assert all(index.contains(i) for i in random.sample(ids, 200))
    assert not index.contains("evt-absent") and index.lookup(ids[7]) == journal.size() // len(ids) * 7


def _records(stored: list[tuple[int, int]]) -> Records:
    """Records by number out of `stored`, as `IdIndex` reads them from its sidecar."""
    return lambda numbers: [stored[n] for n in numbers if n < len(stored)]


def test_every_id_is_found_across_loads_records_and_merges(tmp_path: Path) -> None:
    """Ids written before the load, by this process after it (folded into the arrays every
    `merge_at`), the same hash twice, hashes sharing their 32-bit prefix, and hashes at the ends of
    the range: all found, none invented."""
    import numpy as np

    from urchin.idmemo import IdMemo

    stored: list[tuple[int, int]] = []       # the sidecar's records, in number order
    memo = IdMemo(_records(stored))
    memo.merge_at = 37
    expected: dict[int, list[int]] = {}
    rng = random.Random(5)
    twins = [0, 2**64 - 1, 12345, 12346, (7 << 32) + 1, (7 << 32) + 2]   # 12345/12346: one prefix, two hashes
    for offset in range(3_000):
        h = rng.choice(twins) if offset % 11 == 0 else rng.getrandbits(64)
        stored.append((h, offset))
        memo.add(h, offset, len(stored) - 1)
        expected.setdefault(h, []).append(offset)
        if offset % 500 == 0:
            hashes = [rng.getrandbits(64) for _ in range(50)] + [12345, (7 << 32) + 3]
            offsets = list(range(10**6 + offset, 10**6 + offset + len(hashes)))
            first = len(stored)
            stored.extend(zip(hashes, offsets, strict=True))
            memo.merge(np.array(hashes, dtype=np.uint64), np.arange(first, len(stored), dtype=np.uint32))
            for h2, o in zip(hashes, offsets, strict=True):
                expected.setdefault(h2, []).append(o)
    assert {h: sorted(memo.get(h)) for h in expected} == {h: sorted(offsets) for h, offsets in expected.items()}
    assert memo.get(99) == [] and memo.get((7 << 32) + 4) == [] and len(memo) == sum(map(len, expected.values()))


def test_a_batch_of_new_ids_gives_the_garbage_collector_nothing_to_do() -> None:
    """An importer adds ~4,800 new ids a batch and keeps ~32k of them until a merge: an object the
    collector tracks each (a one-offset list) made ~7 collections a batch and a full one each merge
    (~6% of `urchin import`'s own CPU). Ints are not tracked: no collection, the same answers."""
    import gc

    from urchin.idmemo import IdMemo

    memo = IdMemo(_records([]))
    rng = random.Random(3)
    hashes = [rng.getrandbits(64) for _ in range(5_000)]
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        collections.extend([info["generation"]] if phase == "stop" else [])

    gc.collect()
    gc.callbacks.append(count)
    try:
        memo.add_new(hashes, range(10, 5_010), 0)
    finally:
        gc.callbacks.remove(count)
    assert collections == [] and memo.get(hashes[9]) == [19] and memo.held(hashes[:3]) == set(hashes[:3])
    memo.add(hashes[9], 7, 5_000)
    assert sorted(memo.get(hashes[9])) == [7, 19]


def test_held_answers_for_a_whole_batch_what_get_answers_for_each_hash() -> None:
    """`held` (a bulk writer's one pass over a batch) names exactly the hashes `get` finds, whether
    they sit in the sorted arrays, in the newest records' dict, in both, or nowhere; the range's
    ends and hashes above and below every stored one included."""
    import numpy as np

    from urchin.idmemo import IdMemo

    rng = random.Random(7)
    records: list[tuple[int, int]] = []
    memo = IdMemo(_records(records))
    memo.merge_at = 1 << 30
    assert memo.held([1, 2]) == set() and memo.held([]) == set()
    stored = [rng.getrandbits(64) for _ in range(2_000)] + [1, 2**64 - 2]
    records.extend((h, i) for i, h in enumerate(stored))
    memo.merge(np.array(stored, dtype=np.uint64), np.arange(len(stored), dtype=np.uint32))
    newest = [rng.getrandbits(64) for _ in range(300)] + [stored[5]]
    for offset, h in enumerate(newest):
        records.append((h, 10**6 + offset))
        memo.add(h, 10**6 + offset, len(records) - 1)
    near = [h ^ 1 for h in stored[:50]]       # the prefix of a stored hash, another hash
    probes = (stored[::3] + newest[::2] + near + [rng.getrandbits(64) for _ in range(3_000)]
              + [0, 1, 2, 2**64 - 3, 2**64 - 2, 2**64 - 1])
    rng.shuffle(probes)
    assert memo.held(probes) == {h for h in probes if memo.get(h)}
    assert not memo.held(near) and memo.held(stored[:50]) == set(stored[:50])


def test_a_written_id_is_a_duplicate_after_the_load(tmp_path: Path) -> None:
    journal = _journal(tmp_path / "journal" / "events.jsonl", ["a", "b"])
    index = IdIndex(journal)
    index.load()
    with journal.locked():
        index.catch_up()
    end = journal.size()
    with journal.path.open("ab") as handle:
        handle.write(orjson.dumps({"id": "c", "content": "y"}) + b"\n")
    index.record_hashed([(id_hash("c"), end)], journal.size())
    assert index.contains("c") and index.contains("a") and index.lookup("c") == end


def test_a_batch_of_new_ids_is_recorded_as_one_at_a_time_records_it(tmp_path: Path) -> None:
    """`record_new` (a bulk writer's batch that `held` found nothing of: C-level steps) leaves the
    sidecar's bytes and the memory's answers exactly as `record_hashed` does, merges included, and
    a batch holding two ids of one 64-bit hash keeps both offsets."""
    batches = [[f"b{n}-{i}" for i in range(n * 7 + 1)] for n in range(12)]
    twin = random.Random(3).getrandbits(64)
    indexes = []
    for kind in ("hashed", "new"):
        journal = _journal(tmp_path / kind / "events.jsonl", ["first"])
        index = IdIndex(journal)
        index.load()
        assert index._mem is not None
        index._mem.merge_at = 20
        with journal.locked():
            index.catch_up()
        for n, ids in enumerate(batches):
            hashes = [twin if n == 5 and i in (0, 3) else id_hash(event_id) for i, event_id in enumerate(ids)]
            offsets = [10**6 * (n + 1) + 17 * i for i in range(len(ids))]
            if kind == "hashed":
                index.record_hashed(list(zip(hashes, offsets, strict=True)), 10**9 + n)
            else:
                index.record_new(hashes, offsets, 10**9 + n)
        indexes.append(index)
    hashed, new = indexes
    assert new.path.read_bytes()[:16] == hashed.path.read_bytes()[:16]   # then each journal's inode
    assert new.path.read_bytes()[24:] == hashed.path.read_bytes()[24:]
    probes = [id_hash(i) for ids in batches for i in ids] + [twin, id_hash("first"), 42]
    assert new._mem is not None and hashed._mem is not None
    assert [sorted(new._mem.get(h)) for h in probes] == [sorted(hashed._mem.get(h)) for h in probes]
    assert sorted(new._mem.get(twin)) == [6 * 10**6, 6 * 10**6 + 51] and len(new._mem) == len(hashed._mem)


def _copy(journal: Journal, to: Path) -> Journal:
    """The journal and its sidecar as `cp -a` copies them: the same bytes in other files."""
    to.mkdir(parents=True)
    for path in (journal.path, IdIndex(journal).path):
        shutil.copy2(path, to / path.name)
    return Journal(to / journal.path.name)


def test_a_copied_journal_keeps_its_sidecar_and_a_replaced_one_of_equal_size_does_not(tmp_path: Path) -> None:
    """A copied home (`cp -a`, a restore, a new laptop) has another journal file with the same bytes:
    its sidecar is re-stamped, not rebuilt. A journal replaced by other bytes of the same size (one id
    in the middle changed) is indexed again, so that id is a duplicate and the one it replaced is not."""
    ids = [f"evt-{i:05d}" for i in range(3000)]
    journal = _journal(tmp_path / "a" / "events.jsonl", ids)
    with journal.locked():
        assert IdIndex(journal).catch_up() == "rebuilt"
        assert IdIndex(journal).catch_up() == "caught up"
    copy = _copy(journal, tmp_path / "b")
    index = IdIndex(copy)
    assert index.covered() == 0           # another file: nothing is taken as covered before the check
    with copy.locked():
        assert index.catch_up() == "kept"
        assert index.catch_up() == "caught up"
    assert index.covered() == copy.size() and index.lookup(ids[1234]) == journal.size() // 3000 * 1234
    replaced = _copy(journal, tmp_path / "c")
    data = replaced.path.read_bytes().replace(b"evt-01500", b"evt-X1500")
    replaced.path.unlink()
    replaced.path.write_bytes(data)       # a new file, as an editor or another tool writes it
    index = IdIndex(replaced)
    with replaced.locked():
        assert index.catch_up() == "rebuilt"
    assert index.contains("evt-X1500") and not index.contains("evt-01500") and index.contains("evt-01501")


def test_an_index_rebuilt_in_a_loaded_process_holds_a_piece_at_a_time(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon rebuilds a lost or stale sidecar with its ids in memory: a piece of the journal at
    a time, not a record object per event (a 3M-event rebuild took 1.3 GB)."""
    monkeypatch.setattr(idindex, "_PIECE", 256 << 10, raising=False)
    ids = [f"evt-{i:06d}" for i in range(30_000)]
    journal = _journal(tmp_path / "journal" / "events.jsonl", ids)
    index, (_, peak) = _loaded_and_caught_up(journal)
    assert peak <= 5 << 20, f"{peak / len(ids):.0f} bytes an event at the peak ({peak >> 10} KiB)"
    assert index.contains(ids[-1]) and index.contains(ids[0]) and len(index._mem or ()) == len(ids)


def test_a_rebuild_killed_midway_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    """SIGKILL while a process rebuilds the sidecar (a restored or copied home's first start): the next
    catch-up drops the records a kill left past the header's offset and goes on from there, leaving
    the bytes a whole rebuild leaves."""
    ids = [f"evt-{i:06d}" for i in range(100_000)]
    journal = _journal(tmp_path / "journal" / "events.jsonl", ids)
    index = IdIndex(journal)
    code = ("import sys; from pathlib import Path; from urchin import idindex; from urchin.journal import Journal; "
            "idindex._PIECE = 1 << 16; j = Journal(Path(sys.argv[1])); l = j.locked(); l.__enter__(); "
            "idindex.IdIndex(j).catch_up()")
    child = subprocess.Popen([sys.executable, "-c", code, str(journal.path)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if index.path.exists() and index.path.stat().st_size > 256 << 10:
                break
            time.sleep(0.001)
        child.kill()
    finally:
        child.wait()
    killed = index.path.stat().st_size
    with journal.locked():
        assert index.catch_up() == "caught up"
    whole = _copy(journal, tmp_path / "whole")
    IdIndex(whole).path.unlink()
    with whole.locked():
        IdIndex(whole).catch_up()
    assert index.path.read_bytes()[32:] == IdIndex(whole).path.read_bytes()[32:]
    assert index.path.read_bytes()[:16] == IdIndex(whole).path.read_bytes()[:16]
    assert 256 << 10 < killed < index.path.stat().st_size or child.returncode == 0   # killed midway (or finished)
    assert index.contains(ids[-1]) and index.lookup(ids[0]) == 0


def test_records_a_kill_left_past_the_covered_offset_are_dropped(tmp_path: Path) -> None:
    """A kill between a piece's records and its header leaves records the header does not cover: the
    next catch-up drops them before indexing those lines again (no record twice)."""
    ids = [f"evt-{i:04d}" for i in range(50)]
    journal, index = _caught_up(tmp_path, ids)
    whole = index.path.read_bytes()
    header = struct.unpack_from("<8sQQQ", whole)
    half = journal.size() // 2
    cut = next(o for o in range(half, journal.size()) if journal.path.read_bytes()[o - 1:o] == b"\n")
    crc = zlib.crc32(journal.path.read_bytes()[:cut])
    index.path.write_bytes(struct.pack("<8sQQQ", header[0], cut, header[2], crc) + whole[32:])
    with journal.locked():
        assert index.catch_up() == "caught up"
    assert index.path.read_bytes() == whole


def _rewrite_in_place(journal: Journal, ids: list[str]) -> None:
    """The journal's file given other lines, its inode kept: what a compaction whose new file lands on
    a freed inode (a second one, with no catch-up between), or a restore onto a reused inode, leaves."""
    lines = b"".join(orjson.dumps({"id": i, "content": "x", "timestamp": "2026-01-01T00:00:00.000Z"}) + b"\n"
                     for i in ids)
    with journal.path.open("r+b") as handle:
        handle.write(lines)
        handle.truncate()


@pytest.mark.parametrize("change", ["a middle line gone", "other ids, the same length"])
def test_a_sidecar_naming_a_reused_inode_is_rebuilt_when_its_records_do_not_match(tmp_path: Path,
                                                                                   change: str) -> None:
    """A header naming the journal's inode is not proof of the bytes: the sidecar's first and last
    records are checked against the lines they name; other bytes are indexed again, so an id the
    journal holds is still a duplicate (the stale records found none, and the event was written twice)."""
    ids = [f"evt-{i:04d}" for i in range(60)]
    journal, index = _caught_up(tmp_path, ids)
    now = ids[:20] + ids[21:] if change == "a middle line gone" else [f"new-{i:04d}" for i in range(60)]
    _rewrite_in_place(journal, now)
    with journal.locked():
        assert IdIndex(journal).catch_up() == "rebuilt"
        assert index.catch_up() == "caught up"
    assert index.lookup(now[-1]) == journal.size() - len(journal.path.read_bytes().splitlines()[-1]) - 1
    assert all(index.contains(i) for i in (now[0], now[30], now[-1]))
    with journal.locked():
        assert index.catch_up() == "caught up"   # the proof holds now: nothing read again


def test_a_loaded_index_drops_its_memory_when_another_process_rebuilt_the_sidecar(tmp_path: Path) -> None:
    """A daemon's ids in memory describe the sidecar it read: when another process rebuilds it for a
    journal on the same inode (other bytes), the daemon's next catch-up reloads, not keeps stale offsets."""
    ids = [f"evt-{i:04d}" for i in range(60)]
    journal = _journal(tmp_path / "journal" / "events.jsonl", ids)
    daemon, _ = _loaded_and_caught_up(journal)
    _rewrite_in_place(journal, ids[:10] + ids[11:] + [f"late-{i:04d}" for i in range(3)])
    with journal.locked():
        assert IdIndex(journal).catch_up() == "rebuilt"
        daemon.catch_up()
    assert daemon.contains("late-0002") and daemon.contains(ids[-1]) and daemon.contains(ids[0])
    assert daemon.lookup(ids[11]) == journal.path.read_bytes().index(b'{"id":"evt-0011"')


def test_a_hostile_sidecar_record_is_no_proof(tmp_path: Path) -> None:
    """Records naming offsets past the journal, or inside a line, make the sidecar rebuilt, never fail."""
    ids = [f"evt-{i:04d}" for i in range(20)]
    journal, index = _caught_up(tmp_path, ids)
    whole = index.path.read_bytes()
    for first in (struct.pack("<QQ", id_hash(ids[0]), 1 << 62), struct.pack("<QQ", id_hash(ids[0]), 3)):
        index.path.write_bytes(whole[:32] + first + whole[48:])
        with journal.locked():
            assert index.catch_up() == "rebuilt"
        assert index.path.read_bytes() == whole
