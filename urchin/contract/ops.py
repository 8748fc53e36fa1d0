"""Every operation's parameters, declared once (defaults, bounds, help): `OPERATIONS[name]`.

The MCP input schemas (`urchin/mcp_server/schemas.py`), the HTTP query parsers
(`urchin/daemon/app.py`, `workspace_routes.py`) and the click options (`urchin/cli/`) are
generated from this table. To add a parameter, add one `Param` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict, cast

from urchin.contract.spec import Operation, Param
from urchin.params.context import BOUNDS as CONTEXT_BOUNDS
from urchin.params.context import DEFAULTS as CONTEXT_DEFAULTS
from urchin.params.context import ContextParams
from urchin.params.limits import (
    DOCUMENT_CONTENT_TYPES,
    DOCUMENT_SEARCH_BOUNDS,
    DOCUMENT_SEARCH_DEFAULTS,
    DOCUMENT_SOURCE_TYPES,
    EPHEMERAL_ACTIONS,
    FETCH_MODES,
    HYDE_WORDS,
    MAX_CONTEXT_LIMIT,
    MAX_EPHEMERAL_MINUTES,
    MAX_FROM_LINE,
    MAX_LIMIT,
    MAX_LINES,
    MAX_MEMORY_TOKEN_BUDGET,
    MAX_QUERY_CHARS,
    MAX_RECALL_BUDGET,
    MAX_RECALL_PROMPT_CHARS,
    MAX_SEARCHES,
    MODES,
    SEARCH_HOURS,
    SEARCH_LIMIT,
    SEARCH_SCOPES,
    SEARCH_TYPES,
    STRATEGIES,
)
from urchin.params.reading import GetParams, RecentParams, SemanticParams, SessionParams, TailParams, WorkspaceParams
from urchin.params.search import SearchParams
from urchin.timestamps import MAX_HOURS
from urchin.value_checks import camel

if TYPE_CHECKING:
    from urchin.ephemeral import EphemeralState
    from urchin.event import Event
    from urchin.facade.api import RecallAnswer
    from urchin.facade.forgetting import ForgetResult
    from urchin.facade.status import HomeStatus
    from urchin.facade.workspace import Overview
    from urchin.hybrid.search_context import ContextResult
    from urchin.ingest import IngestResult
    from urchin.jsontypes import JSONObject
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.ephemeral import EphemeralParams
    from urchin.params.forget import ForgetParams
    from urchin.params.ingest import IngestParams
    from urchin.params.recall import RecallParams
    from urchin.params.remember import RememberParams
    from urchin.params.sources import DocumentParams, FetchParams, QuerySourceParams
    from urchin.params.workspace import CuratedMemoryParams, FileParams
    from urchin.search.query import SearchResult
    from urchin.workspace.curated import CuratedMemory, MemoryContents
    from urchin.workspace.reader import FileRange

__all__ = ["OPERATIONS", "OPERATIONS_BY_NAME", "Operations"]

# Bounds, defaults and choices are `urchin/params/limits.py`'s (and `ContextParams`'s): the layers below
# hold to the same objects, so there is no copy here to keep equal.
MAX_SOURCE_LIMIT = MAX_CONTEXT_LIMIT   # query_source runs search_context


def _lazy(where: str) -> str:
    """Typed parameters a CLI start-up need not build (each class costs its dataclass): `urchin.params.<where>`."""
    return f"urchin.params.{where}"


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


# ---- search_context and textrawl's search: wire names are camelCase; defaults and bounds are those of
# the typed parameters (`urchin/params/context.py` `ContextParams`, `urchin/params/limits.py`).
def _hybrid(name: str, kind: Any = "text", help_text: str = "", default: Any = None, **more: Any) -> Param:
    """A parameter of the hybrid query: its wire name is camelCase (`full_text_weight` -> `fullTextWeight`)."""
    return Param(name, kind, help_text, default, wire=camel(name), **more)


def _ctx(name: str, kind: Any = "text", help_text: str = "", **more: Any) -> Param:
    """A `search_context` parameter with `ContextParams`'s default and bounds (hours: over its minimum)."""
    default = CONTEXT_DEFAULTS[name]
    low, high = CONTEXT_BOUNDS.get(name, (None, None))
    bounds = {"above": low, "maximum": high} if name == "hours" else {"minimum": low, "maximum": high}
    return _hybrid(name, kind, help_text, None if default == () else default, **bounds, **more)


