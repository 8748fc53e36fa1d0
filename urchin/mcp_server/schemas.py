"""JSON Schemas and agent-facing descriptions of Urchin's MCP tools.

Input schemas are strict (`additionalProperties: false`, required fields marked, defaults stated
in the schema and the description); every tool also declares the shape of its structuredContent.
"""

from __future__ import annotations

from typing import Any

from urchin.search.query import MAX_LIMIT

__all__ = ["TOOL_DOCS", "INPUT_SCHEMAS", "OUTPUT_SCHEMAS", "SERVER_INSTRUCTIONS"]

SERVER_INSTRUCTIONS = (
    "Urchin is the user's local memory of coding-agent activity: conversations, decisions, commands, "
    "commits, across Claude, Copilot, Gemini, Codex, the shell and git. Search it before asking the user "
    "to repeat themselves, and store decisions worth remembering with urchin_remember."
)


def _string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _hours(default: float) -> dict[str, Any]:
    return {"type": "number", "exclusiveMinimum": 0, "default": default,
            "description": f"Only events from the last N hours (default {default:g})."}


def _limit(default: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": default,
            "description": f"Most events to return, 1-{MAX_LIMIT} (default {default})."}


_QUERY = _string("Text to look for; must not be blank.", minLength=1)
_SOURCE = _string("Only events from this source: claude, copilot, gemini, codex, shell, git, mcp, ... "
                  "(default: any).")
_WORKSPACE = _string("Only events from this workspace (project) (default: any).")
_TAGS = {"type": "array", "items": {"type": "string"}, "description": "Tags, lowercased (default: none)."}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "urchin_search": _object({"query": _QUERY, "hours": _hours(168), "limit": _limit(20), "source": _SOURCE,
                              "workspace": _WORKSPACE,
                              "scope": {"type": "string", "enum": ["local", "team"], "default": "local",
                                        "description": "local: this machine's journal; team: every device's "
                                                       "events in the shared database (default local)."}},
                             ("query",)),
    "urchin_semantic_search": _object({"query": _QUERY, "hours": _hours(168), "limit": _limit(10),
                                       "source": _SOURCE, "workspace": _WORKSPACE}, ("query",)),
    "urchin_recent_activity": _object({"hours": _hours(24), "limit": _limit(20), "source": _SOURCE}),
    "urchin_session_context": _object({"session": _string("The session id.", minLength=1), "hours": _hours(168),
                                       "limit": _limit(50)}, ("session",)),
    "urchin_workspace_context": _object({"workspace": _string("The workspace (project) name.", minLength=1),
                                         "hours": _hours(168), "limit": _limit(40)}, ("workspace",)),
    "urchin_get_event": _object({"id": _string("The event id, as returned by the other tools.", minLength=1)},
                                ("id",)),
    "urchin_ingest": _object({
        "content": _string("The text to store; must not be blank.", minLength=1),
        "source": _string("Who wrote it (default \"mcp\").", default="mcp"),
        "kind": _string("conversation, decision, note, tool_use, ... (default \"conversation\").",
                        default="conversation"),
        "workspace": _string("Project or workspace name (default: none)."),
        "session": _string("Session id (default: none)."),
        "title": _string("A short title (default: none)."),
        "tags": _TAGS,
    }, ("content",)),
    "urchin_remember": _object({
        "content": _string("The decision or fact to remember, in a sentence or two; must not be blank.",
                           minLength=1),
        "tags": _TAGS,
        "workspace": _string("Project or workspace it applies to (default: none)."),
    }, ("content",)),
    "urchin_ephemeral": _object({
        "action": {"type": "string", "enum": ["start", "end", "status"],
                   "description": "start: stop storing anything; end: store again; status: show the mode."},
        "minutes": {"type": "number", "exclusiveMinimum": 0,
                    "description": "With start: switch itself off after N minutes (default: until end)."},
    }, ("action",)),
    "urchin_status": _object({}),
    "urchin_forget": _object({
        "ids": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 10000,
                "description": "Event ids to forget (default: none)."},
        "session": _string("Forget every event of this session (default: any).", minLength=1),
        "query": _string("Forget events whose content contains this text, case-insensitive (default: any).",
                         minLength=1),
        "since": _string("Only events at or after this time, RFC 3339 (default: no bound).", minLength=1),
        "until": _string("Only events at or before this time, RFC 3339 (default: no bound).", minLength=1),
        "confirm": {"type": "boolean", "default": False,
                    "description": "true forgets; anything else only previews what would be forgotten."},
    }),
}

EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"}, "timestamp": {"type": "string"}, "source": {"type": "string"},
        "kind": {"type": "string"}, "content": {"type": "string"},
        "workspace": {"type": ["string", "null"]}, "session": {"type": ["string", "null"]},
        "title": {"type": ["string", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "score": {"type": "number"},
    },
    "required": ["id", "timestamp", "source", "kind", "content", "workspace", "session", "title", "tags"],
}

