"""No first-start wall: a token-cosine query never waits for a build of the view.

With a large backlog (an import, a first start), queries answer from the newest events and say how
many they left out, while a build (the daemon's thread, or a child of a process on its own) indexes
the rest; what it swaps in equals an index built from scratch, and a kill -9 mid-build resumes.
Builds are held by holding their lock (`cosine_build.building`), never by timing.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_urchin
from tests.daemon_fixture import DaemonProcess, _children
from urchin import requests_first
from urchin.config import Settings
from urchin.facade import Memory
from urchin.journal import Journal
from urchin.requests_first import serving
from urchin.search import cosine_build, cosine_store, cosine_view, cosine_view_build
from urchin.search.cosine import TokenCosineIndex
from urchin.search.cosine_extract import Batch
from urchin.search.cosine_tail import TAIL_BYTES
from urchin.search.query import Filters
from urchin.search.semantic import TokenCosineView

EVENTS = 12_000       # ~5.5 MB: more than a tail holds (TAIL_BYTES), for the daemon and the CLI
SMALL, SMALL_TAIL = 3_000, 300_000   # ~1.4 MB, and a tail of ~650 events, where the test sets the tail
OLD = 1_000           # the oldest: the best matches for QUERY, outside any tail
QUERY = "quarantine pipeline"
QUERIES = [QUERY, "nightly job step", "rollback canary deploy", "flaky fixture"]
_FILLER = ("the nightly job ran its steps on the build farm and wrote the usual report with timings, "
           "warnings and the list of artifacts uploaded to the cache; nothing else of note happened here ") * 2


def _events(count: int = EVENTS) -> list[dict[str, object]]:
    start = datetime.now(UTC) - timedelta(hours=100)
    out = []
    for i in range(count):
        words = "quarantine quarantine pipeline" if i < OLD else ("quarantine" if i % 7 == 0 else "canary deploy")
        flaky = " flaky fixture" if i % 13 == 0 else ""
        out.append({"id": f"e{i:06d}", "timestamp": (start + timedelta(seconds=20 * i)).isoformat(),
                    "source": "claude" if i % 3 else "shell", "session": f"s{i // 40}",
                    "content": f"step {i}: {words}{flaky}; {_FILLER}"})
    return out


def _import(home: Path, count: int = EVENTS) -> Path:
    with Memory(Settings.resolve(home)) as memory:
        memory.import_lines(orjson.dumps(e) for e in _events(count))
        path = memory.journal.path
    assert path.stat().st_size > (TAIL_BYTES if count == EVENTS else 3 * SMALL_TAIL)
    return path


_SCRATCH: dict[tuple[Path, int], TokenCosineView] = {}


def _scratch(journal: Path, query: str, **filters: str) -> list[tuple[str, float]]:
    """The ranking of an index built from scratch, in this process, before answering (built once per journal)."""
    key = (journal, journal.stat().st_ino)
    view = _SCRATCH.get(key) or _SCRATCH.setdefault(key, TokenCosineView(Journal(journal), None))
    return [(h.event.id, h.score or 0.0)
            for h in view.search(query, since_ms=None, limit=10, filters=Filters.of(**filters))]


def _ranked(view: TokenCosineView, query: str, **filters: str) -> tuple[list[tuple[str, float]], list[str]]:
    hits, notes = view.ranked(query, since_ms=None, limit=10, filters=Filters.of(**filters))
    return [(h.event.id, h.score or 0.0) for h in hits], notes


def _in_time(call, seconds: float = 60.0):   # noqa: ANN001, ANN202 - a deadline, not a timing
    """Run `call` in a thread; fail when it has not returned by the deadline (it would be waiting for a build)."""
    box: list[object] = []
    worker = threading.Thread(target=lambda: box.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, "the query waited for the build"
    return box[0]


def _newest(ids: list[str]) -> bool:
    return all(int(i[1:]) >= OLD for i in ids)


def test_a_query_during_a_build_answers_from_the_newest_events_and_says_what_it_left_out(urchin_home) -> None:
    journal = _import(urchin_home, SMALL)
    index_dir = Settings.resolve(urchin_home).index_dir / "cosine"
    view = TokenCosineView(Journal(journal), index_dir)
    view.background, view.tail_bytes = "thread", SMALL_TAIL
    with cosine_build.building(index_dir):            # another build holds the folder: this one waits
        hits, notes = _in_time(lambda: _ranked(view, QUERY))
        assert hits and _newest([i for i, _ in hits])   # the best (oldest) matches are not indexed yet
        assert len(notes) == 1 and "older events are not indexed yet and were not searched" in notes[0]
        assert "the daemon is indexing them" in notes[0]
        assert view.session_events(Filters.of(session="s5"), 0, 5) is None   # the caller scans instead
    deadline = time.monotonic() + 60
    while _ranked(view, QUERY)[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    for query in QUERIES:
        assert _ranked(view, query) == (_scratch(journal, query), [])
    assert not _newest([i for i, _ in _ranked(view, QUERY)[0]])


def _lines_in_last(journal: Path, size: int) -> int:
    """How many lines start in the last `size` bytes of `journal` (what a tail of that size holds)."""
    data = journal.read_bytes()
    start = max(0, len(data) - size)
    if start:
        start = data.index(b"\n", start - 1) + 1
    return data.count(b"\n", start)


def _searched(note: str) -> int:
    return int(re.search(r"only the newest ([\d,]+) were", note).group(1).replace(",", ""))   # type: ignore[union-attr]


def test_the_first_tail_is_small_and_the_build_grows_it_before_it_starts(urchin_home) -> None:
    """A first query waits only for the newest `first_tail_bytes`; the build, before indexing, builds the
    tail again at `tail_bytes` (outside the lock, giving way to requests) and queries answer from that."""
    journal = _import(urchin_home, SMALL)
    index_dir = Settings.resolve(urchin_home).index_dir / "cosine"
    view = TokenCosineView(Journal(journal), index_dir)
    view.background, view.tail_bytes, view.first_tail_bytes = "thread", SMALL_TAIL, SMALL_TAIL // 4
    with cosine_build.building(index_dir):            # the build grows the tail, then waits for the folder
        hits, notes = _in_time(lambda: _ranked(view, QUERY))
        assert hits and _searched(notes[0]) == _lines_in_last(journal, SMALL_TAIL // 4)
        deadline = time.monotonic() + 60             # a deadline for a loaded machine, not a timing
        while _searched(_ranked(view, QUERY)[1][0]) < _lines_in_last(journal, SMALL_TAIL) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        hits, notes = _ranked(view, QUERY)
        assert _searched(notes[0]) == _lines_in_last(journal, SMALL_TAIL)
        assert hits and _newest([i for i, _ in hits])
    _until_covered(view)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_finished_build_equals_a_build_from_scratch(urchin_home, workers: int) -> None:
    """Ids, order and scores, for several queries and filters, through worker processes or not, in
    many small batches with a save after each (what a resumed or a chunked build does)."""
    journal = _import(urchin_home, SMALL)
    view = TokenCosineView(Journal(journal), urchin_home / "cosine", workers=workers)
    view.background, view.tail_bytes, view.save_every_s = "thread", SMALL_TAIL, 0.0
    view.build_chunk, view.bulk_bytes = 200_000, 500_000
    view.catch_up()
    view._build_thread.join(120)      # type: ignore[union-attr]
    assert not view._behind
    assert view.loaded_from_disk       # the build's anonymous arrays swapped for the saved, mapped copy
    for query in QUERIES:
        assert _ranked(view, query) == (_scratch(journal, query), [])
    assert _ranked(view, QUERY, source="claude") == (_scratch(journal, QUERY, source="claude"), [])
    again = TokenCosineView(Journal(journal), urchin_home / "cosine")   # what it saved, loaded
    assert _ranked(again, "nightly job step") == (_scratch(journal, "nightly job step"), [])
    assert again.loaded_from_disk


_BUILDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from urchin.journal import Journal
    from urchin.search import cosine_view_build
    from urchin.search.cosine import TokenCosineIndex
    from urchin.search.semantic import TokenCosineView
    TokenCosineIndex.freeze_postings = TokenCosineIndex.max_merge_postings = 20_000
    cosine_view_build._SPILL_POSTINGS = 1_000     # segments spilled as they fill
    view = TokenCosineView(Journal(Path(sys.argv[1])), Path(sys.argv[2]), workers=1)
    view.save_every_s, view.build_chunk = 0.0, 100_000
    view.build()
""")


