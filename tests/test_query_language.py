"""The websearch query language in every leg, and textrawl's `search` tool: in-process, MCP and HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.daemon_fixture import DaemonProcess
from tests.mcp_harness import stdio_session
from tests.mcp_scenarios import call, call_error
from urchin.config import Settings
from urchin.errors import QueryError
from urchin.facade import Memory
from urchin.search.websearch import parse

EVENTS: list[dict[str, Any]] = [
    {"id": "q-mysql", "content": "staging runs mysql 8 behind the staging proxy", "workspace": "ops",
     "session": "a", "kind": "note", "tags": ["db"]},
    {"id": "q-pg", "content": "staging moved to postgres last week, staging is green", "workspace": "ops",
     "session": "b", "kind": "note", "tags": ["db", "ops"]},
    {"id": "q-bg", "content": "we use a blue green deployment for the api", "workspace": "ops", "session": "c",
     "kind": "conversation"},
    {"id": "q-green", "content": "the deployment board is green and blue today", "workspace": "ops",
     "session": "d", "kind": "conversation"},
    {"id": "q-roll", "content": "to roll back a deploy run make rollback deploy", "workspace": "ops",
     "session": "e", "kind": "conversation"},
    {"id": "q-many", "title": "deploy deploy deploy", "content": "deploy deploy deploy deploy deploy checklist",
     "workspace": "ops", "session": "h", "kind": "note"},
    {"id": "q-back", "content": "I am back from lunch", "workspace": "ops", "session": "f", "kind": "conversation"},
    {"id": "q-decide", "content": "Decision: staging deploys need a review", "workspace": "ops", "session": "g",
     "kind": "decision", "source": "mcp"},
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


def test_parser_yields_words_phrases_exclusions_and_or_groups() -> None:
    q = parse('staging OR prod deploy -mysql "blue green"')
    assert q.words == ("staging", "prod", "deploy") and q.phrases == ("blue green",) and q.excluded == ("mysql",)
    assert q.groups == (("staging", "prod"), ("deploy",))
    assert "mysql" not in q.positive and q.every == "((staging) | (prod)) & ((deploy))"


@pytest.mark.parametrize("strategy", ["semantic", "keyword", "hybrid"])
def test_exclusions_filter_every_strategy(memory: Memory, strategy: str) -> None:
    found = ids(memory.context(query="staging -mysql", strategy=strategy, limit=20))
    assert "q-mysql" not in found and "q-pg" in found


@pytest.mark.parametrize("strategy", ["semantic", "hybrid"])
def test_phrases_filter_every_strategy(memory: Memory, strategy: str) -> None:
    found = ids(memory.context(query='"blue green deployment"', strategy=strategy, limit=20))
    assert found == ["q-bg"]


@pytest.mark.parametrize("strategy", ["semantic", "keyword", "hybrid"])
def test_a_phrase_no_result_holds_leaves_the_answer_empty_and_says_so(memory: Memory, strategy: str) -> None:
    """A phrase is a requirement in every leg (seed 000): when no result within the filters holds it,
    the answer is empty, never its words found elsewhere; coverage says so and suggests the unquoted
    query (issue 32: "mysql directly" -prod returned an event holding neither word)."""
    strict = memory.context(query='"blue green deployment" -mysql', strategy=strategy)
    assert ids(strict) == ["q-bg"] and "unheldPhrases" not in strict.coverage
    for query, suggestion in (('"green blue rollout" -board', "green blue rollout -board"),
                              ('"mysql directly" -prod', "mysql directly -prod"),
                              ('staging "mysql directly"', "staging mysql directly")):
        empty = memory.context(query=query, strategy=strategy, limit=20)
        assert empty.results == [] and empty.query == query, ids(empty)
        unheld = empty.coverage["unheldPhrases"]
        assert unheld["suggestion"] == suggestion and suggestion in unheld["note"] and "relaxed" not in empty.coverage
    followed = memory.context(query="green blue rollout -board", strategy=strategy, limit=20)
    assert "q-bg" in ids(followed) and "q-green" not in ids(followed)      # the suggestion answers


@pytest.mark.parametrize("strategy", ["semantic", "keyword", "hybrid"])
def test_an_excluded_phrase_excludes_in_every_leg(memory: Memory, strategy: str) -> None:
    """-"phrase" is an exclusion, as -word is (it used to be read as a required phrase)."""
    assert parse('deploy -"blue green" x').excluded_phrases == ("blue green",) and not parse('-"a b"').phrases
    found = ids(memory.context(query='staging -"staging proxy"', strategy=strategy, limit=20))
    assert "q-mysql" not in found and "q-pg" in found, found
    found = ids(memory.context(query='deployment -"blue green"', strategy=strategy, limit=20))
    assert "q-bg" not in found and "q-green" in found, found
    found = [h.event.id for h in memory.semantic('staging -"staging proxy"', limit=20).hits]
    assert "q-mysql" not in found and "q-pg" in found


def test_query_source_never_drops_a_phrase(memory: Memory) -> None:
    """The issue's instance: query_source on one source, a phrase no event of it holds."""
    result = memory.query_source("manual", '"mysql directly" -prod')
    assert result.results == [] and result.coverage["unheldPhrases"]["suggestion"] == "mysql directly -prod"
    assert ids(memory.query_source("manual", '"staging proxy"')) == ["q-mysql"]


