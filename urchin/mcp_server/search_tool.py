"""textrawl's `search` MCP tool (seed 003): one `Memory.document_search` call, beside search_context.

Its input schema is generated from the contract's `document_search` operation (`urchin/contract/ops.py`).
"""

from __future__ import annotations

from typing import Any

from urchin.contract.render import render_document_search as render

__all__ = ["RUNNERS", "OUTPUT", "DOCS", "READ_ONLY"]


def _search(memory: Any, a: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    result = memory.document_search(a)
    return render(result), result


OUTPUT: dict[str, dict[str, Any]] = {"search": {
    "type": "object",
    "properties": {"query": {"type": "string"}, "totalResults": {"type": "integer"}, "counts": {"type": "object"},
                   "results": {"type": "array"}},
    "required": ["query", "results"]}}

DOCS: dict[str, tuple[str, str]] = {"search": ("Search (documents, memories, conversations)", (
    "textrawl-compatible search over workspace file chunks and journal events (documents), optionally "
    "memories and conversations too; the same hybrid query as search_context. Document-only by default: "
    "{query, totalResults, results:[{documentId, documentTitle, sourceType, tags, chunkId, content, score}]}; "
    "with includeMemories or includeConversations: {query, counts, results:[{type, score, data}]}. "
    "documentId works with fetch_source_document (source: the result's source)."))}

RUNNERS = {"search": _search}
READ_ONLY = set(RUNNERS)
