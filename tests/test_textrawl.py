"""textrawl's `search` and `get_document` exactly as seed 003 documents them (issue 32, item 3), and
`fetch_source_document` at the version indexed (item 4), on the real embedded PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from urchin.config import Settings
from urchin.errors import NotFoundError, QueryError
from urchin.facade import Memory
from urchin.params.context import ContextParams

EVENTS: list[dict[str, Any]] = [
    # the seed's cross-source example: a decision recorded in session db-planning
    {"id": "t-plan-1", "content": "how should we lay out the database for the new service?", "kind": "conversation",
     "session": "db-planning", "workspace": "shop", "source": "claude", "timestamp": "2026-11-01T10:00:00Z"},
    {"id": "t-plan-2", "content": "Decision: the database architecture is PostgreSQL with pgvector",
     "kind": "decision", "session": "db-planning", "workspace": "shop", "source": "mcp",
     "timestamp": "2026-11-01T10:05:00Z"},
    {"id": "t-note", "content": "database architecture review notes: partitions by month", "kind": "note",
     "session": "notes-1", "workspace": "shop", "source": "manual", "tags": ["work", "planning"],
     "timestamp": "2026-11-02T09:00:00Z"},
    {"id": "t-cmd", "content": "psql -c 'select 1' against the database", "kind": "command", "session": "sh-1",
     "workspace": "shop", "source": "shell", "timestamp": "2026-11-02T09:30:00Z"},
    {"id": "t-titled", "content": "we picked a database driver", "kind": "conversation", "session": "titled",
     "title": "Driver choice", "source": "claude", "timestamp": "2026-11-03T09:30:00Z"},
]
for n in range(12):   # enough documents for limits and ranks to matter
    EVENTS.append({"id": f"t-fill-{n:02d}", "content": f"filler note number {n} about caching "
                   + "and more words " * n, "kind": "note", "source": "manual", "session": f"fill-{n}",
                   "timestamp": f"2026-10-{n + 1:02d}T08:00:00Z"})

DESIGN_MD = """# Database design

The database architecture keeps one schema per service.

## Secrets

password = "hunter2-very-secret-value"

## Decisions

We chose pgvector for embeddings.
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "shop"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "design.md").write_text(DESIGN_MD)
    (folder / "schema.py").write_text("def create_database_schema():\n    return 'database architecture'\n")
    return folder


@pytest.fixture
def memory(pg_settings: Settings, root: Path) -> Any:
    memory = Memory(pg_settings)
    memory.ingest(EVENTS)
    memory.workspace_add(str(root))
    memory.index()
    memory.index_service.index_files(memory.files)
    yield memory
    memory.close()


