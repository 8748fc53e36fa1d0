"""Every operation's parameters, declared once (defaults, bounds, help): `OPERATIONS[name]`.

The MCP input schemas (`urchin/mcp_server/schemas.py`), the HTTP query parsers
(`urchin/daemon/app.py`, `workspace_routes.py`) and the click options (`urchin/cli/`) are
generated from this table. To add a parameter, add one `Param` here.
"""

from __future__ import annotations

from urchin.contract.spec import Operation, Param
from urchin.event import MAX_HOURS

__all__ = ["OPERATIONS", "MAX_LIMIT", "MAX_LINES", "MAX_FROM_LINE", "MAX_TOKEN_BUDGET", "MAX_SOURCE_LIMIT",
           "CONTEXT_MAX_TOKEN_BUDGET"]

# The bounds the layers below enforce too (tests/test_contract.py keeps them equal); stated here so the
# CLI need not import the workspace and index modules (~100 ms) to print its help.
MAX_LIMIT = 1000                # events per answer of search, semantic, recent (search.query)
MAX_LINES = 2000                # lines per get_file answer (workspace.reader)
MAX_FROM_LINE = 1 << 31         # answers are JSON: 64-bit integers at most (workspace.reader)
CONTEXT_MAX_TOKEN_BUDGET = 1_000_000   # search_context's tokenBudget (index.params)
MAX_TOKEN_BUDGET = 200_000      # get_memory
MAX_SOURCE_LIMIT = 100          # query_source, like search_context's limit


def _query(help_text: str = "Text to look for; must not be blank.") -> Param:
    return Param("query", help=help_text, required=True, positional=True)


def _hours(default: float) -> Param:
    return Param("hours", "number", "Only events from the last N hours.", default, above=0, maximum=MAX_HOURS)


def _limit(default: int, maximum: int = MAX_LIMIT) -> Param:
    return Param("limit", "int", "Most results to return.", default, minimum=1, maximum=maximum)


def _filters() -> tuple[Param, ...]:
    return (Param("source", help="Only events from this source: claude, copilot, gemini, codex, shell, git, mcp, ..."),
            Param("workspace", help="Only events from this workspace (project)."),
            Param("session", help="Only events of this session."),
            Param("kind", help="Only events of this kind: conversation, decision, tool_use, ..."))


def _required(name: str, help_text: str, wire: str = "") -> Param:
    return Param(name, help=help_text, required=True, positional=True, wire=wire)


OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("search", (_query(), _hours(168), _limit(20), *_filters(),
                         Param("scope", help="local: this machine's journal; team: every device's events in the "
                                             "shared database (URCHIN_DATABASE_URL).", default="local",
                               choices=("local", "team"))), aliases={"q": "query"}),
    Operation("semantic", (_query(), _hours(168), _limit(10), *_filters()), aliases={"q": "query"}),
    Operation("recent", (_hours(24), _limit(20), *_filters())),
    Operation("session_context", (_required("session", "The session id."), _hours(168), _limit(50))),
    Operation("workspace_context", (_required("workspace", "The workspace (project) name."), _hours(168),
                                    _limit(40))),
    Operation("get", (_required("id", "The event id, as returned by the other operations."),)),
    Operation("get_file", (
        _required("path", "`<root name>/<path>`, or just `<path>` when only one workspace root holds it."),
        Param("from_line", "int", "First line to show (1-based).", 1, minimum=1, maximum=MAX_FROM_LINE,
              wire="fromLine"),
        Param("max_lines", "int", "Lines to show.", 200, minimum=1, maximum=MAX_LINES, wire="maxLines"))),
    Operation("overview"),
    Operation("memories"),
    Operation("get_memory", (
        _required("slug", "The memory's slug, from list_memories."),
        Param("token_budget", "int", "Most tokens to return, at 4 characters each.", 8000, minimum=1,
              maximum=MAX_TOKEN_BUDGET, wire="tokenBudget"))),
    Operation("query_source", (
        _required("source", "One source: a journal source such as `claude`, `git` or `shell`, or a workspace "
                            "root's name (its files only)."),
        Param("query", help="What to look for (websearch syntax: \"phrases\", -excluded, or).", required=True,
              positional=True, max_chars=4000),
        _limit(10, MAX_SOURCE_LIMIT))),
    Operation("fetch_document", (
        _required("source", "The result's source: a journal source (then `id` is an event id), a workspace "
                            "root's name (then `id` is a path inside it) or `files` (then `id` is `<root>/<path>`)."),
        _required("id", "The event id or file path to return whole."),
        Param("content_hash", help="A result's location.contentHash: return the file only while it is still "
                                   "that version, else an error says it changed (default: the current version). "
                                   "For a collected event, its location.upstream.contentHash: the event is "
                                   "returned as indexed, with `upstream.status` saying whether its transcript "
                                   "lines still hold it.",
              wire="contentHash"))),
    Operation("status"),
    Operation("tail", (Param("count", "int", "How many of the last events.", 10, minimum=1, maximum=MAX_LIMIT,
                             flag="-n"),)),
    Operation("ingest", (
        Param("content", help="The text to store; must not be blank.", required=True, positional=True,
              blank_ok=True),
        Param("source", help="Who wrote it: claude, shell, git, manual, mcp, ..."),
        Param("kind", help="conversation, decision, note, tool_use, ..."),
        Param("workspace", help="Project or workspace name."),
        Param("session", help="Session id."),
        Param("title", help="A short title."),
        Param("tags", "texts", "Tags, lowercased.", flag="--tag"),
        Param("timestamp", help="RFC 3339 time (default: now)."),
        Param("id", help="Event id (default: a new UUIDv7)."))),
    Operation("remember", (
        Param("content", help="The decision or fact to remember, in a sentence or two; must not be blank.",
              required=True, positional=True, blank_ok=True),
        Param("tags", "texts", "Tags, lowercased.", flag="--tag"),
        Param("workspace", help="Project or workspace it applies to."))),
    Operation("ephemeral", (
        Param("action", help="start: stop storing anything; end: store again; status: show the mode.",
              required=True, positional=True, choices=("start", "end", "status")),
        Param("minutes", "number", "With start: switch itself off after N minutes (default: until end).",
              above=0, maximum=7 * 24 * 60))),
)}
