"""Every operation's parameters, declared once (defaults, bounds, help): `OPERATIONS[name]`.

The MCP input schemas (`urchin/mcp_server/schemas.py`), the HTTP query parsers
(`urchin/daemon/app.py`, `workspace_routes.py`) and the click options (`urchin/cli/`) are
generated from this table. To add a parameter, add one `Param` here.
"""

from __future__ import annotations

from typing import Any

from urchin.checks import camel
from urchin.contract.spec import Operation, Param
from urchin.event import MAX_HOURS

__all__ = ["OPERATIONS", "MAX_LIMIT", "MAX_LINES", "MAX_FROM_LINE", "MAX_TOKEN_BUDGET", "MAX_SOURCE_LIMIT",
           "CONTEXT_MAX_TOKEN_BUDGET", "CONTEXT_MAX_LIMIT", "MAX_QUERY_CHARS", "MAX_WEIGHT", "MAX_K", "STRATEGIES",
           "MODES", "SEARCH_TYPES", "SEARCH_SOURCE_TYPES", "SEARCH_CONTENT_TYPES", "MAX_SEARCHES", "HYDE_WORDS",
           "DEFAULT_LIVE_BYTE_BUDGET", "MAX_LIVE_BYTE_BUDGET", "MAX_RECALL_BUDGET"]

# The bounds the layers below enforce too (tests/test_contract.py keeps them equal); stated here so the
# CLI need not import the workspace and index modules (~100 ms) to print its help.
MAX_LIMIT = 1000                # events per answer of search, semantic, recent (search.query)
MAX_LINES = 2000                # lines per get_file answer (workspace.reader)
MAX_FROM_LINE = 1 << 31         # answers are JSON: 64-bit integers at most (workspace.reader)
MAX_TOKEN_BUDGET = 200_000      # get_memory
# search_context and textrawl's search (index.params, index.docsearch)
CONTEXT_MAX_TOKEN_BUDGET = 1_000_000   # tokenBudget
CONTEXT_MAX_LIMIT = 100         # results per answer, and passages per workspace file
MAX_SOURCE_LIMIT = CONTEXT_MAX_LIMIT   # query_source runs search_context
MAX_QUERY_CHARS = 4000
MAX_WEIGHT = 1000.0             # fusion weights: finite, and their sums stay finite
MAX_K = 1000                    # the RRF constant
STRATEGIES = ("hybrid", "keyword", "semantic")
MODES = ("indexed", "live")
SEARCH_TYPES = ("lex", "vec", "hyde")
MAX_SEARCHES = 8
HYDE_WORDS = (30, 80)           # a hyde sub-query is a hypothetical answer passage, not a keyword list
DEFAULT_LIVE_BYTE_BUDGET = 8 * 1024 * 1024
MAX_LIVE_BYTE_BUDGET = 1024 * 1024 * 1024


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


# ---- search_context and textrawl's search: the index checks the values (index/params.py `ContextParams`,
# whose rules span fields: hours or since, both legs' weights); these declare them, and
# tests/test_contract.py keeps every default and bound equal to the index's own.
def _hybrid(name: str, kind: Any = "text", help_text: str = "", default: Any = None, **more: Any) -> Param:
    """A parameter of the hybrid query: its wire name is camelCase (`full_text_weight` -> `fullTextWeight`)."""
    return Param(name, kind, help_text, default, wire=camel(name), **more)


def _weight(name: str, help_text: str) -> Param:
    return _hybrid(name, "number", help_text, 1.0, minimum=0, maximum=MAX_WEIGHT)


def _sub_query(text: str) -> dict[str, str]:
    """`--search TYPE:TEXT` as the wire's `{type, query}` (the index says what is wrong with it)."""
    kind, _, query = text.partition(":")
    return {"type": kind.strip().lower(), "query": query}


_SUB_QUERY: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["type", "query"],
    "properties": {
        "type": {"type": "string", "enum": list(SEARCH_TYPES),
                 "description": "lex: the keyword leg; vec: the semantic leg; hyde: a passage, embedded."},
        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                  "description": "The sub-query's text."}}}
_LIMIT = _hybrid("limit", "int", "Most results.", 10, minimum=1, maximum=CONTEXT_MAX_LIMIT)
_TAGS = _hybrid("tags", "texts", "Only results carrying ALL these tags.", flag="--tag")