def _legs(memory: Memory, query: str, scope: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Each leg's ranks as search_context's single-leg strategies give them (the lists the seed fuses)."""
    out = {}
    for strategy in ("keyword", "semantic"):
        found = memory.context(ContextParams.parse({"query": query, "strategy": strategy, "limit": 100,
                                                    "perFileCap": 100, **scope}))
        out[strategy] = {r["id"]: rank for rank, r in enumerate(found.results, 1)}
    return out


# ---- item 3: the seed's fusion ----------------------------------------------------------------
@pytest.mark.parametrize("weights", [(1.0, 1.0), (1.0, 1.5), (2.0, 0.0), (0.3, 2.0)])
def test_score_is_the_seeds_rrf_over_the_best_possible(memory: Memory, weights: tuple[float, float]) -> None:
    """RRF = fullTextWeight/(60 + fts_rank) + semanticWeight/(60 + semantic_rank), the caller's weights as
    they are; shown over the best possible (rank 1 in both legs), and the list sorted by it."""
    ftw, sw = weights
    out = memory.document_search({"query": "database architecture", "limit": 50, "fullTextWeight": ftw,
                                  "semanticWeight": sw})
    ranks = _legs(memory, "database architecture", {"includeMemories": False})
    assert out["results"], out
    for r in out["results"]:
        raw = sum(w / (60 + ranks[leg][r["chunkId"]]) for leg, w in (("keyword", ftw), ("semantic", sw))
                  if w > 0 and r["chunkId"] in ranks[leg])
        assert r["score"] == round(raw / ((ftw + sw) / 61), 4), r
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1
    # minScore keeps exactly the results at or above it, on that same number
    cut = scores[len(scores) // 2]
    kept = memory.document_search({"query": "database architecture", "limit": 50, "fullTextWeight": ftw,
                                   "semanticWeight": sw, "minScore": cut})["results"]
    assert [r["chunkId"] for r in kept] == [r["chunkId"] for r in out["results"] if r["score"] >= cut]


# ---- item 3: shapes -----------------------------------------------------------------------------
def test_the_seeds_cross_source_request_answers_in_its_shapes(memory: Memory) -> None:
    """The seed's own request: documents {id, title, content}, memories {entityName, content},
    conversations {sessionKey, title}: the decision's session is a conversation too."""
    out = memory.document_search({"query": "database architecture decisions", "includeMemories": True,
                                  "includeConversations": True, "memoryWeight": 1.5, "limit": 10})
    assert list(out)[:3] == ["query", "counts", "results"]
    firsts = {"document": ["id", "title", "content"], "memory": ["entityName", "content"],
              "conversation": ["sessionKey", "title"]}
    for r in out["results"]:
        assert list(r) == ["type", "score", "data"] and list(r["data"])[:len(firsts[r["type"]])] == firsts[r["type"]]
    kinds = [r["type"] for r in out["results"]]
    assert out["counts"] == {"documents": kinds.count("document"), "memories": kinds.count("memory"),
                             "conversations": kinds.count("conversation")}
    sessions = {r["data"]["sessionKey"]: r["data"] for r in out["results"] if r["type"] == "conversation"}
    assert "db-planning" in sessions, kinds
    # no title in the session: its first prompt names it
    assert sessions["db-planning"]["title"].startswith("how should we lay out the database")
    assert any(r["type"] == "memory" and r["data"]["memoryId"] == "t-plan-2" for r in out["results"])


def test_a_conversation_is_one_result_per_session_titled_by_its_title(memory: Memory) -> None:
    out = memory.document_search({"query": "database", "includeConversations": True, "limit": 50,
                                  "conversationWeight": 2})
    keys = [r["data"]["sessionKey"] for r in out["results"] if r["type"] == "conversation"]
    assert len(keys) == len(set(keys)) and "titled" in keys
    titled = next(r["data"] for r in out["results"] if r["type"] == "conversation" and
                  r["data"]["sessionKey"] == "titled")
    assert titled["title"] == "Driver choice"


def test_document_only_answers_the_seeds_fields_first_with_a_500_character_snippet(memory: Memory) -> None:
    memory.ingest([{"id": "t-long", "content": "database architecture " + "x" * 900, "kind": "note"}])
    out = memory.document_search({"query": "database architecture", "limit": 50})
    assert list(out) == ["query", "totalResults", "results"]
    seed = ["documentId", "documentTitle", "sourceType", "tags", "chunkId", "content", "score"]
    for r in out["results"]:
        assert list(r)[:7] == seed and len(r["content"]) <= 500
    long = next(r for r in out["results"] if r["chunkId"] == "t-long")
    assert long["contentTruncated"] is True and len(long["content"]) == 500


# ---- item 3: filters, bounds and defaults ---------------------------------------------------------
def test_the_seeds_document_request_is_accepted_and_filters_by_source_type_and_tags(memory: Memory) -> None:
    out = memory.document_search({"query": "database architecture review", "limit": 5, "fullTextWeight": 1.0,
                                  "semanticWeight": 1.5, "tags": ["work", "planning"], "sourceType": "note",
                                  "minScore": 0.5})
    assert [r["chunkId"] for r in out["results"]] == ["t-note"] and out["results"][0]["sourceType"] == "note"
    files = memory.document_search({"query": "database architecture", "sourceType": "file", "limit": 50})
    assert files["results"] and {r["sourceType"] for r in files["results"]} == {"file"}


def test_an_unknown_source_type_is_an_error_naming_the_types_that_exist(memory: Memory) -> None:
    for bad in ("url", "markdown", "claude"):
        with pytest.raises(QueryError) as err:
            memory.document_search({"query": "database", "sourceType": bad})
        assert err.value.field == "sourceType" and "note, file" in err.value.message, err.value.message


@pytest.mark.parametrize(("content_type", "expected"), [("markdown", {"shop/docs/design.md"}),
                                                       ("code", {"shop/schema.py"}), ("command", {"t-cmd"})])
def test_content_type_filters_documents(memory: Memory, content_type: str, expected: set[str]) -> None:
    out = memory.document_search({"query": "database", "contentType": content_type, "limit": 50})
    assert {r["documentId"] for r in out["results"]} == expected
    assert {r["contentType"] for r in out["results"]} == {content_type}
    with pytest.raises(QueryError, match="contentType: must be one of conversation, decision"):
        memory.document_search({"query": "database", "contentType": "email"})


def test_bounds_and_defaults_are_the_seeds(memory: Memory) -> None:
    from urchin.mcp_server.tools import INPUT_SCHEMAS

    props = INPUT_SCHEMAS["search"]["properties"]
    assert (props["limit"]["default"], props["limit"]["maximum"]) == (5, 50)
    for name in ("fullTextWeight", "semanticWeight", "memoryWeight", "conversationWeight"):
        assert (props[name]["minimum"], props[name]["maximum"]) == (0, 2), name
    assert props["conversationWeight"]["default"] == 0.5 and props["semanticWeight"]["default"] == 1.0
    assert props["sourceType"]["enum"] == ["note", "file"]
    assert {"email", "youtube"}.isdisjoint(props["contentType"]["enum"])
    assert {"conversation", "decision", "command", "markdown", "code"} <= set(props["contentType"]["enum"])
    assert memory.document_search({"query": "database"})["totalResults"] == 5
    for bad, field in (({"limit": 51}, "limit"), ({"fullTextWeight": 2.5}, "fullTextWeight"),
                       ({"conversationWeight": -1}, "conversationWeight"),
                       ({"fullTextWeight": 0, "semanticWeight": 0}, "semanticWeight")):
        with pytest.raises(QueryError) as err:
            memory.document_search({"query": "database", **bad})
        assert err.value.field == field


# ---- get_document -------------------------------------------------------------------------------
def test_get_document_returns_a_file_at_the_version_indexed_with_its_chunks(memory: Memory, root: Path) -> None:
    hit = next(r for r in memory.document_search({"query": "pgvector embeddings", "sourceType": "file"})["results"])
    (root / "docs" / "design.md").write_text("# Rewritten\n\nnothing the index saw\n")
    got = memory.get_document(hit["documentId"], include_chunks=True)
    doc = got["document"]
    assert doc["id"] == "shop/docs/design.md" and doc["sourceType"] == "file" and doc["truncated"] is False
    assert "We chose pgvector for embeddings." in doc["content"] and "Rewritten" not in doc["content"]
    assert "hunter2" not in doc["content"]                      # redacted as the chunks are
    assert [c["index"] for c in got["chunks"]] == list(range(len(got["chunks"])))
    assert hit["chunkId"] in [c["id"] for c in got["chunks"]]
    assert "chunks" not in memory.get_document(hit["documentId"])


def test_get_document_returns_an_event_and_names_an_unknown_id(memory: Memory) -> None:
    doc = memory.get_document("t-note")["document"]
    assert (doc["id"], doc["sourceType"], doc["contentType"]) == ("t-note", "note", "note")
    assert doc["content"].startswith("database architecture review")
    with pytest.raises(NotFoundError, match="no document with ID 'nope'"):
        memory.get_document("nope")


# ---- item 4: fetch_source_document at the version indexed -----------------------------------------
def test_fetch_source_document_returns_a_retained_file_as_indexed_after_an_edit(memory: Memory, root: Path) -> None:
    cited = memory.context(ContextParams.parse({"query": "pgvector embeddings", "sources": ["files"]})).results[0]
    digest = cited["location"]["contentHash"]
    unchanged = memory.fetch_source_document("shop", "docs/design.md", digest)
    assert unchanged["content"] == memory.fetch_source_document("shop", "docs/design.md", mode="live")["content"]
    assert unchanged["content"].endswith("embeddings.\n") and "hunter2" not in unchanged["content"]
    (root / "docs" / "design.md").write_text("# Rewritten\n\nnothing the index saw\n")
    doc = memory.fetch_source_document("shop", "docs/design.md", digest)
    assert doc["version"] == "indexed" and doc["contentHash"] == digest
    assert "We chose pgvector for embeddings." in doc["content"] and "hunter2" not in doc["content"]
    # the cited lines are where the citation says
    lines = doc["content"].split("\n")
    start, end = cited["location"]["startLine"], cited["location"]["endLine"]
    assert "\n".join(lines[start - 1:end]) == cited["content"]
    live = memory.fetch_source_document("shop", "docs/design.md", mode="live")
    assert live["version"] == "live" and "nothing the index saw" in live["content"]
    with pytest.raises(QueryError, match="changed since it was indexed"):
        memory.fetch_source_document("shop", "docs/design.md", digest, mode="live")
    with pytest.raises(QueryError, match="mode live"):
        memory.fetch_source_document("shop", "docs/design.md", "sha256:" + "0" * 64)


def test_a_file_the_index_does_not_hold_is_read_live(memory: Memory, root: Path) -> None:
    (root / "new.md").write_text("# New\n\nwritten after the index ran\n")
    doc = memory.fetch_source_document("files", "shop/new.md")
    assert doc["version"] == "live" and doc["content"] == "# New\n\nwritten after the index ran\n"
    with pytest.raises(NotFoundError, match="mode live"):
        memory.get_document("shop/new.md")


def test_fetch_mode_is_checked(memory: Memory) -> None:
    with pytest.raises(QueryError, match="mode: must be one of indexed, live"):
        memory.fetch_source_document("shop", "docs/design.md", mode="disk")


def test_get_document_serves_nothing_outside_what_the_roots_indexed(memory: Memory, root: Path) -> None:
    (root / ".env").write_text("API_KEY=abc\n")
    for bad in ("../../etc/passwd", "/etc/passwd", "shop/../../etc/passwd", "shop/.env", "shop/./docs/../../x",
                "other/docs/design.md", "shop", "a\x00b"):
        with pytest.raises(NotFoundError):
            memory.get_document(bad)
    memory.workspace_remove("shop")          # a removed root's chunks are no longer served
    with pytest.raises(NotFoundError):
        memory.get_document("shop/docs/design.md")
