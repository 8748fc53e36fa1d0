"""Scopes in the dispatcher (issue 35 item 2): a workspace-bound token never reads or writes outside its
workspaces, through any operation, on any front end that takes a token (the HTTP routes and `/mcp`).

The table is the contract's operation list (`ACCESS`): a new operation, tool or route is covered the day it
is declared. Over `/mcp` a refusal is an MCP tool error (HTTP 200, `isError`, a message naming the scope
rule, no data), decided by the dispatcher on the call the server parsed; over HTTP it stays a 403 with a
JSON body. Against the real daemon; tokens made with the real `urchin token` command.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_inprocess import call_urchin
from tests.daemon_fixture import DaemonProcess, running
from urchin.contract import OPERATIONS
from urchin.contract.access import ACCESS

SECRET = "zebraquartz"            # only in workspace beta's event: it must never come back to an alpha token
BETA_ID = "beta-event-0001"
WRITTEN = "written-by-a-scoped-token"
# a value for each required parameter of any operation (beta's where it names something of beta)
SAMPLE = {"query": "deploy", "id": BETA_ID, "document_id": BETA_ID, "session": "s-beta", "workspace": "beta",
          "path": "notes.md", "slug": "beta-notes", "source": "claude", "action": "status", "content": WRITTEN}
_MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    home = tmp_path_factory.mktemp("scoped") / "home"
    for process in running(home, "--with-mcp"):
        with process.client() as admin:
            for ws, event_id, text in (("beta", BETA_ID, f"deploy {SECRET} plan"), ("alpha", "alpha-1", "deploy plan")):
                answer = admin.post("/ingest", json={"id": event_id, "content": text, "workspace": ws,
                                                     "session": f"s-{ws}", "source": "claude"})
                assert answer.status_code == 200, answer.text
        yield process


def _token(home: Any, scope: str) -> str:
    made = call_urchin("token", "create", "--scope", scope, "--workspace", "alpha", env={"URCHIN_HOME": str(home)})
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _arguments(operation: str, workspace: str | None) -> dict[str, Any]:
    """The operation's required parameters (wire names), plus `workspace` when given."""
    op = OPERATIONS.get(operation)
    out = {p.wire_name: SAMPLE.get(p.name, "x") for p in (op.params if op else ()) if p.required}
    out.pop("workspace", None)
    if workspace is not None:
        out["workspace"] = workspace
    return out


def _tool(http: Any, tool: str, arguments: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return http.post("/mcp", content=json.dumps(body).encode(), headers=_MCP_HEADERS)


def _tool_refused(answer: Any) -> bool:
    """An MCP tool error naming the scope rule, with no data."""
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    text = " ".join(part.get("text", "") for part in result.get("content", []))
    refused = bool(result.get("isError")) and text.startswith(("scope:", "workspace:"))
    assert not refused or "structuredContent" not in result, result
    return refused


def _route(http: Any, operation: str, method: str, pattern: str, where: str | None,
           arguments: dict[str, Any]) -> Any:
    path = pattern.replace("[^/]+", "claude").replace(".+", BETA_ID)
    if method in ("GET", "DELETE"):
        return http.request(method, path, params=arguments)
    body: Any = {"events": [{"content": WRITTEN, **arguments}]} if where == "batch" else \
        {"content": WRITTEN, **arguments} if where == "event" else \
        {"ids": [BETA_ID], "confirm": True, **arguments} if operation == "forget" else arguments
    return http.request(method, path, json=body)


CALLS = [(op, tool) for op, access in ACCESS.items() for tool in access.tools] + \
        [(op, route) for op, access in ACCESS.items() for route in access.routes]


@pytest.mark.parametrize("scope", ["admin", "read", "ingest"])
def test_a_workspace_token_never_reaches_another_workspace_through_any_operation(daemon: DaemonProcess,
                                                                                 scope: str) -> None:
    token = _token(daemon.home, scope)
    leaks, not_refused = [], []
    with daemon.client(token) as http:
        for operation, call in CALLS:
            access = ACCESS[operation]
            for workspace in ("beta", None):
                arguments = _arguments(operation, workspace)
                if isinstance(call, str):
                    answer = _tool(http, call, arguments)
                    refused = _tool_refused(answer)
                else:
                    answer = _route(http, operation, call.method, call.path, call.where, arguments)
                    refused = answer.status_code == 403
                    assert not refused or answer.json()["field"] in ("workspace", "authorization"), answer.text
                where = (operation, getattr(call, "path", call), workspace)
                # another workspace named, or an operation spanning every workspace: refused, on every front end
                if (workspace == "beta" or not access.scoped) and not refused:
                    not_refused.append(where)
                # beta's content never comes back; nor its id, but where an error quotes the id it was given
                if SECRET in answer.text or (not refused and BETA_ID in answer.text.replace(f"{BETA_ID!r}", "")):
                    leaks.append(where)
    assert not_refused == [], not_refused
    assert leaks == [], leaks
    events = [json.loads(line) for line in daemon.journal_bytes().splitlines()]
    assert {e.get("workspace") for e in events if WRITTEN in e["content"]} <= {"alpha"}
    assert [e["id"] for e in events if e.get("workspace") == "beta"] == [BETA_ID]   # nothing forgotten there


def test_the_table_covers_every_operation_and_front_end() -> None:
    """Every MCP tool and every route of an operation is in the table (so a new one is checked)."""
    from urchin.mcp_server.tools import TOOL_NAMES

    assert {call for _, call in CALLS if isinstance(call, str)} == set(TOOL_NAMES)
    assert all(re.compile(call.path) for _, call in CALLS if not isinstance(call, str))


def test_the_guard_passes_what_it_admits_as_it_came() -> None:
    """No re-parsing or rewriting in the middleware: for every route and `/mcp`, whatever the grant, the
    Guard's scope check either refuses or hands on the very query string and body it was given (the
    dispatcher holds the parsed values to the grant)."""
    from urchin.api_tokens import Grant
    from urchin.daemon import scopes

    query = b"q=deploy&workspace=beta"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "urchin_search", "arguments": {"query": "x"}}}).encode()
    paths = [("POST", "/mcp")] + [(route.method, route.path.replace("[^/]+", "s").replace(".+", "x"))
                                  for access in ACCESS.values() for route in access.routes]
    for grant in (Grant("read", ("alpha",)), Grant("ingest", ("alpha", "beta")), Grant("admin", ("alpha",))):
        for method, path in paths:
            outcome = scopes.check(grant, method, path, query, body)
            assert isinstance(outcome, scopes.Refusal) or (outcome[0] is query and outcome[1] is body), \
                (grant, method, path, outcome)
    source = (Path(scopes.__file__)).read_text()
    assert "orjson" not in source and "json.loads" not in source
