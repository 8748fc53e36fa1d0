"""Workspace routes of the daemon: the same answers as the MCP tools and the CLI, behind the token."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.daemon_fixture import DaemonProcess
from urchin.facade import Memory
from urchin.workspace.curated import Member


def test_files_overview_memories_and_sources_over_http(urchin_home: Path, tmp_path: Path, memory: Memory) -> None:
    root = tmp_path / "shop"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "deploy.md").write_text("# Deploy\nstep one\nstep two\n")
    memory.workspace_add(str(root))
    memory.memory_create("deploying", "deploying", [Member("file", path="docs/deploy.md")])
    memory.ingest_one({"id": "e1", "content": "deploy went fine", "source": "claude"})
    daemon = DaemonProcess(urchin_home).start()
    try:
        auth = {"Authorization": f"Bearer {daemon.token}"}

        def get(path: str, **params: object) -> httpx.Response:
            return httpx.get(daemon.url + path, params=params, headers=auth, timeout=30)

        window = get("/files/shop/docs/deploy.md", fromLine=2, maxLines=1)
        assert window.status_code == 200 and window.json()["lines"] == [{"n": 2, "text": "step one"}]
        assert window.json() == memory.get_file("shop/docs/deploy.md", 2, 1).to_dict()
        refused = get("/files/..%2F..%2Fetc%2Fpasswd")
        assert refused.status_code in (404, 422) and "error" in refused.json()
        assert get("/files/docs/deploy.md", maxLines=0).json()["field"] == "maxLines"
        assert get("/files/docs/deploy.md", color="red").status_code == 400
        assert get("/overview").json()["roots"][0]["name"] == "shop"
        assert get("/memories").json() == {"memories": [m.summary() for m in memory.memory_list()]}
        assert get("/memories/deploying").json()["members"][0]["content"].startswith("# Deploy")
        assert get("/memories/nope").status_code == 404
        document = get("/sources/claude/documents/e1").json()
        assert (document["type"], document["content"]) == ("event", "deploy went fine")
        assert get("/sources/shop/documents/docs/deploy.md").json()["totalLines"] == 3
        assert get("/sources/git/documents/e1").status_code == 404
        assert httpx.get(daemon.url + "/overview", timeout=30).status_code == 401
    finally:
        daemon.stop()
