"""One score orders every ranked list (issue 32, item 1): the list is sorted by the score it shows,
`explain` adds up, and no prior lifts a result holding none of the words above one holding them all."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from urchin.config import Settings
from urchin.facade import Memory
from urchin.params.context import ContextParams

# A session where a decision holding none of the words sits among turns holding some of them (its
# neighbours and the decision prior lift it), and one event holding all three words, on its own.
DEPLOY = [
    {"id": "n-1", "content": "deploy the api again", "session": "s1", "kind": "conversation"},
    {"id": "n-2", "content": "the key is in the vault", "session": "s1", "kind": "conversation"},
    {"id": "n-3", "content": "Rotate the Stripe webhook secret every quarter", "session": "s1", "kind": "decision"},
    {"id": "n-4", "content": "staging is green after the deploy", "session": "s1", "kind": "conversation"},
    {"id": "n-5", "content": "that key for staging too", "session": "s1", "kind": "conversation"},
    {"id": "all", "content": "We made a new deploy key for staging with read access", "session": "s2",
     "kind": "conversation"},
    {"id": "x-1", "content": "lunch order pizza", "session": "s3", "kind": "note"},
    {"id": "x-2", "content": "roll back the release with make rollback", "session": "s4", "kind": "conversation"},
    {"id": "x-3", "content": "a release checklist: tag, build, deploy, watch", "session": "s4", "kind": "decision"},
    {"id": "x-4", "content": "we roll forward, never back", "session": "s4", "kind": "conversation"},
]


def _events() -> list[dict[str, Any]]:
    return [{**e, "source": "claude", "workspace": "shop", "timestamp": f"2026-01-01T10:00:{i:02d}Z"}
            for i, e in enumerate(DEPLOY)]


WORDS = {"deploy", "key", "staging"}


def _holds_all(content: str) -> bool:
    return WORDS <= set(content.lower().replace(",", " ").split())


def _check_order(results: list[dict[str, Any]]) -> None:
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True), scores
    first_partial = next((i for i, r in enumerate(results) if not _holds_all(r["content"])), len(results))
    assert all(not _holds_all(r["content"]) for r in results[first_partial:]), [r["id"] for r in results]


@pytest.fixture
def indexed(pg_settings: Settings) -> Any:
    memory = Memory(pg_settings)
    memory.ingest(_events())
    memory.index()
    yield memory
    memory.close()


@pytest.mark.parametrize("strategy", ["hybrid", "keyword", "semantic"])
def test_context_puts_the_result_holding_every_word_first_and_sorts_by_its_score(indexed: Memory,
                                                                                   strategy: str) -> None:
    result = indexed.context(ContextParams.parse({"query": "deploy key staging", "strategy": strategy,
                                                  "explain": True}))
    assert result.results[0]["id"] == "all", [(r["id"], r["score"]) for r in result.results]
    _check_order(result.results)
    from urchin.search import score

    for r in result.results:        # explain: the parts add up to raw, and the map to the score is stated
        why = r["explain"]
        assert math.isclose(sum(why["parts"].values()), why["raw"], abs_tol=1e-5)
        assert "exp(-raw)" in why["map"] and score.shown(why["raw"]) == r["score"] == why["score"]
        assert {leg["leg"] for leg in why["legs"]} <= {"keyword", "semantic"}


@pytest.mark.parametrize("query", ["how do we roll back a release?", "deploy key staging", "release deploy"])
def test_every_ranked_answer_is_sorted_by_its_score_and_min_score_filters_that_number(indexed: Memory,
                                                                                       query: str) -> None:
    answers = [indexed.context(ContextParams.parse({"query": query, "strategy": s, "limit": 50})).results
               for s in ("hybrid", "keyword", "semantic")]
    answers.append(indexed.query_source("claude", query, 50).results)
    for results in answers:
        scores = [r["score"] for r in results]
        assert scores == sorted(scores, reverse=True), scores
    everything = answers[0]
    for cut in sorted({r["score"] for r in everything}):
        kept = indexed.context(ContextParams.parse({"query": query, "limit": 50, "minScore": cut})).results
        assert [r["id"] for r in kept] == [r["id"] for r in everything if r["score"] >= cut]


def test_semantic_never_lifts_a_decision_holding_no_word_above_one_holding_them_all(memory: Memory) -> None:
    memory.ingest(_events())
    hits = memory.semantic("deploy key staging", hours=24 * 365 * 100).hits
    assert hits[0].event.id == "all", [(h.event.id, h.score) for h in hits]
    _check_order([{"id": h.event.id, "content": h.event.content, "score": h.score} for h in hits])


def test_semantic_explains_each_score_and_min_score_keeps_exactly_those_at_or_above_it(memory: Memory) -> None:
    """`urchin semantic` takes minScore and explain, as search_context does: explain's parts add up to
    its raw, the stated map of raw is the score shown (or it says the session leg capped it), and the
    every-word tier is named where it applies."""
    from urchin.search.score import TOKEN_COSINE, shown

    memory.ingest(_events())
    window = 24 * 365 * 100
    for query in ("deploy key staging", "roll back a release", "release deploy", "pizza"):
        hits = memory.semantic(query, hours=window, limit=50, explain=True).hits
        assert hits, query
        for hit in hits:
            why = hit.explain
            assert why is not None and why["scale"] == TOKEN_COSINE.name and why["score"] == hit.score
            assert math.isclose(sum(why["parts"].values()), why["raw"], abs_tol=1e-5), why
            assert shown(why["raw"]) == hit.score or ("capped" in why and hit.score < shown(why["raw"])), why
        assert hits[0].explain is not None
        if query == "deploy key staging":
            assert hits[0].explain["evidence"]["every"] and not any(h.explain["evidence"]["every"] for h in hits[1:])
        for cut in sorted({h.score for h in hits}):
            kept = memory.semantic(query, hours=window, limit=50, min_score=cut).hits
            assert [(h.event.id, h.score) for h in kept] == [(h.event.id, h.score) for h in hits if h.score >= cut]
            assert all(h.explain is None for h in kept)     # only when asked
    from urchin.errors import QueryError

    for bad in (-0.1, 1.5, float("nan"), "high"):
        with pytest.raises(QueryError, match="minScore"):
            memory.semantic("deploy", min_score=bad)


def test_the_every_word_part_outweighs_all_that_other_evidence_can_add() -> None:
    """Whatever the rest of two results' evidence, the one holding every word ranks first."""
    from urchin.search.score import HYBRID, TOKEN_COSINE, Evidence

    rng = random.Random(32)
    for scale in (HYBRID, TOKEN_COSINE):
        for _ in range(2000):
            every = Evidence(share=1.0, every=True, related=rng.random(), rank=rng.random() * rng.random(),
                             dense=rng.random())
            other = Evidence(share=rng.random(), every=False, related=rng.random(), rank=rng.random(),
                             dense=rng.random())
            assert scale.raw(every) > scale.raw(other)
            assert scale.score(every) >= scale.score(other)


def test_the_map_is_monotone_bounded_and_stated_once() -> None:
    from urchin.search import score
    from urchin.search.score import HYBRID, Evidence

    raws = [-50.0, -3.0, -0.1, 0.0, 0.1, 3.0, 50.0, 1e6, -1e6]
    shown = [score.shown(r) for r in raws]
    assert all(0.0 <= s <= 1.0 for s in shown)
    assert [score.shown(r) for r in sorted(raws)] == sorted(shown)
    e = Evidence(share=0.5, every=False, related=0.25, rank=0.7)
    assert score.calibrated(e) == HYBRID.score(e) == score.shown(HYBRID.raw(e))
    assert score.calibrated(Evidence(share=float("nan"), every=False)) == score.shown(HYBRID.bias)
