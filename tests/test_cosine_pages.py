"""What a loaded token-cosine index's queries leave mapped in the process (a daemon's resident set)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
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


def _cached_pages(path: Path) -> int:
    """Pages of `path` in the page cache (mincore of a fresh read-only map)."""
    import ctypes
    import mmap

    size = path.stat().st_size
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), size, prot=mmap.PROT_READ) as mapped:
        view = np.frombuffer(mapped, dtype=np.uint8)
        vec = (ctypes.c_ubyte * -(-size // mmap.PAGESIZE))()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        assert libc.mincore(view.__array_interface__["data"][0], size, vec) == 0
        del view
        return sum(v & 1 for v in vec)


@pytest.fixture
def disk_settings(disk_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A home on a disk's file system (conftest's disk_path), not in tmp_path (maybe tmpfs)."""
    monkeypatch.setenv("URCHIN_HOME", str(disk_path / "urchin-home"))
    return Settings.resolve(disk_path / "urchin-home")


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise")
def test_a_save_leaves_its_mapped_files_out_of_the_page_cache(disk_settings: Settings,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Just written, a generation's files sit in the page cache in large folios (2 MB: ext4, Linux 6.18), and
    a query's read of one posting maps its whole folio: after a 3M first start, 4x a restart's pages for the
    same queries. The save drops the files queries map read-only; read back, they come in small pieces."""
    settings, memory = disk_settings, Memory(disk_settings)
    monkeypatch.setattr(TokenCosineIndex, "freeze_postings", 2_000)
    view = _view(settings)
    memory.ingest(_items(1_500))
    assert view.catch_up() == 1_500 and view.save() is True
    manifest = orjson.loads((settings.index_dir / "cosine" / "manifest.json").read_bytes())
    gen = settings.index_dir / "cosine" / manifest["generation"]
    mapped = [p for p in gen.iterdir() if p.name.startswith(("seg", "ids", "id_end", "offsets"))]
    assert len(mapped) >= 6 and sum(_cached_pages(p) for p in mapped) == 0
    assert _cached_pages(gen / "norm.npy") > 0        # the rest (loaded copy-on-write, read whole) stays


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise")
def test_a_spilled_segment_is_mapped_from_outside_the_page_cache(disk_path: Path) -> None:
    """A build's spilled segment is read through a map while the build goes on (queries answer from it):
    written, synced, then dropped from the page cache as a save's files are (but the header's pages
    np.load reads back: 642 pages cached without the drop), the same bytes mapped."""
    arrays = (np.arange(1 << 18, dtype=np.int64), np.arange(1 << 17, dtype=np.int32))
    maps = cosine_store.spill(disk_path / "cosine", arrays, {})
    files = [p for p in (disk_path / "cosine").rglob("*.npy")]
    assert len(files) == 2 and sum(_cached_pages(p) for p in files) <= 32
    assert all(np.array_equal(m, a) for m, a in zip(maps, arrays, strict=True))
