"""Scoped API tokens: ingest only writes, read only queries, workspace tokens stay in their workspaces.

Against the real daemon (routes and `/mcp`); tokens made with the real `urchin token` command.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import create_token, run_urchin
from tests.daemon_fixture import DaemonProcess, running
from tests.mcp_harness import http_session
from urchin.api_tokens import TokenStore
from urchin.config import Settings
from urchin.daemon.scopes import TOOL_NEEDS
from urchin.daemon.security import load_token
from urchin.errors import ConfigError

pytestmark = [pytest.mark.anyio]

READ_ROUTES = [("GET", "/search?q=deploy"), ("GET", "/semantic?q=deploy"), ("GET", "/recent"),
               ("GET", "/events/abc"), ("GET", "/status"), ("POST", "/context"), ("GET", "/overview"),
               ("GET", "/memories"), ("GET", "/memories/x"), ("GET", "/files/a.txt"),
               ("GET", "/sources/claude/search?q=x"), ("GET", "/sources/claude/documents/x"),
               ("POST", "/forget"), ("DELETE", "/events/abc")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One daemon for the module (a start with the MCP SDK is ~3 s of a core): every test makes its own
    tokens and reads only the ids and contents it wrote (the admin tool calls of the last one forget none)."""
    yield from running(tmp_path_factory.mktemp("tokens") / "home", "--with-mcp")


def _token(home: Path, *args: str) -> str:
    """`urchin token create ARGS`, in this process (the first test runs the command in a process)."""
    made = call_urchin("token", "create", *args, env={"URCHIN_HOME": str(home)})
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _mcp_call(name: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()


_MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _scope_refused(answer: Any) -> bool:
    """A tool call outside the token's scope: an MCP tool error (HTTP 200, isError) naming the scope
    rule, with no data (the house rule for MCP errors; the dispatcher checks it, not the Guard)."""
    if answer.status_code != 200:
        return False
    result = answer.json().get("result") or {}
    text = " ".join(part.get("text", "") for part in result.get("content", []))
    refused = bool(result.get("isError")) and text.startswith(("scope:", "workspace:"))
    assert not refused or "structuredContent" not in result, result
    return refused


def test_tokens_are_kept_hashed_in_a_private_file(urchin_home: Path) -> None:
    token = create_token(urchin_home, "--scope", "read", "--expires", "30d")
    path = urchin_home / "tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token.split("_", 2)[2] not in path.read_text() and token not in path.read_text()   # the secret part
    listed = run_urchin("token", "list", "--json", env={"URCHIN_HOME": str(urchin_home)})
    assert '"scope":"read"' in listed.stdout and token not in listed.stdout
    bad = run_urchin("token", "create", "--scope", "read", "--expires", "soon", env={"URCHIN_HOME": str(urchin_home)})
    assert bad.returncode == 1 and bad.stderr.startswith("error: expires:")


def test_a_token_file_that_is_not_utf8_is_a_named_error_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "token").write_bytes(b"\xff\xfe not text\n")
    with pytest.raises(ConfigError, match=r"token: the token file is not UTF-8 text"):
        load_token(Settings.resolve(home))


def test_an_ingest_token_writes_and_gets_403_on_every_read_route_and_tool(daemon: DaemonProcess) -> None:
    token = _token(daemon.home, "--scope", "ingest")
    with daemon.client(token) as http:
        assert http.post("/ingest", json={"content": "deploy notes", "source": "claude"}).status_code == 200
        for method, path in READ_ROUTES:
            answer = http.request(method, path, json={"query": "x"} if method == "POST" else None)
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.json()["field"] == "authorization" and "needs" in answer.json()["error"]
        assert http.get("/health").json() == {"status": "ok"}          # no counts for a write-only token
        for name, (need, _) in TOOL_NEEDS.items():
            answer = http.post("/mcp", content=_mcp_call(name, {"query": "x"}), headers=_MCP_HEADERS)
            assert _scope_refused(answer) == (need != "ingest"), (name, answer.status_code, answer.text)
        for rpc in ("resources/list", "resources/read", "prompts/list"):
            body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": rpc, "params": {}}).encode()
            answer = http.post("/mcp", content=body, headers=_MCP_HEADERS)
            assert "result" not in answer.json() and "scope:" in answer.json()["error"]["message"], answer.text
        # a batch runs nothing (400: one message per POST); a body only a lenient parser reads is checked as
        # the server parsed it, since the dispatcher checks the call the server is about to run
        batch = json.dumps([json.loads(_mcp_call("urchin_ingest", {"content": "a"})),
                            json.loads(_mcp_call("urchin_search", {"query": "a"}))]).encode()
        assert http.post("/mcp", content=batch, headers=_MCP_HEADERS).status_code == 400
        unparsable = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"urchin_forget"},"n":' \
                     + b"9" * 30 + b"}"
        answer = http.post("/mcp", content=unparsable, headers=_MCP_HEADERS)
        assert answer.status_code == 400 or _scope_refused(answer), answer.text


