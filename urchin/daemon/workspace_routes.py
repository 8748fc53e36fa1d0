"""HTTP routes over workspace files, curated memories and single sources: the same `Memory` calls
as the MCP tools and the CLI (`get_file`, `get_workspace_overview`, `list_memories`, `get_memory`,
`query_source`, `fetch_source_document`)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from urchin.errors import QueryError

__all__ = ["workspace_routes"]


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise QueryError(name, f"must be a whole number, got {raw!r}") from None


def _only(request: Request, allowed: tuple[str, ...]) -> None:
    for key in request.query_params:
        if key not in allowed:
            raise QueryError(key, f"unknown parameter (allowed: {', '.join(allowed) or 'none'})")


def workspace_routes(json: Any, memory_of: Any) -> list[Route]:
    """`json(obj)` makes the response; `memory_of(request)` is the daemon's Memory."""

    async def get_file(request: Request) -> Response:
        _only(request, ("fromLine", "maxLines"))
        window = await run_in_threadpool(memory_of(request).get_file, request.path_params["path"],
                                         _int(request, "fromLine", 1), _int(request, "maxLines", 200))
        return json(window.to_dict())

    async def overview(request: Request) -> Response:
        _only(request, ())
        return json(await run_in_threadpool(memory_of(request).overview))

    async def memories(request: Request) -> Response:
        _only(request, ())
        items = await run_in_threadpool(memory_of(request).memory_list)
        return json({"memories": [m.summary() for m in items]})

    async def memory(request: Request) -> Response:
        _only(request, ("tokenBudget",))
        return json(await run_in_threadpool(memory_of(request).memory_get, request.path_params["slug"],
                                            _int(request, "tokenBudget", 8000)))

    async def query_source(request: Request) -> Response:
        _only(request, ("query", "limit"))
        result = await run_in_threadpool(memory_of(request).query_source, request.path_params["source"],
                                         request.query_params.get("query", ""), _int(request, "limit", 10))
        return json(result.to_dict())

    async def fetch_document(request: Request) -> Response:
        _only(request, ("contentHash",))
        return json(await run_in_threadpool(memory_of(request).fetch_source_document,
                                            request.path_params["source"], request.path_params["doc_id"],
                                            request.query_params.get("contentHash")))

    return [
        Route("/files/{path:path}", get_file, methods=["GET"]),
        Route("/overview", overview, methods=["GET"]),
        Route("/memories", memories, methods=["GET"]),
        Route("/memories/{slug}", memory, methods=["GET"]),
        Route("/sources/{source}/search", query_source, methods=["GET"]),
        Route("/sources/{source}/documents/{doc_id:path}", fetch_document, methods=["GET"]),
    ]
