"""Sources are real, edges hold, citations name the version indexed: in-process, MCP and HTTP (issue 14)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess
from tests.mcp_harness import stdio_session
from tests.mcp_scenarios import call, call_error
from urchin.config import Settings
from urchin.daemon.client import RemoteMemory, find_daemon
from urchin.errors import QueryError
from urchin.facade import Memory
from urchin.params.context import ContextParams

GUIDE = "# Guide\n\nDeploy with the quokka pipeline.\n\nRoll back with make rollback.\n"


@pytest.fixture
def memory(pg_settings: Settings, tmp_path: Path) -> Any:
    root = tmp_path / "shop"
    root.mkdir()
    (root / "guide.md").write_text(GUIDE)
    big = ["# Dump"] + [f"row {i} filler text for the size cap" for i in range(60)]
    big[30] = "the zanzibar-marmoset appears only here"
    (root / "big.md").write_text("\n".join(big) + "\n")
    memory = Memory(pg_settings)
    memory.workspace_add(str(root))
    memory.ingest([{"content": "quokka deploys are on fridays", "source": "claude", "workspace": "shop"}])
    memory.index()
    memory.index_service.index_files(memory.files, size_cap=1000)
    yield memory
    memory.close()


def test_query_source_with_an_unknown_source_is_an_error_listing_the_known_ones(memory: Memory) -> None:
    with pytest.raises(QueryError) as err:
        memory.query_source("nosuch", "quokka")
    assert err.value.field == "source" and "claude" in err.value.rule and "shop" in err.value.rule


def test_source_ids_accept_every_source_query_source_accepts(memory: Memory) -> None:
    """sourceIds (seed 000) names sources as query_source does: journal sources and workspace roots
    alike answer what query_source answers (issue 32: a root's name left the answer silently empty)."""
    roots = [r.name for r in memory.workspace_list()]
    known = memory.index_service.known_sources() + roots
    assert {"claude", "files", "shop"} <= set(known)
    for source in known:
        mode = "live" if source in roots else "indexed"      # query_source reads a root's cataloged files
        for query in ("quokka", "zanzibar-marmoset", "quokka pipeline"):
            one = memory.query_source(source, query, limit=20)
            ids = [r["id"] for r in memory.context(query=query, source_ids=[source], mode=mode, limit=20).results]
            assert ids == [r["id"] for r in one.results], (source, query)
    files = memory.context(query="quokka", source_ids=["shop"]).results
    assert files and {r["source"] for r in files} == {"files"} and "warnings" not in files
    both = memory.context(query="quokka", source_ids=["claude", "shop"], limit=20).results
    assert {r["source"] for r in both} == {"files", "claude"}


def test_an_unknown_source_id_is_an_error_naming_the_known_ones(memory: Memory) -> None:
    for ids in (["nosuch"], ["claude", "nosuch"], ["Shop2"]):
        with pytest.raises(QueryError) as err:
            memory.context(query="quokka", source_ids=ids)
        assert err.value.field == "sourceIds" and "claude" in err.value.rule and "shop" in err.value.rule
        assert repr(ids[-1]) in err.value.rule


def test_query_source_for_a_root_reads_its_cataloged_files_live(memory: Memory) -> None:
    result = memory.query_source("shop", "zanzibar-marmoset")
    assert [r["location"]["path"] for r in result.results] == ["shop/big.md"]
    assert result.coverage["mode"] == "live" and "shop/big.md" in result.coverage["live"]["read"]


def test_filters_naming_nothing_warn_in_coverage_and_the_cli(memory: Memory) -> None:
    result = memory.context(query="quokka", sources=["nosuch"], kinds=["nokind"])
    assert result.coverage["warnings"] == ["sources: nothing indexed has source 'nosuch'",
                                           "kinds: nothing indexed has kind 'nokind'"]
    assert "warnings" not in memory.context(query="quokka", sources=["claude"]).coverage


def test_search_with_a_source_events_cannot_have_is_an_error() -> None:
    out = run_urchin("search", "x", "--source", "Bad Source")
    assert out.returncode == 1 and out.stderr.startswith("error: source: must be lowercase"), out.stderr


def test_get_file_past_the_end_names_the_length(memory: Memory) -> None:
    with pytest.raises(QueryError, match="'shop/guide.md' has 5 lines: fromLine 500 is past its end"):
        memory.get_file("shop/guide.md", from_line=500)


def test_hyde_passage_length_is_checked() -> None:
    with pytest.raises(QueryError, match=r"searches\[0\].query: a hyde passage must be 30-80 words"):
        ContextParams.parse({"query": "x", "searches": [{"type": "hyde", "query": "too short"}]})


def test_file_citations_carry_the_indexed_hash_and_fetch_checks_it(memory: Memory, tmp_path: Path) -> None:
    hit = memory.context(query="quokka pipeline", sources=["files"]).results[0]
    digest = hit["location"]["contentHash"]
    assert digest and hit["location"]["path"] == "shop/guide.md"
    doc = memory.fetch_source_document("files", "shop/guide.md", digest)
    assert doc["content"] == GUIDE and doc["contentHash"] == digest
    (tmp_path / "shop" / "guide.md").write_text(GUIDE + "New line.\n")
    # issue 32: the cited version still comes back, from the index; only the live read says it changed
    indexed = memory.fetch_source_document("files", "shop/guide.md", digest)
    assert indexed["content"] == GUIDE.rstrip("\n") and indexed["version"] == "indexed"
    with pytest.raises(QueryError, match="changed since it was indexed"):
        memory.fetch_source_document("files", "shop/guide.md", digest, mode="live")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sources_and_edges_over_mcp(memory: Memory, pg_url: str, anyio_backend: str) -> None:
    async with stdio_session({"URCHIN_DATABASE_URL": pg_url}) as session:
        assert (await call_error(session, "query_source", {"source": "nosuch", "query": "x"})).startswith("source:")
        assert (await call_error(session, "search_context", {"query": "x", "sourceIds": ["nosuch"]})
                ).startswith("sourceIds: unknown source 'nosuch' (known: claude, files, shop)")
        _, data = await call(session, "search_context", {"query": "quokka", "sourceIds": ["shop"]})
        assert data["results"] and {r["source"] for r in data["results"]} == {"files"}
        _, data = await call(session, "query_source", {"source": "shop", "query": "zanzibar-marmoset"})
        assert data["results"][0]["location"]["path"] == "shop/big.md"
        message = await call_error(session, "get_file", {"path": "shop/guide.md", "fromLine": 500})
        assert "has 5 lines" in message
        _, data = await call(session, "search_context", {"query": "quokka pipeline", "tokenBudget": 3})
        assert data["truncated"] and data["results"] and data["results"][0]["cut"]
        message = await call_error(session, "search_context", {"query": "x", "searches": [
            {"type": "hyde", "query": "short"}]})
        assert "30-80 words" in message
        _, data = await call(session, "search_context", {"query": "quokka pipeline", "sources": ["files"]})
        digest = data["results"][0]["location"]["contentHash"]
        _, doc = await call(session, "fetch_source_document", {"source": "files", "id": "shop/guide.md",
                                                               "contentHash": digest})
        assert doc["content"] == GUIDE


def test_sources_and_edges_over_http(memory: Memory, urchin_home: Path, pg_url: str) -> None:
    daemon = DaemonProcess(urchin_home, "--with-index", env={"URCHIN_DATABASE_URL": pg_url}).start()
    try:
        with daemon.client() as api:
            bad = api.get("/sources/nosuch/search", params={"query": "x"})
            assert bad.status_code == 400 and bad.json()["field"] == "source", bad.text
            bad = api.post("/context", json={"query": "x", "sourceIds": ["nosuch"]})
            assert bad.status_code == 400 and bad.json()["field"] == "sourceIds" and "shop" in bad.text, bad.text
            rooted = api.post("/context", json={"query": "quokka", "sourceIds": ["shop"]}).json()
            assert rooted["results"] and {r["source"] for r in rooted["results"]} == {"files"}, rooted
            live = api.get("/sources/shop/search", params={"query": "zanzibar-marmoset"})
            assert live.json()["results"][0]["location"]["path"] == "shop/big.md", live.text
            past = api.get("/files/shop/guide.md", params={"fromLine": 500})
            assert past.status_code == 400 and "has 5 lines" in past.text
            tight = api.post("/context", json={"query": "quokka pipeline", "tokenBudget": 3}).json()
            assert tight["truncated"] and tight["results"][0]["cut"]
            warn = api.post("/context", json={"query": "quokka", "sources": ["nosuch"]}).json()
            assert warn["coverage"]["warnings"] == ["sources: nothing indexed has source 'nosuch'"]
            hit = api.post("/context", json={"query": "quokka pipeline", "sources": ["files"]}).json()["results"][0]
            doc = api.get("/sources/files/documents/shop/guide.md",
                          params={"contentHash": hit["location"]["contentHash"]})
            assert doc.status_code == 200 and doc.json()["content"] == GUIDE
            stale = api.get("/sources/files/documents/shop/guide.md", params={"contentHash": "sha256:0"})
            assert stale.status_code == 400 and stale.json()["field"] == "contentHash"
        # the daemon client sends a copy made with dataclasses.replace() by wire names: sourceIds, not sources
        with RemoteMemory(memory.settings, find_daemon(memory.settings)) as remote:   # type: ignore[arg-type]
            copy = dataclasses.replace(ContextParams.parse({"query": "quokka", "sourceIds": ["shop"]}), limit=5)
            rooted_remotely = remote.context(copy)
            assert not remote.fell_back and rooted_remotely.results, rooted_remotely.coverage
            assert {r["source"] for r in rooted_remotely.results} == {"files"}, rooted_remotely.results
    finally:
        daemon.stop()


def test_a_memory_member_outside_every_root_is_refused_at_create_time(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    assert call_urchin("workspace", "add", str(root)).returncode == 0     # in-process: the same entry point
    for bad in ("../../etc/passwd", "/etc/passwd"):
        out = run_urchin("memory", "create", "leak", "--use-when", "never", "--file", bad)
        assert out.returncode == 1 and "outside the workspace roots" in out.stderr, out.stderr
    assert call_urchin("memory", "list", "--json").stdout.count("leak") == 0