async def test_an_ingest_token_ingests_through_mcp(daemon: DaemonProcess) -> None:
    token = _token(daemon.home, "--scope", "ingest")
    async with http_session(daemon.url + "/mcp", token) as session:
        stored = await session.call_tool("urchin_ingest", {"content": "from an ingest-only agent"})
        assert not stored.is_error
    assert b"from an ingest-only agent" in daemon.journal_bytes()


async def test_an_ingest_token_cannot_tell_through_mcp_whether_an_id_was_held(daemon: DaemonProcess) -> None:
    """Issue 34 H: `duplicate` / `suppressed: forgotten` only to a caller that may read every event."""
    with daemon.client() as admin:
        for event_id in ("mcp-held", "mcp-gone"):
            assert admin.post("/ingest", json={"id": event_id, "content": "x"}).status_code == 200
        assert admin.post("/forget", json={"ids": ["mcp-gone"], "confirm": True}).status_code == 200
    answers = {}
    for scope in ("ingest", "admin"):
        token = _token(daemon.home, "--scope", scope)
        async with http_session(daemon.url + "/mcp", token) as session:
            for event_id in ("mcp-held", "mcp-gone", f"mcp-new-{scope}"):
                reply = await session.call_tool("urchin_ingest", {"id": event_id, "content": "probe"})
                assert not reply.is_error
                answers[scope, event_id] = reply.structured_content["status"]
    assert [answers["ingest", i] for i in ("mcp-held", "mcp-gone", "mcp-new-ingest")] == ["appended"] * 3
    assert [answers["admin", i] for i in ("mcp-held", "mcp-gone")] == ["duplicate", "suppressed: forgotten"]
    assert daemon.journal_bytes().count(b'"id":"mcp-held"') == 1 and b'"id":"mcp-gone"' not in daemon.journal_bytes()


def test_a_read_token_queries_and_cannot_write(daemon: DaemonProcess) -> None:
    token = _token(daemon.home, "--scope", "read")
    with daemon.client() as admin:         # the single token of $URCHIN_HOME/token stays admin
        assert admin.post("/ingest", json={"content": "deploy the api"}).status_code == 200
    with daemon.client(token) as http:
        assert http.get("/search", params={"q": "deploy"}).json()["events"]
        for path in ("/ingest", "/ingest/batch", "/forget"):
            assert http.post(path, json={"content": "x"}).status_code == 403
        assert http.delete("/events/x").status_code == 403
        answer = http.post("/mcp", content=_mcp_call("urchin_remember", {"content": "x"}), headers=_MCP_HEADERS)
        assert _scope_refused(answer)


def test_a_workspace_token_sees_and_writes_only_its_workspaces(daemon: DaemonProcess) -> None:
    with daemon.client() as admin:
        for ws in ("alpha", "beta"):
            assert admin.post("/ingest", json={"content": f"deploy {ws} service", "workspace": ws}).status_code == 200
    reader = _token(daemon.home, "--scope", "read", "--workspace", "alpha")
    writer = _token(daemon.home, "--scope", "ingest", "--workspace", "alpha")
    with daemon.client(reader) as http:
        hits = http.get("/search", params={"q": "deploy"}).json()["events"]
        assert [h["workspace"] for h in hits] == ["alpha"]
        refused = http.get("/search", params={"q": "deploy", "workspace": "beta"})
        assert refused.status_code == 403 and refused.json()["field"] == "workspace"
        assert http.get("/recent").status_code == 403                      # spans every workspace
        assert http.get("/events/x").status_code == 403
        tool = http.post("/mcp", content=_mcp_call("urchin_search", {"query": "deploy", "workspace": "beta"}),
                         headers=_MCP_HEADERS)
        assert _scope_refused(tool) and "workspace:" in tool.text
    with daemon.client(writer) as http:
        assert http.post("/ingest", json={"content": "sneaky", "workspace": "beta"}).status_code == 403
        batch = http.post("/ingest/batch", json={"events": [{"content": "ok"}, {"content": "no", "workspace": "beta"}]})
        assert batch.status_code == 403
        assert http.post("/ingest", json={"content": "filled in"}).status_code == 200
    lines = [json.loads(line) for line in daemon.journal_bytes().splitlines()]
    assert {e["workspace"] for e in lines if e["content"] == "filled in"} == {"alpha"}
    assert not any(e["content"] in ("sneaky", "no", "ok") for e in lines)


