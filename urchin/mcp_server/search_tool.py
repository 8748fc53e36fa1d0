"""textrawl's `search` MCP tool (seed 003): one `Memory.document_search` call, beside search_context."""

from __future__ import annotations

from typing import Any

from urchin.contract.render import render_document_search as render

__all__ = ["RUNNERS", "INPUT", "OUTPUT", "DOCS", "READ_ONLY"]


def _search(memory: Any, a: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    result = memory.document_search(a)
    return render(result), result


_STRINGS = {"type": "array", "items": {"type": "string"}}
INPUT: dict[str, dict[str, Any]] = {"search": {
    "type": "object", "additionalProperties": False, "required": ["query"],
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": (
            "What to find, in websearch syntax: words (every word ranks first), \"quoted phrases\" and -excluded "
            "words (filters in every leg), a OR b.")},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
                  "description": "Most results (default 10)."},
        "fullTextWeight": {"type": "number", "minimum": 0, "default": 1.0,
                           "description": "Weight of the full-text list in the fusion (default 1.0)."},
        "semanticWeight": {"type": "number", "minimum": 0, "default": 1.0,
                           "description": "Weight of the semantic list in the fusion (default 1.0)."},
        "tags": {**_STRINGS, "description": "Results must carry ALL these tags (default: none)."},
        "sourceType": {"type": "string", "description": (
            "Only documents of this type: an event kind (note, command, ...) or file, markdown, code "
            "(default: any).")},
        "minScore": {"type": "number", "minimum": 0, "maximum": 1, "default": 0,
                     "description": "Drop results under this absolute 0-1 score (default 0)."},
        "includeMemories": {"type": "boolean", "default": False, "description": (
            "Also search memories: curated memories and urchin_remember decisions (default false).")},
        "includeConversations": {"type": "boolean", "default": False, "description": (
            "Also search conversations: agent sessions, each with its best turns (default false).")},
        "memoryWeight": {"type": "number", "minimum": 0, "default": 1.0,
                         "description": "Weight of memories against documents and conversations (default 1.0)."},
    }}}

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
    "documentId works with fetch_source_document (source: the result's source). Defaults: limit 10, "
    "fullTextWeight 1.0, semanticWeight 1.0, minScore 0, includeMemories false, includeConversations false, "
    "memoryWeight 1.0."))}

RUNNERS = {"search": _search}
READ_ONLY = set(RUNNERS)