def _doc(name: str, kind: Any = "text", help_text: str = "", **more: Any) -> Param:
    """A parameter of textrawl's `search` with its default and bounds (`urchin/params/limits.py`)."""
    low, high = DOCUMENT_SEARCH_BOUNDS.get(name, (None, None))
    return _hybrid(name, kind, help_text, DOCUMENT_SEARCH_DEFAULTS.get(name), minimum=low, maximum=high, **more)


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
_TAGS = _hybrid("tags", "texts", "Only results carrying ALL these tags.", flag="--tag")

_CONTEXT: tuple[Param, ...] = (
    Param("query", help="The question, in websearch syntax: \"quoted phrases\", -excluded words, or.",
          required=True, positional=True, max_chars=MAX_QUERY_CHARS),
    _ctx("strategy", "text", "Which legs run: hybrid for both, keyword for full text only, semantic for "
                     "vectors only.", choices=STRATEGIES),
    _ctx("searches", "objects", (
        "Typed sub-queries that add recall: lex (keyword leg), vec (semantic leg), hyde (a hypothetical "
        f"answer passage of {HYDE_WORDS[0]}-{HYDE_WORDS[1]} words, embedded); the question keeps double weight."),
        flag="--search", metavar="TYPE:TEXT", from_flag=_sub_query, items=_SUB_QUERY, min_items=1,
        max_items=MAX_SEARCHES),
    _ctx("full_text_weight", "number", "Weight of the full-text (keyword) leg in the fusion."),
    _ctx("semantic_weight", "number", "Weight of the semantic leg in the fusion."),
    _ctx("k", "int", "RRF constant: score = sum of weight / (k + rank)."),
    _ctx("sources", "texts", "Only these sources.", flag="--source", unset="any"),
    _ctx("source_ids", "texts", "Alias of sources.", wire_only=True, unset="any"),
    _ctx("kinds", "texts", "Only these kinds.", flag="--kind", unset="any"),
    _ctx("workspace", help_text="Only this workspace.", unset="any"),
    _ctx("session", help_text="Only this session.", unset="any"),
    _TAGS,
    _ctx("devices", "texts", "Team: only events fed by these machines.", flag="--device", unset="every device"),
    _ctx("accounts", "texts", "Team: only events of these accounts.", flag="--account", unset="every account"),
    _ctx("since", help_text="Only events at or after this RFC 3339 time.", unset="no window"),
    _ctx("until", help_text="Only events before this RFC 3339 time.", unset="no window"),
    _ctx("hours", "number", "Only the last N hours; not with since.", unset="no window"),
    _ctx("include_memories", "bool", "Search memories: decisions stored with urchin_remember.", negatable=True),
    _ctx("include_conversations", "bool", "Search every event that is not a memory.", negatable=True),
    _ctx("memory_weight", "number", "Fusion weight of memories against conversations."),
    _ctx("min_score", "number", "Drop results under this calibrated score."),
    _ctx("limit", "int", "Most results."),
    _ctx("token_budget", "int", "Pack results best first into this many tokens (4 characters each), cutting "
                                "the last at a line.", unset="no budget"),
    _ctx("explain", "bool", "Add each leg's rank, raw score, weight and contribution."),
    _ctx("per_file_cap", "int", "Most passages of one workspace file, applied after fusion."),
    _ctx("mode", "text", "indexed searches what the index holds; live also reads workspace files over the "
                         "size cap (cataloged, bodies not stored) at query time, within the live byte budget; "
                         "coverage.live says what was read and what was skipped and why.", choices=MODES),
    _ctx("live_byte_budget", "int", "Bytes read live per query in live mode."),
)

