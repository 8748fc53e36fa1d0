"""The `search_context` MCP tool: the hybrid (Postgres) query, one `Memory.context` call."""

from __future__ import annotations

from typing import Any

from urchin.contract.ops import CONTEXT_MAX_TOKEN_BUDGET
from urchin.contract.render import render_context

__all__ = ["RUNNERS", "INPUT", "OUTPUT", "DOCS", "READ_ONLY"]

_STRINGS = {"type": "array", "items": {"type": "string"}}


def _search_context(memory: Any, a: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    result = memory.context(a).to_dict()
    return render_context(result), result


INPUT: dict[str, dict[str, Any]] = {"search_context": {
    "type": "object", "additionalProperties": False, "required": ["query"],
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": (
            "The question, in websearch syntax: \"quoted phrases\", -excluded words, or.")},
        "strategy": {"type": "string", "enum": ["hybrid", "keyword", "semantic"], "default": "hybrid",
                     "description": ("hybrid, keyword (full-text only) or semantic (vectors only) "
                                     "(default \"hybrid\").")},
        "searches": {"type": "array", "minItems": 1, "maxItems": 8, "description": (
            "Optional 1-8 typed sub-queries that add recall: lex (keyword leg), vec (semantic leg), hyde (a "
            "hypothetical answer passage of 30-80 words, embedded). The question keeps double weight (default: none)."),
            "items": {"type": "object", "additionalProperties": False, "required": ["type", "query"],
                      "properties": {"type": {"type": "string", "enum": ["lex", "vec", "hyde"]},
                                     "query": {"type": "string", "minLength": 1}}}},
        "fullTextWeight": {"type": "number", "minimum": 0, "default": 1.0,
                           "description": "Weight of the full-text list in the fusion (default 1.0)."},
        "semanticWeight": {"type": "number", "minimum": 0, "default": 1.0,
                           "description": "Weight of the semantic list in the fusion (default 1.0)."},
        "k": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 60,
              "description": "RRF constant: weight/(k+rank) (default 60)."},
        "sources": {**_STRINGS, "description": "Only these sources (default: any)."},
        "sourceIds": {**_STRINGS, "description": "Alias of sources (default: any)."},
        "kinds": {**_STRINGS, "description": "Only these kinds (default: any)."},
        "workspace": {"type": "string", "description": "Only this workspace (default: any)."},
        "session": {"type": "string", "description": "Only this session (default: any)."},
        "tags": {**_STRINGS, "description": "Results must carry ALL these tags (default: none)."},
        "devices": {**_STRINGS, "description": "Team: only events fed by these machines (default: every device)."},
        "accounts": {**_STRINGS, "description": "Team: only events of these accounts (default: every account)."},
        "since": {"type": "string", "description": "RFC 3339 lower time bound (default: no window)."},
        "until": {"type": "string", "description": "RFC 3339 upper time bound (default: no window)."},
        "hours": {"type": "number", "exclusiveMinimum": 0,
                  "description": "Only the last N hours (default: no window)."},
        "includeMemories": {"type": "boolean", "default": True,
                            "description": "Include decisions stored with urchin_remember (default true)."},
        "includeConversations": {"type": "boolean", "default": True,
                                 "description": "Include every other event (default true)."},
        "memoryWeight": {"type": "number", "minimum": 0, "default": 1.0,
                         "description": "Fusion weight of memories against conversations (default 1.0)."},
        "minScore": {"type": "number", "minimum": 0, "maximum": 1, "default": 0,
                     "description": "Drop results under this calibrated 0-1 score (default 0)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
                  "description": "Most results (default 10)."},
        "tokenBudget": {"type": "integer", "minimum": 1, "maximum": CONTEXT_MAX_TOKEN_BUDGET, "description": (
            "Pack results best first into this many tokens (4 characters each), cutting the last at a line "
            "(default: no budget).")},
        "explain": {"type": "boolean", "default": False,
                    "description": "Add each leg's rank, raw score, weight and contribution (default false)."},
        "perFileCap": {"type": "integer", "minimum": 1, "maximum": 100, "default": 3,
                       "description": "Most passages of one workspace file, applied after fusion (default 3)."},
        "mode": {"type": "string", "enum": ["indexed", "live"], "default": "indexed", "description": (
            "indexed (default) searches what the index holds; live also reads workspace files over the size "
            "cap (cataloged, bodies not stored) at query time, within liveByteBudget; coverage.live says what was "
            "read and what was skipped and why.")},
        "liveByteBudget": {"type": "integer", "minimum": 0, "maximum": 1073741824, "default": 8388608,
                           "description": "Bytes read live per query in live mode (default 8388608 = 8 MiB)."},
    }}}

OUTPUT: dict[str, dict[str, Any]] = {"search_context": {
    "type": "object",
    "properties": {"query": {"type": "string"}, "results": {"type": "array"}, "coverage": {"type": "object"},
                   "truncated": {"type": "boolean"}, "tokensUsed": {"type": "integer"}},
    "required": ["query", "results", "coverage", "truncated", "tokensUsed"]}}

DOCS: dict[str, tuple[str, str]] = {"search_context": ("Search context (hybrid)", (
    "The best excerpts for an open question ('how do we deploy?') across the journal (and indexed "
    "workspace files), from full-text and semantic search fused by weighted reciprocal-rank fusion, each "
    "with a citation. Prefer it to urchin_semantic_search for questions about a project; then read exact "
    "ranges with get_file. Defaults: strategy \"hybrid\", limit 10, fullTextWeight 1.0, semanticWeight 1.0, "
    "k 60, no time window, perFileCap 3, mode \"indexed\". "
    "File results cite `<root>/<path>#L<start>-L<end>`. "
    "The coverage block says what was searched; it is not evidence."))}

RUNNERS = {"search_context": _search_context}
READ_ONLY = set(RUNNERS)