def test_semantic_and_search_never_drop_a_phrase(memory: Memory) -> None:
    out = memory.semantic('"mysql directly" staging', limit=20)
    assert out.hits == [] and any("'mysql directly staging'" in note for note in out.notes), out.notes
    found = memory.document_search({"query": '"mysql directly" staging'})
    assert found["results"] == [] and "'mysql directly staging'" in found["notes"][0]
    found = memory.document_search({"query": '"mysql directly" staging', "includeMemories": True,
                                    "includeConversations": True})
    assert found["results"] == [] and found["notes"]
    assert "notes" not in memory.document_search({"query": '"staging proxy"'})


def test_min_score_never_turns_a_held_phrase_into_a_relaxed_one(memory: Memory) -> None:
    """A phrase some chunk holds, whose chunks minScore drops: the answer is empty, not the phrase's
    words found elsewhere under a note saying no chunk holds it (found by an attack review)."""
    strict = memory.context(query='"blue green deployment" board', min_score=0.99)
    assert strict.results == [] and "unheldPhrases" not in strict.coverage, strict.coverage


def test_sub_queries_inherit_the_questions_exclusions(memory: Memory) -> None:
    result = memory.context(query="staging -mysql", limit=20,
                            searches=[{"type": "vec", "query": "mysql staging proxy"},
                                      {"type": "lex", "query": "mysql proxy"}])
    assert "q-mysql" not in ids(result)


def test_query_source_applies_exclusions(memory: Memory) -> None:
    found = ids(memory.query_source("manual", "staging -mysql"))
    assert "q-mysql" not in found and "q-pg" in found


def test_a_document_holding_every_word_outranks_one_holding_some(memory: Memory) -> None:
    found = ids(memory.context(query="roll back deploy", strategy="keyword", limit=20))
    assert found[0] == "q-roll"


def test_min_score_half_drops_a_one_shared_word_match_and_keeps_a_strong_one(memory: Memory) -> None:
    everything = memory.context(query="roll back a deploy", limit=20, explain=True)
    assert "q-back" in ids(everything)
    strict = ids(memory.context(query="roll back a deploy", limit=20, min_score=0.5))
    assert "q-roll" in strict and "q-back" not in strict


