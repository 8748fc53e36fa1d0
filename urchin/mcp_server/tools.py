"""Urchin's MCP tools: argument checking against strict schemas, one `Memory` call each, formatting.

`run_tool` is transport-free and synchronous; every failure becomes a result with `isError: true`
and a one-line message, never a protocol error and never a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from jsonschema.exceptions import best_match

from urchin.errors import UrchinError
from urchin.event import Event
from urchin.mcp_server import context_tool, search_tool, workspace_tools
from urchin.mcp_server.schemas import INPUT_SCHEMAS, OUTPUT_SCHEMAS, TOOL_DOCS
from urchin.search.query import SearchResult, one_line

__all__ = ["TOOL_NAMES", "run_tool", "check_arguments", "tool_list", "tool_error", "event_dict", "short"]

log = logging.getLogger("urchin.mcp")

# The result of one tool run: the text part, and the structuredContent.
Reply = tuple[str, dict[str, Any]]


# ---- formatting: the same result objects the CLI prints --------------------------------------------
def event_dict(event: Event, score: float | None = None, whole: bool = False) -> dict[str, Any]:
    """The canonical event shape: every listed key present, `null` or `[]` when unset."""
    out: dict[str, Any] = {"id": event.id, "timestamp": event.timestamp, "source": event.source,
                           "kind": event.kind, "content": event.content, "workspace": event.workspace,
                           "session": event.session, "title": event.title, "tags": list(event.tags)}
    if whole:
        out.update({k: v for k, v in (("brain", event.brain), ("actor", event.actor), ("meta", event.meta))
                    if v is not None})
    if score is not None:
        out["score"] = round(score, 6)
    return out


def _events_reply(result: SearchResult, with_score: bool = False, mode_line: bool = False) -> Reply:
    lines = [one_line(hit.event, score=hit.score if with_score else None) for hit in result.hits]
    if mode_line:
        lines[:0] = [f"mode: {result.mode}", *(f"note: {note}" for note in result.notes)]
    data: dict[str, Any] = {"events": [event_dict(h.event, h.score) for h in result.hits],
                            "totalResults": len(result.hits), "mode": result.mode}
    if result.query is not None:
        data["query"] = result.query
    if result.notes:
        data["notes"] = list(result.notes)
    return "\n".join(lines), data


def _write_reply(result: Any) -> Reply:
    if result.status == "rejected":
        raise UrchinError(result.reason or "rejected")
    data: dict[str, Any] = {"id": result.id, "status": result.status}
    text = f"{result.status} {result.id}"
    if result.reason:
        data["reason"] = result.reason
        text += f" ({result.reason})"
    return text, data


def _int(value: Any) -> Any:
    # JSON Schema counts 20.0 as an integer; Memory wants a Python int.
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _window(args: dict[str, Any], hours: float, limit: int) -> dict[str, Any]:
    return {"hours": args.get("hours", hours), "limit": _int(args.get("limit", limit))}


# ---- the tools: one Memory call each ---------------------------------------------------------------
def _search(memory: Any, a: dict[str, Any]) -> Reply:
    return _events_reply(memory.search(a["query"], **_window(a, 168, 20), source=a.get("source"),
                                       workspace=a.get("workspace")))


def _semantic(memory: Any, a: dict[str, Any]) -> Reply:
    result = memory.semantic(a["query"], **_window(a, 168, 10), source=a.get("source"),
                             workspace=a.get("workspace"))
    return _events_reply(result, with_score=True, mode_line=True)


def _recent(memory: Any, a: dict[str, Any]) -> Reply:
    return _events_reply(memory.recent(**_window(a, 24, 20), source=a.get("source")))


def _session(memory: Any, a: dict[str, Any]) -> Reply:
    return _events_reply(memory.session_context(a["session"], **_window(a, 168, 50)))


def _workspace(memory: Any, a: dict[str, Any]) -> Reply:
    return _events_reply(memory.workspace_context(a["workspace"], **_window(a, 168, 40)))


def _get(memory: Any, a: dict[str, Any]) -> Reply:
    whole = event_dict(memory.get(a["id"]), whole=True)
    return orjson.dumps(whole, option=orjson.OPT_INDENT_2).decode(), {"event": whole}


_INGEST_FIELDS = ("content", "source", "kind", "workspace", "session", "title", "tags")


def _ingest(memory: Any, a: dict[str, Any]) -> Reply:
    item = {k: a[k] for k in _INGEST_FIELDS if k in a}
    return _write_reply(memory.ingest_one(item, {"source": "mcp", "kind": "conversation"}))


def _remember(memory: Any, a: dict[str, Any]) -> Reply:
    item: dict[str, Any] = {k: a[k] for k in ("content", "tags", "workspace") if k in a}
    item.update(source="mcp", kind="decision")
    return _write_reply(memory.ingest_one(item))


def _ephemeral(memory: Any, a: dict[str, Any]) -> Reply:
    state = memory.ephemeral(a["action"], a.get("minutes"))
    data: dict[str, Any] = state.to_dict()
    return state.describe(), data


def _status(memory: Any, a: dict[str, Any]) -> Reply:
    info = memory.status()
    lines = []
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        lines.append(f"{key}: {value}")
    return "\n".join(lines), info


def _forget(memory: Any, a: dict[str, Any]) -> Reply:
    result = memory.forget(a.get("ids"), session=a.get("session"), query=a.get("query"), since=a.get("since"),
                           until=a.get("until"), confirm=a.get("confirm", False) is True)
    return result.render(), result.to_dict()


_RUNNERS: dict[str, Callable[[Any, dict[str, Any]], Reply]] = {
    "urchin_search": _search,
    "urchin_semantic_search": _semantic,
    "urchin_recent_activity": _recent,
    "urchin_session_context": _session,
    "urchin_workspace_context": _workspace,
    "urchin_get_event": _get,
    "urchin_ingest": _ingest,
    "urchin_remember": _remember,
    "urchin_ephemeral": _ephemeral,
    "urchin_status": _status,
    "urchin_forget": _forget,
    **workspace_tools.RUNNERS,
    **context_tool.RUNNERS,
    **search_tool.RUNNERS,
}
for _module in (workspace_tools, context_tool, search_tool):
    INPUT_SCHEMAS.update(_module.INPUT)
    OUTPUT_SCHEMAS.update(_module.OUTPUT)
    TOOL_DOCS.update(_module.DOCS)
TOOL_NAMES = tuple(_RUNNERS)
_READ_ONLY = {"urchin_search", "urchin_semantic_search", "urchin_recent_activity", "urchin_session_context",
              "urchin_workspace_context", "urchin_get_event", "urchin_status", *workspace_tools.READ_ONLY,
              *context_tool.READ_ONLY, *search_tool.READ_ONLY}
_VALIDATORS = {name: Draft202012Validator(INPUT_SCHEMAS[name]) for name in TOOL_NAMES}


def tool_list() -> list[types.Tool]:
    tools = []
    for name in TOOL_NAMES:
        title, description = TOOL_DOCS[name]
        annotations = types.ToolAnnotations(title=title, read_only_hint=name in _READ_ONLY,
                                            destructive_hint=name == "urchin_forget",
                                            idempotent_hint=name in _READ_ONLY,
                                            open_world_hint=False)
        tools.append(types.Tool(name=name, title=title, description=description, input_schema=INPUT_SCHEMAS[name],
                                output_schema=OUTPUT_SCHEMAS[name], annotations=annotations))
    return tools


# ---- argument checking: schema errors become `field: rule` ------------------------------------------
def check_arguments(name: str, args: Any) -> str | None:
    """The first way `args` breaks the tool's input schema, as one line; `None` when it fits."""
    error = best_match(_VALIDATORS[name].iter_errors(args))
    return None if error is None else _describe(error, INPUT_SCHEMAS[name])


