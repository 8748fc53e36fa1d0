"""Vector cache: append, dedupe, crash repair, windows, top-k; and one run against the real server."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from urchin.errors import EmbedderError
from urchin.search.embedder import Embedder, fingerprint
from urchin.search.vectors import CacheBusy, VectorCache, embed_events

DIM = 16
HOUR = 3_600_000


def rand(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def brute_force(vectors: np.ndarray, q: np.ndarray, rows: np.ndarray, k: int) -> list[int]:
    v = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = v[rows] @ (q / np.linalg.norm(q))
    return [int(rows[i]) for i in np.argsort(-scores, kind="stable")[:k]]


@pytest.fixture
def cache(tmp_path: Path) -> VectorCache:
    return VectorCache(tmp_path, "model-16-abc", DIM).open()


def test_files_are_private(cache: VectorCache, tmp_path: Path) -> None:
    cache.add(["a"], [1], rand(1))
    assert stat.S_IMODE(os.stat(cache.path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "vectors").st_mode) == 0o700
    for f in cache.path.iterdir():
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f.name


def test_each_id_is_stored_once(cache: VectorCache) -> None:
    assert cache.add(["a", "b", "a"], [1, 2, 3], rand(3)) == 2
    assert cache.add(["b", "c"], [2, 4], rand(2, 1)) == 1
    assert len(cache) == 3
    assert cache.missing(["a", "d", "c", "d", "e"]) == ["d", "e"]
    assert "c" in cache and "d" not in cache


def test_rows_survive_reopening_and_are_memory_mapped(tmp_path: Path) -> None:
    vectors = rand(50)
    ids = [f"id-{i}" for i in range(50)]
    with VectorCache(tmp_path, "fp", DIM) as cache:
        cache.add(ids, list(range(50)), vectors)
    with VectorCache(tmp_path, "fp", DIM) as cache:
        assert len(cache) == 50 and cache.missing(ids) == []
        assert isinstance(cache._matrix, np.memmap)
        hits = cache.search(vectors[17], limit=1)
        assert hits[0][0] == "id-17" and hits[0][1] == pytest.approx(1.0, abs=1e-5)


def test_a_torn_append_is_trimmed_on_open(tmp_path: Path) -> None:
    with VectorCache(tmp_path, "fp", DIM) as cache:
        cache.add(["a", "b"], [1, 2], rand(2))
        path = cache.path
    # A crash after the matrix and row records were written, halfway through the ids line.
    with open(path / "matrix.f32", "ab") as f:
        f.write(rand(1, 5).tobytes()[:40])
    with open(path / "rows.bin", "ab") as f:
        f.write(b"\x01" * 16)
    with open(path / "ids.txt", "ab") as f:
        f.write(b"tor")
    with VectorCache(tmp_path, "fp", DIM) as cache:
        assert len(cache) == 2 and cache.missing(["a", "b", "torn"]) == ["torn"]
        assert cache.add(["torn"], [3], rand(1, 9)) == 1
        assert cache.search(rand(1, 9)[0], limit=1)[0][0] == "torn"
    assert (path / "ids.txt").read_bytes() == b"a\nb\ntorn\n"
    assert os.path.getsize(path / "matrix.f32") == 3 * DIM * 4


def test_ids_ahead_of_the_matrix_are_dropped(tmp_path: Path) -> None:
    with VectorCache(tmp_path, "fp", DIM) as cache:
        cache.add(["a", "b", "c"], [1, 2, 3], rand(3))
        path = cache.path
    os.truncate(path / "matrix.f32", 2 * DIM * 4)  # as if the file system lost the last rows
    with VectorCache(tmp_path, "fp", DIM) as cache:
        assert len(cache) == 2 and cache.missing(["a", "b", "c"]) == ["c"]


def test_a_second_writer_sees_the_firsts_rows_and_never_adds_them_again(tmp_path: Path) -> None:
    """Two writers of one model's cache (the daemon's embedder loop, its index process): each loads
    what the other appended before it answers or adds, and hands back the other's vectors."""
    first = VectorCache(tmp_path, "fp", DIM).open()
    second = VectorCache(tmp_path, "fp", DIM).open()
    vectors = rand(3)
    assert first.add(["a", "b"], [1, 2], vectors[:2]) == 2
    assert second.missing(["a", "b", "c"]) == ["c"]
    assert second.add(["b", "c"], [2, 3], rand(2, 7)) == 1      # b is the first's: kept once
    got = second.vectors_of(["a", "b", "zz"])
    assert sorted(got) == ["a", "b"]
    assert np.allclose(got["a"], vectors[0] / np.linalg.norm(vectors[0]), atol=1e-6)
    assert first.search(rand(2, 7)[1], limit=1)[0][0] == "c"     # the second's row, found by the first
    assert first.drop(lambda event_id: event_id == "a") == 1
    assert second.missing(["a", "b", "c"]) == ["a"] and sorted(second.vectors_of(["a", "b", "c"])) == ["b", "c"]
    assert (first.path / "ids.txt").read_bytes() == b"b\nc\n"