# textrawl's `search` (`urchin/params/documents.py`; its defaults and bounds are the seed's own page's)
_DOCUMENT_SEARCH: tuple[Param, ...] = (
    Param("query", help="What to find, in websearch syntax: words (every word ranks first), \"quoted phrases\" "
                        "and -excluded words (filters in every leg), a OR b.",
          required=True, positional=True, max_chars=MAX_QUERY_CHARS),
    _doc("limit", "int", "Most results."),
    _doc("full_text_weight", "number", "Weight of the full-text (keyword) leg: score = fullTextWeight / (60 + its "
                                       "rank) + semanticWeight / (60 + the semantic rank)."),
    _doc("semantic_weight", "number", "Weight of the semantic leg in the fusion."),
    _TAGS,
    _doc("source_type", help_text="Only documents of this source type: note (journal events) or file "
                                  "(workspace files).", choices=DOCUMENT_SOURCE_TYPES, unset="any"),
    _doc("content_type", help_text="Only documents of this content type: an event kind Urchin records, or "
                                   "markdown or code (workspace files).", choices=DOCUMENT_CONTENT_TYPES, unset="any"),
    _doc("min_score", "number", "Drop results under this score (relative: the fused score over the best "
                                "possible)."),
    _doc("include_memories", "bool", "Also search memories: curated memories and urchin_remember decisions.",
         flag="--memories"),
    _doc("include_conversations", "bool", "Also search conversations: one result per session whose events "
                                          "answer, with its best turns.", flag="--conversations"),
    _doc("memory_weight", "number", "Weight of memory results (with includeMemories)."),
    _doc("conversation_weight", "number", "Weight of conversation results (with includeConversations)."),
)

# `recall` (urchin/recall/): what an agent is told without asking; the budgets' defaults are [recall]'s
_RECALL: tuple[Param, ...] = (
    Param("workspace", help="The workspace to recall from; not with a cwd in another workspace.",
          unset="the cwd's"),
    Param("cwd", help="A folder: its workspace, mapped as capture maps it (the git root's name, else the folder's).",
          unset="none"),
    Param("session", help="The agent's session: left out of prompt recall, with what it was given before; "
                          "what is returned is recorded as given to it.", unset="none, nothing recorded"),
    Param("prompt", help="The prompt: recall its few relevant past records (silence when none is); without it, "
                         "the session-start digest.", max_chars=MAX_RECALL_PROMPT_CHARS, unset="session start"),
    Param("budget", "int", "Most tokens (4 characters each) of the block.", minimum=1, maximum=MAX_RECALL_BUDGET,
          unset="[recall] session_budget 1200, prompt_budget 600"),
)


Keywords = dict[str, Any]   # `Operation.parse`'s: what an operation without typed parameters takes


class Operations(TypedDict):
    """Each operation's parameters and answer: `OPERATIONS["search"].run(target, params)` is typed (mypy
    checks each run below against the facade's method, and each front end against what it answers)."""

    search: Operation[SearchParams, SearchResult]
    semantic: Operation[SemanticParams, SearchResult]
    recent: Operation[RecentParams, SearchResult]
    session_context: Operation[SessionParams, SearchResult]
    workspace_context: Operation[WorkspaceParams, SearchResult]
    get: Operation[GetParams, Event]
    get_file: Operation[FileParams, FileRange]
    overview: Operation[Keywords, Overview]
    memories: Operation[Keywords, list[CuratedMemory]]
    get_memory: Operation[CuratedMemoryParams, MemoryContents]
    query_source: Operation[QuerySourceParams, ContextResult]
    fetch_document: Operation[FetchParams, JSONObject]
    get_document: Operation[DocumentParams, JSONObject]
    status: Operation[Keywords, HomeStatus]
    tail: Operation[TailParams, list[Event]]
    ingest: Operation[IngestParams, IngestResult]
    remember: Operation[RememberParams, IngestResult]
    ephemeral: Operation[EphemeralParams, EphemeralState]
    context: Operation[ContextParams, ContextResult]
    recall: Operation[RecallParams, RecallAnswer]
    document_search: Operation[DocumentSearchParams, JSONObject]
    forget: Operation[ForgetParams, ForgetResult]


