"""Workspace files in the Postgres index (issue 9): chunks with heading paths and line anchors, hashes,
deletions, live reads of cataloged files, the per-file cap, query_source / fetch_source_document."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from urchin.config import Settings
from urchin.errors import QueryError, ValidationError
from urchin.facade import Memory
from urchin.hybrid.base import chunk_key

DEPLOY_MD = """# Deploy

How we ship the shop.

## Staging

Push to the staging branch; the pipeline runs migrations.

## Production

### Rollback

Run `make rollback` and watch the grafana board named quokka-latency.

### Canary

Send five percent of traffic to the canary first.
"""

APP_PY = """import os


def connect_database(url):
    \"\"\"Open the billing database with a pool.\"\"\"
    return os.environ.get("BILLING_DSN", url)


class Invoice:
    def total(self):
        return 42
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "build").mkdir()
    (root / "docs" / "deploy.md").write_text(DEPLOY_MD)
    (root / "src" / "app.py").write_text(APP_PY)
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build" / "out.md").write_text("# Generated\nquokka-latency generated copy\n")
    (root / "debug.log").write_text("quokka-latency in a log\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    big = ["# Big data dump"] + [f"row {i} filler text for the size cap" for i in range(40)]
    big[25] = "the zanzibar-marmoset appears only here"
    (root / "big.md").write_text("\n".join(big) + "\n")
    return root


@pytest.fixture
def memory(pg_settings: Settings, workspace: Path) -> Any:
    memory = Memory(pg_settings)
    memory.workspace_add(str(workspace))
    memory.index()
    yield memory
    memory.close()


def index(memory: Memory, size_cap: int = 1000) -> Any:
    return memory.index_service.index_files(memory.files, size_cap=size_cap)


def test_files_are_chunked_cataloged_and_ignored(memory: Memory) -> None:
    report = index(memory)
    assert (report.indexed, report.cataloged, report.binaries, report.failed) == (3, 1, 1, 0)  # .gitignore indexed too
    files = {f["path"]: f["state"] for f in memory.index_service.backend.files()}
    assert files == {".gitignore": "indexed", "docs/deploy.md": "indexed", "src/app.py": "indexed",
                     "big.md": "cataloged"}


def test_markdown_results_carry_heading_path_and_exact_lines(memory: Memory) -> None:
    index(memory)
    result = memory.context(query="rollback grafana board", sources=["files"])
    first = result.results[0]
    assert first["citation"] == "shop/docs/deploy.md#L11-L13"
    indexed = {f["path"]: f["hash"] for f in memory.index_service.backend.files("indexed")}
    assert first["location"] == {"path": "shop/docs/deploy.md", "startLine": 11, "endLine": 13,
                                 "headingPath": ["Deploy", "Production", "Rollback"],
                                 "contentHash": indexed["docs/deploy.md"]}
    assert first["title"] == "Deploy › Production › Rollback"
    assert first["content"].splitlines() == DEPLOY_MD.splitlines()[10:13]
    assert first["source"] == "files" and first["workspace"] == "shop"
    mtime = os.stat(memory.workspace_list()[0].path / "docs/deploy.md").st_mtime
    assert first["updatedAt"].startswith(__import__("datetime").datetime.fromtimestamp(
        mtime, __import__("datetime").UTC).strftime("%Y-%m-%dT%H:%M:%S"))


def test_code_chunks_found_and_ignored_files_absent(memory: Memory) -> None:
    index(memory)
    result = memory.context(query="connect_database billing pool")
    assert result.results[0]["citation"].startswith("shop/src/app.py#L")
    loc = result.results[0]["location"]
    lines = APP_PY.splitlines()[loc["startLine"] - 1: loc["endLine"]]
    assert "def connect_database(url):" in lines
    everything = memory.context(query="quokka-latency", limit=50)
    paths = {r["location"].get("path") for r in everything.results}
    assert paths == {"shop/docs/deploy.md"}            # build/ and *.log are ignored


def test_unchanged_files_are_not_rechunked_and_changes_replace_old_chunks(memory: Memory, workspace: Path) -> None:
    index(memory)
    backend = memory.index_service.backend
    before = backend.fetch([chunk_key("", "shop/src/app.py#0")])[chunk_key("", "shop/src/app.py#0")]
    again = index(memory)
    assert (again.indexed, again.unchanged, again.chunks) == (0, 4, 0)
    os.utime(workspace / "src" / "app.py", (1, 1))            # new mtime, same bytes: the hash says unchanged
    touched = index(memory)
    assert (touched.indexed, touched.unchanged, touched.chunks) == (0, 4, 0)
    (workspace / "docs" / "deploy.md").write_text("# Deploy\n\nNow we use the zebra-walrus pipeline.\n")
    third = index(memory)
    assert (third.indexed, third.unchanged) == (1, 3)
    assert backend.fetch([chunk_key("", "shop/src/app.py#0")])[chunk_key("", "shop/src/app.py#0")] == before
    # the old chunk is gone (the new one may still be found through a word related to "latency")
    assert not any("quokka" in r["content"] for r in memory.context(query="quokka-latency", sources=["files"]).results)
    hit = memory.context(query="zebra-walrus", sources=["files"]).results[0]
    assert hit["citation"] == "shop/docs/deploy.md#L1-L3"


def test_deleted_file_and_removed_root_leave_the_index(memory: Memory, workspace: Path) -> None:
    index(memory)
    (workspace / "src" / "app.py").unlink()
    report = index(memory)
    assert report.removed == 1
    assert memory.context(query="connect_database", sources=["files"]).results == []
    memory.workspace_remove("shop")
    report = memory.index_files()
    assert report.removed == 3
    assert memory.index_service.backend.files() == []
    assert memory.index_service.backend.status()["chunks"] == 0


def test_per_file_cap_after_fusion(memory: Memory, workspace: Path) -> None:
    (workspace / "docs" / "many.md").write_text("".join(f"# Part {i}\n\nthe walrus section {i}\n\n" for i in range(8)))
    index(memory)
    default = memory.context(query="walrus section", sources=["files"])
    assert len(default.results) == 3
    assert memory.context(query="walrus section", sources=["files"], per_file_cap=5).results.__len__() == 5
    with pytest.raises(QueryError, match="perFileCap"):
        memory.context(query="walrus", per_file_cap=0)


def test_live_mode_reads_cataloged_files_within_budget(memory: Memory) -> None:
    index(memory)
    indexed = memory.context(query="zanzibar-marmoset")
    assert indexed.results == [] and "live" not in indexed.coverage
    live = memory.context(query="zanzibar-marmoset", mode="live")
    assert live.results[0]["citation"].startswith("shop/big.md#L")
    assert live.results[0]["live"] is True
    loc = live.results[0]["location"]
    assert loc["startLine"] <= 26 <= loc["endLine"]
    assert live.coverage["live"]["read"] == ["shop/big.md"]
    small = memory.context(query="zanzibar-marmoset", mode="live", live_byte_budget=100)
    assert small.results == []
    assert small.coverage["live"]["skipped"][0]["path"] == "shop/big.md"
    assert small.coverage["live"]["skipped"][0]["reason"].startswith("size")


def test_live_mode_budget_spent_by_earlier_files(memory: Memory, workspace: Path) -> None:
    (workspace / "big2.md").write_text("# Other\n" + "zanzibar-marmoset second copy filler line\n" * 40)
    index(memory)
    sizes = {f["path"]: f["size"] for f in memory.index_service.backend.files("cataloged")}
    budget = max(sizes.values()) + 10
    live = memory.context(query="zanzibar-marmoset", mode="live", live_byte_budget=budget)
    smaller = min(sizes, key=sizes.__getitem__)
    assert live.coverage["live"]["read"] == [f"shop/{smaller}"]
    assert [s["reason"].split(":")[0] for s in live.coverage["live"]["skipped"]] == ["budget"]
    with pytest.raises(QueryError, match="mode"):
        memory.context(query="x", mode="psychic")


def test_query_source_restricts_to_a_root_or_a_journal_source(memory: Memory) -> None:
    memory.ingest([{"id": "e-claude", "source": "claude", "content": "the billing database pool was resized"},
                   {"id": "e-git", "source": "git", "content": "commit: billing database pool fix"}])
    index(memory)
    files = memory.query_source("shop", "billing database pool")
    assert files.results and {r["source"] for r in files.results} == {"files"}
    assert files.results[0]["citation"].startswith("shop/src/app.py#L")
    git = memory.query_source("git", "billing database pool")
    assert [r["id"] for r in git.results] == ["e-git"]


def test_fetch_source_document_returns_whole_files_and_events(memory: Memory, workspace: Path) -> None:
    memory.ingest([{"id": "e-claude", "source": "claude", "content": "hello there"}])
    doc = memory.fetch_source_document("shop", "docs/deploy.md")
    assert doc["content"] == DEPLOY_MD and doc["id"] == "shop/docs/deploy.md" and doc["type"] == "file"
    assert memory.fetch_source_document("files", "shop/src/app.py")["content"] == APP_PY
    event = memory.fetch_source_document("claude", "e-claude")
    assert event["event"]["id"] == "e-claude" and event["content"] == "hello there"
    with pytest.raises(Exception, match="not from source"):
        memory.fetch_source_document("git", "e-claude")


def test_fetch_source_document_refuses_traversal_and_symlinks_out(memory: Memory, workspace: Path,
                                                                  tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    (workspace / "link.txt").symlink_to(secret)
    for bad in ("../../etc/passwd", "../secret.txt", "link.txt", "/etc/passwd"):
        with pytest.raises(ValidationError):
            memory.fetch_source_document("shop", bad)
    with pytest.raises(ValidationError):
        memory.fetch_source_document("files", "shop/../../etc/passwd")


def test_cli_and_mcp_faces(memory: Memory, pg_settings: Settings) -> None:
    from urchin.mcp_server.tools import check_arguments, run_tool

    index(memory)
    found = run_tool(memory, "query_source", {"source": "shop", "query": "rollback grafana"})
    text, data = found.content[0].text, found.structured_content  # type: ignore[union-attr]
    assert data is not None and data["results"][0]["citation"] == "shop/docs/deploy.md#L11-L13"
    assert "make rollback" in text
    fetched = run_tool(memory, "fetch_source_document", {"source": "shop", "id": "src/app.py"})
    assert fetched.content[0].text == APP_PY  # type: ignore[union-attr]
    assert check_arguments("query_source", {"source": "shop"}) is not None
    assert check_arguments("fetch_source_document", {"source": "shop", "id": "x", "extra": 1}) is not None


def test_cli_index_query_source_fetch_document(pg_settings: Settings, pg_url: str, workspace: Path) -> None:
    import orjson

    from tests.conftest import run_urchin

    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}
    added = run_urchin("workspace", "add", str(workspace), env=env)
    assert added.returncode == 0 and "urchin index" in added.stderr
    indexed = run_urchin("index", env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert "workspace files: 4 indexed" in indexed.stdout    # big.md is only 1.3 KB: under the 1 MiB cap here
    found = run_urchin("query-source", "shop", "rollback grafana", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert orjson.loads(found.stdout)["results"][0]["citation"] == "shop/docs/deploy.md#L11-L13"
    whole = run_urchin("fetch-document", "shop", "src/app.py", env=env)
    assert whole.stdout == APP_PY + "\n"
    refused = run_urchin("fetch-document", "shop", "../../etc/passwd", env=env)
    assert refused.returncode == 1 and "outside the workspace roots" in refused.stderr


def test_daemon_loop_reindexes_changed_and_deleted_files_within_seconds(memory: Memory, workspace: Path) -> None:
    import time

    from urchin.daemon.background import IndexLoop, WorkspaceIndexLoop

    assert IndexLoop.available()
    loop = WorkspaceIndexLoop(memory)
    loop.start()
    try:
        def wait_for(check: Any) -> float:
            started = time.monotonic()
            while time.monotonic() - started < 15:
                if check():
                    return time.monotonic() - started
                time.sleep(0.2)
            raise AssertionError(f"not indexed within 15 s (last error: {loop.last_error})")

        wait_for(lambda: memory.index_service.status()["files"])   # through the service's lock: the loop shares it
        (workspace / "docs" / "new.md").write_text("# Fresh\n\nthe okapi-teapot runbook\n")
        wait_for(lambda: memory.context(query="okapi-teapot", sources=["files"]).results)
        (workspace / "docs" / "new.md").unlink()
        wait_for(lambda: not memory.context(query="okapi-teapot", sources=["files"]).results)
    finally:
        loop.stop(5)
    assert loop.last_error is None


def test_cli_context_flags_for_files(memory: Memory, pg_url: str) -> None:
    import orjson

    from tests.conftest import run_urchin

    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}
    shown = run_urchin("context", "zanzibar-marmoset", "--mode", "live", "--per-file-cap", "1",
                       "--live-byte-budget", "1000000", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    out = orjson.loads(shown.stdout)
    assert out["coverage"]["mode"] == "live" and out["coverage"]["perFileCap"] == 1
    assert out["coverage"]["live"]["read"] == []       # files were not indexed in this test: nothing is cataloged


def test_files_excluded_in_git_info_exclude_are_not_indexed(memory: Memory, workspace: Path) -> None:
    """`.git/info/exclude` hides files as `.gitignore` does: an indexed file excluded later goes."""
    index(memory)
    assert "docs/deploy.md" in {f["path"] for f in memory.index_service.backend.files()}
    (workspace / ".git" / "info").mkdir(parents=True)
    (workspace / ".git" / "info" / "exclude").write_text("docs/\n")
    report = index(memory)
    assert report.removed == 1
    assert "docs/deploy.md" not in {f["path"] for f in memory.index_service.backend.files()}
    paths = {r["location"].get("path") for r in memory.context(query="rollback grafana board", limit=50).results}
    assert "shop/docs/deploy.md" not in paths


@pytest.mark.parametrize("first", [False, True], ids=["another-root", "the-first-root"])
def test_a_root_added_while_the_daemon_runs_is_searchable_within_seconds(memory: Memory, workspace: Path,
                                                                          tmp_path: Path, first: bool) -> None:
    """`workspace add` from another process (the CLI writes workspaces.json): the loop notices the new
    root within a tick and walks it, not at its next 30 s recheck; the first root of a new home too."""
    import time

    from urchin.daemon.background import WorkspaceIndexLoop

    if first:
        for root in memory.workspace_list():
            memory.workspace_remove(root.name)
    loop = WorkspaceIndexLoop(memory)
    loop.start()
    try:
        deadline = time.monotonic() + (1 if first else 15)
        while not memory.index_service.status()["files"] and time.monotonic() < deadline:
            time.sleep(0.2)
        second = tmp_path / "notes"
        second.mkdir()
        (second / "ideas.md").write_text("# Ideas\n\nthe capybara-lantern plan\n")
        started = time.monotonic()
        Memory(memory.settings).workspace_add(str(second))   # as `urchin workspace add` does, in its process
        while not memory.context(query="capybara-lantern", sources=["files"]).results:
            assert time.monotonic() - started < 6, f"not searchable after 6 s (last error: {loop.last_error})"
            time.sleep(0.2)
        print(f"searchable {time.monotonic() - started:.2f} s after workspace add")
    finally:
        loop.stop(5)
