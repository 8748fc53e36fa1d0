"""`remember`'s typed parameters: `RememberParams`, validated when built.

A decision or fact an agent chose to keep (the MCP tool `urchin_remember`): its text, tags and workspace.
The contract builds one at the edge; its run writes it as one event of kind `decision` from source `mcp`
(`item`), whose content, tags and workspace the event's own rules then check as every write's (a blank
content is refused here already, in the event's words, so a Python caller building one directly cannot
make an empty decision either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from urchin.errors import QueryError
from urchin.params.reading import TypedParams, check_texts, set_checked, tags_of

__all__ = ["RememberParams"]


@dataclass(frozen=True, slots=True)
class RememberParams(TypedParams):
    """The fields as given, of the right types; `tags` None or a non-empty tuple."""

    content: str
    tags: tuple[str, ...] | None = None
    workspace: str | None = None

    def __post_init__(self) -> None:
        check_texts(self, ("content", "workspace"))
        if not self.content.strip():    # the event's rule, in its words (tags and the rest: the event's own)
            raise QueryError("content", "must not be blank")
        set_checked(self, tags=tags_of(self.tags))

    def item(self) -> dict[str, Any]:
        """The event to write: the fields given, as an agent's decision over MCP."""
        item: dict[str, Any] = {"content": self.content, "source": "mcp", "kind": "decision"}
        if self.tags is not None:
            item["tags"] = list(self.tags)
        if self.workspace is not None:
            item["workspace"] = self.workspace
        return item