# ---- textrawl's `search` ---------------------------------------------------------------------
def test_search_is_document_only_by_default(memory: Memory) -> None:
    out = memory.document_search({"query": "staging", "limit": 10})
    assert set(out) == {"query", "totalResults", "results"} and out["totalResults"] == len(out["results"])
    first = out["results"][0]
    assert {"documentId", "documentTitle", "sourceType", "tags", "chunkId", "content", "score"} <= set(first)
    assert "q-decide" not in [r["chunkId"] for r in out["results"]]      # memories are not documents
    doc = memory.fetch_source_document(first["source"], first["documentId"])
    assert doc["content"] == first["content"]


def test_search_filters_by_source_type_and_all_tags(memory: Memory) -> None:
    out = memory.document_search({"query": "staging", "sourceType": "note", "tags": ["db", "ops"]})
    assert [r["chunkId"] for r in out["results"]] == ["q-pg"] and out["results"][0]["sourceType"] == "note"


def test_search_across_sources_answers_type_score_data(memory: Memory) -> None:
    out = memory.document_search({"query": "staging deploys review", "includeMemories": True,
                                  "includeConversations": True, "memoryWeight": 2})
    assert set(out) == {"query", "counts", "results", "totalResults"} and set(out["counts"]) == {
        "documents", "memories", "conversations"}
    assert {r["type"] for r in out["results"]} <= {"document", "memory", "conversation"}
    assert out["results"][0]["type"] == "memory" and out["results"][0]["data"]["memoryId"] == "q-decide"
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)


def test_search_refuses_unknown_parameters(memory: Memory) -> None:
    with pytest.raises(QueryError) as err:
        memory.document_search({"query": "x", "strategy": "semantic"})
    assert err.value.field == "strategy"


SEED_DOCUMENTS = {"query": "staging database", "limit": 5, "fullTextWeight": 0.7, "semanticWeight": 0.3,
                  "minScore": 0.1, "includeMemories": False, "includeConversations": False}
SEED_ALL = {"query": "staging deploys", "limit": 10, "includeMemories": True, "includeConversations": True,
            "memoryWeight": 1.5, "tags": []}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_search_and_exclusions_over_mcp(memory: Memory, pg_url: str, anyio_backend: str) -> None:
    async with stdio_session({"URCHIN_DATABASE_URL": pg_url}) as session:
        text, data = await call(session, "search_context", {"query": "staging -mysql", "strategy": "semantic"})
        assert "q-mysql" not in [r["id"] for r in data["results"]]
        _, data = await call(session, "urchin_semantic_search", {"query": "staging -mysql", "limit": 20})
        assert "q-mysql" not in [e["id"] for e in data["events"]] and data["events"]
        _, data = await call(session, "query_source", {"source": "manual", "query": "staging -mysql"})
        assert "q-mysql" not in [r["id"] for r in data["results"]] and data["results"]
        text, data = await call(session, "search", SEED_DOCUMENTS)
        assert set(data) == {"query", "totalResults", "results"} and data["results"]
        assert text.startswith(f"{data['totalResults']} documents")
        text, data = await call(session, "search", SEED_ALL)
        assert set(data["counts"]) == {"documents", "memories", "conversations"}
        assert all(set(r) == {"type", "score", "data"} for r in data["results"])
        assert (await call_error(session, "search", {"query": "x", "sourceIds": ["a"]}))
        text, data = await call(session, "query_source", {"source": "manual", "query": '"mysql directly" -prod'})
        assert data["results"] == [] and data["coverage"]["unheldPhrases"]["suggestion"] == "mysql directly -prod"
        assert "query 'mysql directly -prod'" in text
        text, data = await call(session, "search", {"query": '"mysql directly" staging'})
        assert data["results"] == [] and "note: no result" in text


