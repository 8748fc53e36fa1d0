"""`ingest`'s typed parameters: `IngestParams`, validated when built.

One event as a front end takes it (the CLI's `urchin ingest`, the MCP tool `urchin_ingest`): its text and
the fields an event may be given. The contract builds one at the edge; each front end names its writer
(`with_writer`: the CLI's manual note, MCP's conversation) and runs the operation, which writes `item()`.
The event's own rules (`urchin/event.py`) then check it as every write's. HTTP's `POST /ingest` and
`/ingest/batch` take events as JSON and go to those rules directly (the intake's hot path).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from urchin.errors import QueryError
from urchin.params.reading import TypedParams, check_texts, set_checked, tags_of

__all__ = ["IngestParams"]

_TEXTS = ("content", "source", "kind", "workspace", "session", "title", "timestamp", "id")


@dataclass(frozen=True, slots=True)
class IngestParams(TypedParams):
    """The fields as given, of the right types; `tags` None or a non-empty tuple."""

    content: str
    source: str | None = None
    kind: str | None = None
    workspace: str | None = None
    session: str | None = None
    title: str | None = None
    tags: tuple[str, ...] | None = None
    timestamp: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        check_texts(self, _TEXTS)
        if not self.content.strip():    # the event's rule, in its words (the other fields: the event's own)
            raise QueryError("content", "must not be blank")
        set_checked(self, tags=tags_of(self.tags))

    def with_writer(self, writer: Mapping[str, str]) -> IngestParams:
        """These parameters, with the writer's source and kind where none is given."""
        missing: dict[str, Any] = {k: v for k, v in writer.items() if getattr(self, k) is None}
        return replace(self, **missing) if missing else self

    def item(self) -> dict[str, Any]:
        """The event to write: the fields given."""
        item = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if "tags" in item:
            item["tags"] = list(item["tags"])
        return item
