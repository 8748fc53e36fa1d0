"""Each event is embedded once, for `urchin semantic`'s vector cache and the PostgreSQL index alike:
the feeder takes an event's vector from the cache, or embeds it into the cache for both (issue 16).
Real parts: the embedded PostgreSQL and the test embedding server."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from urchin.config import Settings
from urchin.facade import Memory
from urchin.search.vectors import VectorCache

pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")

EVENTS = [{"id": f"once-{i}", "content": text, "workspace": "auth"} for i, text in enumerate([
    "We rotate OAuth refresh tokens daily",
    "The cafeteria serves soup on Fridays",
    "Decision: the billing service deploys with blue green releases",
    "Rollback is one command: make rollback",
])] + [{"id": "once-titled", "title": "Release notes", "content": "Version 2 ships the new login page"}]
IDS = sorted(e["id"] for e in EVENTS)


def _settings(home: Path, pg_url: str, embedder_url: str) -> Settings:
    return Settings.resolve(home, database_url=pg_url, embedder_url=embedder_url,
                            embedder_model="all-MiniLM-L6-v2", embedder_api="openai")


def _index_vectors(memory: Memory) -> dict[str, np.ndarray]:
    conn: Any = memory.index_service.backend.conn
    with conn.transaction():
        rows = conn.execute("SELECT chunk_id, embedding::text FROM urchin_embeddings").fetchall()
    return {cid: np.array([float(x) for x in text.strip("[]").split(",")]) for cid, text in rows}


def _cache(memory: Memory) -> VectorCache:
    return memory.embedding_view().cache()


def _same_direction(a: np.ndarray, b: np.ndarray) -> bool:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) > 0.9999   # halfvec keeps ~3 digits


@contextlib.contextmanager
def _another_writer(memory: Memory, home: Path) -> Iterator[None]:
    """The cache's writers' lock held elsewhere, as the daemon's index process holds it mid-request."""
    view = memory.embedding_view()
    with VectorCache(home, view.embedder.fingerprint, view.embedder.dim).open().exclusive():
        yield


def test_the_feed_takes_the_vectors_urchin_embed_made(urchin_home: Path, pg_url: str, embedder_url: str) -> None:
    with Memory(_settings(urchin_home, pg_url, embedder_url)) as memory:
        memory.ingest(EVENTS)
        assert memory.embed()["embedded"] == len(EVENTS)
        report = memory.index()
        assert (report.embedded, report.reused) == (len(EVENTS), len(EVENTS))   # not one request more
        indexed, cached = _index_vectors(memory), _cache(memory).vectors_of(IDS)
        assert sorted(indexed) == IDS == sorted(cached)
        assert all(_same_direction(indexed[i], cached[i]) for i in IDS)


def test_urchin_embed_takes_the_vectors_the_feed_made(urchin_home: Path, pg_url: str, embedder_url: str) -> None:
    with Memory(_settings(urchin_home, pg_url, embedder_url)) as memory:
        memory.ingest(EVENTS)
        report = memory.index()
        assert (report.embedded, report.reused) == (len(EVENTS), 0)
        assert memory.embed()["embedded"] == 0                 # the feed left them in the cache
        cached = _cache(memory).vectors_of(IDS)
        assert sorted(cached) == IDS
        indexed = _index_vectors(memory)
        assert all(_same_direction(indexed[i], cached[i]) for i in IDS)
        # ... and the meaning is the embedder's: the titled event is found by its title's subject
        found = memory.semantic("release notes for version two", limit=1)
        assert found.mode.startswith("embedder") and [e.id for e in found.events] == ["once-titled"]


def test_a_forgotten_event_is_not_put_in_the_cache_by_the_feed(urchin_home: Path, pg_url: str,
                                                              embedder_url: str) -> None:
    with Memory(_settings(urchin_home, pg_url, embedder_url)) as memory:
        memory.ingest(EVENTS)
        memory.forget(ids=["once-1"], confirm=True)
        memory.index()
        assert "once-1" not in _cache(memory).vectors_of(IDS)
        assert "once-1" not in _index_vectors(memory)


def test_a_query_does_not_wait_for_another_writer_of_the_cache(urchin_home: Path, pg_url: str,
                                                               embedder_url: str) -> None:
    """The daemon's index process holds the cache's lock while its embedding request runs, at the lowest
    CPU priority: a semantic query then answers from what is cached, and says the rest is not yet."""
    with Memory(_settings(urchin_home, pg_url, embedder_url)) as memory:
        memory.ingest(EVENTS[:2])
        memory.embed()
        memory.ingest(EVENTS[2:])
        with _another_writer(memory, urchin_home):
            started = time.monotonic()
            found = memory.semantic("OAuth refresh tokens", limit=1)
            assert time.monotonic() - started < 20
            assert [e.id for e in found.events] == ["once-0"]
            assert any("not embedded yet" in note for note in found.notes), found.notes
        found = memory.semantic("release notes for version two", limit=1)   # free again: embeds the rest first
        assert [e.id for e in found.events] == ["once-titled"] and found.notes == []


def test_a_context_query_feeds_inline_without_waiting_for_another_writer(urchin_home: Path, pg_url: str,
                                                                         embedder_url: str) -> None:
    """A query's inline feed of a small backlog does not wait for the cache's lock either: the new rows
    are indexed at once (keyword leg), their vectors stay pending, and the next feed embeds them once."""
    with Memory(_settings(urchin_home, pg_url, embedder_url)) as memory:
        memory.ingest(EVENTS[:2])
        memory.index()
        memory.ingest(EVENTS[2:])
        with _another_writer(memory, urchin_home):
            started = time.monotonic()
            result = memory.context(query="blue green releases for billing")
            assert time.monotonic() - started < 20
            assert result.to_dict()["coverage"]["index"]["behindJournalBytes"] == 0
            assert "once-2" in {hit["id"] for hit in result.to_dict()["results"]}
            assert sorted(_index_vectors(memory)) == ["once-0", "once-1"]     # pending, not waited for
        report = memory.index()
        assert report.embedded == len(EVENTS) - 2
        assert sorted(_index_vectors(memory)) == IDS == sorted(_cache(memory).vectors_of(IDS))


@pytest.mark.parametrize("damage", [b"{not json", b"[384]"])
def test_a_damaged_cache_meta_file_costs_neither_the_feed_nor_the_query(urchin_home: Path, pg_url: str,
                                                                        embedder_url: str, damage: bytes) -> None:
    """A sidecar damaged on disk is named, not a traceback: the index still gets every vector (the feed
    embeds on its own), and a semantic query falls back to token-cosine, saying which file and why."""
    with Memory(_settings(urchin_home, pg_url, embedder_url)) as memory:
        memory.ingest(EVENTS)
        memory.embed()
        fingerprint = memory.embedding_view().embedder.fingerprint
    meta = urchin_home / "vectors" / fingerprint / "meta.json"
    assert meta.exists()
    meta.write_bytes(damage)
    with Memory(_settings(urchin_home, pg_url, embedder_url)) as memory:
        report = memory.index()
        assert (report.embedded, report.reused) == (len(EVENTS), 0)
        assert sorted(_index_vectors(memory)) == IDS
        found = memory.semantic("OAuth refresh tokens", limit=1)
        assert found.mode.startswith("token-cosine") and [e.id for e in found.events] == ["once-0"]
        assert any("meta.json" in note for note in found.notes), found.notes
    assert meta.read_bytes() == damage          # nothing stored was touched