def _describe(error: SchemaError, schema: dict[str, Any]) -> str:
    field = ".".join(str(p) for p in error.absolute_path) or "arguments"
    rule, value, instance = error.validator, error.validator_value, error.instance
    if rule == "required":
        missing = [k for k in value if isinstance(instance, dict) and k not in instance]
        return f"{missing[0] if missing else field}: is required"
    if rule == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(instance) - set(allowed)) if isinstance(instance, dict) else []
        known = ", ".join(allowed) if allowed else "none"
        return f"{extra[0] if extra else field}: unknown argument (allowed: {known})"
    if rule == "type":
        wanted = " or ".join(value) if isinstance(value, list) else value
        article = "an" if str(wanted)[0] in "aeiou" else "a"
        return f"{field}: must be {article} {wanted}, got {short(instance)}"
    if rule == "minLength":
        return f"{field}: must not be empty"
    if rule == "exclusiveMinimum":
        return f"{field}: must be greater than {value:g}, got {short(instance)}"
    if rule in ("minimum", "maximum"):
        bounds = schema["properties"].get(str(error.path[0]), {}) if error.path else {}
        return f"{field}: must be from {bounds.get('minimum')} to {bounds.get('maximum')}, got {short(instance)}"
    if rule == "enum":
        return f"{field}: must be one of {', '.join(map(str, value))}, got {short(instance)}"
    return f"{field}: {_one_line(error.message)}"


def short(value: Any) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, float) else f"{value:g}"
    return text if len(text) <= 60 else text[:57] + "..."


def _one_line(message: str) -> str:
    return " ".join(message.split())


def tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_one_line(message))], is_error=True)


def run_tool(memory: Any, name: str, args: Any) -> types.CallToolResult:
    """Check, run and format one call, synchronously; every failure becomes an isError result."""
    if name not in _RUNNERS:
        return tool_error(f"unknown tool {name!r} (tools: {', '.join(TOOL_NAMES)})")
    problem = check_arguments(name, args)
    if problem:
        return tool_error(problem)
    try:
        text, data = _RUNNERS[name](memory, args)
    except UrchinError as exc:
        return tool_error(exc.message)
    except Exception as exc:  # a bug must still reach the agent as one line; the traceback goes to the log
        log.exception("tool %s failed", name)
        return tool_error(f"internal error in {name}: {type(exc).__name__}: {exc}")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=data)
