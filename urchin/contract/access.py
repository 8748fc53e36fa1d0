"""Who may run each operation, declared once: its scope, its MCP tools and its HTTP routes.

The daemon's Guard (`urchin/daemon/scopes.py`) builds both of its tables from `ACCESS`, and the MCP
server maps tools to operations from it, so an operation needs the same scope on every front end:
a REST route and an MCP tool of one operation cannot disagree (issue 32: `search` needed admin over
`/mcp` and read over `POST /documents/search`). Routes with no operation (`/health`, the viewer's)
are the Guard's own.

`admit` and `hold` are the dispatcher's scope check (issue 35: scopes in the dispatcher): a token's grant
admits an operation or not, and holds the values of a workspace-bound one to its workspaces (filled in
when it has one and none is named), before the operation is parsed and run. Refusals are `Forbidden`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from urchin.errors import Forbidden

if TYPE_CHECKING:
    from urchin.api_tokens import Grant

__all__ = ["Access", "Route", "ACCESS", "NEEDS", "tool_operations", "admit", "hold", "needs_refusal",
           "spans_refusal", "workspace_refusal"]

Need = Literal["ingest", "read", "recall", "admin"]
NEEDS = ("ingest", "read", "recall", "admin")   # recall: read and hook tokens (urchin.api_tokens.Grant.allows)
# Where a workspace-scoped token's workspace is held (checked, or filled in) on a route: the query
# string, the JSON body, the event (a body), each event of a batch; None: the route spans every workspace.
Where = Literal["query", "body", "event", "batch"] | None


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str          # a regular expression the whole path must match
    where: Where = None


@dataclass(frozen=True, slots=True)
class Access:
    """One operation's scope. `scoped`: it takes a `workspace` a workspace token is held to (on MCP
    the tool's arguments; on HTTP each route's `where`); otherwise it spans every workspace and a
    workspace token may not run it."""

    need: Need
    scoped: bool = False
    tools: tuple[str, ...] = ()
    routes: tuple[Route, ...] = ()   # the first takes all the parameters: the daemon client sends it


def _read(tools: tuple[str, ...], *routes: Route, scoped: bool = False) -> Access:
    return Access("read", scoped, tools, routes)


ACCESS: dict[str, Access] = {
    "search": _read(("urchin_search",), Route("GET", r"/search", "query"), scoped=True),
    "semantic": _read(("urchin_semantic_search",), Route("GET", r"/semantic", "query"), scoped=True),
    "recent": _read(("urchin_recent_activity",), Route("GET", r"/recent")),
    "session_context": _read(("urchin_session_context",)),
    "workspace_context": _read(("urchin_workspace_context",), scoped=True),
    "get": _read(("urchin_get_event",), Route("GET", r"/events/.+")),
    "get_file": _read(("get_file",), Route("GET", r"/files/.+")),
    "overview": _read(("get_workspace_overview",), Route("GET", r"/overview")),
    "memories": _read(("list_memories",), Route("GET", r"/memories")),
    "get_memory": _read(("get_memory",), Route("GET", r"/memories/[^/]+")),
    "query_source": _read(("query_source",), Route("GET", r"/sources/[^/]+/search")),
    "fetch_document": _read(("fetch_source_document",), Route("GET", r"/sources/[^/]+/documents/.+")),
    "get_document": _read(("get_document",), Route("GET", r"/documents/.+")),
    "status": _read(("urchin_status",), Route("GET", r"/status")),
    "tail": _read(()),
    "context": _read(("search_context",), Route("POST", r"/context", "body"), scoped=True),
    "document_search": _read(("search",), Route("POST", r"/documents/search")),
    # a hook's token (scope `hook`) may run this and ingest, nothing else; recall reads one workspace
    "recall": Access("recall", True, ("urchin_recall",), (Route("POST", r"/recall", "body"),)),
    "ingest": Access("ingest", True, ("urchin_ingest",),
                     (Route("POST", r"/ingest", "event"), Route("POST", r"/ingest/batch", "batch"))),
    "remember": Access("ingest", True, ("urchin_remember",)),
    "ephemeral": Access("admin", False, ("urchin_ephemeral",), (Route("POST", r"/ephemeral"),)),
    "forget": Access("admin", False, ("urchin_forget",), (Route("POST", r"/forget"), Route("DELETE", r"/events/.+"))),
}


def tool_operations() -> dict[str, str]:
    """MCP tool name -> the operation it runs."""
    return {tool: op for op, access in ACCESS.items() for tool in access.tools}



# ---- the grant's check, before an operation runs ----------------------------------------------------
def needs_refusal(grant: Grant, need: str, what: str) -> Forbidden | None:
    """Why `grant` may not do what needs `need` (None: it may)."""
    if grant.allows(need):
        return None
    return Forbidden("authorization", f"this token's scope is {grant.scope}; {what} needs {need}",
                     message=f"scope: this token's scope is {grant.scope}; {what} needs {need}")


def spans_refusal(grant: Grant, what: str) -> Forbidden:
    rule = f"this token is limited to workspaces {', '.join(grant.workspaces)}; {what} spans every workspace"
    return Forbidden("authorization", rule, message=f"scope: {rule}")


def workspace_refusal(grant: Grant, value: Any, what: str) -> Forbidden | None:
    """Why a workspace-bound `grant` may not use workspace `value` (None: given and its own, or not
    given and the grant has one, which is then the one used)."""
    allowed = ", ".join(grant.workspaces)
    if value is None:
        if len(grant.workspaces) == 1:
            return None
        rule = f"required: this token is limited to workspaces {allowed}; {what} must name one"
    elif value not in grant.workspaces:
        rule = f"this token is limited to workspaces {allowed}; {what} may not use {value!r}"
    else:
        return None
    return Forbidden("workspace", rule, message=f"workspace: {rule}")


def admit(grant: Grant | None, operation: str, what: str) -> None:
    """`Forbidden` unless `grant` may run `operation` (no grant: the user's own process, stdio)."""
    if grant is None:
        return
    access = ACCESS[operation]
    refusal = needs_refusal(grant, access.need, what)
    if refusal is not None:
        raise refusal
    if grant.workspaces and not access.scoped:
        raise spans_refusal(grant, what)


def hold(grant: Grant | None, values: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    """`values` (an admitted operation's, by wire name) held to a workspace-bound grant: a copy whose
    `workspace` is the grant's one when none is named; `Forbidden` for a workspace not its own."""
    if grant is None or not grant.workspaces:
        return values
    value = values.get("workspace")
    refusal = workspace_refusal(grant, value, what)
    if refusal is not None:
        raise refusal
    return values if value is not None else {**values, "workspace": grant.workspaces[0]}
