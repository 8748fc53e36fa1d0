"""A home copied to other files (`cp -a`, rsync, a new laptop): what its derived files keep and what
they rebuild. The same bytes keep the id index, the token-cosine view and the journal stats; other
bytes (a journal replaced, even of the same size) rebuild them, and a rebuild never waits forever on
the saved index it replaces."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import orjson
import pytest

from tests.test_cosine_build import QUERY, SMALL, SMALL_TAIL, _import
from urchin.config import Settings
from urchin.facade.copied import follow_copy
from urchin.facade.upgrade import open_home
from urchin.idindex import IdIndex
from urchin.journal import Journal
from urchin.search import cosine_store
from urchin.search.query import Filters
from urchin.search.semantic import TokenCosineView


@pytest.fixture(scope="module")
def saved_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home of SMALL events with its token-cosine view saved and its journal stats cached."""
    home = tmp_path_factory.mktemp("saved") / "home"
    journal = Journal(_import(home, SMALL))
    view = TokenCosineView(journal, Settings.resolve(home).index_dir / "cosine", home=home)
    view.build(learn=False)
    journal.stats()
    assert cosine_store.covers(view.index_dir, journal)
    return home


def _copy(home: Path, to: Path) -> Settings:
    shutil.copytree(home, to, copy_function=shutil.copy2)     # cp -a: other files, the same bytes
    return Settings.resolve(to)


def test_a_copied_home_keeps_its_id_index_views_and_stats(saved_home: Path, tmp_path: Path) -> None:
    settings = _copy(saved_home, tmp_path / "copy")
    journal = Journal(settings.journal_path)
    assert not cosine_store.covers(settings.index_dir / "cosine", journal)   # names the first home's file
    open_home(settings)          # what every command and the daemon do first
    assert cosine_store.covers(settings.index_dir / "cosine", journal)
    stats = orjson.loads(settings.journal_path.with_name("events.jsonl.stats").read_bytes())
    assert stats["mark"]["inode"] == settings.journal_path.stat().st_ino
    with journal.locked():
        assert IdIndex(journal).catch_up() == "caught up"
    view = TokenCosineView(journal, settings.index_dir / "cosine", home=settings.home)
    view.ready()
    assert view.loaded_from_disk and view.coverage() is None
    assert view.search(QUERY, since_ms=None, limit=3, filters=Filters.of())
    assert follow_copy(settings) == []      # once: the home is now its own


def test_a_replaced_journal_is_indexed_again_and_its_build_is_not_stuck_on_the_saved_index(
        saved_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other bytes of the same size in another file: nothing is re-stamped, the id index finds the
    changed ids, and the daemon's build (a child) builds the view again rather than wait on the saved
    index of the former journal (which once failed every retry: /semantic stayed partial for good)."""
    settings = _copy(saved_home, tmp_path / "replaced")
    path = settings.journal_path
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data.replace(b'"id":"e000007"', b'"id":"x000007"'))
    open_home(settings)
    journal = Journal(path)
    assert not cosine_store.covers(settings.index_dir / "cosine", journal)
    index = IdIndex(journal)
    with journal.locked():     # left to the first writer (a daemon's: in the background), not done at the open
        assert index.catch_up() == "rebuilt"
    assert index.contains("x000007") and not index.contains("e000007")
    view = TokenCosineView(journal, settings.index_dir / "cosine", home=settings.home)
    view.background, view.tail_bytes = "child", SMALL_TAIL
    view.ready()
    deadline = time.monotonic() + 90      # a deadline for a loaded machine, not a timing
    while view.coverage() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
        view.ready()
    assert view.coverage() is None, view.rebuild_reason
    assert cosine_store.covers(settings.index_dir / "cosine", journal)
