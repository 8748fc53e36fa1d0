"""HTTP routes over workspace files, curated memories and single sources: the same `Memory` calls
as the MCP tools and the CLI (`get_file`, `get_workspace_overview`, `list_memories`, `get_memory`,
`query_source`, `fetch_source_document`, `get_document`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from urchin.contract import OPERATIONS, OPERATIONS_BY_NAME
from urchin.contract.access import ACCESS, hold
from urchin.daemon.security import GRANT
from urchin.errors import QueryError

if TYPE_CHECKING:
    from urchin.facade.api import Facade

__all__ = ["workspace_routes", "request_args", "request_params", "held"]


def request_args(request: Request, operation: str, **path: str) -> dict[str, Any]:
    """Query string and path parameters, checked together by the operation's one validator."""
    return OPERATIONS_BY_NAME[operation].parse(_given(request, path), "wire", from_text=True)


def request_params(request: Request, operation: str, **path: str) -> Any:
    """The query string (and path parameters) as the operation's typed parameters, checked here; a
    workspace-bound token's workspace held to it first (`Forbidden`: 403)."""
    return OPERATIONS_BY_NAME[operation].build(held(request, operation, _given(request, path)), "wire", from_text=True)


def held(request: Request, operation: str, values: Mapping[str, Any]) -> Mapping[str, Any]:
    """`values` of a workspace-taking operation held to the request's grant (its workspace filled in or
    refused), before they are parsed and run; the Guard has refused every other operation to such a token."""
    if not ACCESS[operation].scoped:
        return values
    return hold(request.scope.get(GRANT), values, f"{request.method} {request.url.path}")


def _given(request: Request, path: dict[str, str]) -> dict[str, Any]:
    query = {k: v for k, v in request.query_params.multi_items() if k not in path}
    if len(query) != len(request.query_params):
        raise QueryError(next(k for k in request.query_params if k in path), "is given by the path")
    return {**query, **path}


def workspace_routes(json: Callable[[Any], Response], memory_of: Callable[[Request], Facade]) -> list[Route]:
    """`json(obj)` makes the response; `memory_of(request)` is the daemon's Memory. Query parameters
    and path parameters are checked together by the operation's one validator."""

    args = request_args
    async def get_file(request: Request) -> Response:
        p = request_params(request, "get_file", path=request.path_params["path"])
        window = await run_in_threadpool(OPERATIONS["get_file"].run, memory_of(request), p)
        return json(window.to_dict())

    async def overview(request: Request) -> Response:
        args(request, "overview")
        return json(await run_in_threadpool(memory_of(request).overview))

    async def memories(request: Request) -> Response:
        args(request, "memories")
        items = await run_in_threadpool(memory_of(request).memory_list)
        return json({"memories": [m.summary() for m in items]})

    async def memory(request: Request) -> Response:
        p = request_params(request, "get_memory", slug=request.path_params["slug"])
        return json(await run_in_threadpool(OPERATIONS["get_memory"].run, memory_of(request), p))

    async def query_source(request: Request) -> Response:
        p = request_params(request, "query_source", source=request.path_params["source"])
        return json((await run_in_threadpool(OPERATIONS["query_source"].run, memory_of(request), p)).to_dict())

    async def fetch_document(request: Request) -> Response:
        p = request_params(request, "fetch_document", source=request.path_params["source"],
                           id=request.path_params["doc_id"])
        return json(await run_in_threadpool(OPERATIONS["fetch_document"].run, memory_of(request), p))

    async def get_document(request: Request) -> Response:
        p = request_params(request, "get_document", documentId=request.path_params["document_id"])
        return json(await run_in_threadpool(OPERATIONS["get_document"].run, memory_of(request), p))

    return [
        Route("/files/{path:path}", get_file, methods=["GET"]),
        Route("/overview", overview, methods=["GET"]),
        Route("/memories", memories, methods=["GET"]),
        Route("/memories/{slug}", memory, methods=["GET"]),
        Route("/sources/{source}/search", query_source, methods=["GET"]),
        Route("/sources/{source}/documents/{doc_id:path}", fetch_document, methods=["GET"]),
        Route("/documents/{document_id:path}", get_document, methods=["GET"]),
    ]
