"""Who may run each operation, declared once: its scope, its MCP tools and its HTTP routes.

The daemon's Guard (`urchin/daemon/scopes.py`) builds both of its tables from `ACCESS`, and the MCP
server maps tools to operations from it, so an operation needs the same scope on every front end:
a REST route and an MCP tool of one operation cannot disagree (issue 32: `search` needed admin over
`/mcp` and read over `POST /documents/search`). Routes with no operation (`/health`, the viewer's)
are the Guard's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Access", "Route", "ACCESS", "NEEDS", "tool_operations"]

Need = Literal["ingest", "read", "recall", "admin"]
NEEDS = ("ingest", "read", "recall", "admin")   # recall: read and hook tokens (urchin.tokens.Grant.allows)
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
    routes: tuple[Route, ...] = ()


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

