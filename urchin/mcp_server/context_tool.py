"""The `search_context` MCP tool: the hybrid (Postgres) query, one `Memory.context` call.

Its input schema is generated from the contract's `context` operation (`urchin/contract/ops.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from urchin.contract.render import render_context

if TYPE_CHECKING:
    from urchin.facade.api import Facade
    from urchin.params.context import ContextParams

__all__ = ["RUNNERS", "OUTPUT", "DOCS", "READ_ONLY"]


def _search_context(memory: Facade, a: ContextParams) -> tuple[str, dict[str, Any]]:
    result = memory.context(a).to_dict()
    return render_context(result), result


OUTPUT: dict[str, dict[str, Any]] = {"search_context": {
    "type": "object",
    "properties": {"query": {"type": "string"}, "results": {"type": "array"}, "coverage": {"type": "object"},
                   "truncated": {"type": "boolean"}, "tokensUsed": {"type": "integer"}},
    "required": ["query", "results", "coverage", "truncated", "tokensUsed"]}}

DOCS: dict[str, tuple[str, str]] = {"search_context": ("Search context (hybrid)", (
    "The best excerpts for an open question ('how do we deploy?') across the journal (and indexed "
    "workspace files), from full-text and semantic search fused by weighted reciprocal-rank fusion, each "
    "with a citation. Prefer it to urchin_semantic_search for questions about a project; then read exact "
    "ranges with get_file. File results cite `<root>/<path>#L<start>-L<end>`. "
    "The coverage block says what was searched; it is not evidence."))}

RUNNERS = {"search_context": _search_context}
READ_ONLY = set(RUNNERS)
