"""What a loaded token-cosine index's queries leave mapped in the process (a daemon's resident set)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.test_cosine_store import _resident
from urchin.config import Settings
from urchin.facade import Memory
from urchin.search import cosine_store
from urchin.search.cosine import TokenCosineIndex
from urchin.search.query import Filters
from urchin.search.semantic import TokenCosineView

WORDS = ["deploy", "rollback", "cache", "latency", "token", "session", "kubernetes", "postgres", "ledger", "quartz"]


def _items(n: int) -> list[dict]:
    return [{"id": f"e{i}", "content": f"{WORDS[i % 10]} {WORDS[i * 7 % 10]} note {i % 13} word{i % 997} w{i}",
             "session": f"s{i // 5}", "timestamp": f"2026-04-{1 + i * 28 // n:02d}T10:{i % 60:02d}:00Z"}
            for i in range(n)]


def _view(settings: Settings) -> TokenCosineView:
    return TokenCosineView(Memory(settings).journal, settings.index_dir / "cosine", save_every=0)


@pytest.fixture
def loaded(memory: Memory, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> tuple[TokenCosineView, Path]:
    """3,000 events indexed in segments of ~3.5k postings, saved, loaded by a second view (its maps released)."""
    monkeypatch.setattr(TokenCosineIndex, "freeze_postings", 2_000)
    monkeypatch.setattr(TokenCosineIndex, "max_merge_postings", 2_000)
    monkeypatch.setattr(cosine_store, "_MMAP_MIN", 1024)      # small segments mapped as a large index's are
    view, items = _view(settings), _items(3_000)
    for start in range(0, 3_000, 500):
        memory.ingest(items[start:start + 500])
        assert view.catch_up() == 500
    assert view.save() is True
    again = _view(settings)
    assert again.catch_up() == 0 and again.loaded_from_disk
    manifest = orjson.loads((settings.index_dir / "cosine" / "manifest.json").read_bytes())
    assert manifest["segments"] >= 5
    return again, settings.index_dir / "cosine" / manifest["generation"]


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads this process's smaps")
def test_a_windowed_query_leaves_no_segment_mapped_whole(loaded: tuple[TokenCosineView, Path]) -> None:
    """A windowed query asks each segment for its lowest and highest row, which reads a page of its rows
    per term: nearly every page of every segment (a 3M index: ~260 MB of the daemon's resident set after
    its first windowed query). Those pages leave the process once the span is known."""
    view, gen = loaded
    assert _resident(gen, ("seg",)) == 0
    spans = [seg.span for seg in view.index._segments]
    assert spans[0][0] == 0 and spans[-1][1] <= 2_999 and all(a <= b for a, b in spans)
    assert _resident(gen, ("seg",)) == 0
    found = view.search("quartz ledger", since_ms=1_775_500_000_000, limit=5, filters=Filters())
    assert found and _resident(gen, ("seg",)) < 64 * len(view.index._segments)
