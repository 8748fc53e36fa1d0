"""The saved token-cosine index: round trips, catch-up after a load, rebuilds when anything does not
match, permissions, and the daemon's catch_up/save."""

from __future__ import annotations

import os
import platform
import stat
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import run_urchin
from urchin.config import Settings
from urchin.facade import Memory
from urchin.search.query import Filters
from urchin.search.semantic import TokenCosineView
from urchin.search.vocab import Vocabulary

QUERIES = ["deploy rollback", "postgres latency", "kubernetes cache note", "token 7"]
WORDS = ["deploy", "rollback", "cache", "latency", "token", "session", "kubernetes", "postgres"]


def _items(start: int, n: int) -> list[dict]:
    return [{"id": f"e{i}", "content": f"{WORDS[i % 8]} {WORDS[i * 7 % 8]} note {i % 13}", "session": f"s{i // 5}",
             "timestamp": f"2026-04-{1 + i % 28:02d}T10:{i % 60:02d}:00Z", "workspace": f"w{i % 3}",
             "source": ["claude", "shell"][i % 2]} for i in range(start, start + n)]


def _view(settings: Settings, **kw: int) -> TokenCosineView:
    """A view that saves when asked only (save_every 0), unless a test sets its own cadence."""
    return TokenCosineView(Memory(settings).journal, settings.index_dir / "cosine", **{"save_every": 0, **kw})


def _results(view: TokenCosineView) -> list[list[tuple[str, float | None]]]:
    out = []
    for q in QUERIES:
        for since, filters in ((None, Filters()), (1_775_000_000_000, Filters()), (None, Filters.of("shell", "w1"))):
            out.append([(h.event.id, h.score) for h in view.search(q, since_ms=since, limit=20, filters=filters)])
    return out


@pytest.fixture
def saved(memory: Memory, settings: Settings) -> list[list[tuple[str, float | None]]]:
    """A journal of 400 events, indexed and saved; returns the results of the saving view."""
    memory.ingest(_items(0, 400))
    view = _view(settings)
    assert view.catch_up() == 400
    assert view.save() is True
    return _results(view)


def _cosine_dir(settings: Settings) -> Path:
    return settings.index_dir / "cosine"


def _generation(settings: Settings) -> Path:
    manifest = orjson.loads((_cosine_dir(settings) / "manifest.json").read_bytes())
    return _cosine_dir(settings) / manifest["generation"]


def test_a_reloaded_index_answers_like_the_saved_one(saved: list, settings: Settings) -> None:
    view = _view(settings)
    assert view.catch_up() == 0  # nothing to index: all of it came from disk
    assert view.loaded_from_disk and view.rebuild_reason is None
    assert _results(view) == saved
    assert view.save() is False  # nothing new since the load


def test_events_appended_after_the_save_are_caught_up(saved: list, memory: Memory, settings: Settings) -> None:
    memory.ingest(_items(400, 30) + [{"id": "new", "content": "zeppelin hangar inspection"}])
    view = _view(settings)
    assert view.catch_up() == 31 and view.loaded_from_disk
    assert view.next_offset == memory.journal.size()
    assert [h.event.id for h in view.search("zeppelin", since_ms=None, limit=5, filters=Filters())] == ["new"]
    fresh = TokenCosineView(memory.journal)  # memory only, built from scratch
    assert _results(view) == _results(fresh)