def _generation(index_dir: Path) -> dict[str, bytes]:
    manifest = orjson.loads((index_dir / "manifest.json").read_bytes())
    return {f.name: f.read_bytes() for f in (index_dir / manifest["generation"]).iterdir()}


def test_a_build_keeps_no_frozen_segment_in_memory_and_saves_the_same_bytes(urchin_home, monkeypatch) -> None:
    """Each segment a build freezes is written to the index folder as it fills and read back through a
    read-only map (its postings are not the builder's memory, which at 3M events held them all: ~0.5 GB),
    and so are its rows' ids, their ends and offsets as they grow (~150 MB at 3M); the index saved is
    byte for byte the one the same build keeping all in memory saves."""
    journal = _import(urchin_home, SMALL)
    monkeypatch.setattr(TokenCosineIndex, "freeze_postings", 20_000)     # many segments
    monkeypatch.setattr(TokenCosineIndex, "max_merge_postings", 20_000)
    held: list[bool] = []
    add_batch = TokenCosineIndex.add_batch

    def probe(index: TokenCosineIndex, batch: Batch) -> None:   # what the build left between two batches
        held.extend(s.rows.flags.writeable for s in index._segments if s.nnz >= 1_000)
        ids = index._id_bytes          # and its rows' ids: in a file (a read-only map), all but the last few
        held.append(len(ids.tail) > 2_000 or len(ids) > 4_000 and ids.base.flags.writeable)
        add_batch(index, batch)

    monkeypatch.setattr(TokenCosineIndex, "add_batch", probe)
    monkeypatch.setattr(cosine_view_build, "_SPILL_POSTINGS", 1_000)
    monkeypatch.setattr(cosine_view_build, "_ROWS_BYTES", 1_000)
    saved = {}
    for name, spill in (("spilled", True), ("in-memory", False)):
        view = TokenCosineView(Journal(journal), urchin_home / name, workers=1)
        view.save_every_s, view.build_chunk, view._spilling = 0.0, 100_000, spill
        held.clear()
        view.build()
        saved[name] = _generation(urchin_home / name)
        if name == "spilled":
            assert len(held) >= 5 and not any(held), "a frozen segment or the rows' ids were held in memory"
            assert not [p for p in (urchin_home / name).iterdir() if p.name.startswith("tmp-")]   # linked, removed
    assert saved["spilled"] == saved["in-memory"]