def test_a_reader_never_trims_a_writers_append_in_progress(tmp_path: Path) -> None:
    writer = VectorCache(tmp_path, "fp", DIM).open()
    reader = VectorCache(tmp_path, "fp", DIM).open()
    writer.add(["a"], [1], rand(1))
    with writer.exclusive():        # mid-append: matrix and rows written, the ids line not yet
        with open(writer.path / "matrix.f32", "ab") as f:
            f.write(rand(1, 3).tobytes())
        with open(writer.path / "rows.bin", "ab") as f:
            f.write(b"\x00" * 16)
        assert reader.missing(["a", "b"]) == ["b"] and len(reader.search(rand(1, 3)[0], limit=5)) == 1
        assert os.path.getsize(writer.path / "matrix.f32") == 2 * DIM * 4   # nothing trimmed under it
    # the writer died there: the next writer trims the torn append before adding
    assert reader.add(["b"], [2], rand(1, 4)) == 1
    assert (writer.path / "ids.txt").read_bytes() == b"a\nb\n"
    assert os.path.getsize(writer.path / "matrix.f32") == 2 * DIM * 4


def test_opening_beside_a_writer_mid_request_does_not_wait(tmp_path: Path) -> None:
    """A query process opens the cache while the daemon's index process holds the writers' lock for an
    embedding request: it reads what is there at once, leaving the append in progress alone. A cache
    still being created cannot be read: `wait=False` says so at once instead of waiting."""
    writer = VectorCache(tmp_path, "fp", DIM).open()
    writer.add(["a"], [1], rand(1))
    with writer.exclusive():
        with open(writer.path / "matrix.f32", "ab") as f:
            f.write(rand(1, 3).tobytes())
        reader = VectorCache(tmp_path, "fp", DIM).open(wait=False)
        assert reader.missing(["a", "b"]) == ["b"] and [h[0] for h in reader.search(rand(1)[0], limit=5)] == ["a"]
        assert os.path.getsize(writer.path / "matrix.f32") == 2 * DIM * 4
        with pytest.raises(CacheBusy), reader.exclusive(wait=False):
            pass
    creator = VectorCache(tmp_path, "fp-new", DIM)
    with creator.exclusive():
        with pytest.raises(CacheBusy):
            VectorCache(tmp_path, "fp-new", DIM).open(wait=False)
    assert VectorCache(tmp_path, "fp-new", DIM).open(wait=False).missing(["a"]) == ["a"]


