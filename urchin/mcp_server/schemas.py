"""JSON Schemas and agent-facing descriptions of Urchin's MCP tools.

Input schemas are strict (`additionalProperties: false`, required fields marked, defaults stated
in the schema and the description); every tool also declares the shape of its structuredContent.
"""

from __future__ import annotations

from typing import Any

from urchin.contract import OPERATIONS_BY_NAME, describe, input_schema
from urchin.contract.access import tool_operations

__all__ = ["TOOL_DOCS", "TOOL_OPS", "INPUT_SCHEMAS", "OUTPUT_SCHEMAS", "SERVER_INSTRUCTIONS", "EVENT_SCHEMA",
           "INGEST_DEFAULTS"]

SERVER_INSTRUCTIONS = (
    "Urchin is the user's local memory of coding-agent activity: conversations, decisions, commands, "
    "commits, across Claude, Copilot, Gemini, Codex, the shell and git. Search it before asking the user "
    "to repeat themselves, and store decisions worth remembering with urchin_remember."
)


# Tool name -> the operation it runs (declared with the operation's scope in the contract's `ACCESS`);
# its input schema is generated from the operation's parameters (urchin_forget's is written below).
TOOL_OPS: dict[str, str] = {tool: op for tool, op in tool_operations().items() if op in OPERATIONS_BY_NAME}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """A value that may be null, in the form every MCP client accepts (no `"type": [..., "null"]`)."""
    return {"anyOf": [schema, {"type": "null"}]}


_FORGET_INPUT: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "ids": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 10000,
                "description": "Event ids to forget (default: none)."},
        "session": {"type": "string", "minLength": 1,
                    "description": "Forget every event of this session (default: any)."},
        "query": {"type": "string", "minLength": 1,
                  "description": "Forget events whose content contains this text, case-insensitive (default: any)."},
        "since": {"type": "string", "minLength": 1,
                  "description": "Only events at or after this time, RFC 3339 (default: no bound)."},
        "until": {"type": "string", "minLength": 1,
                  "description": "Only events at or before this time, RFC 3339 (default: no bound)."},
        "confirm": {"type": "boolean", "default": False,
                    "description": "true forgets; anything else only previews what would be forgotten."},
        "purge": {"type": "boolean", "default": False,
                  "description": "true also rewrites Urchin's own PostgreSQL tables (VACUUM FULL), so no data file "
                                 "keeps the forgotten rows' bytes; slower, blocks the index meanwhile."},
    },
}

# What an MCP write is when the agent does not say: the writer's identity (the CLI writes manual/note).
INGEST_DEFAULTS = {"source": "mcp", "kind": "conversation"}


def _with_defaults(schema: dict[str, Any], defaults: dict[str, str]) -> dict[str, Any]:
    props = {k: dict(v) for k, v in schema["properties"].items()}
    for key, default in defaults.items():
        props[key]["default"] = default
        props[key]["description"] = props[key]["description"].replace("(default: none)", f'(default "{default}")')
    return {**schema, "properties": props}


INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    **{tool: input_schema(OPERATIONS_BY_NAME[op]) for tool, op in TOOL_OPS.items()},
    "urchin_forget": _FORGET_INPUT,
}
INPUT_SCHEMAS["urchin_ingest"] = _with_defaults(INPUT_SCHEMAS["urchin_ingest"], INGEST_DEFAULTS)

EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"}, "timestamp": {"type": "string"}, "source": {"type": "string"},
        "kind": {"type": "string"}, "content": {"type": "string"},
        "workspace": {"type": "string"}, "session": {"type": "string"}, "title": {"type": "string"},
        "brain": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
        "actor": {"type": "object"}, "meta": {"type": "object"}, "score": {"type": "number"},
        "explain": {"type": "object", "description": "How score was made (semantic search with explain): the "
                                                     "evidence, parts that add up to raw, and the map to score."},
    },
    "required": ["id", "timestamp", "source", "kind", "content"],
}

_EVENTS_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "events": {"type": "array", "items": EVENT_SCHEMA},
        "totalResults": {"type": "integer", "minimum": 0},
        "mode": {"type": "string"},
        "query": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"}},
        "olderMatch": {"type": "object", "properties": {"timestamp": {"type": "string"},
                                                          "hours": {"type": "integer"}}},
    },
    "required": ["events", "totalResults", "mode"],
}
_QUERY_RESULT = {**_EVENTS_RESULT, "required": ["events", "totalResults", "mode", "query"]}
_WRITE_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"id": _nullable({"type": "string"}),
                   "status": {"type": "string"},
                   "reason": {"type": "string"}},
    "required": ["id", "status"],
}

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "urchin_search": _QUERY_RESULT,
    "urchin_semantic_search": _QUERY_RESULT,
    "urchin_recent_activity": _EVENTS_RESULT,
    "urchin_session_context": _EVENTS_RESULT,
    "urchin_workspace_context": _EVENTS_RESULT,
    "urchin_get_event": EVENT_SCHEMA,
    "urchin_ingest": _WRITE_RESULT,
    "urchin_remember": _WRITE_RESULT,
    "urchin_ephemeral": {
        "type": "object",
        "properties": {"on": {"type": "boolean"}, "startedAt": _nullable({"type": "string"}),
                       "until": _nullable({"type": "string"}), "suppressedTotal": {"type": "integer"}},
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
        "when you only know what it was about. Returns one line per event, "
        "[timestamp] source — content, or an empty text when nothing matches.")),
    "urchin_semantic_search": ("Search memory by meaning", (
        "Find past events about a topic even when the words differ, best match first with a score. Use it "
        "for questions like 'what did we decide about caching'; use urchin_search for exact strings. "
        "The first line says which mode ran (token-cosine, or embedder when "
        "an embedding server is configured).")),
    "urchin_recent_activity": ("Recent activity", (
        "The newest events across all agents, newest first: use it to catch up on what happened lately, "
        "optionally from one source.")),
    "urchin_session_context": ("Session context", (
        "Everything recorded in one session, oldest first, to resume or summarise it. Needs the session "
        "id; it returns the session's latest events.")),
    "urchin_workspace_context": ("Workspace context", (
        "The latest events in one workspace (project), newest first: use it when starting work on a "
        "project to learn what was done and decided there.")),
    "urchin_get_event": ("Get one event", (
        "The whole event for an id returned by another tool (full content, tags, metadata); search results "
        "cut long content in their text lines.")),
    "urchin_ingest": ("Store an event", (
        "Append one event to the journal; it is searchable at once. Use it to record conversation, notes "
        "or tool output worth finding later; use urchin_remember for decisions. Returns the id and "
        "status: appended, duplicate, or suppressed with the reason (ephemeral mode, or forgotten).")),
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


def _defaults_sentence(schema: dict[str, Any]) -> str:
    """`Defaults: hours 168, limit 20.` from the schema, itself generated from the contract."""
    parts = []
    for name, prop in schema.get("properties", {}).items():
        if "default" in prop and not isinstance(prop["default"], bool):
            parts.append(f"{name} {describe(prop['default'])}")
    return f" Defaults: {', '.join(parts)}." if parts else ""


def with_defaults(docs: dict[str, tuple[str, str]], schemas: dict[str, dict[str, Any]]) -> None:
    """Append each tool's defaults to its description, so prose and schema cannot disagree."""
    for name, (title, text) in docs.items():
        if name in TOOL_OPS:
            docs[name] = (title, text + _defaults_sentence(schemas[name]))
