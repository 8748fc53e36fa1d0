"""`ContextParams.parse`: wire names, defaults, and a clear error for every bad parameter (no database)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from urchin.errors import QueryError
from urchin.hybrid.search_context import pack
from urchin.params.context import ContextParams, SubQuery
from urchin.search.websearch import split_websearch

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_defaults_follow_the_issue() -> None:
    p = ContextParams.parse({"query": "deploy"})
    # k 20 (the issue said 60): chosen by leave-one-conversation-out CV on LoCoMo (bench/locomo_hybrid.py --cv)
    assert (p.strategy, p.full_text_weight, p.semantic_weight, p.k, p.limit) == ("hybrid", 1.0, 1.0, 20, 10)
    assert (p.since, p.until, p.token_budget, p.min_score, p.explain) == (None, None, None, 0.0, False)
    assert p.include_memories and p.include_conversations and p.memory_weight == 1.0


PASSAGE = " ".join(["word"] * 30)


def test_wire_names_and_snake_case_both_parse() -> None:
    wire = ContextParams.parse({"query": "q", "fullTextWeight": 0.5, "sourceIds": ["Git"], "sources": "claude",
                                "tokenBudget": 100, "minScore": 0.25, "includeMemories": False,
                                "searches": [{"type": "hyde", "query": PASSAGE}]})
    snake = ContextParams.parse({"query": "q", "full_text_weight": 0.5, "source_ids": ["git"], "sources": ["claude"],
                                 "token_budget": 100, "min_score": 0.25, "include_memories": False,
                                 "searches": [{"type": "hyde", "query": PASSAGE}]})
    assert wire == snake
    assert wire.sources == ("claude", "git") and wire.searches == (SubQuery("hyde", PASSAGE),)


def test_hours_becomes_a_since_from_now() -> None:
    p = ContextParams.parse({"query": "q", "hours": 2}, now=NOW)
    assert p.since == NOW - timedelta(hours=2) and p.until is None
    assert p.filters_dict() == {"since": "2026-03-01T10:00:00.000Z"}


@pytest.mark.parametrize(("params", "message"), [
    ({}, "query must not be empty"),
    ({"query": "  "}, "query must not be empty"),
    ({"query": "q", "strategy": "fuzzy"}, "strategy: must be hybrid, keyword or semantic, got 'fuzzy'"),
    ({"query": "q", "searches": []}, "searches: must hold 1 to 8 sub-queries, got 0"),
    ({"query": "q", "searches": [{"type": "lex", "query": "a"}] * 9}, "searches: must hold 1 to 8 sub-queries, got 9"),
    ({"query": "q", "searches": "lex:a"}, "searches: must be a list of {type, query} objects"),
    ({"query": "q", "searches": [{"type": "lex", "query": "a"}, {"type": "lex", "query": "b"},
                                 {"type": "sql", "query": "c"}]}, "searches[2].type: must be lex, vec or hyde"),
    ({"query": "q", "searches": [{"type": "vec", "query": ""}]}, "searches[0].query must not be empty"),
    ({"query": "q", "searches": [{"type": "vec", "query": "a", "weight": 2}]}, "searches[0].weight: unknown field"),
    ({"query": "q", "fullTextWeight": -1}, "fullTextWeight: must be from 0 to 1000, got -1"),
    ({"query": "q", "semanticWeight": "heavy"}, "semanticWeight: must be a number"),
    ({"query": "q", "fullTextWeight": 0, "semanticWeight": 0}, "fullTextWeight: fullTextWeight and semanticWeight"),
    ({"query": "q", "strategy": "keyword", "fullTextWeight": 0}, "fullTextWeight: must be greater than 0"),
    ({"query": "q", "k": 0}, "k: must be from 1 to 1000, got 0"),
    ({"query": "q", "k": 2.5}, "k: must be a whole number"),
    ({"query": "q", "sources": [""]}, "sources[0]: must be a non-empty string"),
    ({"query": "q", "kinds": 3}, "kinds: must be a list of strings"),
    ({"query": "q", "tags": ["ok", 5]}, "tags[1]: must be a non-empty string"),
    ({"query": "q", "workspace": 7}, "workspace: must be a string"),
    ({"query": "q", "since": "yesterday"}, "since: must be an RFC 3339 timestamp"),
    ({"query": "q", "since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until: must be later"),
    ({"query": "q", "hours": 0}, "hours: must be greater than 0"),
    ({"query": "q", "hours": 1, "since": "2026-01-01T00:00:00Z"}, "hours: cannot be combined with since"),
    ({"query": "q", "includeMemories": False, "includeConversations": False}, "includeConversations: includeMemories"),
    ({"query": "q", "includeMemories": "yes"}, "includeMemories: must be true or false"),
    ({"query": "q", "memoryWeight": -0.5}, "memoryWeight: must be from 0 to 1000, got -0.5"),
    ({"query": "q", "includeConversations": False, "memoryWeight": 0}, "memoryWeight: must be greater than 0"),
    ({"query": "q", "minScore": 1.5}, "minScore: must be from 0 to 1, got 1.5"),
    ({"query": "q", "limit": 0}, "limit: must be from 1 to 100, got 0"),
    ({"query": "q", "limit": True}, "limit: must be a whole number"),
    ({"query": "q", "tokenBudget": 0}, "tokenBudget: must be from 1 to 1000000, got 0"),
    ({"query": "q", "explain": 1}, "explain: must be true or false"),
    ({"query": "q", "mode": "psychic"}, "mode: must be indexed or live"),
    ({"query": "q", "perFileCap": 0}, "perFileCap: must be from 1 to 100"),
    ({"query": "q", "liveByteBudget": -1}, "liveByteBudget: must be from 0"),
])
def test_bad_parameters_name_the_field_and_rule(params: dict[str, Any], message: str) -> None:
    with pytest.raises(QueryError, match=re.escape(message)) as caught:
        ContextParams.parse(params, now=NOW)
    assert caught.value.status == 400


def test_websearch_split_keeps_phrases_and_exclusions_as_constraints() -> None:
    assert split_websearch('deploy "blue green" -friday or rollback') == (
        ["deploy", "rollback"], '"blue green" -friday')
    assert split_websearch("What's the plan?") == (["what", "s", "the", "plan"], None)


def test_pack_cuts_the_overflowing_result_at_a_line_and_drops_the_rest() -> None:
    results = [{"content": "a" * 40}, {"content": "line one\nline two\nline three"}, {"content": "never"}]
    packed, truncated, used = pack([dict(r) for r in results], budget=15)
    assert truncated and used <= 15
    assert [r["content"] for r in packed] == ["a" * 40, "line one\nline two"] and packed[1]["cut"]
    assert pack([dict(r) for r in results], budget=None)[1:] == (False, 10 + 7 + 2)  # ceil(chars / 4) each
