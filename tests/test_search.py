"""The `urchin_search` contract through the Memory facade: windows, order, casefold, filters, limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from urchin.errors import NotFoundError, QueryError
from urchin.facade import Memory

NOW = datetime(2026, 5, 4, 20, 0, tzinfo=UTC)


def _at(hours_ago: float) -> str:
    return (NOW - timedelta(hours=hours_ago)).isoformat()


@pytest.fixture
def filled(memory: Memory) -> Memory:
    memory.ingest([
        {"id": "old", "content": "deploy failed on staging", "timestamp": _at(200), "source": "claude"},
        {"id": "new", "content": "Deploy fixed by pinning numpy", "timestamp": _at(1), "source": "codex",
         "workspace": "api", "session": "s1", "kind": "decision"},
        # appended later but older: order must follow timestamps, not file order
        {"id": "backfill", "content": "DEPLOY checklist written", "timestamp": _at(50), "source": "claude",
         "workspace": "api", "session": "s2"},
        {"id": "mid", "content": "redeploy after review", "timestamp": _at(10), "source": "shell"},
        {"id": "german", "content": "Die Straße ist gesperrt", "timestamp": _at(2), "source": "manual"},
        {"id": "greek", "content": "ΟΔΥΣΣΕΥΣ returned", "timestamp": _at(3), "source": "manual"},
    ])
    return memory


@freeze_time(NOW)
def test_newest_first_by_event_timestamp_within_the_default_week(filled: Memory) -> None:
    assert [e.id for e in filled.search("deploy").events] == ["new", "mid", "backfill"]


@freeze_time(NOW)
def test_hours_window_is_relative_to_now(filled: Memory) -> None:
    assert [e.id for e in filled.search("deploy", hours=24).events] == ["new", "mid"]
    assert [e.id for e in filled.search("deploy", hours=1000).events] == ["new", "mid", "backfill", "old"]
    with freeze_time(NOW + timedelta(hours=30)):
        assert [e.id for e in filled.search("deploy", hours=24).events] == []


@freeze_time(NOW)
def test_unicode_casefold(filled: Memory) -> None:
    assert [e.id for e in filled.search("STRASSE").events] == ["german"]
    assert [e.id for e in filled.search("straße").events] == ["german"]
    assert [e.id for e in filled.search("οδυσσευς").events] == ["greek"]


@freeze_time(NOW)
def test_search_is_over_content_only(filled: Memory) -> None:
    assert filled.search("codex").events == []
    assert filled.search("claude").events == []


@freeze_time(NOW)
def test_filters(filled: Memory) -> None:
    assert [e.id for e in filled.search("deploy", source="CLAUDE").events] == ["backfill"]
    assert [e.id for e in filled.search("deploy", workspace="api").events] == ["new", "backfill"]
    assert [e.id for e in filled.search("deploy", session="s1").events] == ["new"]
    assert [e.id for e in filled.search("deploy", kind="decision").events] == ["new"]


@freeze_time(NOW)
def test_limit_applies_after_filtering(filled: Memory) -> None:
    assert [e.id for e in filled.search("deploy", limit=2).events] == ["new", "mid"]
    assert [e.id for e in filled.search("deploy", limit=1, source="claude").events] == ["backfill"]


@freeze_time(NOW)
def test_ties_break_by_id(memory: Memory) -> None:
    memory.ingest([{"id": i, "content": "same moment", "timestamp": _at(1)} for i in ("b", "c", "a")])
    assert [e.id for e in memory.search("moment").events] == ["c", "b", "a"]


@pytest.mark.parametrize("kwargs, message", [
    ({"query": "  "}, "query must not be empty"),
    ({"query": ""}, "query must not be empty"),
    ({"query": "x", "hours": 0}, "hours: must be greater than 0"),
    ({"query": "x", "hours": -5}, "hours: must be greater than 0"),
    ({"query": "x", "limit": 0}, "limit: must be from 1 to 1000"),
    ({"query": "x", "limit": 1001}, "limit: must be from 1 to 1000"),
])
def test_bad_parameters_fail_clearly(memory: Memory, kwargs: dict, message: str) -> None:
    with pytest.raises(QueryError) as caught:
        memory.search(**kwargs)
    assert str(caught.value).startswith(message)


@freeze_time(NOW)
def test_recent_and_context_views(filled: Memory) -> None:
    assert [e.id for e in filled.recent(hours=24).events] == ["new", "german", "greek", "mid"]
    assert [e.id for e in filled.recent(hours=24, source="shell").events] == ["mid"]
    filled.ingest([{"id": "s1-a", "content": "start", "session": "s1", "timestamp": _at(5)}])
    assert [e.id for e in filled.session_context("s1").events] == ["s1-a", "new"]
    assert [e.id for e in filled.workspace_context("api").events] == ["new", "backfill"]


def test_get_returns_the_whole_event_or_not_found(memory: Memory) -> None:
    memory.ingest_one({"id": "x", "content": "hello", "meta": {"k": 1}})
    assert memory.get("x").meta == {"k": 1}
    with pytest.raises(NotFoundError):
        memory.get("missing")


@freeze_time(NOW)
def test_nothing_in_the_window_says_where_an_older_match_is(filled: Memory) -> None:
    """Only when nothing matched, and only for a real match the block index finds (query, filters,
    forgetting and redaction as the search applies them): its time and a round window reaching it."""
    found = filled.search("deploy failed", hours=24)
    assert found.hits == [] and found.older == {"timestamp": "2026-04-26T12:00:00Z", "hours": 500}
    assert found.to_dict()["olderMatch"] == found.older
    assert [e.id for e in filled.search("deploy failed", hours=found.older["hours"]).events] == ["old"]
    assert filled.search("deploy", hours=24).older is None                 # something matched: nothing to say
    assert filled.search("no such words", hours=24).older is None          # no older match either
    assert filled.search("deploy failed", hours=24, source="codex").older is None   # filters hold
    assert filled.search("deploy failed", hours=24, workspace="api").older is None
    filled.forget(["old"], confirm=True)
    assert filled.search("deploy failed", hours=24).older is None          # a forgotten match is no match


def test_the_older_window_is_round_and_reaches_the_match() -> None:
    from urchin.search.query import older_hint

    now_ms = int(NOW.timestamp() * 1000)
    for age_h, hours in ((0.5, 1), (30, 50), (199, 500), (900, 1000), (1000, 2000), (60_000, 100_000)):
        hint = older_hint(now_ms - int(age_h * 3_600_000), NOW)
        assert hint["hours"] == hours and hint["hours"] >= age_h, age_h