_CONTEXT: tuple[Param, ...] = (
    Param("query", help="The question, in websearch syntax: \"quoted phrases\", -excluded words, or.",
          required=True, positional=True, max_chars=MAX_QUERY_CHARS),
    _hybrid("strategy", "text", "Which legs run: hybrid for both, keyword for full text only, semantic for "
                        "vectors only.", "hybrid", choices=STRATEGIES),
    _hybrid("searches", "objects", (
        "Typed sub-queries that add recall: lex (keyword leg), vec (semantic leg), hyde (a hypothetical "
        f"answer passage of {HYDE_WORDS[0]}-{HYDE_WORDS[1]} words, embedded); the question keeps double weight."),
        flag="--search", metavar="TYPE:TEXT", from_flag=_sub_query, items=_SUB_QUERY, min_items=1,
        max_items=MAX_SEARCHES),
    _weight("full_text_weight", "Weight of the full-text (keyword) leg in the fusion."),
    _weight("semantic_weight", "Weight of the semantic leg in the fusion."),
    _hybrid("k", "int", "RRF constant: score = sum of weight / (k + rank).", 20, minimum=1, maximum=MAX_K),
    _hybrid("sources", "texts", "Only these sources.", flag="--source", unset="any"),
    _hybrid("source_ids", "texts", "Alias of sources.", wire_only=True, unset="any"),
    _hybrid("kinds", "texts", "Only these kinds.", flag="--kind", unset="any"),
    _hybrid("workspace", help_text="Only this workspace.", unset="any"),
    _hybrid("session", help_text="Only this session.", unset="any"),
    _TAGS,
    _hybrid("devices", "texts", "Team: only events fed by these machines.", flag="--device", unset="every device"),
    _hybrid("accounts", "texts", "Team: only events of these accounts.", flag="--account", unset="every account"),
    _hybrid("since", help_text="Only events at or after this RFC 3339 time.", unset="no window"),
    _hybrid("until", help_text="Only events before this RFC 3339 time.", unset="no window"),
    _hybrid("hours", "number", "Only the last N hours; not with since.", above=0, maximum=MAX_HOURS,
            unset="no window"),
    _hybrid("include_memories", "bool", "Search memories: decisions stored with urchin_remember.", True,
            negatable=True),
    _hybrid("include_conversations", "bool", "Search every event that is not a memory.", True, negatable=True),
    _weight("memory_weight", "Fusion weight of memories against conversations."),
    _hybrid("min_score", "number", "Drop results under this calibrated score.", 0.0, minimum=0, maximum=1),
    _LIMIT,
    _hybrid("token_budget", "int", "Pack results best first into this many tokens (4 characters each), cutting "
                                   "the last at a line.", minimum=1, maximum=CONTEXT_MAX_TOKEN_BUDGET,
            unset="no budget"),
    _hybrid("explain", "bool", "Add each leg's rank, raw score, weight and contribution.", False),
    _hybrid("per_file_cap", "int", "Most passages of one workspace file, applied after fusion.", 3, minimum=1,
            maximum=CONTEXT_MAX_LIMIT),
    _hybrid("mode", "text", "indexed searches what the index holds; live also reads workspace files over the "
                            "size cap (cataloged, bodies not stored) at query time, within the live byte budget; "
                            "coverage.live says what was read and what was skipped and why.", "indexed",
            choices=MODES),
    _hybrid("live_byte_budget", "int", "Bytes read live per query in live mode.", DEFAULT_LIVE_BYTE_BUDGET,
            minimum=0, maximum=MAX_LIVE_BYTE_BUDGET),
)

# textrawl's `search` (index/docsearch.py `SearchParams`, its defaults and bounds the seed's own page's:
# tests/test_contract.py keeps the two equal)
_SEED_WEIGHT = 2.0
SEARCH_SOURCE_TYPES = ("note", "file")
SEARCH_CONTENT_TYPES = ("conversation", "decision", "tool_use", "command", "commit", "note", "capture", "agent",
                        "error", "markdown", "code")


def _seed_weight(name: str, help_text: str, default: float = 1.0) -> Param:
    return _hybrid(name, "number", help_text, default, minimum=0, maximum=_SEED_WEIGHT)


_DOCUMENT_SEARCH: tuple[Param, ...] = (
    Param("query", help="What to find, in websearch syntax: words (every word ranks first), \"quoted phrases\" "
                        "and -excluded words (filters in every leg), a OR b.",
          required=True, positional=True, max_chars=MAX_QUERY_CHARS),
    _hybrid("limit", "int", "Most results.", 5, minimum=1, maximum=50),
    _seed_weight("full_text_weight", "Weight of the full-text (keyword) leg: score = fullTextWeight / (60 + its "
                                     "rank) + semanticWeight / (60 + the semantic rank)."),
    _seed_weight("semantic_weight", "Weight of the semantic leg in the fusion."),
    _TAGS,
    _hybrid("source_type", help_text="Only documents of this source type: note (journal events) or file "
                                     "(workspace files).", choices=SEARCH_SOURCE_TYPES, unset="any"),
    _hybrid("content_type", help_text="Only documents of this content type: an event kind Urchin records, or "
                                      "markdown or code (workspace files).", choices=SEARCH_CONTENT_TYPES, unset="any"),
    _hybrid("min_score", "number", "Drop results under this score (relative: the fused score over the best "
                                   "possible).", 0.0, minimum=0, maximum=1),
    _hybrid("include_memories", "bool", "Also search memories: curated memories and urchin_remember decisions.",
            False, flag="--memories"),
    _hybrid("include_conversations", "bool", "Also search conversations: one result per session whose events "
                                             "answer, with its best turns.", False, flag="--conversations"),
    _seed_weight("memory_weight", "Weight of memory results (with includeMemories)."),
    _seed_weight("conversation_weight", "Weight of conversation results (with includeConversations).", 0.5),
)

