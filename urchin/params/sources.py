"""The typed parameters of the reads of one source and of one document: `query_source`
(`QuerySourceParams`), `fetch_source_document` (`FetchParams`, the contract's `fetch_document`) and
textrawl's `get_document` (`DocumentParams`), each validated when built.

The contract builds them at the edge (naming a bad field as the caller spelled it) and `Memory` takes
them as they are; a Python caller builds them too (or passes `Memory`'s arguments, built there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from urchin.errors import QueryError
from urchin.params.limits import FETCH_MODES, MAX_CONTEXT_LIMIT, MAX_QUERY_CHARS
from urchin.params.reading import TypedParams, required_text, set_checked
from urchin.value_checks import check_bool, check_number, describe

__all__ = ["QuerySourceParams", "FetchParams", "DocumentParams"]


def _label(value: Any, name: str) -> str:
    """A required name (source, id): not blank, its surrounding spaces dropped."""
    return required_text(value, name).strip()


@dataclass(frozen=True, slots=True)
class QuerySourceParams(TypedParams):
    """`search_context` on one source: a journal source (claude, git, ...) or a workspace root's files."""

    source: str
    query: str
    limit: int = 10
    min_score: float = 0.0
    WIRE: ClassVar[Mapping[str, str]] = {"min_score": "minScore"}

    def __post_init__(self) -> None:
        query = required_text(self.query, "query")
        if len(query) > MAX_QUERY_CHARS:
            raise QueryError("query", f"must be at most {MAX_QUERY_CHARS} characters, got {len(query)}")
        set_checked(self, source=_label(self.source, "source"), query=query,
                    limit=int(check_number(self.limit, "limit", whole=True, low=1, high=MAX_CONTEXT_LIMIT)),
                    min_score=float(check_number(self.min_score, "minScore", whole=False, low=0, high=1)))



@dataclass(frozen=True, slots=True)
class FetchParams(TypedParams):
    """One whole document: an event by id, or a workspace root's file; `content_hash` insists on a version."""

    source: str
    id: str
    mode: str = "indexed"
    content_hash: str | None = None
    WIRE: ClassVar[Mapping[str, str]] = {"content_hash": "contentHash"}

    def __post_init__(self) -> None:
        mode = self.mode.strip().lower() if isinstance(self.mode, str) else self.mode
        if mode not in FETCH_MODES:
            raise QueryError("mode", f"must be one of {', '.join(FETCH_MODES)}, got {describe(self.mode)}")
        if self.content_hash is not None and not isinstance(self.content_hash, str):
            raise QueryError("contentHash", f"must be a string, got {describe(self.content_hash)}")
        set_checked(self, source=_label(self.source, "source"), id=_label(self.id, "id"), mode=mode,
                    content_hash=self.content_hash)



@dataclass(frozen=True, slots=True)
class DocumentParams(TypedParams):
    """textrawl's `get_document`: a search result's documentId, with its chunks or not."""

    document_id: str
    include_chunks: bool = False
    WIRE: ClassVar[Mapping[str, str]] = {"document_id": "documentId", "include_chunks": "includeChunks"}

    def __post_init__(self) -> None:
        set_checked(self, document_id=_label(self.document_id, "documentId"),
                    include_chunks=check_bool(self.include_chunks, "includeChunks"))

