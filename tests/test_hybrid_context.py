"""`search_context` against the real PostgreSQL: legs, fusion, every parameter and filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from urchin.config import Settings
from urchin.errors import QueryError
from urchin.facade import Memory
from urchin.hybrid.base import split_key
from urchin.hybrid.leg_runs import KEYWORD_SHARE
from urchin.params.context import ContextParams

EVENTS: list[dict[str, Any]] = [
    {"id": "e-deploy", "content": "We deploy the billing service with blue green releases on Fridays",
     "workspace": "shop", "session": "s1", "source": "claude", "kind": "conversation", "tags": ["ops", "billing"],
     "timestamp": "2026-01-01T10:00:00Z"},
    {"id": "e-rollback", "content": "Rollback of billing is a single command:\nmake rollback\nthen check grafana",
     "workspace": "shop", "session": "s1", "source": "claude", "kind": "conversation", "tags": ["ops"],
     "timestamp": "2026-01-01T10:00:01Z"},
    {"id": "e-decision", "content": "Decision: billing releases need two approvals before deploy",
     "workspace": "shop", "session": "s2", "source": "mcp", "kind": "decision", "tags": ["billing"],
     "timestamp": "2026-01-02T09:00:00Z"},
    {"id": "e-shell", "content": "kubectl rollout status deploy/billing", "workspace": "shop", "session": "s3",
     "source": "shell", "kind": "command", "timestamp": "2026-01-03T09:00:00Z"},
    {"id": "e-other", "content": "Deploy the blog with hugo and rsync", "workspace": "blog", "session": "b1",
     "source": "claude", "kind": "conversation", "timestamp": "2026-01-04T09:00:00Z"},
    {"id": "e-lunch", "content": "Lunch order: pizza margherita for the team", "workspace": "shop", "session": "s4",
     "source": "manual", "kind": "note", "timestamp": "2026-01-05T09:00:00Z"},
]


@pytest.fixture
def memory(pg_settings: Settings) -> Any:
    memory = Memory(pg_settings)
    memory.ingest(EVENTS)
    memory.index()
    yield memory
    memory.close()


def ids(result: Any) -> list[str]:
    return [r["id"] for r in result.results]


def test_hybrid_finds_by_words_with_any_word_semantics(memory: Memory) -> None:
    result = memory.context(query="how do we do a rollback of billing safely?")
    assert ids(result)[0] == "e-rollback"
    first = result.results[0]
    assert first["citation"] == "urchin://events/e-rollback"
    assert first["location"]["journalOffset"] >= 0
    assert memory.journal.read_line_at(first["location"]["journalOffset"]).startswith(b'{"id":"e-rollback"')
    assert first["updatedAt"] == "2026-01-01T10:00:01.000Z"
    assert {"content", "score", "source", "workspace", "session"} <= set(first)


def test_a_question_reads_its_term_frequencies_once(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its words', their related words' (thesaurus) and the chunk count: one statement before the legs,
    not a second read per leg for the related words (each a transaction of two statements)."""
    from urchin.hybrid.pg_legs import PgLegs

    reads: list[int] = []
    real = PgLegs.term_stats

    def counted(self: PgLegs, terms: Any) -> tuple[dict[int, int], int]:
        reads.append(len(terms))
        return real(self, terms)

    monkeypatch.setattr(PgLegs, "term_stats", counted)
    result = memory.context(query="how do we do a rollback of billing safely?", explain=True)
    assert ids(result)[0] == "e-rollback"
    assert any("related words" in leg["method"] for leg in result.coverage["legs"])
    assert len(reads) == 1, reads


def test_result_object_has_the_mcp_shape(memory: Memory) -> None:
    out = memory.context(ContextParams.parse({"query": "deploy billing", "limit": 3})).to_dict()
    assert set(out) == {"query", "results", "coverage", "truncated", "tokensUsed"}
    assert len(out["results"]) == 3
    legs = out["coverage"]["legs"]
    # the question counts double; the keyword lists weigh KEYWORD_SHARE of fullTextWeight
    assert [(leg["leg"], leg["origin"], leg["weight"]) for leg in legs] == [("keyword", "query", 2 * KEYWORD_SHARE),
                                                                          ("semantic", "query", 2.0)]
    assert all(leg["candidates"] > 0 for leg in legs)
    assert out["coverage"]["skipped"] == [] and "not evidence" in out["coverage"]["note"]


