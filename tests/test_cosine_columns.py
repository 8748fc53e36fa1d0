"""A token-cosine index's per-row columns: label codes a byte a row, a format-2 save converted to them,
and a loaded index's columns out of the resident set once its view is idle."""

from __future__ import annotations

import os
import resource
import signal
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.test_cosine_store import QUERIES, _cosine_dir, _generation, _items, _resident, _results, _view
from urchin.config import Settings
from urchin.facade import Memory
from urchin.search import cosine_store
from urchin.search.query import Filters
from urchin.search.semantic import TokenCosineView

NARROW = ("source", "workspace", "kind")     # label fields of a few values
_NARROWED = tuple(f"label_{name}.npy" for name in NARROW)


@pytest.fixture
def saved(memory: Memory, settings: Settings) -> list[list[tuple[str, float | None]]]:
    """400 events indexed and saved (their generation's columns mapped once loaded); the saver's results."""
    memory.ingest(_items(0, 400))
    view = _view(settings)
    assert view.catch_up() == 400 and view.save() is True
    return _results(view)


def _format_2(settings: Settings) -> None:
    """Rewrite the saved generation as the code before this format saved it: int32 label codes, format 2."""
    folder, manifest_path = _generation(settings), _cosine_dir(settings) / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    for name in _NARROWED:
        np.save(folder / name, np.load(folder / name).astype(np.int32), allow_pickle=False)
        manifest["files"][name][0] = (folder / name).stat().st_size
    manifest["format"] = 2
    manifest_path.write_bytes(orjson.dumps(manifest))


def _sources(view: TokenCosineView, names: list[str]) -> list[list[str]]:
    return [[h.event.id for h in view.search("deploy", since_ms=None, limit=5, filters=Filters.of(name))]
            for name in names]


def test_label_codes_take_a_byte_and_widen_when_a_field_outgrows_it(saved: list, memory: Memory,
                                                                    settings: Settings) -> None:
    """Kind, source and workspace codes are int8 in memory and on disk (a fifth of an index's per-row bytes
    were these three int32 columns); a 200th source widens its column (to int16) without wrapping a code."""
    assert {str(np.load(_generation(settings) / name).dtype) for name in _NARROWED} == {"int8"}
    assert np.load(_generation(settings) / "label_session.npy").dtype == np.int32
    view = _view(settings)
    assert view.catch_up() == 0 and view.loaded_from_disk and _results(view) == saved
    memory.ingest([{"id": f"s{i}", "content": f"deploy from source {i}", "source": f"src{i}"} for i in range(200)])
    assert view.catch_up() == 200
    assert {n: str(view.index._fields[n].column.data.dtype) for n in NARROW} == {
        "source": "int16", "workspace": "int8", "kind": "int8"}
    names = ["src0", "src126", "src127", "src199", "claude"]
    fresh = TokenCosineView(memory.journal)
    assert _sources(view, names) == _sources(fresh, names) and _sources(view, names)[3] == ["s199"]
    assert view.save() is True
    again = _view(settings)
    assert again.catch_up() == 0 and _sources(again, names) == _sources(fresh, names)
    assert np.load(_generation(settings) / "label_source.npy").dtype == np.int16


def _converting_dies(directory: Path) -> None:
    """`convert` in a child process whose file size limit stops its first write: a crash mid-conversion."""
    pid = os.fork()
    if pid == 0:     # pragma: no cover - the child
        code = 1
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
            code = 0 if cosine_store.convert(directory) is False else 2
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0


def test_a_format_2_save_is_read_then_converted_and_a_crash_mid_conversion_loses_nothing(
        saved: list, memory: Memory, settings: Settings) -> None:
    """The code before this format saved int32 label codes (format 2): it is read as it is (codes narrowed
    in memory, no rebuild), converted in place of the old generation by `convert` (the home's upgrade), and
    a conversion stopped mid-write leaves the format-2 save whole, to be read and converted again."""
    _format_2(settings)
    directory = _cosine_dir(settings)
    view = _view(settings)
    assert view.catch_up() == 0 and view.loaded_from_disk and view.rebuild_reason is None
    assert _results(view) == saved and view.index._fields["kind"].column.data.dtype == np.int8
    _converting_dies(directory)
    assert [p.name for p in directory.iterdir() if p.name.startswith("tmp-gen-")]     # what the crash left
    assert orjson.loads((directory / "manifest.json").read_bytes())["format"] == 2
    again = _view(settings)
    assert again.catch_up() == 0 and again.loaded_from_disk and _results(again) == saved
    old = _generation(settings)
    linked = {p.name: p.stat().st_ino for p in old.iterdir() if p.name not in _NARROWED}
    assert cosine_store.convert(directory) is True and cosine_store.convert(directory) is True   # once
    manifest = orjson.loads((directory / "manifest.json").read_bytes())
    assert manifest["format"] == cosine_store.FORMAT and not old.exists()
    assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == [manifest["generation"]]   # leftovers gone
    new = _generation(settings)
    assert {p.name: p.stat().st_ino for p in new.iterdir() if p.name not in _NARROWED} == linked   # not rebuilt
    assert {str(np.load(new / name).dtype) for name in _NARROWED} == {"int8"}
    third = _view(settings)
    assert third.catch_up() == 0 and third.loaded_from_disk and _results(third) == saved


@pytest.mark.skipif(not Path("/proc/self/pagemap").exists(), reason="reads this process's pagemap")
def test_an_idle_view_drops_its_columns_pages_but_keeps_what_it_wrote(saved: list, memory: Memory,
                                                                      settings: Settings,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole-journal question reads the labels, norms and links of every row its terms reach: ~30 B a
    row of a 3M index stayed resident after the questions. An idle view drops those file pages; pages a
    new row changed (the `next` link of a session's last loaded row) are private copies and stay."""
    monkeypatch.setattr(cosine_store, "_MMAP_MIN", 256)      # 400 rows' columns (0.5-3.2 kB), mapped
    view = _view(settings)
    assert view.catch_up() == 0 and view.loaded_from_disk
    folder = _generation(settings)
    columns = ("ts", "norm", "prev", "next", "label_")
    assert _results(view) == saved and _resident(folder, columns) > 0
    assert view.release_pages(0) > 0 and _resident(folder, columns) == 0
    assert _results(view) == saved and _resident(folder, columns) > 0      # read back from the page cache
    last = max(i for i in range(400) if i // 5 == 79)           # session s79's last row: its `next` is written
    memory.ingest([{"id": "more", "content": "deploy rollback again", "session": "s79",
                    "timestamp": "2026-04-28T11:00:00Z", "workspace": "w1", "source": "shell"}])
    assert view.catch_up() == 1 and int(view.index._next.data[last]) == 400
    assert view.search("rollback", since_ms=None, limit=1, filters=Filters()) and view.release_pages(0) > 0
    assert int(view.index._next.data[last]) == 400 and 0 < _resident(folder, ("next",)) <= 4
    fresh = TokenCosineView(memory.journal)
    for q in QUERIES:
        assert [(h.event.id, h.score) for h in view.search(q, since_ms=None, limit=20, filters=Filters())] == \
            [(h.event.id, h.score) for h in fresh.search(q, since_ms=None, limit=20, filters=Filters())]