def test_a_reader_never_pairs_an_id_with_another_rows_vector_while_a_drop_swaps_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drop replaces matrix, rows, then ids: a reader that loads between those renames (here, frozen
    right before the ids' rename) must not pair an id with a shifted row; once the swap is done it
    reads the new files without the writers' lock, so a later query does not wait for an embedding."""
    import threading

    reader = VectorCache(tmp_path, "fp", DIM).open()
    reader.add([f"a{i}" for i in range(10)], list(range(10)), np.eye(DIM, dtype=np.float32)[:10])
    writer = VectorCache(tmp_path, "fp", DIM).open()
    writer.add([f"a{i}" for i in range(10, 15)], list(range(10, 15)), np.eye(DIM, dtype=np.float32)[10:15])
    real_replace, paused, resume = os.replace, threading.Event(), threading.Event()

    def replace(src: Any, dst: Any) -> None:
        if str(dst).endswith("ids.txt") and threading.current_thread().name == "dropper":
            paused.set()
            resume.wait(10)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    dropper = threading.Thread(target=writer.drop, args=(lambda event_id: event_id == "a0",), name="dropper")
    dropper.start()
    assert paused.wait(10)
    try:
        got = reader.vectors_of(["a5", "a12"])   # mid-swap: waited out for 2 s, then CacheBusy, never wrong
        assert {k: int(np.argmax(v)) for k, v in got.items()} == {"a5": 5, "a12": 12}
    except CacheBusy:
        pass
    finally:
        resume.set()
        dropper.join(10)
    with writer.exclusive():                    # the writers' lock held, as by an embedding request
        assert {k: int(np.argmax(v)) for k, v in reader.vectors_of(["a0", "a5", "a12"]).items()} == {"a5": 5, "a12": 12}
        assert reader.search(np.eye(DIM, dtype=np.float32)[5], limit=1)[0][0] == "a5"
        fresh = VectorCache(tmp_path, "fp", DIM).open(wait=False)
        assert fresh.missing(["a0", "a1", "a14"]) == ["a0"]


def test_writers_in_two_processes_store_each_id_once(tmp_path: Path) -> None:
    """Two processes add overlapping ids at once; every id is stored once, with a vector one of them gave."""
    script = (
        "import sys, numpy as np\n"
        "from urchin.search.vectors import VectorCache\n"
        "cache = VectorCache(sys.argv[1], 'fp', 16).open()\n"
        "for start in range(0, 400, 20):\n"
        "    ids = [f'id-{i}' for i in range(start, start + 40)]\n"
        "    v = np.array([[hash(i) % 97 + 1.0] + [float(len(i))] * 15 for i in ids], np.float32)\n"
        "    cache.add(ids, list(range(len(ids))), v)\n"
    )
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], env=env) for _ in range(2)]
    assert [p.wait(60) for p in procs] == [0, 0]
    with VectorCache(tmp_path, "fp", DIM) as cache:
        ids = (cache.path / "ids.txt").read_bytes().decode().split()
        assert sorted(ids) == sorted({f"id-{i}" for i in range(420)}) and len(ids) == 420
        assert os.path.getsize(cache.path / "matrix.f32") == 420 * DIM * 4


@pytest.mark.parametrize("in_order", [True, False])
def test_search_matches_brute_force_within_the_window(tmp_path: Path, in_order: bool) -> None:
    n = 2000
    vectors = rand(n, 3)
    ts = np.arange(n) * HOUR if in_order else np.random.default_rng(4).permutation(n) * HOUR
    ids = [f"e{i:05d}" for i in range(n)]
    q = rand(1, 7)[0]
    with VectorCache(tmp_path, "fp", DIM) as cache:
        for start in range(0, n, 300):  # several appends, like events arriving
            cache.add(ids[start:start + 300], ts[start:start + 300].tolist(),
                      vectors[start:start + 300])
        since = 1500 * HOUR
        got = [i for i, _ in cache.search(q, since_ms=since, limit=10)]
        want = brute_force(vectors, q, np.flatnonzero(ts >= since), 10)
        assert got == [ids[r] for r in want]
        got_all = [i for i, _ in cache.search(q, limit=10)]
        assert got_all == [ids[r] for r in brute_force(vectors, q, np.arange(n), 10)]
        mask = np.arange(n) % 3 == 0
        got_masked = [i for i, _ in cache.search(q, since_ms=since, mask=mask, limit=5)]
        want_masked = brute_force(vectors, q, np.flatnonzero((ts >= since) & mask), 5)
        assert got_masked == [ids[r] for r in want_masked]