def test_files_are_private(saved: list, settings: Settings) -> None:
    for path in (settings.index_dir, _cosine_dir(settings), _generation(settings)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    files = [p for p in _cosine_dir(settings).rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_save_replaces_the_generation_and_links_frozen_segments(memory: Memory, settings: Settings) -> None:
    memory.ingest(_items(0, 400))
    view = _view(settings)
    view.index.freeze_postings = 500  # frozen segments on this small journal
    view.catch_up()
    view.save()
    first = _generation(settings)
    segment = first / "seg00.rows.npy"
    inode = segment.stat().st_ino
    (_cosine_dir(settings) / "tmp-gen-crashed").mkdir()  # left by a save that crashed
    memory.ingest(_items(400, 3))
    assert view.catch_up() == 3 and view.save() is True
    second = _generation(settings)
    assert second != first and not first.exists()
    assert sorted(p.name for p in _cosine_dir(settings).iterdir()) == sorted([".lock", "manifest.json", second.name])
    assert (second / "seg00.rows.npy").stat().st_ino == inode  # hard-linked, not written again
    assert _results(_view(settings)) == _results(view)


def _rebuilds(settings: Settings, reason: str, expected: list | None = None) -> TokenCosineView:
    view = _view(settings)
    view.catch_up()
    assert not view.loaded_from_disk
    assert view.rebuild_reason is not None and reason in view.rebuild_reason
    if expected is not None:
        assert _results(view) == expected
    return view


def test_a_replaced_journal_is_rebuilt(saved: list, memory: Memory, settings: Settings) -> None:
    path = memory.journal.path
    copy = path.with_name("copy.jsonl")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)  # same bytes, another file
    _rebuilds(settings, "replaced", saved)


def test_a_truncated_journal_is_rebuilt(saved: list, memory: Memory, settings: Settings) -> None:
    path = memory.journal.path
    data = path.read_bytes()
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1
    os.truncate(path, cut)  # as a torn-tail repair would, below what the index covers
    view = _rebuilds(settings, "shorter")
    assert len(view.index) == 399


def test_a_rewritten_journal_is_rebuilt(saved: list, memory: Memory, settings: Settings) -> None:
    path = memory.journal.path
    data = bytearray(path.read_bytes())
    data[-20:-10] = b"X" * 10  # same size, same inode, other bytes
    path.write_bytes(bytes(data))
    _rebuilds(settings, "rewritten")


def test_a_journal_path_change_is_rebuilt(saved: list, settings: Settings, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.jsonl"
    other.write_bytes(settings.journal_path.read_bytes())
    moved = Settings.resolve(settings.home, env={"URCHIN_EVENT_JOURNAL_PATH": str(other)})
    _rebuilds(moved, "replaced", saved)      # another file: the one journal mark tells by its inode


def _corrupt_manifest(settings: Settings) -> str:
    (_cosine_dir(settings) / "manifest.json").write_bytes(b"{ not json")
    return "damaged"


def _wrong_format(settings: Settings) -> str:
    path = _cosine_dir(settings) / "manifest.json"
    manifest = orjson.loads(path.read_bytes())
    manifest["format"] = 99
    path.write_bytes(orjson.dumps(manifest))
    return "format 99"


def _truncated_array(settings: Settings) -> str:
    path = _generation(settings) / "norm.npy"
    os.truncate(path, path.stat().st_size - 8)
    return "size differs"


def _garbled_vocab(settings: Settings) -> str:
    path = _generation(settings) / "vocab.bin"
    data = bytearray(path.read_bytes())
    data[3] ^= 0xFF
    path.write_bytes(bytes(data))
    return "checksum"


def _missing_file(settings: Settings) -> str:
    (_generation(settings) / "ts.npy").unlink()
    return "damaged"


def _bad_array_header(settings: Settings) -> str:
    path = _generation(settings) / "prev.npy"
    data = bytearray(path.read_bytes())
    data[:6] = b"NOTNPY"
    path.write_bytes(bytes(data))
    return "damaged"


def _out_of_range_links(settings: Settings) -> str:
    import numpy as np
    path = _generation(settings) / "next.npy"
    links = np.load(path)
    links[5] = 10_000_000
    with path.open("r+b") as handle:  # same size: only the consistency checks can tell
        np.save(handle, links)
    return "next: bounds"


@pytest.mark.parametrize("damage", [_corrupt_manifest, _wrong_format, _truncated_array, _garbled_vocab,
                                    _missing_file, _bad_array_header, _out_of_range_links])
def test_damaged_files_are_rebuilt_never_a_crash(saved: list, settings: Settings, damage: object) -> None:
    reason = damage(settings)  # type: ignore[operator]
    view = _rebuilds(settings, reason, saved)
    assert view.save() is True  # and the rebuilt index replaces the damaged one
    assert _view(settings).catch_up() == 0


def test_cli_uses_the_saved_index_and_survives_a_damaged_one(saved: list, settings: Settings) -> None:
    top = saved[0][0][0]
    out = run_urchin("semantic", "--hours", "100000", QUERIES[0])
    assert out.returncode == 0 and f"— {WORDS[0]}" in out.stdout
    _garbled_vocab(settings)
    out = run_urchin("semantic", "--hours", "100000", QUERIES[0])
    assert out.returncode == 0, out.stderr
    assert top and len([line for line in out.stdout.splitlines() if line.startswith("[")]) == 10


def test_a_live_view_rebuilds_when_the_journal_is_cut(memory: Memory, settings: Settings) -> None:
    memory.ingest(_items(0, 50))
    view = _view(settings)
    view.catch_up()
    data = memory.journal.path.read_bytes()
    os.truncate(memory.journal.path, data.index(b"\n") + 1)  # one event left
    assert view.catch_up() == 1 and len(view.index) == 1 and view.rebuild_reason
    memory.ingest(_items(50, 2))
    assert view.catch_up() == 2 and len(view.index) == 3


def test_catch_up_saves_every_n_events_and_save_is_idempotent(memory: Memory, settings: Settings) -> None:
    view = _view(settings, save_every=100)
    memory.ingest(_items(0, 99))
    assert view.catch_up() == 99
    assert not (_cosine_dir(settings) / "manifest.json").exists()
    memory.ingest(_items(99, 1))
    assert view.catch_up() == 1
    assert (_cosine_dir(settings) / "manifest.json").exists()
    assert view.save() is False  # nothing new
    memory.ingest(_items(100, 1))
    view.catch_up()
    assert view.save() is True  # what the daemon calls at shutdown
    assert _view(settings).catch_up() == 0


def test_memory_only_views_never_write(memory: Memory, settings: Settings) -> None:
    memory.ingest(_items(0, 20))
    view = TokenCosineView(memory.journal, None, save_every=1)
    view.catch_up()
    assert view.save() is False
    assert not settings.index_dir.exists()


def test_a_backfilled_event_keeps_windows_right_across_a_reload(memory: Memory, settings: Settings) -> None:
    memory.ingest(_items(0, 200))
    memory.ingest([{"id": "late", "content": "zeppelin audit", "timestamp": "2026-01-15T10:00:00Z"},
                   {"id": "recent", "content": "zeppelin launch", "timestamp": "2026-04-28T10:00:00Z"}])
    view = _view(settings)
    view.catch_up()
    view.save()
    loaded = _view(settings)
    jan = (1_768_000_000_000, 1_769_000_000_000)  # 2026-01-09 .. 2026-01-21
    for v in (view, loaded):
        assert [h.event.id for h in v.search("zeppelin", since_ms=jan[0], until_ms=jan[1], limit=5,
                                             filters=Filters())] == ["late"]
        assert [h.event.id for h in v.search("zeppelin", since_ms=1_777_000_000_000, limit=5,
                                             filters=Filters())] == ["recent"]


def test_a_save_without_ts_max_computes_it_at_the_load(saved: list, settings: Settings) -> None:
    """A save made before `ts_max` and `late` were saved (or one missing them) loads as before: both
    computed from `ts`, the answers the same."""
    manifest_path = _cosine_dir(settings) / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    assert {"ts_max.npy", "late.npy"} <= manifest["files"].keys()
    for name in ("ts_max.npy", "late.npy"):
        del manifest["files"][name]
    manifest_path.write_bytes(orjson.dumps(manifest))
    view = _view(settings)
    assert view.catch_up() == 0 and view.loaded_from_disk and _results(view) == saved


def test_a_damaged_posting_found_at_query_time_rebuilds(memory: Memory, settings: Settings) -> None:
    import numpy as np
    memory.ingest(_items(0, 400))
    view = _view(settings)
    view.index.freeze_postings = 500  # frozen segments on this small journal
    view.catch_up()
    view.save()
    expected = _results(TokenCosineView(memory.journal))
    path = _generation(settings) / "seg00.rows.npy"
    rows = np.load(path)
    rows[:] = 10_000_000  # rows that do not exist; loading does not read postings, so it cannot tell
    with path.open("r+b") as handle:
        np.save(handle, rows)
    damaged = _view(settings)
    assert damaged.catch_up() == 0 and damaged.loaded_from_disk
    assert _results(damaged) == expected
    assert not damaged.loaded_from_disk and "damaged postings" in (damaged.rebuild_reason or "")


def test_a_young_index_saves_at_doubling_sizes_so_its_associations_exist_early(memory: Memory,
                                                                                settings: Settings) -> None:
    """search_context reads the associations a save wrote: a young index saves at 256, 512, ... rows
    (then every SAVE_EVERY events), not only once 10,000 events are in."""
    view = TokenCosineView(memory.journal, _cosine_dir(settings))
    memory.ingest(_items(0, 300))
    view.catch_up()
    assert view._saved[0] == 300 and view.associations() is not None      # saved by the catch-up itself
    memory.ingest(_items(300, 200))
    view.catch_up()
    assert view._saved[0] == 300                                          # 500 rows: the next save is at 600
    memory.ingest(_items(500, 100))
    view.catch_up()
    assert view._saved[0] == 600


def test_a_daemon_view_learns_its_associations_in_a_child_process(memory: Memory, settings: Settings,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`learn_apart` (the daemon): the associations' build held the GIL for seconds, so every query and
    write waited. A save starts a child at the lowest priority that builds them from the saved index;
    they are installed beside it and used: the model an in-process build makes, and none was built here
    (nor before a query, past the small index a query builds for: INLINE_ASSOC_ROWS). A daemon's last
    save (learn=False) starts no child."""
    import numpy as np

    from urchin.search import assoc
    from urchin.search.cosine import TokenCosineIndex
    from urchin.search.semantic import INLINE_ASSOC_ROWS

    rows = INLINE_ASSOC_ROWS + 200

    def in_this_process(*args: object, **kwargs: object) -> None:
        raise AssertionError("associations built in the daemon's process")

    memory.ingest(_items(0, rows))
    view = _view(settings)
    view.learn_apart = True
    monkeypatch.setattr(assoc, "build", in_this_process)
    assert view.catch_up() == rows
    assert view.search("deploy cache", since_ms=None, limit=5, filters=Filters())
    assert view.index.assoc is None
    assert view.save() is True and view._learning is not None
    _wait_learning(view)
    learned = view.index.assoc
    assert learned is not None and len(learned) > 0
    assert assoc.path_beside(_cosine_dir(settings)).exists()
    assert not list(settings.index_dir.glob(".cosine.learned.tmp"))
    assert view.associations() is not None
    monkeypatch.undo()
    expected = assoc.build(TokenCosineIndex.from_state(view.index.state()))
    assert learned.terms == expected.terms
    assert np.array_equal(learned.vectors, expected.vectors.astype(np.float16).astype(np.float32))

    memory.ingest(_items(rows, rows))       # stale again (grown by half)
    view.catch_up()
    assert view.save(learn=False) is True and view._learning is None        # no new child


def _wait_learning(view: TokenCosineView, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while view._learning is not None:
        assert time.monotonic() < deadline, "the learning thread did not finish"
        time.sleep(0.05)


def test_a_view_that_starts_over_while_a_child_learns_gets_a_model_of_its_new_index(memory: Memory,
                                                                                   settings: Settings) -> None:
    """A compaction (the view starts over) while a child learns: that child's model is refused, and the
    save of the new index, asked while the child ran, is learned right after it, not 10,000 events later."""
    from urchin.search import assoc

    memory.ingest(_items(0, 400))
    view = _view(settings)
    view.learn_apart = True
    view.catch_up()
    assert view.save() is True and view._learning is not None
    view._reset()                         # as a compaction or a replaced journal does
    view.catch_up()
    assert view.save() is True
    _wait_learning(view)
    assert view.index.assoc is not None and assoc.path_beside(_cosine_dir(settings)).exists()
    assert view.index.assoc.rows == len(view.index)


def test_a_learning_child_waits_until_queries_pause_and_their_pages_are_released(
        memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon's first build swaps its index in and its first queries map much of it (3M events: ~0.5-0.8
    GB of postings); the learning child (~320 MB) is started only once no query has read the index for
    LEARN_IDLE_S, after those pages were released, never beside the queries."""
    import time

    import urchin.search.cosine_view_learn as learning

    monkeypatch.setattr(learning, "LEARN_IDLE_S", 0.5)
    started: list[tuple[float, float | None]] = []    # (when the child was started, the view's last query then)
    real = learning.python_child

    def recorded(module: str) -> tuple[list[str], dict[str, str]]:
        started.append((time.monotonic(), view._used))
        return real(module)

    monkeypatch.setattr(learning, "python_child", recorded)
    memory.ingest(_items(0, 1_100))     # past INLINE_ASSOC_ROWS: queries never build the model inline
    view = _view(settings)
    view.learn_apart = True
    view.catch_up()
    first = last = time.monotonic()
    assert view.save() is True and view._learning is not None
    while time.monotonic() - first < 1.5:       # queries every 0.1 s for 1.5 s: the child waits for them
        view.search("deploy", since_ms=None, limit=5, filters=Filters())
        last = time.monotonic()
        time.sleep(0.1)
    _wait_learning(view)
    assert len(started) == 1 and started[0][0] >= last + 0.5, (started, last)
    assert started[0][1] is None        # the queries' maps released before the child started
    assert view.index.assoc is not None and view.index.assoc.rows == len(view.index)


def test_a_child_that_dies_silently_installs_nothing(memory: Memory, settings: Settings) -> None:
    """A child killed before it says anything (the OOM killer) is a failure, whatever a dead child left
    at an output path; leftovers of dead children are removed."""
    from urchin.search import assoc

    memory.ingest(_items(0, 400))
    view = _view(settings)
    view.learn_apart = True
    view.catch_up()
    assert view.save(learn=False) is True
    stale = assoc.Associations(["secret-from-before", "other"], np.ones((2, 4), np.float32), 10)
    folder = _cosine_dir(settings)
    leftover = folder.with_name(f".{folder.name}.learned.1-1.tmp")
    stale.save(leftover)
    stale.save(folder.with_name(f".{folder.name}.learned.{os.getpid()}-{view._generation}.tmp"))
    import sys

    def killed_child(module: str) -> tuple[list[str], dict[str, str]]:     # dies before a word, as OOM kills
        return [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], dict(os.environ)

    import urchin.processes as children

    original = children.python_child
    import urchin.search.cosine_view_learn as learning

    learning.python_child = killed_child    # type: ignore[assignment]
    try:
        view._learn_once(view._generation)
    finally:
        learning.python_child = original    # type: ignore[assignment]
    assert view.index.assoc is None and not assoc.path_beside(folder).exists()
    assert not list(folder.parent.glob(f"*.{folder.name}.learned.*"))


def test_associations_learned_for_an_index_since_gone_are_not_installed(memory: Memory, settings: Settings,
                                                                       tmp_path: Path) -> None:
    """A model learned from an index this view has since started over from, or one a compaction
    discarded (it may hold forgotten words), is never installed; a child that finds no index fails
    quietly and leaves nothing behind."""
    from urchin.search import assoc, cosine_store

    memory.ingest(_items(0, 400))
    view = _view(settings)
    view.learn_apart = True
    view.catch_up()
    assert view.save(learn=False) is True
    model_path = assoc.path_beside(_cosine_dir(settings))
    view._learn_once(view._generation - 1)     # a child started before the view started over
    assert view.index.assoc is None and not model_path.exists()
    view._learn_once(view._generation)         # the same, current: installed
    assert view.index.assoc is not None and model_path.exists()

    other = tmp_path / "model.npz"
    view.index.assoc.save(other)
    cosine_store.discard(_cosine_dir(settings))
    assert not model_path.exists()
    assert cosine_store.install_beside(_cosine_dir(settings), memory.journal, other) is False and other.exists()
    view.index.assoc = None
    view._learn_once(view._generation)         # no saved index to learn from: nothing, no error
    assert view.index.assoc is None and not model_path.exists()
    assert not list(settings.index_dir.glob(".cosine.learned.tmp"))


def test_a_loaded_index_keeps_its_ids_on_disk_and_grows_its_columns_by_an_eighth(memory: Memory,
                                                                                  settings: Settings) -> None:
    """A daemon's memory must not hold a second copy of what the saved index maps: the rows' ids stay
    mapped after the load and after rows are added (they go to a tail of their own), and a loaded
    column's first growth adds an eighth of it, not as much again (that doubled a 3M-event daemon's
    columns to ~300 MB on its first new event)."""
    import mmap

    memory.ingest([{**item, "id": f"event-{i:04d}-{'x' * 40}"} for i, item in enumerate(_items(0, 2_000))])
    view = _view(settings)
    view.catch_up()
    assert view.save() is True
    memory.ingest([{"id": "after-the-load", "content": "zeppelin hangar inspection"}])
    loaded = _view(settings)
    assert loaded.catch_up() == 1 and loaded.loaded_from_disk
    ids = loaded.index._id_bytes
    base = ids.base
    while not isinstance(base, mmap.mmap):
        base = base.base if hasattr(base, "base") else base._mmap
    assert len(ids) == len(view.index._id_bytes) + len("after-the-load")
    found = loaded.search("zeppelin", since_ms=None, limit=1, filters=Filters())
    assert [h.event.id for h in found] == ["after-the-load"]
    assert loaded.index._id(1999) == f"event-1999-{'x' * 40}" and loaded.index._id(2000) == "after-the-load"
    assert loaded.index._id_end.base.base is not None      # the ids' ends too stay as loaded
    # a daemon's follower releases the read-only maps of an idle view: they leave its resident set
    assert _resident(_generation(settings), ("ids.npy", "seg")) > 0     # the query read its hits' ids
    assert loaded.release_pages(idle_s=0) >= 1
    assert _resident(_generation(settings), ("ids.npy", "seg")) == 0
    from urchin.search.postings import Column

    column = Column.of(np.zeros(800_000, dtype=np.int64))      # as a loaded 800k-row index's
    column.extend([7])
    assert column.size == 800_001 and len(column.data) == 900_000 and column.view()[-1] == 7


def test_a_loaded_index_keeps_its_rows_journal_offsets_mapped(saved: list, memory: Memory, settings: Settings,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows' journal offsets (8 bytes a row: 24 MB at 3M events) stay the saved file's read-only map
    after a load, not a copy in anonymous memory; rows added since go to a tail of their own, a save
    writes both, and an idle daemon's release drops the map's pages."""
    import mmap

    from urchin.search import cosine_store

    monkeypatch.setattr(cosine_store, "_MMAP_MIN", 1024)      # 400 rows' offsets: 3.2 kB, mapped as a large one is
    memory.ingest(_items(400, 5) + [{"id": "new", "content": "zeppelin hangar inspection"}])
    view = _view(settings)
    assert view.catch_up() == 6 and view.loaded_from_disk
    base = view.offsets.base
    assert not base.flags.writeable and len(base) == 400 and len(view.offsets) == 406
    while not isinstance(base, mmap.mmap):
        base = base.base if hasattr(base, "base") else base._mmap
    assert [h.event.id for h in view.search("zeppelin", since_ms=None, limit=5, filters=Filters())] == ["new"]
    assert _results(view) == _results(TokenCosineView(memory.journal))
    assert view.save() is True
    again = _view(settings)
    assert again.catch_up() == 0 and _results(again) == _results(view)
    assert _resident(_generation(settings), ("offsets",)) > 0       # the queries read their hits' offsets
    assert again.release_pages(idle_s=0) >= 1
    assert _resident(_generation(settings), ("offsets",)) == 0


def _resident(folder: Path, names: tuple[str, ...]) -> int:
    """kB of this process's resident pages mapped from files in `folder` whose names start with `names`."""
    total, counting = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields[0]) > 8 and ":" not in fields[0]:   # a mapping's header
            path = Path(fields[-1]) if len(fields) >= 6 else None
            counting = path is not None and path.parent == folder and path.name.startswith(names)
        elif counting and fields[:1] == ["Rss:"]:
            total += int(fields[1])
    return total


def _mapped_file(address: int) -> str:
    """The file /proc/self/maps says `address` is mapped from ("" for anonymous memory)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if lo <= address < hi:
            return fields[5] if len(fields) >= 6 else ""
    raise AssertionError(f"{address:#x} is not mapped")


def test_events_added_after_a_load_do_not_copy_the_loaded_columns(saved: list, memory: Memory, settings: Settings,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon's first new event after a load must not copy the loaded per-row columns into anonymous
    memory (at 3M events that took its RSS from 510 to 576 MB): they are mapped with room to grow, the
    rows added go on in that room, the loaded rows stay the saved files' pages; and the answers are a
    fresh build's."""
    from urchin.search import cosine_store

    monkeypatch.setattr(cosine_store, "_MMAP_MIN", 256)       # 400 rows' columns (0.5-3.2 kB), mapped as large ones
    view = _view(settings)
    assert view.catch_up() == 0 and view.loaded_from_disk
    index = view.index
    columns = {"ts": index._ts, "norm": index._norm, "prev": index._prev, "next": index._next,
               "ts_max": index._ts_max, **{f"label_{n}": c.column for n, c in index._fields.items()}}
    where = {name: c.data.__array_interface__["data"][0] for name, c in columns.items()}
    folder = _generation(settings)
    for name, address in where.items():   # ts_max too: saved beside ts, not computed into owned memory at the load
        assert _mapped_file(address) == str(folder / f"{name}.npy"), name
    memory.ingest(_items(400, 5) + [{"id": "new", "content": "zeppelin hangar inspection"}])
    assert view.catch_up() == 6
    assert [h.event.id for h in view.search("zeppelin", since_ms=None, limit=5, filters=Filters())] == ["new"]
    assert _results(view) == _results(TokenCosineView(memory.journal))
    for name, column in columns.items():
        assert column.size == 406 and column.data.__array_interface__["data"][0] == where[name], name
        assert _mapped_file(where[name]) == str(folder / f"{name}.npy"), name
    assert view.save() is True                         # and a save writes the loaded rows with the added ones
    again = _view(settings)
    assert again.catch_up() == 0 and _results(again) == _results(view)
    # the vocabulary too: loaded as its saved bytes (not a dict of str), the terms added since saved after them
    assert isinstance(index._vocab, Vocabulary) and isinstance(again.index._vocab, Vocabulary)
    assert again.index._vocab["zeppelin"] == index._vocab["zeppelin"] and len(again.index._vocab) == len(index._vocab)
    assert [h.event.id for h in again.search("zeppelin", since_ms=None, limit=5, filters=Filters())] == ["new"]


def _rss_anon_kb() -> int:
    return next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("RssAnon:"))


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's arenas keep freed memory resident")
def test_an_idle_view_gives_malloc_free_space_back(saved: list, settings: Settings) -> None:
    """glibc keeps what a query's temporaries freed in its arenas, resident (3M events, after the bench's
    hot cells: ~90-140 MB of the daemon). An idle view's release gives it back along with its maps."""
    view = _view(settings)
    assert view.catch_up() == 0 and view.loaded_from_disk
    view.search("deploy rollback", since_ms=None, limit=5, filters=Filters())   # used: the next release runs
    chunks = [np.ones(8192) for _ in range(1024)]     # 64 kB each, 64 MB: below the mmap threshold, in the heap
    last = chunks[-1]
    del chunks                                        # freed, but under `last`: no trim of the heap's top
    before = _rss_anon_kb()
    assert view.release_pages(idle_s=0) >= 0
    assert before - _rss_anon_kb() > 32 * 1024, (before, _rss_anon_kb())
    del last


def test_a_journal_rewritten_in_place_at_its_size_no_longer_covers_the_saved_index(saved: list,
                                                                                   settings: Settings) -> None:
    """The saved index (and the associations learned beside it) covers the journal as its ends were
    hashed: a same-size rewrite in place (the same file, so the same inode and size) is seen by the
    next check, not kept from the one before it."""
    view = _view(settings)
    view.catch_up()
    assert view.saved_covers()
    journal = view.journal.path
    data = journal.read_bytes()
    before = journal.stat().st_mtime_ns
    with journal.open("r+b") as handle:           # one byte of the first line's content, in place
        handle.seek(data.index(b'"content":"') + 11)
        handle.write(b"D" if data[data.index(b'"content":"') + 11:][:1] != b"D" else b"d")
    os.utime(journal, ns=(before + 10**9, before + 10**9))   # a later tick than the check's
    assert journal.stat().st_size == len(data)
    assert not view.saved_covers()
