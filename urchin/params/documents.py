"""textrawl's `search` (seed 003, `document_search`): its typed parameters, `DocumentSearchParams`,
validated when built.

Names, defaults and bounds are the seed's own page's (`urchin/params/limits.py`); the query and tags
are checked as `search_context` checks them (`ContextParams`, the one query checker). The contract
builds one at the edge (naming a bad field as the caller spelled it: `--source-type` in the CLI,
`sourceType` over HTTP and MCP); the index's search (`urchin/hybrid/docsearch.py`) takes it as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from urchin.errors import QueryError
from urchin.params.context import ContextParams
from urchin.params.limits import (
    DOCUMENT_CONTENT_TYPES,
    DOCUMENT_SEARCH_BOUNDS,
    DOCUMENT_SEARCH_DEFAULTS,
    DOCUMENT_SOURCE_TYPES,
)
from urchin.params.reading import parse_fields, set_checked
from urchin.value_checks import camel, check_bool, check_number, describe

__all__ = ["DocumentSearchParams"]

_D = DOCUMENT_SEARCH_DEFAULTS


@dataclass(frozen=True, slots=True)
class DocumentSearchParams:
    """What to find, how the two legs and the result classes are weighted, and the filters."""

    query: str
    limit: int = _D["limit"]
    full_text_weight: float = _D["full_text_weight"]
    semantic_weight: float = _D["semantic_weight"]
    tags: tuple[str, ...] = ()
    source_type: str | None = _D["source_type"]
    content_type: str | None = _D["content_type"]
    min_score: float = _D["min_score"]
    include_memories: bool = _D["include_memories"]
    include_conversations: bool = _D["include_conversations"]
    memory_weight: float = _D["memory_weight"]
    conversation_weight: float = _D["conversation_weight"]
    WIRE: ClassVar[Mapping[str, str]] = {
        "full_text_weight": "fullTextWeight", "semantic_weight": "semanticWeight", "source_type": "sourceType",
        "content_type": "contentType", "min_score": "minScore", "include_memories": "includeMemories",
        "include_conversations": "includeConversations", "memory_weight": "memoryWeight",
        "conversation_weight": "conversationWeight"}

    def __post_init__(self) -> None:
        # the order errors come in: the query and tags, the numbers, the weights together, flags, choices
        shared = ContextParams.parse({"query": self.query, "tags": self.tags})
        values: dict[str, Any] = {"query": shared.query, "tags": shared.tags}
        for name, (low, high) in DOCUMENT_SEARCH_BOUNDS.items():
            values[name] = check_number(getattr(self, name), camel(name), whole=name == "limit", low=low, high=high)
        if values["full_text_weight"] == 0 and values["semantic_weight"] == 0:
            raise QueryError("semanticWeight", "must be over 0 when fullTextWeight is 0 (no leg would run)")
        for name in ("include_memories", "include_conversations"):
            values[name] = check_bool(getattr(self, name), camel(name))
        values["source_type"] = _choice(self.source_type, "sourceType", DOCUMENT_SOURCE_TYPES)
        values["content_type"] = _choice(self.content_type, "contentType", DOCUMENT_CONTENT_TYPES)
        set_checked(self, **values)

    @classmethod
    def parse(cls, values: Mapping[str, Any], *, from_text: bool = False) -> DocumentSearchParams:
        """From field names or wire names (`fullTextWeight`); `None` means the default."""
        if not isinstance(values, Mapping):
            raise QueryError("params", "must be an object")
        by_wire = {wire: name for name, wire in cls.WIRE.items()}
        named = {by_wire.get(key, key) if isinstance(key, str) else key: value for key, value in values.items()}
        if len(named) < len(values):   # a field given twice, by both its names
            raise QueryError(next(k for k in values if k in by_wire and by_wire[k] in values), "is given twice")
        return parse_fields(cls, named, from_text=from_text, wire={f.name: camel(f.name) for f in fields(cls)})


def _choice(value: Any, name: str, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        raise QueryError(name, f"must be one of {', '.join(allowed)}, got {describe(value)}")
    return value.strip().lower()
