"""Semantic search through the Memory facade: ranking, scores, filters, and following the journal."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from tests.conftest import run_urchin
from urchin.errors import QueryError
from urchin.memory import Memory

NOW = datetime(2026, 5, 4, 20, 0, tzinfo=UTC)


def _at(hours_ago: float) -> str:
    return (NOW - timedelta(hours=hours_ago)).isoformat()


@pytest.fixture
def filled(memory: Memory) -> Memory:
    memory.ingest([
        {"id": "q", "content": "Which database should back the hybrid index?", "session": "s1",
         "timestamp": _at(5), "source": "claude", "workspace": "api"},
        {"id": "a", "content": "PostgreSQL with pgvector; HNSW for the vectors.", "session": "s1",
         "timestamp": _at(4.9), "source": "claude", "workspace": "api"},
        {"id": "shell", "content": "git status", "timestamp": _at(3), "source": "shell"},
        {"id": "auth", "content": "Authentication decisions: tokens rotate daily", "timestamp": _at(2),
         "source": "codex", "kind": "decision"},
        {"id": "old", "content": "database migration notes", "timestamp": _at(500), "source": "claude"},
    ])
    return memory


@freeze_time(NOW)
def test_best_first_with_scores_in_zero_one(filled: Memory) -> None:
    result = filled.semantic("database for the index")
    assert result.mode == "token-cosine"
    assert [h.event.id for h in result.hits][:1] == ["q"]
    assert "a" in [h.event.id for h in result.hits]  # found through its session neighbour
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores if s is not None)


@freeze_time(NOW)
def test_window_and_filters(filled: Memory) -> None:
    assert "old" not in [h.event.id for h in filled.semantic("database migration").hits]
    assert [h.event.id for h in filled.semantic("database migration", hours=1000).hits][0] == "old"
    assert [h.event.id for h in filled.semantic("authentication", kind="decision").hits] == ["auth"]
    assert filled.semantic("authentication", source="claude").hits == []
    assert [h.event.id for h in filled.semantic("pgvector", workspace="api").hits] == ["a", "q"]


@freeze_time(NOW)
def test_events_appended_by_another_process_are_found(filled: Memory) -> None:
    assert filled.semantic("kubernetes rollout").hits == []
    out = run_urchin("ingest", "--timestamp", _at(1), "kubernetes rollout paused for the weekend")
    assert out.returncode == 0
    assert [h.event.content for h in filled.semantic("kubernetes rollout").hits] == [
        "kubernetes rollout paused for the weekend"]


def test_bad_parameters(memory: Memory) -> None:
    with pytest.raises(QueryError, match="query: must not be empty"):
        memory.semantic("   ")
    with pytest.raises(QueryError, match="limit"):
        memory.semantic("x", limit=0)


def test_cli_prints_scores() -> None:
    run_urchin("ingest", "the deploy pipeline uses blue green")
    out = run_urchin("semantic", "deploy pipeline")
    assert out.returncode == 0
    assert re.fullmatch(r"\[[0-9T:-]+Z\] manual \(0\.\d{3}\) — the deploy pipeline uses blue green\n", out.stdout)
