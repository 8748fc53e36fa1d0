"""Urchin's MCP tools: arguments checked by their operation's one validator, one `Memory` call each.

`run_tool` is transport-free and synchronous; every failure becomes a result with `isError: true`
and a one-line message, never a protocol error and never a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

from urchin.contract import OPERATIONS, OPERATIONS_BY_NAME, describe
from urchin.contract.access import admit, hold, tool_operations
from urchin.contract.render import rejection, render_event, render_events, render_ingest, render_status
from urchin.errors import UrchinError, ValidationError
from urchin.mcp_server import context_tool, recall_tool, search_tool, workspace_tools
from urchin.mcp_server.schemas import (
    INGEST_DEFAULTS,
    INPUT_SCHEMAS,
    OUTPUT_SCHEMAS,
    TOOL_DOCS,
    TOOL_OPS,
    with_defaults,
)
from urchin.redact import redact_message
from urchin.search.query import SearchResult

if TYPE_CHECKING:
    from urchin.api_tokens import Grant
    from urchin.facade.api import Facade
    from urchin.params.ephemeral import EphemeralParams
    from urchin.params.forget import ForgetParams
    from urchin.params.ingest import IngestParams
    from urchin.params.reading import GetParams
    from urchin.params.remember import RememberParams

__all__ = ["TOOL_NAMES", "run_tool", "check_arguments", "parse_arguments", "tool_list", "tool_error", "short"]

log = logging.getLogger("urchin.mcp")

# The result of one tool run: the text part, and the structuredContent (a result's dict, or a typed one).
Reply = tuple[str, Mapping[str, object]]


# ---- the tools: one Memory call each; structuredContent is the result's to_dict(), text its render --
def _events(result: SearchResult) -> Reply:
    return render_events(result), result.to_dict()


def _listing(operation: str) -> Callable[[Facade, Any], Reply]:
    """A tool whose operation answers a list of events: its one run, rendered."""
    op = OPERATIONS_BY_NAME[operation]
    return lambda memory, params: _events(op.run(memory, params))


def _get(memory: Facade, a: GetParams) -> Reply:
    event = OPERATIONS["get"].run(memory, a).to_dict()
    return render_event(event), event


def _write_reply(result: Any, reader: bool = True) -> Reply:
    if result.status == "rejected":   # the same error HTTP's 422 gives, naming the field
        raise rejection(result.reason)
    if not reader:                    # a caller that may not read learns nothing of ids held (as /ingest)
        result = result.for_writer()
    return render_ingest(result.to_dict()), result.to_dict()


def _ingest(memory: Facade, a: IngestParams, reader: bool = True) -> Reply:
    return _write_reply(OPERATIONS["ingest"].run(memory, a.with_writer(INGEST_DEFAULTS)), reader)


def _remember(memory: Facade, a: RememberParams, reader: bool = True) -> Reply:
    return _write_reply(OPERATIONS["remember"].run(memory, a), reader)


def _ephemeral(memory: Facade, a: EphemeralParams) -> Reply:
    state = OPERATIONS["ephemeral"].run(memory, a)
    return state.describe(), state.to_dict()


def _status(memory: Facade, a: dict[str, Any]) -> Reply:
    info = memory.status()
    return render_status(info), info


def _forget(memory: Facade, a: ForgetParams) -> Reply:
    result = OPERATIONS["forget"].run(memory, a)
    return result.render(), result.to_dict()


_RUNNERS: dict[str, Callable[[Facade, Any], Reply]] = {
    "urchin_search": _listing("search"),
    "urchin_semantic_search": _listing("semantic"),
    "urchin_recent_activity": _listing("recent"),
    "urchin_session_context": _listing("session_context"),
    "urchin_workspace_context": _listing("workspace_context"),
    "urchin_get_event": _get,
    "urchin_ingest": _ingest,
    "urchin_remember": _remember,
    "urchin_ephemeral": _ephemeral,
    "urchin_status": _status,
    "urchin_forget": _forget,
    **workspace_tools.RUNNERS,
    **context_tool.RUNNERS,
    **search_tool.RUNNERS,
    **recall_tool.RUNNERS,
}
for _module in (workspace_tools, context_tool, search_tool, recall_tool):
    OUTPUT_SCHEMAS.update(_module.OUTPUT)
    TOOL_DOCS.update(_module.DOCS)
with_defaults(TOOL_DOCS, INPUT_SCHEMAS)
TOOL_NAMES = tuple(_RUNNERS)
_READ_ONLY = {"urchin_search", "urchin_semantic_search", "urchin_recent_activity", "urchin_session_context",
              "urchin_workspace_context", "urchin_get_event", "urchin_status", *workspace_tools.READ_ONLY,
              *context_tool.READ_ONLY, *search_tool.READ_ONLY}


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


# ---- argument checking: the operation's one validator, fields in wire names -------------------------
def check_arguments(name: str, args: Any) -> str | None:
    """The first way `args` breaks the tool's parameters, as one line; `None` when they fit."""
    try:
        parse_arguments(name, args)
    except UrchinError as exc:
        return exc.message
    return None


def parse_arguments(name: str, args: Any) -> Any:
    """Validated arguments with defaults (an operation's typed parameters when it has them); tools
    without a declared operation check in `Memory`."""
    if not isinstance(args, dict):
        raise ValidationError("arguments", f"must be an object, got {describe(args)}")
    op = TOOL_OPS.get(name)
    if op is None:
        return dict(args)
    operation = OPERATIONS_BY_NAME[op]
    return operation.build(args, "wire") if operation.typed else operation.parse(args, "wire")


def short(value: Any) -> str:
    return describe(value)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def tool_error(message: str) -> types.CallToolResult:
    text = _one_line(redact_message(message))  # an error may quote the input: never a secret
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


_WRITERS_VIEW: dict[str, Callable[[Facade, Any], Reply]] = {
    "urchin_ingest": lambda memory, a: _ingest(memory, a, reader=False),
    "urchin_remember": lambda memory, a: _remember(memory, a, reader=False),
}


_OPERATION_OF = tool_operations()


def run_tool(memory: Facade, name: str, args: Any, reader: bool = True,
             grant: Grant | None = None) -> types.CallToolResult:
    """Check, run and format one call, synchronously; every failure becomes an isError result.
    `reader`: the caller may read every event (stdio, an admin token), so a write may tell it that
    an id was already held or forgotten (`IngestResult.for_writer`). `grant`: the daemon's token for
    the request (None over stdio): it admits the tool or not, and holds its workspace, before the
    arguments are parsed (a refusal is an isError naming the scope rule, and nothing is read)."""
    if name not in _RUNNERS:
        return tool_error(f"unknown tool {name!r} (tools: {', '.join(TOOL_NAMES)})")
    runner = _RUNNERS[name] if reader else _WRITERS_VIEW.get(name, _RUNNERS[name])
    try:
        if grant is not None:
            admit(grant, _OPERATION_OF[name], f"MCP tool {name}")
            if isinstance(args, dict):
                args = hold(grant, args, f"MCP tool {name}")
        text, data = runner(memory, parse_arguments(name, args))
    except UrchinError as exc:
        return tool_error(exc.message)
    except Exception as exc:  # a bug must still reach the agent as one line; the traceback goes to the log
        log.exception("tool %s failed", name)
        return tool_error(f"internal error in {name}: {type(exc).__name__}: {exc}")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=dict(data))
