"""`urchin mcp` over stdio, driven as a subprocess by the official SDK's client (`mcp.client.stdio`)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_harness import child_env, stdio_session
from tests.mcp_scenarios import (
    call,
    call_error,
    check_errors,
    check_large_output,
    check_read_tools,
    check_tool_list,
    check_workspace_tools,
    check_write_tools,
)
from urchin.facade import Memory
from urchin.mcp_server import TOOL_NAMES, check_arguments, run_tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_every_tool_over_stdio(memory: Memory, tmp_path: Path) -> None:
    """One session (a server process is ~2.5 s of a core), as test_mcp_daemon's: it names itself and
    lists strict tools, reads, turns bad arguments into clean tool errors (no traceback on stderr),
    writes, then returns large results whole (1,000 events of 10 KB)."""
    errlog = tmp_path / "stderr.txt"
    async with stdio_session(errlog=errlog) as session:
        info = session.initialize_result
        assert info is not None and info.server_info.name == "urchin"
        assert info.instructions and "urchin_remember" in info.instructions
        assert info.capabilities.tools is not None
        await check_tool_list(session)
        await check_read_tools(session, memory)
        await check_errors(session, memory)
        await check_write_tools(session, memory)
        await check_large_output(session, memory)
    assert "Traceback" not in errlog.read_text()


async def test_workspace_tools_over_stdio(memory: Memory, tmp_path: Path) -> None:
    async with stdio_session() as session:
        await check_workspace_tools(session, memory, tmp_path / "proj")


async def test_unreadable_journal_is_an_error_naming_the_path(tmp_path: Path) -> None:
    journal = tmp_path / "journal-is-a-folder"
    journal.mkdir()
    async with stdio_session({"URCHIN_EVENT_JOURNAL_PATH": str(journal)}) as session:
        for tool, args in (("urchin_search", {"query": "x"}), ("urchin_recent_activity", {}),
                           ("urchin_session_context", {"session": "s"}),
                           ("urchin_workspace_context", {"workspace": "w"}), ("urchin_get_event", {"id": "e"}),
                           ("urchin_ingest", {"content": "x"}), ("urchin_remember", {"content": "x"}),
                           ("urchin_status", {})):
            message = await call_error(session, tool, args)
            assert str(journal) in message, (tool, message)


async def test_semantic_search_says_its_mode_and_scores(memory: Memory) -> None:
    memory.ingest([{"id": "a", "content": "we picked postgres for the hybrid index"},
                   {"id": "b", "content": "lunch was pizza"},
                   {"id": "c", "content": "the postgres server crashed at night"}])
    async with stdio_session() as session:
        text, data = await call(session, "urchin_semantic_search", {"query": "indexing in Postgres"})
        empty, nothing = await call(session, "urchin_semantic_search", {"query": "zebra"})
    lines = text.splitlines()
    notes = data.get("notes", [])
    assert lines[0] == f"mode: {data['mode']}" and data["mode"] in ("token-cosine", "embedder")
    assert [e["id"] for e in data["events"]] == ["a", "c"]
    scores = [e["score"] for e in data["events"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert lines[1 + len(notes)].startswith("[") and f"({scores[0]:.3f}) — we picked postgres" in lines[1 + len(notes)]
    assert len(lines) == 1 + len(notes) + 2
    assert nothing["events"] == [] and empty.splitlines()[0] == f"mode: {nothing['mode']}"


def test_stdout_carries_nothing_but_protocol(memory: Memory) -> None:
    """Raw JSON-RPC over the pipes: every stdout line is a JSON-RPC message; non-object arguments are
    a tool error rather than a protocol error."""
    memory.ingest_one({"content": "hello over raw stdio"})
    requests: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "urchin_search",
                                                                        "arguments": {"query": "raw stdio"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "urchin_search", "arguments": "raw"}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "urchin_status"}},
        {"jsonrpc": "2.0", "id": 6, "method": "ping"},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "mcp", "--log-level", "debug"],
                            env={**os.environ, **child_env()}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    assert proc.stdin is not None
    for request in requests:
        proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    replies: dict[int, dict[str, Any]] = {}
    try:
        while len(replies) < 6:
            message = json.loads(lines.get(timeout=30))
            assert message["jsonrpc"] == "2.0" and ("result" in message or "error" in message), message
            replies[message["id"]] = message
    finally:
        proc.stdin.close()
        proc.wait(15)
    stderr = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.returncode == 0, stderr
    assert lines.empty()
    assert "error" not in replies[4]
    assert replies[4]["result"]["isError"] is True
    assert replies[4]["result"]["content"][0]["text"] == 'arguments: must be an object, got "raw"'
    assert replies[3]["result"]["structuredContent"]["totalResults"] == 1
    assert replies[5]["result"]["structuredContent"]["events"] == 1
    assert len(replies[2]["result"]["tools"]) == len(TOOL_NAMES)
    assert "urchin" in stderr or stderr == ""  # debug logs may appear, but only on stderr


def test_every_tool_has_a_runner_schema_and_docs(memory: Memory) -> None:
    for name in TOOL_NAMES:   # declared operations refuse it statically; the others in Memory, at the call
        assert (check_arguments(name, {"__nope__": 1}) is not None
                or run_tool(memory, name, {"__nope__": 1}).is_error), name
    result = run_tool(memory, "urchin_status", {})
    assert not result.is_error and result.structured_content is not None


def test_a_bug_in_a_tool_is_one_line_not_a_traceback(memory: Memory) -> None:
    class Broken:
        def status(self) -> dict[str, Any]:
            raise KeyError("boom\nsecond line")

    result = run_tool(Broken(), "urchin_status", {})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("internal error in urchin_status: KeyError") and "\n" not in text


async def test_search_context_over_stdio(memory: Memory, pg_url: str) -> None:
    memory.ingest([{"content": "Releases are cut from main every Tuesday after the freeze", "workspace": "rel"},
                   {"content": "The office plant needs water", "workspace": "rel"}])
    async with stdio_session({"URCHIN_DATABASE_URL": pg_url}) as session:
        text, data = await call(session, "search_context", {"query": "when do we cut releases", "workspace": "rel",
                                                            "limit": 1, "explain": True})
        assert data["results"][0]["content"].startswith("Releases are cut")
        assert data["results"][0]["citation"].startswith("urchin://events/") and "explain" in data["results"][0]
        assert text.startswith("[1] urchin://events/") and "coverage: 1 result, hybrid" in text
        message = await call_error(session, "search_context", {"query": "x", "searches": [{"type": "sql",
                                                                                          "query": "y"}]})
        assert "searches" in message
        message = await call_error(session, "search_context", {"query": "x", "limit": 0})
        assert message.startswith("limit")


def _walk(schema: Any) -> Any:
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


def test_schemas_are_portable_no_type_lists() -> None:
    """What Inspector --strict and Gemini-style function declarations refuse: `"type": [..., "null"]`."""
    from urchin.mcp_server.tools import tool_list

    for tool in tool_list():
        for part in (tool.input_schema, tool.output_schema):
            for node in _walk(part):
                assert not isinstance(node.get("type"), list), (tool.name, node)
    ephemeral = next(t for t in tool_list() if t.name == "urchin_ephemeral").output_schema or {}
    assert ephemeral["properties"]["until"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}


@pytest.mark.parametrize("args, message", [
    ({"query": "x", "searches": [{"type": "lex", "query": "a", "weight": 2}]},
     "searches[0].weight: unknown field (known: type, query)"),
    ({"query": "x", "searches": []}, "searches: must hold 1 to 8 sub-queries, got 0"),
    ({"query": "x", "k": 5000}, "k: must be from 1 to 1000, got 5000"),
    ({"query": "   "}, "query must not be empty"),
])
def test_search_context_errors_name_nested_fields_never_validator_text(memory: Memory, args: dict[str, Any],
                                                                       message: str) -> None:
    result = run_tool(memory, "search_context", args)
    assert result.is_error and result.content[0].text == message  # type: ignore[union-attr]


@pytest.mark.parametrize("args, message", [
    ({"content": "  "}, "content: must not be blank"),
    ({"content": 7}, "content: must be a string, got 7"),
    ({"tags": ["x"]}, "content: is required"),
    ({"content": "x", "tags": "deps"}, 'tags: must be an array of strings, got "deps"'),
    ({"content": "x", "tags": ["deps", 1]}, "tags[1]: must be a string, got 1"),
    ({"content": "x", "workspace": 3}, "workspace: must be a string, got 3"),
    ({"content": "x", "kind": "note"}, "kind: unknown parameter (allowed: content, tags, workspace)"),
])
def test_remember_is_parsed_once_and_names_the_field(memory: Memory, args: dict[str, Any], message: str) -> None:
    """`urchin_remember` builds `RememberParams` at the edge; a bad value is an isError naming the field, and
    nothing is stored."""
    result = run_tool(memory, "urchin_remember", args)
    assert result.is_error and result.content[0].text.startswith(message)  # type: ignore[union-attr]
    assert memory.recent(hours=1).events == []


@pytest.mark.parametrize("args, message", [({"content": " "}, "content: must not be blank"),
                                           ({"content": "x", "tags": [1]}, "tags[0]: must be a string, got 1")])
def test_remember_params_built_directly_are_checked(args: dict[str, Any], message: str) -> None:
    from urchin.errors import QueryError
    from urchin.params.remember import RememberParams

    with pytest.raises(QueryError) as caught:
        RememberParams(**args)
    assert caught.value.message == message


def test_remember_writes_an_agents_decision(memory: Memory) -> None:
    result = run_tool(memory, "urchin_remember", {"content": "We pin numpy below 2", "tags": ["Deps"],
                                                  "workspace": "shop"})
    assert not result.is_error
    [event] = memory.recent(hours=1).events
    assert (event.source, event.kind, event.content, event.workspace, event.tags) == \
        ("mcp", "decision", "We pin numpy below 2", "shop", ("deps",))


@pytest.mark.parametrize("args, message", [({"content": "\t"}, "content: must not be blank"),
                                           ({"content": "x", "title": 5}, "title: must be a string, got 5"),
                                           ({"content": "x", "tags": "ops"}, 'tags: must be an array of strings')])
def test_ingest_params_built_directly_are_checked(memory: Memory, args: dict[str, Any], message: str) -> None:
    """`urchin_ingest` and `urchin ingest` build `IngestParams` at the edge; built directly they check too,
    and the MCP tool's isError says the same (nothing stored)."""
    from urchin.errors import QueryError
    from urchin.params.ingest import IngestParams

    with pytest.raises(QueryError) as caught:
        IngestParams(**args)
    assert caught.value.message.startswith(message)
    result = run_tool(memory, "urchin_ingest", args)
    assert result.is_error and result.content[0].text.startswith(message)  # type: ignore[union-attr]
    assert memory.recent(hours=1).events == []


def test_ingest_takes_the_writers_source_and_kind_only_where_none_is_given(memory: Memory) -> None:
    assert not run_tool(memory, "urchin_ingest", {"content": "first", "id": "e-1"}).is_error
    assert not run_tool(memory, "urchin_ingest", {"content": "second", "id": "e-2", "kind": "note",
                                                  "tags": ["Ops"]}).is_error
    got = {e.id: (e.source, e.kind, e.tags) for e in memory.recent(hours=1).events}
    assert got == {"e-1": ("mcp", "conversation", ()), "e-2": ("mcp", "note", ("ops",))}