def test_search_and_exclusions_over_http(memory: Memory, urchin_home: Path, pg_url: str) -> None:
    # the device the fixture fed as: events are keyed by device, so another name would be a second copy
    daemon = DaemonProcess(urchin_home, "--with-index",
                           env={"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        answer = httpx.post(daemon.url + "/context", headers=headers, json={"query": '"green blue rollout"'},
                            timeout=30)
        assert answer.status_code == 200 and answer.json()["results"] == []
        assert answer.json()["coverage"]["unheldPhrases"]["suggestion"] == "green blue rollout"
        answer = httpx.get(daemon.url + "/sources/manual/search", headers=headers,
                           params={"query": '"mysql directly" -prod'}, timeout=30)
        assert answer.status_code == 200 and answer.json()["results"] == [], answer.text
        answer = httpx.post(daemon.url + "/context", headers=headers,
                            json={"query": '"blue green deployment"', "limit": 20}, timeout=30)
        assert answer.status_code == 200 and [r["id"] for r in answer.json()["results"]] == ["q-bg"]
        answer = httpx.get(daemon.url + "/semantic", headers=headers, params={"query": "staging -mysql", "limit": 20},
                           timeout=30)
        found = [e["id"] for e in answer.json()["events"]]
        assert answer.status_code == 200 and "q-mysql" not in found and "q-pg" in found, answer.text
        answer = httpx.get(daemon.url + "/sources/manual/search", headers=headers, params={"query": "staging -mysql"},
                           timeout=30)
        found = [r["id"] for r in answer.json()["results"]]
        assert answer.status_code == 200 and "q-mysql" not in found and "q-pg" in found, answer.text
        answer = httpx.post(daemon.url + "/documents/search", headers=headers, json=SEED_DOCUMENTS, timeout=30)
        assert answer.status_code == 200 and answer.json()["totalResults"] >= 1, answer.text
        answer = httpx.post(daemon.url + "/documents/search", headers=headers, json=SEED_ALL, timeout=30)
        assert answer.status_code == 200 and "counts" in answer.json(), answer.text
        bad = httpx.post(daemon.url + "/documents/search", headers=headers, json={"query": "x", "sourceType": 3},
                         timeout=30)
        assert bad.status_code == 400 and bad.json()["field"] == "sourceType"
    finally:
        daemon.stop()


def test_urchin_semantic_over_events_applies_exclusions_and_phrases(urchin_home: Path) -> None:
    from tests.conftest import run_urchin

    memory = Memory.open()
    memory.ingest(EVENTS)
    found = [h.event.id for h in memory.semantic("staging -mysql", limit=20).hits]
    assert "q-mysql" not in found and "q-pg" in found
    found = [h.event.id for h in memory.semantic('"blue green deployment"', limit=20).hits]
    assert found == ["q-bg"]
    out = run_urchin("semantic", "staging -mysql", "--json")
    assert out.returncode == 0 and "q-mysql" not in out.stdout and "q-pg" in out.stdout


def test_search_finds_curated_memories_and_keeps_their_exclusions(memory: Memory) -> None:
    from urchin.workspace.curated import Member

    memory.memory_create("staging-db", "questions about the staging database", [Member("query", query="staging")])
    out = memory.document_search({"query": "staging database", "includeMemories": True})
    curated = [r for r in out["results"] if r["type"] == "memory" and r["data"]["kind"] == "curated"]
    assert [m["data"]["memoryId"] for m in curated] == ["staging-db"]
    assert curated[0]["score"] == round(1 / 61 / (2 / 61), 4)     # first in the full-text leg only
    out = memory.document_search({"query": "staging -database", "includeMemories": True})
    assert all(r["data"].get("kind") != "curated" for r in out["results"])


def test_cli_context_and_semantic_say_a_phrase_is_held_by_nothing(memory: Memory, pg_url: str) -> None:
    from tests.conftest import run_urchin

    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_NO_DAEMON": "1"}
    out = run_urchin("context", '"mysql directly" -prod', env=env)
    assert out.returncode == 0 and "query 'mysql directly -prod'" in out.stdout, out.stdout + out.stderr
    assert "[1]" not in out.stdout
    out = run_urchin("semantic", '"mysql directly" staging', env=env)
    assert out.returncode == 0 and "note: no event" in out.stdout and "q-" not in out.stdout, out.stdout