@pytest.mark.parametrize("spill", [True, False])
def test_a_build_saves_its_ids_and_offsets_without_a_copy_of_them(urchin_home, monkeypatch, spill: bool) -> None:
    """A build's saves write the ids and offsets it holds as they are, from its files or its memory
    (at 3M events a copy of each was ~130 MB more at every save, the build child's peak with its
    workers); rows added after a save go on, and the index saved ranks as one built from scratch."""
    journal = _import(urchin_home, SMALL)
    view = TokenCosineView(Journal(journal), urchin_home / "cosine", workers=1)
    view.save_every_s, view.build_chunk, view._spilling = 0.0, 100_000, spill     # a save after every batch
    shared: list[bool] = []
    save = cosine_store.save

    def probe(directory: Path, state, offsets, mark, reuse=None):   # noqa: ANN001, ANN202
        shared.append(not state.arrays["ids"].flags.owndata and not offsets.flags.owndata)
        return save(directory, state, offsets, mark, reuse)

    monkeypatch.setattr(cosine_store, "save", probe)
    view.build()
    assert len(shared) >= 5 and all(shared)
    again = TokenCosineView(Journal(journal), urchin_home / "cosine")
    for query in QUERIES:
        assert _ranked(again, query) == (_scratch(journal, query), [])
    assert again.loaded_from_disk


def test_a_segment_that_cannot_be_written_stays_in_memory_and_the_build_goes_on(urchin_home, monkeypatch,
                                                                                caplog) -> None:
    journal = _import(urchin_home, SMALL)
    monkeypatch.setattr(TokenCosineIndex, "freeze_postings", 20_000)
    monkeypatch.setattr(TokenCosineIndex, "max_merge_postings", 20_000)
    monkeypatch.setattr(cosine_view_build, "_SPILL_POSTINGS", 1_000)
    index_dir = urchin_home / "cosine"
    index_dir.mkdir()
    (index_dir / cosine_store._SPILL_DIR).write_text("in the way")   # where this process spills: not a folder
    view = TokenCosineView(Journal(journal), index_dir, workers=1)
    view.save_every_s, view.build_chunk = 0.0, 100_000
    with caplog.at_level(logging.WARNING):
        view.build()
    assert sum("cannot write" in r.getMessage() for r in caplog.records) == 1   # once (segments or rows), not per batch
    for query in QUERIES:
        assert _ranked(view, query) == (_scratch(journal, query), [])
    assert _ranked(TokenCosineView(Journal(journal), index_dir), QUERY) == (_scratch(journal, QUERY), [])