def test_revoked_and_expired_tokens_are_refused(daemon: DaemonProcess) -> None:
    token = _token(daemon.home, "--scope", "admin")
    with daemon.client(token) as http:
        assert http.get("/status").status_code == 200
        token_id = token.split("_")[1]
        assert run_urchin("token", "revoke", token_id, env={"URCHIN_HOME": str(daemon.home)}).returncode == 0
        assert http.get("/status").status_code == 401
    store = TokenStore(daemon.home)
    expired, _ = store.create("read", expires="1h", now=0.0)
    assert store.verify(expired) is None
    with daemon.client(expired) as http:
        assert http.get("/status").status_code == 401
    missing = call_urchin("token", "revoke", "nope", env={"URCHIN_HOME": str(daemon.home)})
    assert missing.returncode == 1 and "no token" in missing.stderr
    assert os.stat(daemon.home / "tokens.json").st_mode & 0o077 == 0


# Every MCP tool's REST route(s), as a client calls them; tools with no REST route are listed apart.
REST_OF_TOOL: dict[str, list[tuple[str, str]]] = {
    "urchin_search": [("GET", "/search?q=deploy")], "urchin_semantic_search": [("GET", "/semantic?q=deploy")],
    "urchin_recent_activity": [("GET", "/recent")], "urchin_get_event": [("GET", "/events/abc")],
    "urchin_status": [("GET", "/status")], "search_context": [("POST", "/context")],
    "search": [("POST", "/documents/search")], "get_workspace_overview": [("GET", "/overview")],
    "list_memories": [("GET", "/memories")], "get_memory": [("GET", "/memories/x")],
    "get_file": [("GET", "/files/a.txt")], "query_source": [("GET", "/sources/claude/search?q=x")],
    "fetch_source_document": [("GET", "/sources/claude/documents/x")], "get_document": [("GET", "/documents/x")],
    "urchin_ingest": [("POST", "/ingest"), ("POST", "/ingest/batch")],
    "urchin_forget": [("POST", "/forget"), ("DELETE", "/events/abc")], "urchin_ephemeral": [("POST", "/ephemeral")],
    "urchin_recall": [("POST", "/recall")],
}
NO_REST_ROUTE = {"urchin_session_context", "urchin_workspace_context", "urchin_remember"}


def test_every_operation_needs_the_same_scope_over_rest_and_mcp(daemon: DaemonProcess) -> None:
    """An operation needs one scope on every front end (issue 32: a read token got 403 "needs admin" for
    `search` over /mcp while POST /documents/search answered it): for every MCP tool and every kind of
    token, its REST route refuses (403) exactly when its tool call over /mcp does (a scope tool error)."""
    from urchin.mcp_server.tools import tool_list

    tools = {tool.name for tool in tool_list()}
    assert set(REST_OF_TOOL) | NO_REST_ROUTE == tools and not set(REST_OF_TOOL) & NO_REST_ROUTE
    grants = [("read",), ("ingest",), ("admin",), ("read", "--workspace", "alpha"),
              ("ingest", "--workspace", "alpha"), ("hook",)]
    differ = []
    for grant in grants:
        token = _token(daemon.home, "--scope", *grant)
        with daemon.client(token) as http:
            for tool, routes in REST_OF_TOOL.items():
                arguments = {"query": "x"} if tool != "urchin_ingest" else {"content": "x"}
                over_mcp = http.post("/mcp", content=_mcp_call(tool, arguments), headers=_MCP_HEADERS)
                for method, path in routes:
                    # a body the route cannot use (400 once past the Guard): only the Guard's answer counts
                    over_rest = http.request(method, path, content=b"{" if method == "POST" else None,
                                             headers={"content-type": "application/json"})
                    if (over_rest.status_code == 403) != _scope_refused(over_mcp):
                        differ.append((grant, tool, over_mcp.status_code, method, path, over_rest.status_code))
    assert not differ, differ