def test_accept_filters_after_scoring_and_widens_until_limit(cache: VectorCache) -> None:
    n = 500
    vectors = rand(n, 11)
    ids = [f"e{i:03d}" for i in range(n)]
    cache.add(ids, list(range(n)), vectors)
    q = rand(1, 12)[0]
    rare = {f"e{i:03d}" for i in range(0, n, 50)}  # 10 of 500: needs several widenings
    got = [i for i, _ in cache.search(q, accept=rare.__contains__, limit=6)]
    want = [ids[r] for r in brute_force(vectors, q, np.arange(0, n, 50), 6)]
    assert got == want
    assert cache.search(q, accept=lambda _id: False, limit=3) == []


def test_equal_scores_rank_newer_first_then_by_id(cache: VectorCache) -> None:
    v = np.tile(rand(1), (3, 1))
    cache.add(["b", "a", "c"], [5, 5, 9], v)
    assert [i for i, _ in cache.search(v[0], limit=3)] == ["c", "a", "b"]


def test_empty_window_and_zero_limit_return_nothing(cache: VectorCache) -> None:
    assert cache.search(rand(1)[0]) == []
    cache.add(["a"], [10], rand(1))
    assert cache.search(rand(1)[0], since_ms=11) == []
    assert cache.search(rand(1)[0], limit=0) == []


def test_bad_input_is_refused_and_nothing_is_stored(cache: VectorCache) -> None:
    with pytest.raises(EmbedderError, match=r"expected shape \(2, 16\)"):
        cache.add(["a", "b"], [1, 2], rand(3))
    with pytest.raises(EmbedderError, match="must be one non-empty line"):
        cache.add(["a\nb"], [1], rand(1))
    with pytest.raises(EmbedderError, match="query has 3 dims"):
        cache.search(np.zeros(3))
    assert len(cache) == 0 and os.path.getsize(cache.path / "matrix.f32") == 0


def test_another_model_gets_its_own_folder_and_dims_never_mix(tmp_path: Path) -> None:
    with VectorCache(tmp_path, "model-a", DIM) as a, VectorCache(tmp_path, "model-b", 8) as b:
        a.add(["x"], [1], rand(1))
        assert a.path != b.path and len(b) == 0
    with pytest.raises(EmbedderError, match="holds 16-dim"):
        VectorCache(tmp_path, "model-a", 8).open()


# -- with the real server -----------------------------------------------------------------------

@dataclass
class Ev:
    id: str
    ts_ms: int
    content: str
    title: str | None = None


EVENTS = [
    Ev("e1", 1_000, "We decided to use OAuth2 with PKCE for the login flow", "auth decision"),
    Ev("e2", 2_000, "Fixed the flaky CSV export test by sorting rows"),
    Ev("e3", 3_000, "Bumped numpy to 2.1 and regenerated the lock file"),
    Ev("e4", 4_000, "Session tokens now expire after 30 minutes of inactivity"),
] + [Ev(f"filler-{i}", 5_000 + i, f"routine log line number {i} from the build") for i in range(100)]


@pytest.mark.slow
def test_events_are_embedded_once_ever_and_found_by_meaning(embedder_url: str, tmp_path: Path) -> None:
    calls: list[str] = []
    hooks = {"request": [lambda r: calls.append(f"{r.method} {r.url.path}")]}
    with httpx.Client(event_hooks=hooks) as client:
        with Embedder(embedder_url, "all-MiniLM-L6-v2", api="openai", client=client) as embedder:
            with VectorCache(tmp_path, embedder.fingerprint, embedder.dim) as cache:
                assert embed_events(embedder, cache, EVENTS + EVENTS[:2]) == len(EVENTS)
                hits = cache.search(embedder.embed_query("decisions about authentication"), limit=2)
        assert {i for i, _ in hits} == {"e1", "e4"}
        first_run = calls.count("POST /v1/embeddings")
        assert first_run == 1 + 2 + 1  # dim probe, 104 texts in 2 batches, the query
        calls.clear()
        # A new process: new client, cache reopened from disk; nothing known is sent again.
        with Embedder(embedder_url, "all-MiniLM-L6-v2", api="openai", client=client) as embedder:
            with VectorCache(tmp_path, fingerprint("openai", "all-MiniLM-L6-v2", 384), 384) as cache:
                assert embed_events(embedder, cache, EVENTS) == 0
                assert len(cache) == len(EVENTS)
        assert calls.count("POST /v1/embeddings") == 0


