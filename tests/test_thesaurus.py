"""The shipped thesaurus and pivoted length normalisation in token-cosine search."""

from __future__ import annotations

import math

import pytest

from tests.test_cosine import ev, ids
from urchin.search.cosine import TokenCosineIndex
from urchin.search.cosine_settings import RankingSettings
from urchin.search.terms import tokenize
from urchin.search.thesaurus import Thesaurus, default


def related(thesaurus: Thesaurus, text: str, n: int = 30) -> list[str]:
    return [t for t, _ in thesaurus.expand(tokenize(text), n=n)]


def test_the_shipped_list_parses_and_every_group_has_general_words() -> None:
    th = default()
    assert len(th) >= 80
    assert all(general for general, _ in th.groups)
    assert {"login", "oauth", "sso"} <= set(related(th, "authentication"))


def test_an_instance_brings_its_group_words_but_not_its_siblings() -> None:
    th = Thesaurus.parse("agent: agent assistant | claude gemini codex\n# a comment\n\nlone: single")
    assert len(th) == 1  # a group of one word relates nothing
    assert set(related(th, "gemini")) == {"agent", "assist"}  # stemmed as the index stems
    assert set(related(th, "agents")) == {"assist", "claud", "gemini", "codex"}
    assert related(th, "unrelated words") == []


def test_expansion_is_shared_fairly_between_the_query_words() -> None:
    th = Thesaurus.parse("a: alpha a1 a2 a3 a4 a5\nb: beta b1 b2 b3 b4 b5")
    got = related(th, "alpha beta", n=4)
    assert sorted(got) == ["a1", "a2", "b1", "b2"]
    weights = dict(th.expand(tokenize("alpha beta"), n=4))
    assert weights["a1"] > weights["a2"]  # the first words of a group are its closest


def test_a_question_finds_an_answer_that_shares_no_word_with_it() -> None:
    events = [ev(f"n{i}", f"routine note {i} about the dashboard layout", t=i) for i in range(30)]
    events.append(ev("answer", "We switched login to OAuth with PKCE", t=40, kind="decision"))
    off = TokenCosineIndex(RankingSettings(related=0.0, session=0.0))
    off.add_many(events)
    assert off.search("decisions about authentication") == []
    on = TokenCosineIndex()
    on.add_many(events)
    assert ids(on.search("decisions about authentication"))[:1] == ["answer"]


def test_the_words_typed_outweigh_related_ones_however_rare() -> None:
    # "postgresql" is rarer than "database" here: uncapped, its idf would put the related-only event first
    events = [ev("exact", "database migration notes", t=0),
              ev("related", "PostgreSQL with pgvector and HNSW for the vectors", t=1),
              *[ev(f"d{i}", f"database {i}", t=2 + i) for i in range(3)]]
    index = TokenCosineIndex(RankingSettings(context=0.0, session=0.0))
    index.add_many(events)
    hits = ids(index.search("database migration"))
    assert hits[0] == "exact" and "related" in hits


@pytest.mark.parametrize("pivot", [1.0, 0.3])
def test_pivoted_length_normalisation(pivot: float) -> None:
    events = [ev("short", "budget"), ev("long", "budget review of the quarterly cloud spending with finance")]
    index = TokenCosineIndex(RankingSettings(context=0.0, session=0.0, related=0.0, kind=0.0, pivot=pivot))
    index.add_many(events)
    n = len(index)
    idf = {t: math.log((n + 1) / (df + 0.5)) for t, df in
           {t: sum(t in tokenize(f"{e.content} {e.source}") for e in events) for t in
            set(tokenize(" ".join(f"{e.content} {e.source}" for e in events)))}.items()}
    norms = {e.id: math.sqrt(sum(idf[t] ** 2 for t in set(tokenize(f"{e.content} {e.source}")))) for e in events}
    mean = sum(norms.values()) / n
    expected = {i: idf["budget"] / ((1 - pivot) * mean + pivot * norm) for i, norm in norms.items()}
    got = {h.id: h.match for h in index.search("budget")}
    assert got == pytest.approx({i: min(v, 1.0) for i, v in expected.items()}, rel=1e-4)
    with pytest.raises(ValueError, match="pivot"):
        TokenCosineIndex(RankingSettings(pivot=0.0))


def test_an_excluded_word_is_not_added_back_as_a_related_one() -> None:
    events = [ev(f"l{i}", f"login form tweak {i}", t=i) for i in range(20)]
    events.append(ev("oauth", "we moved to oauth with pkce", t=30))
    index = TokenCosineIndex(RankingSettings(session=0.0))
    index.add_many(events)
    assert any(h.id.startswith("l") for h in index.search("authentication", limit=30))   # "login" is related
    hits = index.search("authentication", exclude={"login"}, limit=30)
    assert ids(hits) == ["oauth"]


def test_semantic_search_with_a_minus_word_keeps_what_it_did_not_exclude(memory) -> None:  # type: ignore[no-untyped-def]
    memory.ingest([{"content": f"login form tweak {i}", "id": f"l{i}"} for i in range(20)]
                  + [{"content": "we moved to oauth with pkce", "id": "oauth"}])
    assert [h.event.id for h in memory.semantic("authentication -login", limit=1).hits] == ["oauth"]


def test_a_query_naming_a_source_favours_its_events() -> None:
    events = [ev("c", "the cache eviction plan", t=1, source="claude"),
              ev("g", "the cache eviction plan", t=0, source="gemini")]
    index = TokenCosineIndex()
    index.add_many(events)
    assert ids(index.search("cache eviction plan")) == ["c", "g"]            # the newer first
    hits = index.search("what did gemini say about the cache eviction plan")
    assert ids(hits) == ["g", "c"]
    off = TokenCosineIndex(RankingSettings(named_source=0.0))
    off.add_many(events)
    # without the prior, the name counts only as a word of the event (its source is indexed)
    plain = off.search("what did gemini say about the cache eviction plan")
    assert ids(plain)[0] == "g" and hits[0].score / hits[1].score > plain[0].score / plain[1].score
