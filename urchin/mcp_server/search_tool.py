"""textrawl's `search` and `get_document` MCP tools (seed 003): one `Memory` call each, beside search_context.

Their input schemas are generated from the contract's `document_search` and `get_document` operations
(`urchin/contract/ops.py`); their output schemas are the seed's, Urchin's own fields following.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from urchin.contract.render import render_document, render_document_search

if TYPE_CHECKING:
    from urchin.facade.api import Facade
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.sources import DocumentParams

__all__ = ["RUNNERS", "OUTPUT", "DOCS", "READ_ONLY"]


def _search(memory: Facade, a: DocumentSearchParams) -> tuple[str, Mapping[str, object]]:
    result = memory.document_search(a)
    return render_document_search(result), result


def _get_document(memory: Facade, a: DocumentParams) -> tuple[str, Mapping[str, object]]:
    result = memory.get_document(a)
    return render_document(result), result


_STRING = {"type": "string"}
_COUNTS = {"type": "object", "properties": {"documents": {"type": "integer"}, "memories": {"type": "integer"},
                                            "conversations": {"type": "integer"}},
           "required": ["documents", "memories", "conversations"]}
_RESULT = {"type": "object", "properties": {
    "type": {"type": "string", "enum": ["document", "memory", "conversation"]}, "score": {"type": "number"},
    "data": {"type": "object"}, "documentId": _STRING, "documentTitle": _STRING, "sourceType": _STRING,
    "tags": {"type": "array", "items": _STRING}, "chunkId": _STRING, "content": _STRING},
    "required": ["score"]}
_DOCUMENT = {"type": "object", "properties": {
    "id": _STRING, "title": _STRING, "sourceType": _STRING, "sourceUrl": {"anyOf": [_STRING, {"type": "null"}]},
    "content": _STRING, "truncated": {"type": "boolean"}, "fullLength": {"type": "integer"},
    "metadata": {"type": "object"}, "createdAt": _STRING, "updatedAt": _STRING},
    "required": ["id", "title", "sourceType", "content", "truncated", "createdAt", "updatedAt"]}

OUTPUT: dict[str, dict[str, Any]] = {
    "search": {"type": "object", "properties": {
        "query": _STRING, "totalResults": {"type": "integer"}, "counts": _COUNTS,
        "results": {"type": "array", "items": _RESULT}, "notes": {"type": "array", "items": _STRING}},
        "required": ["query", "totalResults", "results"]},
    "get_document": {"type": "object", "properties": {
        "document": _DOCUMENT, "chunks": {"type": "array", "items": {"type": "object", "properties": {
            "id": _STRING, "index": {"type": "integer"}, "content": _STRING}, "required": ["id", "index", "content"]}}},
        "required": ["document"]},
}

DOCS: dict[str, tuple[str, str]] = {
    "search": ("Search (documents, memories, conversations)", (
        "textrawl-compatible hybrid search over workspace file chunks and journal events (documents), "
        "optionally memories and conversations too. Results are fused by RRF, score = fullTextWeight / "
        "(60 + full-text rank) + semanticWeight / (60 + semantic rank), shown over the best possible score "
        "(scores are relative: 1.0 is first in every leg). Document-only by default: "
        "{query, totalResults, results:[{documentId, documentTitle, sourceType, tags, chunkId, content, score}]}; "
        "with includeMemories or includeConversations: {query, counts, results:[{type, score, data}]}, data "
        "being {id, title, content} (document), {entityName, content} (memory) or {sessionKey, title} "
        "(conversation: one per session). Content is cut at 500 characters: get_document returns the whole.")),
    "get_document": ("Get a whole document", (
        "A search result's whole document by its documentId, at the version indexed: an event, or a "
        "workspace file as the index holds it (redacted as indexed, with its contentHash). includeChunks "
        "adds its chunks. A file the index does not hold is an error naming fetch_source_document's live mode.")),
}

RUNNERS: dict[str, Callable[[Facade, Any], tuple[str, Mapping[str, object]]]] = {
    "search": _search, "get_document": _get_document}
READ_ONLY = set(RUNNERS)