_DROPPER = """
import os, sys, time
import numpy as np
from urchin.search.vectors import VectorCache
def slowly(call):               # widen the moments a kill can fall into: between fsyncs and renames
    def slow(*args):
        time.sleep(0.01)
        return call(*args)
    return slow
os.fsync, os.replace = slowly(os.fsync), slowly(os.replace)
cache = VectorCache(sys.argv[1], 'fp', 16).open()
print('ready', flush=True)
for i in range(int(sys.argv[2])):
    cache.drop(lambda event_id, i=i: event_id == f'a{i}')
"""


def test_a_drop_killed_at_any_moment_leaves_the_old_rows_or_the_new_ones(tmp_path: Path) -> None:
    """SIGKILL a process dropping rows (each drop writes the three files anew, then a marker commits
    the swap) at random moments: the next open finds every id with its own vector and time, the files
    agreeing, and no half-swap left behind: the cache before some drop, or after it."""
    import random
    import signal
    import subprocess
    import sys
    import time

    n = 5_000
    vectors = rand(n, 11)
    with VectorCache(tmp_path, "fp", DIM) as cache:
        cache.add([f"a{i}" for i in range(n)], list(range(n)), vectors)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    chance, dropped = random.Random(5), 0
    for _ in range(12):
        child = subprocess.Popen([sys.executable, "-c", _DROPPER, str(tmp_path), str(n)], env=env,
                                 stdout=subprocess.PIPE)
        try:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
            time.sleep(chance.uniform(0.0, 0.5))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        with VectorCache(tmp_path, "fp", DIM) as cache:
            ids = (cache.path / "ids.txt").read_bytes().decode().split("\n")[:-1]
            first = int(ids[0][1:])
            assert first >= dropped and ids == [f"a{i}" for i in range(first, n)]   # a0..a(first-1) dropped
            dropped = first
            got = cache.vectors_of(ids)
            assert np.allclose(np.stack([got[i] for i in ids]), unit[first:], atol=1e-6)
            rows = np.fromfile(cache.path / "rows.bin", dtype=[("ts", "<i8"), ("key", "<u8")])
            assert rows["ts"].tolist() == list(range(first, n))
            assert os.path.getsize(cache.path / "matrix.f32") == len(ids) * DIM * 4
            assert not [p.name for p in cache.path.iterdir() if p.name.endswith(".new") or p.name == "drop.commit"]
    assert dropped > 0, "no drop completed before a kill: the test proved nothing"


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="/proc/self/smaps")
def test_the_matrix_appended_or_rewritten_stays_cached_and_no_reader_maps_it(disk_path: Path) -> None:
    """What an append wrote and a drop rewrote stays in the page cache (a query's first read after a
    large write is not one from the disk: +0.36 s after appends, +0.85 s after a drop at 300k rows when
    they were dropped), and a reader's `background` and `vectors_of` read the rows they need with
    `pread`: no page of the file is mapped into the reader (a just-written one's whole 2 MB folio)."""
    from tests.test_cosine_pages import _cached_pages

    dim = 384
    cache = VectorCache(disk_path, "model-384", dim).open()
    vectors = np.random.default_rng(4).standard_normal((1024, dim)).astype(np.float32)
    for start, stop in ((0, 509), (509, 1001), (1001, 1024)):     # rows of 1,536 bytes: the last two start mid-page
        cache.add([f"e{i}" for i in range(start, stop)], list(range(start, stop)), vectors[start:stop])
    matrix = cache.path / "matrix.f32"
    pages = -(-matrix.stat().st_size // 4096)
    assert _cached_pages(matrix) == pages
    assert cache.drop(lambda event_id: event_id == "e7") == 1
    assert _cached_pages(matrix) == -(-matrix.stat().st_size // 4096)
    reader = VectorCache(disk_path, "model-384", dim).open()
    reader.background(vectors[3])
    found = reader.vectors_of(["e0", "e8", "e1023"])
    assert _mapped_kb(matrix) == 0
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert len(reader) == 1023 and all(np.allclose(found[f"e{i}"], unit[i], atol=1e-6) for i in (0, 8, 1023))


def _mapped_kb(path: Path) -> int:
    """This process's resident KB of its maps of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line[:1].isalnum() and "-" in line.split(" ", 1)[0]:      # a mapping's first line
            inside = line.endswith(" " + str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="/proc/self/smaps")
def test_background_and_vectors_of_read_rows_without_the_map(disk_path: Path) -> None:
    """A query's `background` (1,024 rows spread over the whole matrix) and `vectors_of` read their rows
    with `pread`, not through the map: a page read through a map is the reader's (a just-written file's
    whole 2 MB folio: 21 -> 402 MB of RSS over a 300k-row matrix). The answers are those of the map."""
    from urchin.search.vector_math import background, normalise

    vectors = rand(5000, seed=9)
    writer = VectorCache(disk_path, "m", DIM).open()
    writer.add([f"e{i}" for i in range(4000)], list(range(4000)), vectors[:4000])
    reader = VectorCache(disk_path, "m", DIM).open()
    q = rand(1, seed=10)[0]
    matrix = disk_path / "vectors" / "m" / "matrix.f32"
    expected = [background(np.fromfile(matrix, np.float32).reshape(-1, DIM), normalise(q[None, :])[0])]
    got = [reader.background(q), reader.background(q)]         # the second from the rows read once
    writer.add([f"e{i}" for i in range(4000, 5000)], list(range(4000, 5000)), vectors[4000:])
    expected.append(background(np.fromfile(matrix, np.float32).reshape(-1, DIM), normalise(q[None, :])[0]))
    got.append(reader.background(q))                          # the rows another process appended, too
    found = reader.vectors_of(["e4999", "e0", "nope", "e1", "e2500"])
    assert _mapped_kb(matrix) == 0
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert got == [expected[0], expected[0], expected[1]] and expected[0] != expected[1]
    assert sorted(found) == ["e0", "e1", "e2500", "e4999"]
    assert all(np.allclose(found[f"e{i}"], unit[i], atol=1e-6) for i in (0, 1, 2500, 4999))


def test_a_drop_copies_the_kept_rows_a_piece_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`drop` writes the kept rows of the matrix as it reads them, DROP_PIECE bytes at a time: its
    process never holds the whole matrix (nor maps it). Dropped rows in several pieces; the rest stay."""
    import tracemalloc

    from urchin.search import vector_files

    monkeypatch.setattr(vector_files, "DROP_PIECE", 64 << 10)
    dim, n = 512, 4096                      # an 8 MB matrix, 64 KB pieces
    vectors = np.random.default_rng(11).standard_normal((n, dim)).astype(np.float32)
    cache = VectorCache(tmp_path, "m", dim).open()
    cache.add([f"e{i}" for i in range(n)], list(range(n)), vectors)
    gone = {f"e{i}" for i in (0, 31, 32, 1000, 2000, 4095)}
    assert cache.drop(lambda event_id: event_id == "e2000") == 1      # what a first drop imports: not traced
    tracemalloc.start()
    try:
        assert cache.drop(gone.__contains__) == 5
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * dim * 4 // 4, peak            # ~0.65 MB (ids, rows.bin, the id index); the base: 3x the matrix
    kept = [i for i in range(n) if f"e{i}" not in gone]
    reader = VectorCache(tmp_path, "m", dim).open()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert [reader.id_at(r) for r in range(len(reader))] == [f"e{i}" for i in kept]
    assert np.allclose(np.fromfile(cache.path / "matrix.f32", np.float32).reshape(-1, dim), unit[kept], atol=1e-6)