def test_a_build_killed_mid_way_is_resumed_and_ends_as_a_build_from_scratch(urchin_home) -> None:
    journal = _import(urchin_home, SMALL)
    index_dir = urchin_home / "cosine"
    child = subprocess.Popen([sys.executable, "-c", _BUILDER, str(journal), str(index_dir)],
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while cosine_store.saved_offset(index_dir) < journal.stat().st_size // 3 and time.monotonic() < deadline:
            assert child.poll() is None, "the build ended before it was killed"
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    covered = cosine_store.saved_offset(index_dir)
    assert 0 < covered < journal.stat().st_size
    view = TokenCosineView(Journal(journal), index_dir)
    view.background, view.tail_bytes = "thread", SMALL_TAIL
    view.catch_up()                   # loads what was saved, builds the rest
    view._build_thread.join(120)      # type: ignore[union-attr]
    assert view.loaded_from_disk and not view._behind
    for query in QUERIES:
        assert _ranked(view, query) == (_scratch(journal, query), [])
    assert not [p for p in index_dir.iterdir() if p.name.startswith("tmp-")]   # the killed build's spills too


def _until_ids_loaded(memory: Memory) -> None:
    deadline = time.monotonic() + 60     # a deadline for a loaded machine, not a timing
    while "ids" in memory.loading() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "ids" not in memory.loading()


def _until_covered(view: TokenCosineView) -> None:
    deadline = time.monotonic() + 120
    while view.coverage() is not None and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_query_at_a_daemon_start_answers_from_the_tail_while_the_id_index_waits_for_it(urchin_home,
                                                                                       monkeypatch) -> None:
    """A request being answered at a daemon's start (`Memory.warm`): the id index's load gives way to it
    (requests first), and a query meanwhile answers from the newest events, saying what it left out."""
    _import(urchin_home, SMALL)
    monkeypatch.setattr(requests_first, "STARTUP_WAIT_S", 600.0)   # held by the mark below, not by a timeout
    monkeypatch.setattr(cosine_view, "TAIL_BYTES", SMALL_TAIL)
    settings = Settings.resolve(urchin_home)
    with Memory(settings) as memory, cosine_build.building(settings.index_dir / "cosine"):
        with serving():          # a request being answered
            memory.warm()
            result = _in_time(lambda: memory.semantic(QUERY, hours=10_000))
            assert result.hits and _newest([h.event.id for h in result.hits])
            assert any("older events are not indexed yet" in note for note in result.notes)
            assert "ids" in memory.loading()         # not begun while the request is answered
        _until_ids_loaded(memory)
        assert memory.ingest_one({"id": "e000001", "content": "again", "source": "shell"}).status == "duplicate"
    _until_covered(memory._semantic.cosine())


def test_a_daemon_start_opens_the_token_cosine_view_before_its_other_start_up_work(urchin_home,
                                                                                  monkeypatch) -> None:
    """What a first query waits for comes first: by the time the id index is loaded, the token-cosine
    view was opened (here: its tail built, the build waiting for the folder), not left to the first query."""
    _import(urchin_home, SMALL)
    monkeypatch.setattr(requests_first, "STARTUP_WAIT_S", 600.0)
    monkeypatch.setattr(cosine_view, "TAIL_BYTES", SMALL_TAIL)
    settings = Settings.resolve(urchin_home)
    with Memory(settings) as memory, cosine_build.building(settings.index_dir / "cosine"):
        memory.warm()
        _until_ids_loaded(memory)
        view = memory._semantic.cosine()
        note = view.coverage()
        assert note is not None and "older events are not indexed yet" in note
    _until_covered(view)


def test_the_daemon_answers_during_its_build_and_swaps_the_whole_index_in(urchin_home) -> None:
    journal = _import(urchin_home)
    index_dir = Settings.resolve(urchin_home).index_dir / "cosine"
    daemon = DaemonProcess(urchin_home)
    try:
        with cosine_build.building(index_dir):         # the daemon's build waits for it
            daemon.start(timeout=300)
            with daemon.client(timeout=300) as http:
                body = http.get("/semantic", params={"query": QUERY}).json()
                assert body["events"] and _newest([r["id"] for r in body["events"]])
                assert any("older events are not indexed yet" in n for n in body["notes"])
                assert http.get("/health").status_code == 200
                assert http.get("/search", params={"query": "quarantine"}).json()["events"]
        _answers_whole(daemon, journal)
    finally:
        daemon.stop()


def _answers_whole(daemon: DaemonProcess, journal: Path) -> None:
    """Once the daemon's build is done (no partial note), it answers as a build from scratch."""
    with daemon.client(timeout=300) as http:
        deadline = time.monotonic() + 300   # a deadline for a loaded machine, not a timing
        while (body := http.get("/semantic", params={"query": QUERY}).json()).get("notes") and \
                time.monotonic() < deadline:
            time.sleep(0.1)
    assert not body.get("notes")
    assert [(r["id"], r["score"]) for r in body["events"]] == _scratch(journal, QUERY)


def _cli(env: dict[str, str]) -> dict[str, object]:
    done = run_urchin("semantic", QUERY, "--json", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def test_the_cli_on_its_own_answers_at_once_and_a_child_builds_for_the_next_call(urchin_home) -> None:
    journal = _import(urchin_home)
    index_dir = Settings.resolve(urchin_home).index_dir / "cosine"
    env = {"URCHIN_HOME": str(urchin_home)}
    with cosine_build.building(index_dir):             # a build already runs: no second one starts
        body = _cli(env)
        assert body["events"] and _newest([r["id"] for r in body["events"]])
        assert any("a background process is indexing them" in n for n in body["notes"])
    deadline = time.monotonic() + 300   # a deadline for a loaded machine, not a timing
    while (body := _cli(env)).get("notes") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not body.get("notes")
    assert [(r["id"], r["score"]) for r in body["events"]] == _scratch(journal, QUERY)


def _build_child(daemon: DaemonProcess, timeout: float = 120.0) -> int:
    """The pid of the daemon's build child (`python -m urchin.search.build_child ... --parent PID`)."""
    assert daemon.proc is not None
    deadline = time.monotonic() + timeout    # a deadline for a loaded machine, not a timing
    while not (found := _children(daemon.proc.pid, b"urchin.search.build_child")):
        assert time.monotonic() < deadline, f"no build child: {daemon.log()}"
        time.sleep(0.02)
    return found[0]


def _gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and b"Z" not in Path(f"/proc/{pid}/stat").read_bytes().split(b")")[-1][:3]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_daemon_builds_in_a_child_that_a_kill_of_either_leaves_resumable(urchin_home) -> None:
    """The daemon's first build runs in a child at the lowest priority (its working set never the
    daemon's); SIGKILL of the child leaves the daemon answering from the newest events, SIGKILL of the
    daemon ends the child, and the next start builds what is left and answers as a build from scratch."""
    journal = _import(urchin_home)
    index_dir = Settings.resolve(urchin_home).index_dir / "cosine"
    for kill in ("child", "daemon", None):
        daemon = DaemonProcess(urchin_home)
        try:
            daemon.start(timeout=300)
            if kill is not None:
                child = _build_child(daemon)
                deadline = time.monotonic() + 30      # set by the daemon right after the spawn, and by the child
                while os.sched_getscheduler(child) != os.SCHED_IDLE and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert os.sched_getscheduler(child) == os.SCHED_IDLE
                if kill == "child":
                    os.kill(child, signal.SIGKILL)
                    assert _gone(child)
                    with daemon.client(timeout=300) as http:     # answers from the newest events still
                        body = http.get("/semantic", params={"query": QUERY}).json()
                    assert body["events"] and any("older events are not indexed yet" in n for n in body["notes"])
                daemon.signal(signal.SIGKILL)
                daemon.wait()
                assert _gone(child), "the build child outlived the daemon"
                continue
            _answers_whole(daemon, journal)
            assert not _children(daemon.proc.pid, b"urchin.search.build_child")   # type: ignore[union-attr]
        finally:
            daemon.stop()
    assert cosine_store.saved_offset(index_dir) > 0


def test_a_build_learns_the_associations_once_at_its_end_never_at_its_partial_saves(urchin_home,
                                                                                    monkeypatch) -> None:
    """A build's partial saves learn no associations (learning a whole index's model again at each of
    them was a build child's peak of memory), its last save does; the daemon's child (learn False)
    learns none: the daemon's learning child does, after it."""
    from urchin.search import assoc

    journal = _import(urchin_home, SMALL)
    learned: list[int] = []
    build = assoc.build
    monkeypatch.setattr(assoc, "build", lambda index, **kw: learned.append(len(index)) or build(index, **kw))
    for name, learn in (("cli", True), ("daemon", False)):
        view = TokenCosineView(Journal(journal), urchin_home / name, workers=1)
        view.save_every_s, view.build_chunk = 0.0, 100_000      # a save after every batch
        learned.clear()
        view.build(learn=learn)
        assert learned == ([SMALL] if learn else [])
        assert assoc.path_beside(urchin_home / name).exists() == learn