# Each operation with its one call of the facade (a `Memory` or the daemon client).
OPERATIONS: Operations = {
    "search": Operation(
        "search", (_query(), _hours(SEARCH_HOURS), _limit(SEARCH_LIMIT), *_filters(),
                   Param("scope", help="local: this machine's journal; team: every device's events in the shared "
                                       "database (URCHIN_DATABASE_URL).", default="local", choices=SEARCH_SCOPES)),
        aliases={"q": "query"}, typed=SearchParams,
        respell_free_text=False,   # `source: must be lowercase ...`, as it always was
        runner=lambda t, p: t.search(p)),
    "semantic": Operation(
        "semantic", (_query(), _hours(168), _limit(10), *_filters(),
                     _hybrid("min_score", "number", "Drop results under this calibrated score (the list is "
                                                    "sorted by it).", 0.0, minimum=0, maximum=1),
                     _hybrid("explain", "bool", "Add to each result how its score was made: the evidence, "
                                                "its parts, and the map to the score.", False)),
        aliases={"q": "query"}, typed=SemanticParams, respell_free_text=False, runner=lambda t, p: t.semantic(p)),
    "recent": Operation("recent", (_hours(24), _limit(20), *_filters()), typed=RecentParams, respell_free_text=False,
                        runner=lambda t, p: t.recent(p)),
    "session_context": Operation("session_context", (_required("session", "The session id."), _hours(168),
                                                     _limit(50)),
                                 typed=SessionParams, runner=lambda t, p: t.session_context(p)),
    "workspace_context": Operation("workspace_context", (_required("workspace", "The workspace (project) name."),
                                                         _hours(168), _limit(40)),
                                   typed=WorkspaceParams, runner=lambda t, p: t.workspace_context(p)),
    "get": Operation("get", (_required("id", "The event id, as returned by the other operations."),), typed=GetParams,
                     runner=lambda t, p: t.get(p)),
    "get_file": Operation("get_file", (
        _required("path", "`<root name>/<path>`, or just `<path>` when only one workspace root holds it."),
        Param("from_line", "int", "First line to show (1-based).", 1, minimum=1, maximum=MAX_FROM_LINE,
              wire="fromLine"),
        Param("max_lines", "int", "Lines to show.", 200, minimum=1, maximum=MAX_LINES, wire="maxLines")),
        typed=_lazy("workspace:FileParams"), runner=lambda t, p: t.get_file(p)),
    "overview": Operation("overview", runner=lambda t, p: t.overview()),
    "memories": Operation("memories", runner=lambda t, p: t.memory_list()),
    "get_memory": Operation("get_memory", (
        _required("slug", "The memory's slug, from list_memories."),
        Param("token_budget", "int", "Most tokens to return, at 4 characters each.", 8000, minimum=1,
              maximum=MAX_MEMORY_TOKEN_BUDGET, wire="tokenBudget")),
        typed=_lazy("workspace:CuratedMemoryParams"), runner=lambda t, p: t.memory_get(p)),
    "query_source": Operation("query_source", (
        _required("source", "One source: a journal source such as `claude`, `git` or `shell`, or a workspace "
                            "root's name (its files only)."),
        Param("query", help="What to look for (websearch syntax: \"phrases\", -excluded, or).", required=True,
              positional=True, max_chars=MAX_QUERY_CHARS),
        _limit(10, MAX_SOURCE_LIMIT),
        _hybrid("min_score", "number", "Drop results under this calibrated score (the list is sorted by it).", 0.0,
                minimum=0, maximum=1)),
        typed=_lazy("sources:QuerySourceParams"), runner=lambda t, p: t.query_source(p)),
    "fetch_document": Operation("fetch_document", (
        _required("source", "The result's source: a journal source (then `id` is an event id), a workspace "
                            "root's name (then `id` is a path inside it) or `files` (then `id` is `<root>/<path>`)."),
        _required("id", "The event id or file path to return whole."),
        Param("mode", help="indexed: a workspace file the index holds comes from the index, at the version "
                           "indexed (a file it does not hold is read from disk); live: read the file from disk "
                           "as it is now. An event is the version indexed either way.", default="indexed",
              choices=FETCH_MODES),
        Param("content_hash", help="A result's location.contentHash: return the file only at that version, "
                                   "else an error says it changed. "
                                   "For a collected event, its location.upstream.contentHash: the event is "
                                   "returned as indexed, with `upstream.status` saying whether its transcript "
                                   "lines still hold it.",
              wire="contentHash", unset="the current version")),
        typed=_lazy("sources:FetchParams"), runner=lambda t, p: t.fetch_source_document(p)),
    "get_document": Operation("get_document", (
        _required("document_id", "A search result's documentId: an event id, or a workspace file <root>/<path>.",
                  wire="documentId"),
        Param("include_chunks", "bool", "Include the document's chunks.", False, wire="includeChunks")),
        typed=_lazy("sources:DocumentParams"), runner=lambda t, p: t.get_document(p)),
    "status": Operation("status", runner=lambda t, p: t.status()),
    "tail": Operation("tail", (Param("count", "int", "How many of the last events.", 10, minimum=1, maximum=MAX_LIMIT,
                                     flag="-n"),),
                      typed=TailParams, runner=lambda t, p: t.tail(p)),
    "ingest": Operation("ingest", (
        Param("content", help="The text to store; must not be blank.", required=True, positional=True,
              blank_ok=True),
        Param("source", help="Who wrote it: claude, shell, git, manual, mcp, ..."),
        Param("kind", help="conversation, decision, note, tool_use, ..."),
        Param("workspace", help="Project or workspace name."),
        Param("session", help="Session id."),
        Param("title", help="A short title."),
        Param("tags", "texts", "Tags, lowercased.", flag="--tag"),
        Param("timestamp", help="RFC 3339 time.", unset="now"),
        Param("id", help="Event id.", unset="a new UUIDv7")),
        typed=_lazy("ingest:IngestParams"),
        runner=lambda t, p: t.ingest_one(p.item())),   # with the front end's writer (IngestParams.with_writer)
    "remember": Operation("remember", (
        Param("content", help="The decision or fact to remember, in a sentence or two; must not be blank.",
              required=True, positional=True, blank_ok=True),
        Param("tags", "texts", "Tags, lowercased.", flag="--tag"),
        Param("workspace", help="Project or workspace it applies to.")),
        typed=_lazy("remember:RememberParams"),
        runner=lambda t, p: t.ingest_one(p.item())),   # an agent's decision (the MCP tool's): source mcp
    "ephemeral": Operation("ephemeral", (
        Param("action", help="start: stop storing anything; end: store again; status: show the mode.",
              required=True, positional=True, choices=EPHEMERAL_ACTIONS),
        Param("minutes", "number", "With start: switch itself off after N minutes.", above=0,
              maximum=MAX_EPHEMERAL_MINUTES, unset="until end")),
        typed=_lazy("ephemeral:EphemeralParams"), runner=lambda t, p: t.ephemeral(p)),
    "context": Operation("context", _CONTEXT, typed=ContextParams, runner=lambda t, p: t.context(p)),
    "recall": Operation("recall", _RECALL, typed=_lazy("recall:RecallParams"), runner=lambda t, p: t.recall(p)),
    "document_search": Operation("document_search", _DOCUMENT_SEARCH, typed=_lazy("documents:DocumentSearchParams"),
                                 runner=lambda t, p: t.document_search(p)),
    # forget: MCP's input schema is written out (urchin/mcp_server/schemas.py), the CLI's flags too (--yes)
    "forget": Operation("forget", (
        Param("ids", "texts", "Event ids to forget.", positional=True, unset="none"),
        Param("session", help="Forget every event of this session.", unset="any"),
        Param("query", help="Forget events whose content contains this text, case-insensitive.", unset="any"),
        Param("since", help="Only events at or after this time, RFC 3339.", unset="no bound"),
        Param("until", help="Only events at or before this time, RFC 3339.", unset="no bound"),
        Param("confirm", "bool", "true forgets; anything else only previews what would be forgotten.", False),
        Param("purge", "bool", "true also rewrites Urchin's own PostgreSQL tables (VACUUM FULL), so no data "
                               "file keeps the forgotten rows' bytes.", False)),
        typed=_lazy("forget:ForgetParams"), runner=lambda t, p: t.forget(p)),
}
# The same table for a front end that picks an operation by a name it holds (a route's, a tool's, a command's):
# each operation's parameters and answer are then its own business (`Any`).
OPERATIONS_BY_NAME: Mapping[str, Operation[Any, Any]] = cast("Mapping[str, Operation[Any, Any]]", OPERATIONS)