def test_scores_are_calibrated_between_zero_and_one(memory: Memory) -> None:
    result = memory.context(query="rollback billing grafana", explain=True)
    scores = [r["score"] for r in result.results]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    top = result.results[0]["explain"]
    assert all(leg["rank"] == 1 for leg in top["legs"]) and len(top["legs"]) == 2
    assert top["rank"] == pytest.approx(1.0) and top["evidence"]["every"]
    assert sum(top["parts"].values()) == pytest.approx(top["raw"], abs=1e-5)


def test_min_score_drops_weak_results(memory: Memory) -> None:
    everything = memory.context(query="billing deploy")
    strict = memory.context(query="billing deploy", min_score=0.5)
    assert 0 < len(strict.results) < len(everything.results)
    assert [r["id"] for r in strict.results] == [r["id"] for r in everything.results if r["score"] >= 0.5]


def test_explain_reports_each_leg(memory: Memory) -> None:
    result = memory.context(query="billing deploy", explain=True, k=10, full_text_weight=0.5)
    for r in result.results:
        explain = r["explain"]
        fused = sum(leg["contribution"] for leg in explain["legs"])
        assert explain["fused"] == pytest.approx(fused)
        for leg in explain["legs"]:
            base = 0.5 * KEYWORD_SHARE if leg["leg"] == "keyword" else 1.0
            assert leg["weight"] == 2 * base
            assert leg["contribution"] == pytest.approx(leg["weight"] / (10 + leg["rank"]))
    assert "explain" not in memory.context(query="billing").results[0]


def test_strategies_run_one_leg_each(memory: Memory) -> None:
    keyword = memory.context(query="pizza", strategy="keyword")
    semantic = memory.context(query="pizza", strategy="semantic")
    assert [leg["leg"] for leg in keyword.coverage["legs"]] == ["keyword"]
    assert [leg["leg"] for leg in semantic.coverage["legs"]] == ["semantic"]
    assert ids(keyword) == ids(semantic) == ["e-lunch"]


def test_websearch_phrases_and_exclusions_hold(memory: Memory) -> None:
    assert ids(memory.context(query='"blue green" deploy', strategy="keyword")) == ["e-deploy"]
    excluded = ids(memory.context(query="deploy -hugo", strategy="keyword"))
    assert "e-other" not in excluded and "e-deploy" in excluded


HYDE = ("We rolled back billing with make, and the on call engineer watched the service for a while until "
        "everything looked calm again, then wrote a short note about what happened so that the next person "
        "knows what to do")


def test_sub_queries_add_lists_and_the_question_counts_double(memory: Memory) -> None:
    result = memory.context(query="pizza", searches=[{"type": "lex", "query": "grafana"},
                                                     {"type": "vec", "query": "kubectl rollout"},
                                                     {"type": "hyde", "query": HYDE}])
    legs = [(leg["leg"], leg["origin"], leg["weight"]) for leg in result.coverage["legs"]]
    assert legs == [("keyword", "query", 2 * KEYWORD_SHARE), ("keyword", "lex", KEYWORD_SHARE),
                    ("semantic", "query", 2.0),
                    ("semantic", "vec", 1.0), ("semantic", "hyde", 1.0)]
    found = ids(result)
    assert found[0] == "e-lunch" and {"e-rollback", "e-shell"} <= set(found)


def test_sub_queries_of_a_leg_not_run_are_reported_skipped(memory: Memory) -> None:
    result = memory.context(query="pizza", strategy="keyword", searches=[{"type": "vec", "query": "food"}])
    assert result.coverage["skipped"] == ["vec/hyde sub-queries skipped: strategy keyword runs no semantic leg"]


