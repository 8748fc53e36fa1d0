"""A workspace file as the hybrid index holds it: its body at the version indexed, reassembled from its chunks.

Chunks never overlap and carry their first and last line (urchin/workspace/chunking.py); what lies
between two chunks was blank, so placing each chunk at its lines gives the indexed text back, redacted
as the chunks are. Whitespace-only lines come back empty and the final newline is not kept (Memory
serves the file's own bytes instead while they still hash to the version indexed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from urchin.timestamps import format_timestamp

__all__ = ["reassemble", "indexed_file", "MAX_DOCUMENT_CHARS"]

MAX_DOCUMENT_CHARS = 4 * 1024 * 1024     # get_document cuts a body past this (textrawl's `truncated`)


def reassemble(chunks: Sequence[Mapping[str, Any]]) -> str:
    """The text of a file's chunks (in line order), each at its own lines, blank lines between."""
    lines: list[str] = []
    for chunk in chunks:
        start = max(1, int(chunk["start_line"]))
        body = str(chunk["content"]).split("\n")
        if len(lines) < start - 1:
            lines.extend([""] * (start - 1 - len(lines)))
        lines[start - 1:] = body      # a later chunk never starts inside an earlier one; if it did, it wins
    return "\n".join(lines)


def indexed_file(root: str, rel: str, catalog: Mapping[str, Any] | None, chunks: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any] | None:
    """`fetch_source_document`'s answer for a retained file (None: the index holds no chunk of it)."""
    if not chunks:
        return None
    text = reassemble(chunks)
    stamp = chunks[0]["occurred_at"]       # a file chunk's time is the file's mtime when indexed
    digest = chunks[0]["content_hash"] or (catalog or {}).get("hash")
    out: dict[str, Any] = {"source": root, "id": f"{root}/{rel}", "type": "file", "content": text,
                           "totalLines": len(text.splitlines()),
                           "size": (catalog or {}).get("size"), "contentHash": digest,
                           "updatedAt": format_timestamp(stamp, ms=False) if isinstance(stamp, datetime) else None,
                           "version": "indexed"}
    if out["size"] is None:
        del out["size"]
    return out
