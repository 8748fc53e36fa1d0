"""Ranged reads of workspace files: a window of numbered lines and the file's total line count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from urchin.checks import check_number
from urchin.errors import QueryError, ValidationError
from urchin.workspace.access import FileAccess

__all__ = ["FileRange", "read_range", "MAX_LINES"]

MAX_LINES = 2000
MAX_FROM_LINE = 1 << 31


@dataclass(frozen=True, slots=True)
class FileRange:
    path: str
    from_line: int
    to_line: int
    total_lines: int
    lines: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "fromLine": self.from_line, "toLine": self.to_line,
                "totalLines": self.total_lines, "lines": [{"n": self.from_line + i, "text": t}
                                                          for i, t in enumerate(self.lines)],
                "truncated": self.to_line < self.total_lines}

    def render(self) -> str:
        width = len(str(max(self.to_line, 1)))
        body = "\n".join(f"{self.from_line + i:>{width}}  {text}" for i, text in enumerate(self.lines))
        more = (f"\n… lines {self.to_line + 1}-{self.total_lines} not shown (read on from line {self.to_line + 1})"
                if self.to_line < self.total_lines else "")
        return f"{self.path} (lines {self.from_line}-{self.to_line} of {self.total_lines})\n{body}{more}"


def _int(value: Any, name: str, low: int, high: int | None = None) -> int:
    return int(check_number(value, name, whole=True, low=low, high=high))


def read_range(files: FileAccess, path: str, from_line: int = 1, max_lines: int = 200) -> FileRange:
    """Lines `from_line`.. of a checked workspace file, redacted (line numbers kept), and its line count."""
    from_line = _int(from_line, "fromLine", 1)
    if from_line > MAX_FROM_LINE:   # answers are JSON: 64-bit integers at most
        raise QueryError("fromLine", f"must be at most {MAX_FROM_LINE}, got {from_line}")
    max_lines = _int(max_lines, "maxLines", 1, MAX_LINES)
    loc = files.locate(path)
    if files.is_binary(loc):
        raise ValidationError("path", f"{path!r} is a binary file")
    lines: list[str] = []
    total = 0
    for total, line in enumerate(files.lines(loc), 1):
        if from_line <= total < from_line + max_lines:
            lines.append(line.rstrip("\n").rstrip("\r"))
    if from_line > max(total, 1):
        raise QueryError("fromLine", f"{loc.display!r} has {total} line{'s' if total != 1 else ''}: "
                                     f"fromLine {from_line} is past its end")
    to_line = from_line + len(lines) - 1 if lines else min(from_line - 1, total)
    return FileRange(loc.display, from_line, to_line, total, lines)
