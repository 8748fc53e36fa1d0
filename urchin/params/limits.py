"""Every operation's bounds, defaults and choices, declared once.

The contract's declarations (`urchin/contract/ops.py`: help, JSON Schemas, click flags) and the layers
that hold to them (the typed parameters beside this module, the substring search, file ranges, curated
memories, recall, textrawl's search) import them from here: there is no second copy to keep equal.
"""

from __future__ import annotations

from typing import Any

from urchin.event import RECORDED_KINDS

__all__ = ["MAX_LIMIT", "MAX_LINES", "MAX_FROM_LINE", "MAX_MEMORY_TOKEN_BUDGET", "MAX_CONTEXT_TOKEN_BUDGET",
           "MAX_CONTEXT_LIMIT", "MAX_QUERY_CHARS", "MAX_WEIGHT", "MAX_K", "STRATEGIES", "MODES", "SEARCH_TYPES",
           "MAX_SEARCHES", "HYDE_WORDS", "DEFAULT_LIVE_BYTE_BUDGET", "MAX_LIVE_BYTE_BUDGET", "MAX_RECALL_BUDGET",
           "MAX_RECALL_PROMPT_CHARS", "FETCH_MODES", "SEARCH_SCOPES", "SEARCH_HOURS", "SEARCH_LIMIT",
           "DOCUMENT_SEARCH_NAMES", "DOCUMENT_SEARCH_DEFAULTS", "DOCUMENT_SEARCH_BOUNDS", "DOCUMENT_SOURCE_TYPES",
           "DOCUMENT_FILE_TYPES", "DOCUMENT_CONTENT_TYPES", "EPHEMERAL_ACTIONS", "MAX_EPHEMERAL_MINUTES"]

# events per answer of search, semantic, recent, tail
MAX_LIMIT = 1000
# `search`: its window and answer size by default; where it searches
SEARCH_HOURS = 168
SEARCH_LIMIT = 20
SEARCH_SCOPES = ("local", "team")
# get_file: lines per answer; answers are JSON, so 64-bit integers at most
MAX_LINES = 2000
MAX_FROM_LINE = 1 << 31
# get_memory
MAX_MEMORY_TOKEN_BUDGET = 200_000
# search_context (and the query and tags of textrawl's search)
MAX_CONTEXT_TOKEN_BUDGET = 1_000_000   # tokenBudget
MAX_CONTEXT_LIMIT = 100                # results per answer, and passages per workspace file
MAX_QUERY_CHARS = 4000
MAX_WEIGHT = 1000.0                    # fusion weights: finite, and their sums stay finite
MAX_K = 1000                           # the RRF constant
STRATEGIES = ("hybrid", "keyword", "semantic")
MODES = ("indexed", "live")
SEARCH_TYPES = ("lex", "vec", "hyde")
MAX_SEARCHES = 8
HYDE_WORDS = (30, 80)                  # a hyde sub-query is a hypothetical answer passage, not a keyword list
DEFAULT_LIVE_BYTE_BUDGET = 8 * 1024 * 1024
MAX_LIVE_BYTE_BUDGET = 1024 * 1024 * 1024
# fetch_source_document: a retained file from the index (as cited), or from disk
FETCH_MODES = ("indexed", "live")
# ephemeral: what it does, and the longest a start lasts (7 days)
EPHEMERAL_ACTIONS = ("start", "end", "status")
MAX_EPHEMERAL_MINUTES = 7 * 24 * 60
# recall: the block's budget; a hook passes the whole prompt, the ranking reads its start
MAX_RECALL_BUDGET = 20_000
MAX_RECALL_PROMPT_CHARS = 100_000

# textrawl's `search` (seed 003): its names, defaults and bounds are the seed's own page's. The seed's
# sourceType is note | file | url: Urchin has notes (journal events) and files (workspace files); it saves
# no web pages, so `url` is refused by name.
DOCUMENT_SEARCH_NAMES = ("query", "limit", "fullTextWeight", "semanticWeight", "tags", "sourceType", "contentType",
                         "minScore", "includeMemories", "includeConversations", "memoryWeight", "conversationWeight")
DOCUMENT_SEARCH_DEFAULTS: dict[str, Any] = {
    "limit": 5, "full_text_weight": 1.0, "semantic_weight": 1.0, "min_score": 0.0, "include_memories": False,
    "include_conversations": False, "memory_weight": 1.0, "conversation_weight": 0.5, "source_type": None,
    "content_type": None}
DOCUMENT_SEARCH_BOUNDS: dict[str, tuple[float, float]] = {
    "limit": (1, 50), "full_text_weight": (0, 2.0), "semantic_weight": (0, 2.0), "min_score": (0, 1),
    "memory_weight": (0, 2.0), "conversation_weight": (0, 2.0)}
DOCUMENT_SOURCE_TYPES = ("note", "file")
DOCUMENT_FILE_TYPES = ("markdown", "code")
DOCUMENT_CONTENT_TYPES = (*RECORDED_KINDS, *DOCUMENT_FILE_TYPES)
