"""Who may recall what through the daemon (issue 33): a workspace-scoped token never recalls another
workspace's events; the hooks' token may ingest and recall and nothing else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import create_token
from tests.daemon_fixture import DaemonProcess

_STAMP = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
SEED = [{"id": f"{ws}-{i}", "timestamp": _STAMP, "source": "claude", "kind": "decision", "workspace": ws,
         "session": f"{ws}-s", "content": f"The {ws} billing retry uses exponential backoff, note {i}"}
        for ws in ("alpha", "beta") for i in range(3)]
SEED += [{"id": f"bg-{i}", "timestamp": _STAMP, "source": "shell", "kind": "command", "workspace": "bg",
          "content": f"make target-{i} in the {word} folder"}
         for i, word in enumerate(["docs", "src", "build", "tests", "tools", "assets", "vendor", "scripts"])]
PROMPT = "billing retry exponential backoff"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    process = DaemonProcess(tmp_path_factory.mktemp("recall-access") / "home", "--with-mcp").start()
    try:
        with process.client() as http:
            assert http.post("/ingest/batch", json={"events": SEED}).json()["appended"] == len(SEED)
        yield process
    finally:
        process.stop()


def _ids(answer: dict[str, Any]) -> set[str]:
    return {i for item in answer["items"] for i in [item["id"], *item.get("ids", [])]}


def test_a_workspace_scoped_token_never_recalls_another_workspace(daemon: DaemonProcess) -> None:
    token = create_token(daemon.home, "--scope", "read", "--workspace", "alpha")
    with daemon.client(token) as http:
        for body in ({}, {"prompt": PROMPT}, {"workspace": "alpha", "prompt": PROMPT, "budget": 5000}):
            reply = http.post("/recall", json=body)
            assert reply.status_code == 200, reply.text
            answer = reply.json()
            assert answer["items"] and answer["workspace"] == "alpha"
            assert all(i.startswith("alpha") for i in _ids(answer)), answer
            assert "beta" not in answer["text"]
        refused = http.post("/recall", json={"workspace": "beta", "prompt": PROMPT})
        assert refused.status_code == 403 and "limited to workspaces alpha" in refused.json()["error"]
        elsewhere = http.post("/recall", json={"cwd": "/nowhere/beta", "prompt": PROMPT})
        assert elsewhere.status_code == 400
        assert elsewhere.json()["error"] == "cwd: is in workspace 'beta', not 'alpha'"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "urchin_recall", "arguments": {"workspace": "beta", "prompt": PROMPT}}}
        mcp = http.post("/mcp", content=json.dumps(call).encode(),
                        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
        result = mcp.json()["result"]   # over /mcp a scope refusal is a tool error (isError), with no data
        assert mcp.status_code == 200 and result["isError"] and "structuredContent" not in result
        assert result["content"][0]["text"].startswith("workspace:") and "beta" in result["content"][0]["text"]


def test_the_hook_scope_may_ingest_and_recall_and_nothing_else(daemon: DaemonProcess) -> None:
    token = create_token(daemon.home, "--scope", "hook")
    with daemon.client(token) as http:
        answer = http.post("/recall", json={"workspace": "beta", "prompt": PROMPT}).json()
        assert answer["items"] and all(i.startswith("beta") for i in _ids(answer))
        assert http.post("/ingest", json={"content": "from a hook", "workspace": "beta"}).json()["status"] == "appended"
        for method, path in (("GET", "/search?query=billing"), ("GET", "/recent"), ("GET", "/events/alpha-1"),
                             ("GET", "/semantic?query=billing"), ("POST", "/forget"), ("GET", "/status")):
            reply = http.request(method, path, json={} if method == "POST" else None)
            assert reply.status_code == 403, (method, path, reply.text)
    ingest_only = create_token(daemon.home, "--scope", "ingest")
    with daemon.client(ingest_only) as http:
        assert http.post("/recall", json={"workspace": "beta"}).status_code == 403
