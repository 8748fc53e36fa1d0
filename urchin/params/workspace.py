"""The typed parameters of the reads of workspace files and curated memories: `get_file` (`FileParams`)
and `get_memory` (`CuratedMemoryParams`), each validated when built.

The contract builds them at the edge (naming a bad field as the caller spelled it: `--from-line` in the
CLI, `fromLine` over HTTP and MCP) and `Memory` takes them as they are; a Python caller builds them too
(`FileParams("ws/a.py", from_line=40)`, or `Memory.get_file`'s arguments), so no caller skips the checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from urchin.params.limits import MAX_FROM_LINE, MAX_LINES, MAX_MEMORY_TOKEN_BUDGET
from urchin.params.reading import TypedParams, required_text, set_checked
from urchin.value_checks import check_number

__all__ = ["FileParams", "CuratedMemoryParams"]


def _whole(value: Any, name: str, high: int) -> int:
    return int(check_number(value, name, whole=True, low=1, high=high))


@dataclass(frozen=True, slots=True)
class FileParams(TypedParams):
    """A window of numbered lines of a workspace file: `<root>/<path>`, or `<path>` when one root holds it."""

    path: str
    from_line: int = 1
    max_lines: int = 200
    WIRE: ClassVar[Mapping[str, str]] = {"from_line": "fromLine", "max_lines": "maxLines"}

    def __post_init__(self) -> None:
        set_checked(self, path=required_text(self.path, "path"),
                    from_line=_whole(self.from_line, "fromLine", MAX_FROM_LINE),
                    max_lines=_whole(self.max_lines, "maxLines", MAX_LINES))



@dataclass(frozen=True, slots=True)
class CuratedMemoryParams(TypedParams):
    """A curated memory by slug, its members' contents cut to `token_budget` tokens (4 characters each)."""

    slug: str
    token_budget: int = 8000
    WIRE: ClassVar[Mapping[str, str]] = {"token_budget": "tokenBudget"}

    def __post_init__(self) -> None:
        set_checked(self, slug=required_text(self.slug, "slug"),
                    token_budget=_whole(self.token_budget, "tokenBudget", MAX_MEMORY_TOKEN_BUDGET))