@pytest.mark.parametrize(("params", "expected"), [
    ({"workspace": "blog"}, {"e-other"}),
    ({"session": "s1"}, {"e-deploy", "e-rollback"}),
    ({"sources": ["shell"]}, {"e-shell"}),
    ({"sourceIds": ["mcp"]}, {"e-decision"}),
    ({"kinds": ["command", "decision"]}, {"e-shell", "e-decision"}),
    ({"tags": ["ops", "billing"]}, {"e-deploy"}),
    ({"tags": ["ops"]}, {"e-deploy", "e-rollback"}),
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-04T00:00:00Z"}, {"e-decision", "e-shell"}),
    ({"includeMemories": False, "workspace": "shop"}, {"e-deploy", "e-rollback", "e-shell"}),
    ({"includeConversations": False}, {"e-decision"}),
])
def test_filters_apply_inside_both_legs(memory: Memory, params: dict[str, Any], expected: set[str]) -> None:
    result = memory.context(ContextParams.parse({"query": "deploy billing rollback releases kubectl blog", **params}))
    assert set(ids(result)) == expected
    assert all(leg["candidates"] <= len(expected) for leg in result.coverage["legs"])


def test_hours_window_counts_back_from_now(memory: Memory) -> None:
    memory.ingest([{"id": "e-now", "content": "fresh billing deploy note", "workspace": "shop"}])
    assert ids(memory.context(query="billing deploy", hours=1)) == ["e-now"]     # fed by the query's catch-up


def test_memory_weight_lifts_memories_among_results_of_comparable_evidence(memory: Memory) -> None:
    query = "billing releases deploy"        # both e-deploy and e-decision hold every word
    plain = memory.context(query=query, workspace="shop", memory_weight=0.2, explain=True)
    lifted = memory.context(query=query, workspace="shop", memory_weight=3.0, explain=True)
    assert ids(lifted)[0] == "e-decision" and ids(plain)[0] != "e-decision", (ids(lifted), ids(plain))
    assert lifted.results[0]["explain"]["classWeight"] == 3.0
    # ...but never above a result holding every word when the memory does not
    blue = memory.context(query="deploy billing with blue green releases", workspace="shop", memory_weight=3.0)
    assert ids(blue)[0] == "e-deploy"


def test_limit_caps_results(memory: Memory) -> None:
    assert len(memory.context(query="billing deploy rollback", limit=2).results) == 2


def test_token_budget_packs_best_first_and_cuts_at_a_line(memory: Memory) -> None:
    full = memory.context(query="rollback billing grafana make")
    assert full.results[0]["id"] == "e-rollback" and not full.truncated
    budget = 8      # 32 characters: the first line of the rollback event (35 chars) does not fit, "Rollback of..."
    result = memory.context(query="rollback billing grafana make", token_budget=12)
    assert result.truncated and result.tokens_used <= 12
    assert [r["content"] for r in result.results] == ["Rollback of billing is a single command:"]
    assert result.results[0]["cut"] is True
    # a budget below the best result's first line still returns that result, cut to fit (at a space)
    tight = memory.context(query="rollback billing grafana make", token_budget=budget)
    assert [r["content"] for r in tight.results] == ["Rollback of billing is a single"]
    assert tight.truncated and tight.results[0]["cut"] is True and tight.tokens_used <= budget


def test_nothing_matching_returns_no_results(memory: Memory) -> None:
    result = memory.context(query="zeppelin")
    assert result.results == [] and not result.truncated and result.tokens_used == 0


def test_bad_parameters_are_refused_before_the_database(memory: Memory) -> None:
    with pytest.raises(QueryError, match=r"searches\[0\]\.type: must be lex, vec or hyde"):
        memory.context(ContextParams.parse({"query": "x", "searches": [{"type": "sql", "query": "drop"}]}))
    with pytest.raises(QueryError, match="query must not be empty"):
        memory.context(query="  ")


