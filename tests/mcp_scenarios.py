"""What every MCP transport must do, written once and run over stdio and streamable HTTP.

Each scenario takes a connected `ClientSession` (the official SDK's client, which also checks
every structuredContent against the tool's declared outputSchema) and the test's `Memory`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from mcp.client.session import ClientSession

from urchin.facade import Memory
from urchin.search.query import one_line
from urchin.timestamps import format_timestamp

TOOLS = {"urchin_search", "urchin_semantic_search", "urchin_recent_activity", "urchin_session_context",
         "urchin_workspace_context", "urchin_get_event", "urchin_ingest", "urchin_remember", "urchin_ephemeral",
         "urchin_status", "get_file", "get_workspace_overview", "list_memories", "get_memory",
         "search_context", "query_source", "fetch_source_document", "urchin_forget", "search", "get_document",
         "urchin_recall"}
REQUIRED = {"search": ["query"], "get_document": ["documentId"], "query_source": ["source", "query"],
            "fetch_source_document": ["source", "id"],
            "get_file": ["path"], "get_memory": ["slug"], "search_context": ["query"], "urchin_search": ["query"],
            "urchin_semantic_search": ["query"], "urchin_session_context": ["session"],
            "urchin_workspace_context": ["workspace"], "urchin_get_event": ["id"], "urchin_ingest": ["content"],
            "urchin_remember": ["content"], "urchin_ephemeral": ["action"]}
DEFAULTS = {"urchin_search": {"hours": 168, "limit": 20}, "urchin_semantic_search": {"hours": 168, "limit": 10},
            "urchin_recent_activity": {"hours": 24, "limit": 20}, "urchin_session_context": {"hours": 168, "limit": 50},
            "urchin_workspace_context": {"hours": 168, "limit": 40},
            "urchin_ingest": {"source": "mcp", "kind": "conversation"},
            "get_file": {"fromLine": 1, "maxLines": 200}, "get_memory": {"tokenBudget": 8000},
            "query_source": {"limit": 10},
            "search_context": {"strategy": "hybrid", "limit": 10, "k": 20},
            "search": {"limit": 5, "conversationWeight": 0.5}, "fetch_source_document": {"mode": "indexed"}}
REQUIRED_FIELDS = {"id", "timestamp", "source", "kind", "content"}   # unset optional fields are omitted
EVENT_FIELDS = REQUIRED_FIELDS | {"workspace", "session", "title", "tags", "brain", "actor", "meta"}
LINE = re.compile(r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] [a-z0-9._-]+ — ")


async def call(session: ClientSession, tool: str, args: dict[str, Any] | None = None) -> tuple[str, Any]:
    """Call a tool that must succeed; returns (text, structuredContent)."""
    result = await session.call_tool(tool, args or {})
    text = result.content[0].text if result.content else None  # type: ignore[union-attr]
    assert not result.is_error, f"{tool}({args}) failed: {text}"
    assert len(result.content) == 1 and result.content[0].type == "text"
    return str(text), result.structured_content


async def call_error(session: ClientSession, tool: str, args: dict[str, Any]) -> str:
    """Call a tool that must fail cleanly; returns its one-line message."""
    result = await session.call_tool(tool, args)
    assert result.is_error, f"{tool}({args}) should have failed: {result}"
    assert len(result.content) == 1 and result.content[0].type == "text"
    text = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in text and "Traceback" not in text and text.strip() == text and text
    assert result.structured_content is None
    return str(text)


def ids(data: dict[str, Any]) -> list[str]:
    return [e["id"] for e in data["events"]]


def seed(memory: Memory) -> datetime:
    now = datetime.now(UTC)

    def at(hours: float) -> str:
        return format_timestamp(now - timedelta(hours=hours))

    results = memory.ingest([
        {"id": "e-old", "timestamp": at(3), "source": "claude", "kind": "conversation",
         "content": "We chose Postgres for the index", "workspace": "alpha", "session": "s-1", "tags": ["db"]},
        {"id": "e-mid", "timestamp": at(2), "source": "shell", "kind": "command",
         "content": "pytest -q tests/test_index.py", "workspace": "alpha", "session": "s-1"},
        {"id": "e-new", "timestamp": at(1), "source": "claude", "kind": "conversation",
         "content": "Postgres index\nis fast now", "workspace": "beta", "session": "s-2", "title": "perf"},
        {"id": "e-week", "timestamp": at(30), "source": "git", "kind": "commit",
         "content": "old commit about postgres", "workspace": "alpha"},
    ])
    assert [r.status for r in results] == ["appended"] * 4
    return now


async def check_tool_list(session: ClientSession) -> None:
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert schema.get("required", []) == REQUIRED.get(name, []), name
        for field, default in DEFAULTS.get(name, {}).items():
            prop = schema["properties"][field]
            assert prop["default"] == default, (name, field)
            shown = f'"{default}"' if isinstance(default, str) else str(default)
            assert f"default {shown}" in prop["description"], (name, field)
            assert f"{field} {shown}" in tool.description, (name, field)
        for field, prop in schema["properties"].items():
            assert prop.get("description"), (name, field)
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        assert tool.description and len(tool.description) > 60, name


async def check_read_tools(session: ClientSession, memory: Memory) -> None:
    seed(memory)
    text, data = await call(session, "urchin_search", {"query": "POSTGRES"})
    assert ids(data) == ["e-new", "e-old", "e-week"]
    assert data["query"] == "POSTGRES" and data["mode"] == "substring" and data["totalResults"] == 3
    assert all(REQUIRED_FIELDS <= set(e) <= EVENT_FIELDS for e in data["events"])
    newest = memory.get("e-new")
    assert text.splitlines()[0] == f"[{newest.timestamp[:19]}Z] claude — Postgres index is fast now"
    assert text.splitlines() == [one_line(memory.get(i)) for i in ids(data)]
    assert all(LINE.match(line) for line in text.splitlines())
    assert data["events"][0]["title"] == "perf" and data["events"][1]["tags"] == ["db"]
    assert "session" not in data["events"][2] and data["events"][0]["actor"]["device"]

    _, data = await call(session, "urchin_search", {"query": "postgres", "hours": 24})
    assert ids(data) == ["e-new", "e-old"]
    _, data = await call(session, "urchin_search", {"query": "postgres", "source": "claude", "workspace": "alpha"})
    assert ids(data) == ["e-old"]
    _, data = await call(session, "urchin_search", {"query": "postgres", "limit": 1})
    assert ids(data) == ["e-new"]
    text, data = await call(session, "urchin_search", {"query": "no such words anywhere"})
    assert text == "" and data["events"] == [] and data["totalResults"] == 0 and "olderMatch" not in data
    text, data = await call(session, "urchin_search", {"query": "OLD COMMIT", "hours": 24})   # 30 h old
    assert text == "" and data["events"] == [] and data["olderMatch"]["hours"] == 50   # seed 001: still ""

    text, data = await call(session, "urchin_recent_activity")
    assert ids(data) == ["e-new", "e-mid", "e-old"] and data["mode"] == "recent" and "query" not in data
    assert len(text.splitlines()) == 3
    _, data = await call(session, "urchin_recent_activity", {"source": "shell", "hours": 48})
    assert ids(data) == ["e-mid"]

    text, data = await call(session, "urchin_session_context", {"session": "s-1"})
    assert ids(data) == ["e-old", "e-mid"]
    assert text.splitlines()[1].endswith("shell — pytest -q tests/test_index.py")
    _, data = await call(session, "urchin_workspace_context", {"workspace": "alpha"})
    assert ids(data) == ["e-mid", "e-old", "e-week"]
    _, data = await call(session, "urchin_workspace_context", {"workspace": "alpha", "limit": 1, "hours": 2.5})
    assert ids(data) == ["e-mid"]

    text, data = await call(session, "urchin_semantic_search", {"query": "Postgres indexes"})
    found = ids(data)
    # both events naming Postgres and an index first ("pytest ... test_index.py" may sit between them:
    # it shares "index" and is e-old's session neighbour); the older commit naming Postgres only later
    assert found[0] == "e-old" and "e-new" in found[1:3] and "e-week" in found[2:], found
    assert all(REQUIRED_FIELDS | {"score"} <= set(e) <= EVENT_FIELDS | {"score"} for e in data["events"])
    scores = [e["score"] for e in data["events"]]
    assert scores == sorted(scores, reverse=True) and data["query"] == "Postgres indexes"
    lines = text.splitlines()
    said = [f"note: {n}" for n in data.get("notes", [])] + ([f"hint: {data['hint']}"] if data.get("weak") else [])
    assert lines[0] == f"mode: {data['mode']}" and lines[1:1 + len(said)] == said
    assert lines[1 + len(said):] == [one_line(memory.get(i), score=sc) for i, sc in zip(found, scores, strict=True)]
    assert "(" + f"{scores[0]:.3f}" + ") — " in lines[1 + len(said)]

    text, data = await call(session, "urchin_get_event", {"id": "e-old"})
    assert data["content"] == "We chose Postgres for the index" and data["tags"] == ["db"]
    assert data["actor"]["account"]
    assert orjson.loads(text) == data == memory.get("e-old").to_dict()   # the bare event, as HTTP returns it


async def check_write_tools(session: ClientSession, memory: Memory) -> None:
    stored = memory.status()["events"]
    text, data = await call(session, "urchin_ingest", {"content": "switched the cache to redis", "workspace": "w",
                                                       "tags": ["Cache"], "title": "cache", "session": "s-9"})
    assert data["status"] == "appended" and text == f"appended {data['id']}"
    first = data["id"]
    _, found = await call(session, "urchin_search", {"query": "redis"})
    assert ids(found) == [first]
    event = found["events"][0]
    assert (event["source"], event["kind"], event["tags"], event["workspace"]) == ("mcp", "conversation",
                                                                                   ["cache"], "w")
    _, data = await call(session, "urchin_ingest", {"content": "a note", "source": "claude", "kind": "note"})
    assert memory.get(data["id"]).source == "claude" and memory.get(data["id"]).kind == "note"
    _, data = await call(session, "urchin_ingest", {"content": "switched the cache to redis", "workspace": "w"})
    assert data["status"] == "appended"  # same text, new id: not a duplicate

    text, data = await call(session, "urchin_remember", {"content": "We use uv, not pip", "tags": ["tooling"],
                                                         "workspace": "w"})
    assert data["status"] == "appended"
    remembered = memory.get(data["id"])
    assert (remembered.kind, remembered.source, remembered.tags) == ("decision", "mcp", ("tooling",))

    text, data = await call(session, "urchin_ephemeral", {"action": "status"})
    assert data["on"] is False and text.startswith("ephemeral mode: off")
    text, data = await call(session, "urchin_ephemeral", {"action": "start", "minutes": 5})
    assert data["on"] is True and data["until"] and text.startswith("ephemeral mode: on")
    text, data = await call(session, "urchin_ingest", {"content": "secret plan xyzzy"})
    assert data["status"] == "suppressed: ephemeral mode" and data["reason"] == "ephemeral mode"
    assert text == "suppressed: ephemeral mode, nothing stored" and data["id"] not in text
    _, data = await call(session, "urchin_remember", {"content": "secret decision xyzzy"})
    assert data["status"] == "suppressed: ephemeral mode"
    text, data = await call(session, "urchin_ephemeral", {"action": "end"})
    assert data["on"] is False and data["suppressedTotal"] == 2
    _, data = await call(session, "urchin_search", {"query": "xyzzy"})
    assert data["events"] == []

    text, data = await call(session, "urchin_status")
    assert data["journal"] == str(memory.settings.journal_path) and data["events"] == stored + 4
    assert f"journal: {memory.settings.journal_path}" in text.splitlines()
    assert f"events: {stored + 4}" in text.splitlines()


ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("urchin_search", {"query": ""}, "query must not be empty"),
    ("urchin_search", {"query": "   "}, "query must not be empty"),
    ("urchin_search", {}, "query: is required"),
    ("urchin_search", {"query": 42}, "query: must be a string, got 42"),
    ("urchin_search", {"query": "x", "hours": 0}, "hours: must be greater than 0, got 0"),
    ("urchin_search", {"query": "x", "hours": -5}, "hours: must be greater than 0, got -5"),
    ("urchin_search", {"query": "x", "hours": "a week"}, 'hours: must be a number, got "a week"'),
    ("urchin_search", {"query": "x", "limit": 0}, "limit: must be from 1 to 1000, got 0"),
    ("urchin_search", {"query": "x", "limit": 5000}, "limit: must be from 1 to 1000, got 5000"),
    ("urchin_search", {"query": "x", "limit": 2.5}, "limit: must be a whole number, got 2.5"),
    ("urchin_search", {"query": "x", "color": "red"},
     "color: unknown parameter (allowed: query, hours, limit, source,"),
    ("urchin_search", {"query": "x", "source": 7}, "source: must be a string, got 7"),
    ("urchin_semantic_search", {"query": ""}, "query must not be empty"),
    ("urchin_semantic_search", {"query": " \t"}, "query must not be empty"),
    ("urchin_semantic_search", {"query": "x", "limit": 0}, "limit: must be from 1 to 1000, got 0"),
    ("urchin_recent_activity", {"hours": True}, "hours: must be a number, got true"),
    ("urchin_recent_activity", {"query": "x"}, "query: unknown parameter"),
    ("urchin_session_context", {}, "session: is required"),
    ("urchin_session_context", {"session": " "}, "session must not be empty"),
    ("urchin_workspace_context", {"workspace": ""}, "workspace must not be empty"),
    ("urchin_get_event", {"id": "no-such-id"}, "no event with id 'no-such-id'"),
    ("urchin_get_event", {"id": ""}, "id must not be empty"),
    ("urchin_ingest", {"content": "   "}, "content: must not be blank"),
    ("urchin_ingest", {"content": "x", "tags": "db"}, 'tags: must be an array of strings, got "db"'),
    ("urchin_ingest", {"content": "x", "source": "Bad Source!"}, "source: must be lowercase"),
    ("urchin_ingest", {"content": "x", "color": "red"}, "color: unknown parameter"),
    ("urchin_remember", {"content": "x", "kind": "note"},
     "kind: unknown parameter (allowed: content, tags, workspace)"),
    ("urchin_ephemeral", {"action": "pause"}, 'action: must be one of start, end, status, got "pause"'),
    ("urchin_ephemeral", {"action": "start", "minutes": 0}, "minutes: must be greater than 0, got 0"),
    ("urchin_ephemeral", {"action": "start", "minutes": 100000}, "minutes: must be at most 10080, got 100000"),
    ("urchin_status", {"verbose": True}, "verbose: unknown parameter (allowed: none)"),
    ("urchin_no_such_tool", {}, "unknown tool 'urchin_no_such_tool'"),
]


async def check_errors(session: ClientSession, memory: Memory) -> None:
    before = memory.journal.size()
    for tool, args, expected in ERRORS:
        message = await call_error(session, tool, args)
        assert message.startswith(expected), (tool, args, message)
    assert memory.journal.size() == before, "a failed call wrote to the journal"


async def check_large_output(session: ClientSession, memory: Memory, n: int = 1000, size: int = 10_000) -> None:
    now = datetime.now(UTC)
    filler = "lorem ipsum dolor sit amet " * (size // 27 + 1)
    events = [{"id": f"big-{i:04d}", "timestamp": format_timestamp(now - timedelta(seconds=n - i)),
               "source": "claude", "content": (f"needle {i:04d} " + filler)[:size]} for i in range(n)]
    assert all(r.status == "appended" for r in memory.ingest(events))
    text, data = await call(session, "urchin_search", {"query": "needle", "limit": n})
    assert data["totalResults"] == n and ids(data) == [f"big-{i:04d}" for i in reversed(range(n))]
    assert all(len(e["content"]) == size for e in data["events"])
    lines = text.splitlines()
    assert len(lines) == n and lines[0].startswith("[") and len(lines[0]) < 300


async def check_workspace_tools(session: ClientSession, memory: Memory, root: Any) -> None:
    """Ranged reads, overview and curated memories over MCP; traversal refused as a clean error."""
    from urchin.workspace.curated import Member

    (root / "docs").mkdir(parents=True)
    (root / "docs" / "deploy.md").write_text("# Deploy\nstep one\nstep two\n## Rollback\nrevert\n")
    memory.workspace_add(str(root), "proj")
    text, data = await call(session, "get_file", {"path": "docs/deploy.md", "fromLine": 2, "maxLines": 2})
    assert [line["text"] for line in data["lines"]] == ["step one", "step two"]
    assert (data["path"], data["totalLines"], data["toLine"]) == ("proj/docs/deploy.md", 5, 3)
    assert text.splitlines()[1:3] == ["2  step one", "3  step two"]
    assert "outside the workspace roots" in await call_error(session, "get_file", {"path": "../../etc/passwd"})
    assert "maxLines" in await call_error(session, "get_file", {"path": "docs/deploy.md", "maxLines": 5000})
    _, data = await call(session, "get_workspace_overview")
    assert data["roots"][0]["name"] == "proj" and data["roots"][0]["files"] == 1
    memory.memory_create("deploying", "deploying or rolling back", [Member("file", path="docs/deploy.md"),
                                                                    Member("file", path="docs/missing.md")])
    _, data = await call(session, "list_memories")
    assert data["memories"] == [{"slug": "deploying", "title": "Deploying", "useWhen": "deploying or rolling back",
                                 "members": 2}]
    text, data = await call(session, "get_memory", {"slug": "deploying"})
    assert data["members"][0]["content"].startswith("# Deploy") and "step two" in text
    assert data["coverage"][0]["status"] == "unreadable"
    assert "no memory named" in await call_error(session, "get_memory", {"slug": "nope"})
