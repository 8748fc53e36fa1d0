"""What a scoped token may do: each route and MCP tool needs `ingest`, `read` or `admin`, checked by the Guard.

One table for the HTTP routes, one for the MCP tools (`/mcp` bodies are JSON-RPC, checked message by
message), both derived from the contract's one declaration per operation (`ACCESS`), so an operation
needs the same scope on every front end. A workspace-scoped token may use only operations that take a
`workspace`: a workspace it names must be one of its own; when it names none, its only workspace is
filled in (with several, it must name one). Operations that span every workspace (recent activity, an
event by id, status, forget, files) are refused to it. A refusal is a 403 naming the field and the rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson

from urchin.contract.access import ACCESS, tool_operations
from urchin.tokens import Grant

__all__ = ["Refusal", "check", "fill_workspace", "TOOL_NEEDS", "MCP_OPEN_METHODS"]


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
MCP_OPEN_METHODS = frozenset({"initialize", "ping", "tools/list"})   # plus notifications/*


def _scoped(grant: Grant, value: Any, what: str) -> tuple[Any, Refusal | None]:
    """The workspace to use for `value` (given or not) under a workspace-scoped grant, or a refusal."""
    allowed = grant.workspaces
    if value is None:
        if len(allowed) == 1:
            return allowed[0], None
        return None, Refusal(f"workspace: required: this token is limited to workspaces {', '.join(allowed)}; "
                             f"{what} must name one", "workspace")
    if value not in allowed:
        return None, Refusal(f"workspace: this token is limited to workspaces {', '.join(allowed)}; "
                             f"{what} may not use {value!r}", "workspace")
    return value, None


def _spans(grant: Grant, what: str) -> Refusal:
    return Refusal(f"scope: this token is limited to workspaces {', '.join(grant.workspaces)}; {what} spans "
                   "every workspace", "authorization")


def _need(grant: Grant, need: str, what: str) -> Refusal | None:
    if grant.allows(need):
        return None
    return Refusal(f"scope: this token's scope is {grant.scope}; {what} needs {need}", "authorization")


def check(grant: Grant, method: str, path: str, query: bytes,
          body: bytes | None) -> Refusal | tuple[bytes, bytes | None]:
    """Refuse, or return the (possibly workspace-filled) query string and body to pass on."""
    if path == "/mcp" or path.startswith("/mcp/"):
        return _check_mcp(grant, method, query, body)
    what = f"{method} {path}"
    need, where = _LITERAL.get((method, path)) or route_rule(method, path)
    refusal = _need(grant, need, what)
    if refusal or not grant.workspaces:
        return refusal or (query, body)
    if where is None:
        return _spans(grant, what)
    if where == "route":
        return query, body
    if where == "query":
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in pairs if k == "workspace"]
        value, refusal = _scoped(grant, given[-1] if given else None, what)
        if refusal:
            return refusal
        pairs = [(k, v) for k, v in pairs if k != "workspace"] + [("workspace", value)]
        return urlencode(pairs).encode("latin-1"), body
    return _rewrite_body(grant, where, what, query, body)


def _rewrite_body(grant: Grant, where: str, what: str, query: bytes,
                  body: bytes | None) -> Refusal | tuple[bytes, bytes | None]:
    try:
        data = orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        return query, body                    # the route answers 400 for it; nothing can be written
    refusal: Refusal | None = None
    if where in ("body", "event") and isinstance(data, dict):
        refusal = fill_workspace(grant, data, what)
    elif where == "batch":
        events = data.get("events") if isinstance(data, dict) else data
        defaults = data.get("defaults") if isinstance(data, dict) else None
        fallback = defaults.get("workspace") if isinstance(defaults, Mapping) else None
        for i, item in enumerate(events if isinstance(events, list) else []):
            if isinstance(item, dict):
                if item.get("workspace") is None and fallback is not None:
                    item["workspace"] = fallback
                refusal = refusal or fill_workspace(grant, item, f"{what} events[{i}]")
    return refusal or (query, orjson.dumps(data))


def fill_workspace(grant: Grant, data: dict[str, Any], what: str) -> Refusal | None:
    """Hold `data["workspace"]` to a workspace-scoped grant: filled in when the grant has one and
    `data` names none; a refusal when it names another (or none, and the grant has several)."""
    if not grant.workspaces:
        return None
    value, refusal = _scoped(grant, data.get("workspace"), what)
    if refusal is None:
        data["workspace"] = value
    return refusal


def _check_mcp(grant: Grant, method: str, query: bytes, body: bytes | None) -> Refusal | tuple[bytes, bytes | None]:
    """JSON-RPC over streamable HTTP: each message of a POST (or a batch) is checked."""
    if method != "POST" or (grant.scope == "admin" and not grant.workspaces):
        return query, body                    # the event stream and session end carry no tool call
    try:
        data = orjson.loads(body or b"")
    except orjson.JSONDecodeError:            # fail closed: what cannot be checked does not run
        return Refusal("body: not JSON this token's scope can be checked against", "body")
    changed = False
    for message in data if isinstance(data, list) else [data]:
        if not isinstance(message, dict):
            continue
        rpc = message.get("method")
        if not isinstance(rpc, str) or rpc in MCP_OPEN_METHODS or rpc.startswith("notifications/"):
            continue
        if rpc != "tools/call":
            refusal = _need(grant, "read", f"MCP {rpc}")
            if refusal or grant.workspaces:
                return refusal or _spans(grant, f"MCP {rpc}")
            continue
        params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
        name = params.get("name")
        need, scopable = TOOL_NEEDS.get(name if isinstance(name, str) else "", ("admin", False))
        what = f"MCP tool {name}"
        refusal = _need(grant, need, what)
        if refusal:
            return refusal
        if grant.workspaces:
            if not scopable:
                return _spans(grant, what)
            args = params.get("arguments")
            if args is None:
                params["arguments"] = args = {}
            if isinstance(args, dict):
                refusal = fill_workspace(grant, args, what)
                if refusal:
                    return refusal
                changed = True
    return query, orjson.dumps(data) if changed else body
