"""What a scoped token may do on each HTTP route: it needs `ingest`, `read` or `admin`, checked by the Guard.

The routes' table is derived from the contract's one declaration per operation (`ACCESS`), and its
refusals are the contract's (`admit`, `hold`), so an operation needs the same scope on every front end.
A workspace-scoped token may use only operations that take a `workspace`; the route holds the workspace
it parsed to the grant (a workspace it names must be one of its own; when it names none, its only
workspace is used; with several, it must name one). Operations that span every workspace (recent
activity, an event by id, status, forget, files) are refused to it here. A refusal is a 403 naming the
field and the rule. `/mcp` is not read here: the MCP
server's dispatcher checks each tool call it parsed against the same grant (`mcp_server/tools.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from urchin.api_tokens import Grant
from urchin.contract.access import ACCESS, needs_refusal, spans_refusal, tool_operations, workspace_refusal
from urchin.errors import Forbidden

__all__ = ["Refusal", "check", "fill_workspace", "TOOL_NEEDS"]


@dataclass(frozen=True, slots=True)
class Refusal:
    message: str
    field: str


# (method, path pattern, need, where the workspace is: query | body | event | batch | route | None):
# each operation's routes as the contract declares them (urchin/contract/access.py), then the routes
# of no operation. Every other path (the viewer's, unknown routes) needs read and spans workspaces.
# `route`: only the route can tell the workspace (a hook's is its cwd's); it holds the grant to it
# with `fill_workspace`, as here, before anything is stored or read.
_ROUTES: tuple[tuple[str, re.Pattern[str], str, str | None], ...] = tuple(
    (r.method, re.compile(r.path), access.need, r.where) for access in ACCESS.values() for r in access.routes
) + tuple((m, re.compile(p), need, where) for m, p, need, where in (
    ("GET", r"/health", "read", None),
    ("POST", r"/auth/code", "admin", None),           # a browser sign-in is an admin session
    ("POST", r"/hook/[^/]+", "ingest", "route"),      # a whole hook call; recall too when it asks (hook_route.py)
))



def route_rule(method: str, path: str) -> tuple[str, str | None]:
    """(need, where) of the first route in `_ROUTES` that `method path` matches; (read, None) for any other."""
    for m, pattern, need, where in _ROUTES:
        if m == method and pattern.fullmatch(path):
            return need, where
    return "read", None


# Literal paths (`/ingest`, `/status`) by one lookup instead of a scan of every pattern before theirs
# (~1.5 us of each `POST /ingest`), each with exactly what the scan gives it.
_LITERAL: dict[tuple[str, str], tuple[str, str | None]] = {
    (m, p.pattern): route_rule(m, p.pattern) for m, p, _, _ in _ROUTES if re.escape(p.pattern) == p.pattern}

# MCP tools: need, and whether the tool takes a `workspace` a scoped token can be held to (the same
# declaration as the routes: an operation needs one scope on every front end)
TOOL_NEEDS: dict[str, tuple[str, bool]] = {tool: (ACCESS[op].need, ACCESS[op].scoped)
                                           for tool, op in tool_operations().items()}


def _refusal(error: Forbidden) -> Refusal:
    return Refusal(error.message, error.field)


def _scoped(grant: Grant, value: Any, what: str) -> tuple[Any, Refusal | None]:
    """The workspace to use for `value` (given or not) under a workspace-scoped grant, or a refusal."""
    error = workspace_refusal(grant, value, what)
    if error is not None:
        return None, _refusal(error)
    return (grant.workspaces[0] if value is None else value), None


def _spans(grant: Grant, what: str) -> Refusal:
    return _refusal(spans_refusal(grant, what))


def _need(grant: Grant, need: str, what: str) -> Refusal | None:
    error = needs_refusal(grant, need, what)
    return None if error is None else _refusal(error)


def check(grant: Grant, method: str, path: str, query: bytes,
          body: bytes | None) -> Refusal | tuple[bytes, bytes | None]:
    """Refuse (the route's need; a workspace-bound token on a route that spans workspaces), or return the
    query string and body to pass on as they came."""
    if path == "/mcp" or path.startswith("/mcp/"):
        return _check_mcp(grant, query, body)
    what = f"{method} {path}"
    need, where = _LITERAL.get((method, path)) or route_rule(method, path)
    refusal = _need(grant, need, what)
    if refusal or not grant.workspaces:
        return refusal or (query, body)
    if where is None:
        return _spans(grant, what)
    # `route`, `query`, `body`, `event`, `batch`: the route holds the workspace it parsed to the grant
    # (`contract.access.hold` in `daemon/app.py` and `daemon/intake.py`, `fill_workspace` in `hook_route.py`)
    # before it reads or writes; nothing is re-parsed or rewritten here
    return query, body


def fill_workspace(grant: Grant, data: dict[str, Any], what: str) -> Refusal | None:
    """Hold `data["workspace"]` to a workspace-scoped grant: filled in when the grant has one and
    `data` names none; a refusal when it names another (or none, and the grant has several)."""
    if not grant.workspaces:
        return None
    value, refusal = _scoped(grant, data.get("workspace"), what)
    if refusal is None:
        data["workspace"] = value
    return refusal


def _check_mcp(grant: Grant, query: bytes, body: bytes | None) -> Refusal | tuple[bytes, bytes | None]:
    """`/mcp` passes untouched to a token that may call some tool: which tool a message calls, and with
    which workspace, the MCP server's dispatcher decides on the message it parsed itself (`run_tool`:
    `admit`, `hold`; a refusal is a tool error naming the scope rule). A token that may call no tool
    gets 403 on the endpoint."""
    if any(grant.allows(need) for need, _ in TOOL_NEEDS.values()):
        return query, body
    needs = sorted({need for need, _ in TOOL_NEEDS.values()})
    return Refusal(f"scope: this token's scope is {grant.scope}; MCP needs one of {', '.join(needs)}",
                   "authorization")