@pytest.mark.slow
def test_hybrid_with_a_real_embedder_adds_dense_lists_and_survives_its_outage(urchin_home: Path, pg_url: str,
                                                                               embedder_url: str) -> None:
    import socket

    from urchin.config import Settings
    from urchin.facade import Memory

    settings = Settings.resolve(urchin_home, database_url=pg_url, embedder_url=embedder_url,
                                embedder_model="all-MiniLM-L6-v2", embedder_api="openai")
    memory = Memory(settings)
    memory.ingest([{"content": "We rotate OAuth refresh tokens daily", "workspace": "auth"},
                   {"content": "The cafeteria serves soup on Fridays", "workspace": "auth"}])
    try:
        result = memory.context(query="how do we handle login credentials", workspace="auth", limit=2).to_dict()
        methods = [leg["method"] for leg in result["coverage"]["legs"]]
        assert any(m.startswith("embeddings (") for m in methods) and any(m.startswith("token-cosine") for m in methods)
        assert result["results"][0]["content"].startswith("We rotate OAuth")
    finally:
        memory.close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    down = Memory(settings.with_(embedder_url=dead))
    try:
        result = down.context(query="OAuth refresh tokens", workspace="auth", limit=1).to_dict()
        assert result["results"] and "OAuth" in result["results"][0]["content"]
        assert any("embedder lists skipped" in note for note in result["coverage"]["skipped"])
    finally:
        down.close()


def test_memory_is_a_context_manager_that_releases_the_index(pg_settings: Settings) -> None:
    with Memory(pg_settings) as memory:
        memory.ingest_one({"content": "closing time", "id": "close-1"})
        assert [r["id"] for r in memory.context(query="closing").to_dict()["results"]] == ["close-1"]
        backend = memory.index_service.backend
        assert backend.link.current is not None and backend.link.twin().current is not None
    assert backend.link.current is None and backend.link.twin().current is None   # both closed on exit


def test_a_word_in_no_chunk_does_not_leave_the_legs_searching_for_it_alone(pg_settings: Settings) -> None:
    """Every indexed word of the question is common (in more than MIN_COMMON_DF chunks), one is in no
    chunk at all: the legs fall back to the rarest indexed word, not to the absent one (which found
    nothing: 0 keyword candidates for half the team bench's questions at 1M)."""
    events = [{"id": f"c-{i}", "content": f"deploy the server number {i}", "source": "claude",
               "timestamp": f"2026-01-01T10:{i:02d}:00Z"} for i in range(30)]
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        result = memory.context(query="how do we deploy the server flakyzork", explain=True)
        legs = {leg["leg"]: leg["candidates"] for leg in result.coverage["legs"] if leg["origin"] == "query"}
        assert legs["keyword"] > 0 and legs["semantic"] > 0, result.coverage["legs"]
        assert len(result.results) == 10