# `recall` (urchin/recall/): what an agent is told without asking; the budgets' defaults are [recall]'s
MAX_RECALL_BUDGET = 20_000          # urchin.recall.policy.MAX_BUDGET
MAX_PROMPT_CHARS = 100_000          # a hook passes the whole prompt; the ranking reads its start
_RECALL: tuple[Param, ...] = (
    Param("workspace", help="The workspace to recall from; not with a cwd in another workspace.",
          unset="the cwd's"),
    Param("cwd", help="A folder: its workspace, mapped as capture maps it (the git root's name, else the folder's).",
          unset="none"),
    Param("session", help="The agent's session: left out of prompt recall, with what it was given before; "
                          "what is returned is recorded as given to it.", unset="none, nothing recorded"),
    Param("prompt", help="The prompt: recall its few relevant past records (silence when none is); without it, "
                         "the session-start digest.", max_chars=MAX_PROMPT_CHARS, unset="session start"),
    Param("budget", "int", "Most tokens (4 characters each) of the block.", minimum=1, maximum=MAX_RECALL_BUDGET,
          unset="[recall] session_budget 1200, prompt_budget 600"),
)

OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("search", (_query(), _hours(168), _limit(20), *_filters(),
                         Param("scope", help="local: this machine's journal; team: every device's events in the "
                                             "shared database (URCHIN_DATABASE_URL).", default="local",
                               choices=("local", "team"))), aliases={"q": "query"}),
    Operation("semantic", (_query(), _hours(168), _limit(10), *_filters(),
                           _hybrid("min_score", "number", "Drop results under this calibrated score (the list is "
                                                          "sorted by it).", 0.0, minimum=0, maximum=1),
                           _hybrid("explain", "bool", "Add to each result how its score was made: the evidence, "
                                                      "its parts, and the map to the score.", False)),
              aliases={"q": "query"}),
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
              positional=True, max_chars=MAX_QUERY_CHARS),
        _limit(10, MAX_SOURCE_LIMIT),
        _hybrid("min_score", "number", "Drop results under this calibrated score (the list is sorted by it).", 0.0,
                minimum=0, maximum=1))),
    Operation("fetch_document", (
        _required("source", "The result's source: a journal source (then `id` is an event id), a workspace "
                            "root's name (then `id` is a path inside it) or `files` (then `id` is `<root>/<path>`)."),
        _required("id", "The event id or file path to return whole."),
        Param("mode", help="indexed: a workspace file the index holds comes from the index, at the version "
                           "indexed (a file it does not hold is read from disk); live: read the file from disk "
                           "as it is now. An event is the version indexed either way.", default="indexed",
              choices=("indexed", "live")),
        Param("content_hash", help="A result's location.contentHash: return the file only at that version, "
                                   "else an error says it changed. "
                                   "For a collected event, its location.upstream.contentHash: the event is "
                                   "returned as indexed, with `upstream.status` saying whether its transcript "
                                   "lines still hold it.",
              wire="contentHash", unset="the current version"))),
    Operation("get_document", (
        _required("document_id", "A search result's documentId: an event id, or a workspace file <root>/<path>.",
                  wire="documentId"),
        Param("include_chunks", "bool", "Include the document's chunks.", False, wire="includeChunks"))),
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
        Param("timestamp", help="RFC 3339 time.", unset="now"),
        Param("id", help="Event id.", unset="a new UUIDv7"))),
    Operation("remember", (
        Param("content", help="The decision or fact to remember, in a sentence or two; must not be blank.",
              required=True, positional=True, blank_ok=True),
        Param("tags", "texts", "Tags, lowercased.", flag="--tag"),
        Param("workspace", help="Project or workspace it applies to."))),
    Operation("ephemeral", (
        Param("action", help="start: stop storing anything; end: store again; status: show the mode.",
              required=True, positional=True, choices=("start", "end", "status")),
        Param("minutes", "number", "With start: switch itself off after N minutes.", above=0,
              maximum=7 * 24 * 60, unset="until end"))),
    Operation("context", _CONTEXT, checked_below=True),
    Operation("recall", _RECALL),
    Operation("document_search", _DOCUMENT_SEARCH, checked_below=True),
)}