_EVENTS_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "events": {"type": "array", "items": EVENT_SCHEMA},
        "totalResults": {"type": "integer", "minimum": 0},
        "mode": {"type": "string"},
        "query": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["events", "totalResults", "mode"],
}
_QUERY_RESULT = {**_EVENTS_RESULT, "required": ["events", "totalResults", "mode", "query"]}
_WRITE_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": ["string", "null"]},
                   "status": {"type": "string", "enum": ["appended", "duplicate", "suppressed"]},
                   "reason": {"type": "string"}},
    "required": ["id", "status"],
}

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "urchin_search": _QUERY_RESULT,
    "urchin_semantic_search": _QUERY_RESULT,
    "urchin_recent_activity": _EVENTS_RESULT,
    "urchin_session_context": _EVENTS_RESULT,
    "urchin_workspace_context": _EVENTS_RESULT,
    "urchin_get_event": {"type": "object", "properties": {"event": EVENT_SCHEMA}, "required": ["event"]},
    "urchin_ingest": _WRITE_RESULT,
    "urchin_remember": _WRITE_RESULT,
    "urchin_ephemeral": {
        "type": "object",
        "properties": {"on": {"type": "boolean"}, "startedAt": {"type": ["string", "null"]},
                       "until": {"type": ["string", "null"]}, "suppressedTotal": {"type": "integer"}},
        "required": ["on", "startedAt", "until", "suppressedTotal"],
    },
    "urchin_status": {
        "type": "object",
        "properties": {"journal": {"type": "string"}, "events": {"type": "integer"}},
        "required": ["journal", "events"],
    },
    "urchin_forget": {
        "type": "object",
        "properties": {"matched": {"type": "integer"}, "forgotten": {"type": "integer"},
                       "confirmed": {"type": "boolean"}, "preview": {"type": "array"},
                       "notFound": {"type": "array", "items": {"type": "string"}}, "compacted": {"type": "boolean"},
                       "removedBytes": {"type": "integer"}, "notes": {"type": "array", "items": {"type": "string"}}},
        "required": ["matched", "forgotten", "confirmed", "preview"],
    },
}

# (title, description) per tool: when an agent should pick it, in plain sentences.
TOOL_DOCS: dict[str, tuple[str, str]] = {
    "urchin_search": ("Search memory (literal)", (
        "Find past events whose content contains the exact text, case-insensitive, newest first. Use it for "
        "names, error messages, file paths, commands and other literal strings; use urchin_semantic_search "
        "when you only know what it was about. Defaults: hours 168, limit 20. Returns one line per event, "
        "[timestamp] source — content, or an empty text when nothing matches.")),
    "urchin_semantic_search": ("Search memory by meaning", (
        "Find past events about a topic even when the words differ, best match first with a score. Use it "
        "for questions like 'what did we decide about caching'; use urchin_search for exact strings. "
        "Defaults: hours 168, limit 10. The first line says which mode ran (token-cosine, or embedder when "
        "an embedding server is configured).")),
    "urchin_recent_activity": ("Recent activity", (
        "The newest events across all agents, newest first: use it to catch up on what happened lately, "
        "optionally from one source. Defaults: hours 24, limit 20.")),
    "urchin_session_context": ("Session context", (
        "Everything recorded in one session, oldest first, to resume or summarise it. Needs the session "
        "id. Defaults: hours 168, limit 50 (the session's latest events).")),
    "urchin_workspace_context": ("Workspace context", (
        "The latest events in one workspace (project), newest first: use it when starting work on a "
        "project to learn what was done and decided there. Defaults: hours 168, limit 40.")),
    "urchin_get_event": ("Get one event", (
        "The whole event for an id returned by another tool (full content, tags, metadata); search results "
        "cut long content in their text lines.")),
    "urchin_ingest": ("Store an event", (
        "Append one event to the journal; it is searchable at once. Use it to record conversation, notes "
        "or tool output worth finding later; use urchin_remember for decisions. Defaults: source \"mcp\", "
        "kind \"conversation\". Returns the id and status: appended, duplicate, or suppressed (ephemeral "
        "mode is on).")),
    "urchin_remember": ("Remember a decision", (
        "Store a decision or durable fact (kind \"decision\", source \"mcp\") so future sessions find it: "
        "'we use uv, not pip', 'API v2 drops XML'. Keep it to a sentence or two. Returns the id and status.")),
    "urchin_ephemeral": ("Ephemeral mode", (
        "Pause or resume recording: start drops every write (from every agent) until end, or for the given "
        "minutes; status shows the mode. Use it when the user asks you not to remember something.")),
    "urchin_status": ("Urchin status", (
        "Where the journal is, how many events it holds, the newest event's time, and the state of the "
        "daemon, embedder and index. Use it to check Urchin is working.")),
    "urchin_forget": ("Forget events", (
        "Remove events from memory for good (journal and every index), by ids, session, query text and/or "
        "time range (all given must hold). Only when the user asks to forget something. Without confirm: "
        "true it changes nothing and previews the matches; call again with confirm: true to forget them.")),
}