def test_plan_ranks_the_rare_words_and_gathers_in_tiers_only_past_the_budget() -> None:
    from urchin.hybrid.base import Tier
    from urchin.hybrid.leg_runs import RANK_BUDGET, plan

    # the usual question: its rare words' chunks fit the budget; the common word is dropped
    assert plan({"rollback": 30, "billing": 400, "the": 0, "deploy": 90_000}, 1_000_000, 12) == \
        (["rollback", "billing"], [])
    # every word common: rank by all of them, gather every-word chunks first, then fewer, then the rarest
    words, tiers = plan({"deploy": 131_000, "server": 137_000, "config": 143_000}, 1_000_000, 12)
    assert words == ["deploy", "server", "config"]
    assert tiers == [Tier(("deploy", "server", "config"), True), Tier(("deploy", "server"), True),
                     Tier(("deploy",), False)]
    # rare words, but together in more chunks than a leg may rank
    many = {f"w{i}": RANK_BUDGET // 3 + i for i in range(4)}
    words, tiers = plan(many, 1_000_000, 12)
    assert words == ["w0", "w1", "w2", "w3"] and tiers[0] == Tier(("w0", "w1", "w2", "w3"), True)
    assert tiers[-1] == Tier(("w0", "w1", "w2", "w3"), False)


def test_a_question_of_common_words_ranks_a_bounded_set_newest_and_fullest_first(
        pg_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every word of the question is in most chunks (at 1M events: each leg ranked 130k chunks, 1.2 s):
    each leg ranks at most RANK_BUDGET, gathered from the chunks holding every word, the newest first."""
    from datetime import UTC, datetime, timedelta

    from urchin.hybrid import leg_runs
    from urchin.timestamps import format_timestamp

    monkeypatch.setattr(leg_runs, "RANK_BUDGET", 25)
    now = datetime.now(UTC)
    def at(days: float) -> str:
        return format_timestamp(now - timedelta(days=days))
    events = ([{"id": f"old-{i}", "content": f"deploy the server config, try {i}", "timestamp": at(300 + i)}
               for i in range(20)]
              + [{"id": f"new-{i}", "content": f"deploy the server config, try {i}", "timestamp": at(1 + i / 10)}
                 for i in range(20)]
              + [{"id": f"part-{i}", "content": f"deploy the server, try {i}", "timestamp": at(i / 100)}
                 for i in range(30)]
              + [{"id": f"one-{i}", "content": f"deploy it, try {i}", "timestamp": at(i / 100)} for i in range(30)])
    with Memory(pg_settings) as memory:
        memory.ingest([{**e, "source": "claude"} for e in events])
        memory.index()
        result = memory.context(query="how do we deploy the server config", limit=10)
        legs = [leg for leg in result.coverage["legs"] if leg["origin"] == "query"]
        assert {leg["leg"] for leg in legs} == {"keyword", "semantic"}
        for leg in legs:
            assert "gathered in tiers" in leg["method"] and 0 < leg["candidates"] <= 25, leg
        assert all(r["id"].startswith("new-") for r in result.results), ids(result)
        # the same question over a window of old events still finds its every-word chunks there
        old = memory.context(query="how do we deploy the server config", limit=5,
                             until=at(200))
        assert {r["id"][:4] for r in old.results} == {"old-"}, ids(old)
        # one common word alone is planned the same way (the keyword leg ranked every chunk holding it)
        one = memory.context(query="deploy", limit=10)
        for leg in (leg for leg in one.coverage["legs"] if leg["origin"] == "query"):
            assert "gathered in tiers" in leg["method"] and 0 < leg["candidates"] <= 25, leg


def test_a_tiered_leg_ranks_as_many_distinct_chunks_as_its_budget(pg_settings: Settings) -> None:
    """The gathering's parts are disjoint: a chunk in the every-word tier is not counted again by the
    tier under it, nor by the older half of its own tier, so the budget is filled with distinct
    chunks and the next tier gets the rest (found by an attack review: 100 of 200 ranked)."""
    from datetime import UTC, datetime, timedelta

    from urchin.hybrid.base import Filter, Tier
    from urchin.timestamps import format_timestamp

    now = datetime.now(UTC)
    events = [{"id": f"e{i}", "content": ("deploy server config" if i < 100 else "deploy server") + f" x{i}",
               "source": "manual", "kind": "note", "timestamp": format_timestamp(now - timedelta(days=i % 60))}
              for i in range(400)]
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        backend = memory.index_service.backend
        words = ["deploy", "server", "config"]
        tiers = [Tier(tuple(words), True), Tier(tuple(words[:2]), True), Tier(tuple(words), False)]
        for budget in (100, 200, 300):
            rows = backend.keyword(words, None, Filter(), 100_000, 0, None, tiers, budget)
            assert len({r.chunk_id for r in rows}) == len(rows) == budget, budget
        rows = backend.keyword(words, None, Filter(), 100_000, 0, None, tiers, 200)
        assert {split_key(r.chunk_id)[1] for r in rows} >= {f"e{i}" for i in range(100)}   # the fullest tier first


def test_search_context_finds_an_answer_sharing_no_word_with_the_question(pg_settings: Settings) -> None:
    """The token-cosine leg adds the thesaurus's related words, and they pick candidates too."""
    events = [{"id": f"n-{i}", "content": f"routine note {i} about the dashboard layout", "source": "claude",
               "timestamp": f"2026-01-01T10:{i:02d}:00Z"} for i in range(20)]
    events.append({"id": "answer", "content": "We switched login to OAuth with PKCE", "source": "claude",
                   "kind": "decision", "timestamp": "2026-01-01T11:00:00Z"})
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        result = memory.context(query="decisions about authentication", explain=True)
        assert ids(result)[:1] == ["answer"]
        legs = {leg["leg"]: leg for leg in result.coverage["legs"]}
        assert "related words (thesaurus)" in legs["semantic"]["method"]
        assert result.results[0]["score"] < 0.5   # it holds none of the question's words: a weak match, said so


def test_a_memory_outranks_an_equal_conversation_in_each_leg(pg_settings: Settings) -> None:
    events = [{"id": "said", "content": "cache eviction for the ranker", "kind": "conversation",
               "timestamp": "2026-01-02T10:00:00Z"},
              {"id": "kept", "content": "cache eviction for the ranker", "kind": "decision",
               "timestamp": "2026-01-01T10:00:00Z"}]
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        for strategy in ("keyword", "semantic", "hybrid"):
            assert ids(memory.context(query="cache eviction", strategy=strategy)) == ["kept", "said"], strategy
        # memoryWeight still weighs memories in the fusion, as asked
        assert ids(memory.context(query="cache eviction", memory_weight=0.25)) == ["said", "kept"]


def test_the_token_cosine_leg_pivots_its_length_normalisation(pg_settings: Settings) -> None:
    """pivot (0, 1) is the plain cosine of the stored vectors; the shipped pivot lets a longer chunk holding
    the word rank with a one-word one instead of far below it."""
    from urchin.hybrid.base import Filter
    from urchin.hybrid.sparse import query_vector, term_ids, to_sparsevec, tokens

    events = [{"id": "short", "content": "budget", "timestamp": "2026-01-01T10:00:00Z"},
              {"id": "long", "content": "budget review of the quarterly cloud spending with finance and the "
                                        "platform team", "timestamp": "2026-01-01T10:01:00Z"}]
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        backend = memory.index_service.backend
        ids_ = list(term_ids(tokens("budget")))
        df, n = backend.term_stats(ids_)
        vector = to_sparsevec(query_vector("budget", df, n))
        plain = {split_key(r.chunk_id)[1]: r.score for r in backend.sparse(vector, ids_, Filter(), 10)}
        cosine = dict(backend.conn.execute(
            "SELECT chunk_id, 1 - (tvec <=> %s::sparsevec) FROM urchin_chunks", (vector,)).fetchall())
        assert plain == pytest.approx(cosine)
        mean = backend.norm_mean(n)
        pivoted = {split_key(r.chunk_id)[1]: r.score
                   for r in backend.sparse(vector, ids_, Filter(), 10, pivot=(0.7 * mean, 0.3))}
        assert pivoted["long"] / pivoted["short"] > plain["long"] / plain["short"]
        # the mean follows the index: read again as soon as the chunk count moves (small index), never stale
        memory.ingest([{"id": f"w{i}", "content": " ".join(f"word{j}" for j in range(40)),
                        "timestamp": f"2026-01-02T10:{i:02d}:00Z"} for i in range(5)])
        memory.index()
        _, grown = backend.term_stats(ids_)
        fresh = backend.conn.execute("SELECT avg(l2_norm(tvec)) FROM urchin_chunks").fetchone()[0]
        assert grown == n + 5 and backend.norm_mean(grown) == pytest.approx(float(fresh)) != pytest.approx(mean)


def test_the_memory_prior_ranks_before_the_cut_off_so_the_limit_does_not_change_the_top(
        pg_settings: Settings) -> None:
    """A leg keeps its best `depth` candidates in SQL; a memory whose doubled score wins must be among
    them whatever `limit` asks (it was not: the prior was applied after the cut-off)."""
    events = [{"id": f"c{i}", "content": "cache eviction policy " + " ".join(f"p{i}x{j}" for j in range(5)),
               "kind": "conversation", "timestamp": f"2026-01-{1 + i % 20:02d}T10:{i % 60:02d}:00Z"} for i in range(80)]
    events.append({"id": "dec", "content": "cache eviction dx0 dx1 dx2", "kind": "decision",
                   "timestamp": "2026-01-22T10:00:00Z"})
    events += [{"id": f"n{i}", "content": f"unrelated words here {i}", "timestamp": "2026-01-23T10:00:00Z"}
               for i in range(3000)]
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        for strategy in ("semantic", "keyword", "hybrid"):
            tops = {limit: ids(memory.context(query="cache eviction", strategy=strategy, limit=limit))[0]
                    for limit in (1, 10, 80)}
            assert len(set(tops.values())) == 1, (strategy, tops)
        # (every chunk holds both words: the prior decides; with "policy", which dec lacks, the rows
        # holding every word rank first whatever the prior)
        assert ids(memory.context(query="cache eviction", strategy="semantic", limit=1)) == ["dec"]
        assert "dec" in ids(memory.context(query="cache eviction", limit=10))
        # memoryWeight 0: memories weigh nothing, so the legs give them no prior either
        plain = ids(memory.context(query="cache eviction", strategy="semantic", memory_weight=0, limit=80))
        assert plain[0] != "dec"


def test_a_question_naming_a_source_favours_its_chunks_in_each_leg(pg_settings: Settings,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import urchin.hybrid.pg_legs as pg_legs

    # "c" holds one more of the question's words ("say") than "g" holds ("gemini", its source): without the
    # prior they tie on words and the newer, "c", leads; with it, the named source's chunk does
    events = [{"id": "c", "content": "they say the cache eviction plan is ready", "source": "claude",
               "timestamp": "2026-01-02T10:00:00Z"},
              {"id": "g", "content": "the cache eviction plan is ready", "source": "gemini",
               "timestamp": "2026-01-01T10:00:00Z"},
              *[{"id": f"n{i}", "content": f"unrelated note {i}", "source": "shell",
                 "timestamp": "2026-01-03T10:00:00Z"} for i in range(3)]]
    question = "what did gemini say about the cache eviction plan"
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        for strategy in ("keyword", "semantic", "hybrid"):
            assert ids(memory.context(query=question, strategy=strategy))[0] == "g", strategy
        monkeypatch.setattr(pg_legs, "NAMED_SOURCE_PRIOR", 0.0)
        assert ids(memory.context(query=question, strategy="keyword"))[0] == "c"


def test_priors_multiply_a_total_after_context_as_in_token_cosine() -> None:
    """A named speaker's turn counts double, but the reply after it gets context from its plain score:
    the prior is not passed on to neighbours (token-cosine multiplies its smoothed scores the same way)."""
    from datetime import UTC, datetime

    from urchin.hybrid.base import ContextRow
    from urchin.hybrid.leg_runs import with_context

    at = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [ContextRow("named", "named", 0, 1.0, "conversation", at, prior=2.0),      # the named speaker
            ContextRow("named", "reply", 1, 0.0, "conversation", at),                 # holds no word
            ContextRow("other", "other", 0, 0.4, "conversation", at)]
    hits = with_context(rows, 0.5, 10)
    assert [(h.chunk_id, h.raw) for h in hits] == [("named", 2.0), ("reply", 0.5), ("other", 0.4)]
    # the leg's rows carry plain scores and the factor apart
    assert with_context([*rows[:2], ContextRow("other", "other", 0, 0.6, "conversation", at)], 0.5, 10)[1].chunk_id \
        == "other"


def test_the_legs_rows_carry_plain_scores_and_their_prior_apart(pg_settings: Settings) -> None:
    from urchin.hybrid.base import Filter
    from urchin.hybrid.postgres import PostgresIndex
    from urchin.hybrid.sparse import term_ids, to_sparsevec, tokens

    events = [{"id": "g", "content": "the cache eviction plan is ready", "source": "gemini", "session": "s",
               "timestamp": "2026-01-01T10:00:00Z"},
              {"id": "r", "content": "great, thanks", "source": "claude", "session": "s",
               "timestamp": "2026-01-01T10:01:00Z"}]
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
    backend = PostgresIndex(pg_settings.database_url or "")
    try:
        terms = list(term_ids(tokens("cache eviction")))
        vector = to_sparsevec(dict.fromkeys(terms, 1.0))
        plain = {split_key(r.chunk_id)[1]: r for r in backend.sparse(vector, terms, Filter(), 10, 1)}
        named = {split_key(r.chunk_id)[1]: r for r in backend.sparse(vector, terms, Filter(), 10, 1, named=["gemini"])}
    finally:
        backend.close()
    assert named["g"].score == plain["g"].score > 0 and named["r"].score == plain["r"].score == 0
    assert (named["g"].prior, named["r"].prior, plain["g"].prior) == (2.0, 1.0, 1.0)


def test_the_token_cosine_leg_uses_the_associations_learned_from_the_journal(
        pg_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A question's word that the answer lacks, but that shares sessions with the answer's words, finds
    it through the token-cosine view's learned associations (made-up words: no thesaurus entry)."""
    import random

    import urchin.hybrid.leg_runs as leg_runs

    rng = random.Random(7)
    topics = [["zorblat", "quenmix", "vandrel", "plixor", "drumvel", "oskarn"],
              ["fennack", "glorbit", "hastrel", "ivmora", "jextil", "kolvane"],
              ["lumbrix", "morvash", "nektal", "orbisk", "prazzle", "quintor"]]
    filler = ["git", "status", "pytest", "passed", "read", "edit", "file", "diff"]
    events = [{"id": f"s{s}-{turn}", "content": " ".join(rng.sample(topics[s % 3], 2) + rng.sample(filler, 3)),
               "session": f"s{s}", "timestamp": f"2026-01-{1 + s % 28:02d}T10:{turn:02d}:00Z"}
              for s in range(24) for turn in range(4)]    # a topic's word in fewer than 20 chunks: not "common"
    events.append({"id": "answer", "content": "quenmix with vandrel through the plixor", "session": "late",
                   "timestamp": "2026-02-01T10:00:00Z"})
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        assert ids(memory.context(query="zorblat", strategy="semantic", session="late")) == []   # none saved yet
        memory.semantic("zorblat")
        assert memory.save_views()                  # what the daemon does every so often and at exit
        found = ids(memory.context(query="zorblat", strategy="semantic", session="late"))
        monkeypatch.setattr(leg_runs, "LEARNED", 0.0)
        without = ids(memory.context(query="zorblat", strategy="semantic", session="late"))
    assert found == ["answer"] and without == []


def test_a_query_never_waits_behind_another_feeders_locks(pg_settings: Settings) -> None:
    """The inline catch-up of a query gives up on a lock another feeder holds (the daemon's index
    process, at the lowest priority, may hold it for long) and answers from the index as it is."""
    import time

    import psycopg

    with Memory(pg_settings) as memory:
        memory.ingest([{"id": "first", "content": "the billing service refused"}])
        memory.index()
        memory.ingest([{"id": "second", "content": "the billing service after a retry"}])
        with psycopg.connect(pg_settings.database_url or "") as other:
            other.execute("LOCK TABLE urchin_chunks IN SHARE MODE")     # what an index build holds
            started = time.monotonic()
            result = memory.context(query="billing service")
            assert time.monotonic() - started < 5
            assert ids(result) == ["first"] and result.coverage["index"]["behindJournalBytes"] > 0
        assert set(ids(memory.context(query="billing service"))) == {"first", "second"}   # caught up once free


def test_recall_audit_events_are_out_of_the_hybrid_index_answers_unless_asked_for(pg_settings: Settings) -> None:
    """The rule of `Filters.hides` holds in PostgreSQL too: an audit event (source urchin, kind recall)
    answers no question unless its source, its kind or its session is named."""
    with Memory(pg_settings) as memory:
        memory.ingest(EVENTS + [{"id": "e-audit", "source": "urchin", "kind": "recall", "workspace": "shop",
                                 "session": "s9", "content": "Urchin recall (prompt): billing rollback records given",
                                 "timestamp": "2026-01-06T09:00:00Z"}])
        memory.index()
        for strategy in ("hybrid", "keyword", "semantic"):
            assert "e-audit" not in ids(memory.context(query="billing rollback records given", strategy=strategy))
        assert "e-audit" in ids(memory.context(query="billing rollback records given", sources=["urchin"]))
        assert "e-audit" in ids(memory.context(query="billing rollback records given", kinds=["recall"]))
        assert "e-audit" in ids(memory.context(query="billing rollback records given", session="s9"))
