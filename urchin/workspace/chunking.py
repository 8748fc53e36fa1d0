"""Split workspace files into retrievable chunks with line anchors.

Markdown is split at headings (outside fenced code), each chunk carrying its heading path; code and
plain text are split at blank lines and definitions near a target size. Line numbers are 1-based
and inclusive. `Chunk.retrieval_text` prefixes the path and heading path, which is what gets indexed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Chunk", "chunk_text", "chunk_markdown", "chunk_code", "TARGET_CHARS", "MAX_CHARS"]

TARGET_CHARS = 1500
MAX_CHARS = 4000
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".rst", ".txt")

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_DEFINITION = re.compile(
    r"^(?:\s{0,4})(?:async\s+def|def|class|function|func|fn|pub\s+fn|impl|interface|type|struct|enum|export\s+"
    r"(?:default\s+)?(?:function|class|const|interface|type)|const\s+\w+\s*=\s*\(|module|public|private|protected"
    r"|@\w+)\b")


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    start_line: int
    end_line: int
    heading_path: tuple[str, ...] = ()

    def retrieval_text(self, path: str) -> str:
        """What the index sees: the file path and heading path, then the chunk."""
        head = path + (" › " + " › ".join(self.heading_path) if self.heading_path else "")
        return f"{head}\n{self.text}"


def chunk_text(path: str, text: str, target: int = TARGET_CHARS, maximum: int = MAX_CHARS) -> list[Chunk]:
    if path.lower().endswith((".md", ".markdown", ".mdx")):
        return chunk_markdown(text, target, maximum)
    return chunk_code(text, target, maximum)


def chunk_markdown(text: str, target: int = TARGET_CHARS, maximum: int = MAX_CHARS) -> list[Chunk]:
    lines = text.splitlines()
    sections: list[tuple[int, int, tuple[str, ...]]] = []  # (start index, end index exclusive, path)
    stack: list[tuple[int, str]] = []
    start = 0
    path: tuple[str, ...] = ()
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _ATX.match(line)
        if match is None:
            continue
        if i > start:
            sections.append((start, i, path))
        level = len(match.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, match.group(2).strip()))
        start, path = i, tuple(title for _, title in stack)
    if start < len(lines):
        sections.append((start, len(lines), path))
    chunks: list[Chunk] = []
    for begin, end, heading_path in sections:
        if not any(line.strip() for line in lines[begin:end]):
            continue
        if sum(len(line) + 1 for line in lines[begin:end]) <= maximum:
            chunks.append(_make(lines, begin, end, heading_path))
        else:
            chunks.extend(_split(lines, begin, end, heading_path, target, maximum))
    return chunks


def chunk_code(text: str, target: int = TARGET_CHARS, maximum: int = MAX_CHARS) -> list[Chunk]:
    lines = text.splitlines()
    return _split(lines, 0, len(lines), (), target, maximum)


def _split(lines: list[str], begin: int, end: int, heading_path: tuple[str, ...], target: int,
           maximum: int) -> list[Chunk]:
    """Greedy: grow a chunk; past `target`, cut before a blank line or a definition; past `maximum`, cut."""
    chunks: list[Chunk] = []
    start = begin
    size = 0
    for i in range(begin, end):
        line = lines[i]
        boundary = not line.strip() or _DEFINITION.match(line) is not None
        if i > start and ((size >= target and boundary) or size + len(line) + 1 > maximum):
            chunks.append(_make(lines, start, i, heading_path))
            start, size = i, 0
        size += len(line) + 1
    if start < end:
        chunks.append(_make(lines, start, end, heading_path))
    return [c for c in chunks if c.text.strip()]


def _make(lines: list[str], begin: int, end: int, heading_path: tuple[str, ...]) -> Chunk:
    # Trim blank lines at both ends so the anchors point at text.
    while begin < end - 1 and not lines[begin].strip():
        begin += 1
    while end - 1 > begin and not lines[end - 1].strip():
        end -= 1
    return Chunk("\n".join(lines[begin:end]), begin + 1, end, heading_path)
