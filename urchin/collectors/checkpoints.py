"""Where a collector stopped in each file: `$URCHIN_HOME/collectors/<name>.json` (0600) holds a
cursor per file (byte offset after the last complete line consumed, line count, inode, size, a
fingerprint of the file's start, the adapter's state) and run statistics; a cursor is reset when its
file was replaced, truncated or rewritten.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from urchin.config import Settings
from urchin.fileio import write_private

__all__ = ["FileCursor", "Checkpoints", "check_rotation", "count_lines", "head_of", "READ_CHUNK"]

READ_CHUNK = 4 << 20          # bytes of a file read per step; a longer line grows the step
_HEAD_BYTES = 256             # fingerprint of a file's start, to notice it was rewritten


@dataclass
class FileCursor:
    """Where reading one file stopped: offset after the last complete line consumed, and how many
    lines lie before it (None in a checkpoint from before line numbers: counted once when next read)."""

    offset: int = 0
    inode: int = 0
    size: int = 0
    head: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    line: int | None = 0

    def to_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "line": self.line, "inode": self.inode, "size": self.size,
                "head": self.head, "state": self.state}

    @classmethod
    def from_dict(cls, data: Any) -> FileCursor:
        if not isinstance(data, dict):
            return cls()
        state = data.get("state")
        line = data.get("line")
        return cls(int(data.get("offset") or 0), int(data.get("inode") or 0), int(data.get("size") or 0),
                   str(data.get("head") or ""), state if isinstance(state, dict) else {},
                   line if type(line) is int and line >= 0 else None)


class Checkpoints:
    """`$URCHIN_HOME/collectors/<name>.json` (0600): cursors per file plus run statistics."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.path = settings.collectors_dir / f"{name}.json"
        self.files: dict[str, FileCursor] = {}
        self.stats: dict[str, Any] = {"events": 0, "lastRun": None, "lastError": None}

    def load(self) -> Checkpoints:
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return self
        except (OSError, orjson.JSONDecodeError):
            # A damaged checkpoint only costs a re-read: ids are deterministic, so nothing doubles.
            return self
        if isinstance(data, dict):
            files = data.get("files")
            if isinstance(files, dict):
                self.files = {k: FileCursor.from_dict(v) for k, v in files.items()}
            stats = data.get("stats")
            if isinstance(stats, dict):
                self.stats.update(stats)
        return self

    def cursor(self, path: Path) -> FileCursor:
        return self.files.setdefault(str(path), FileCursor())

    def save(self) -> None:
        body = orjson.dumps({"files": {k: v.to_dict() for k, v in self.files.items()}, "stats": self.stats})
        write_private(self.path, body)


def head_of(path: Path, upto: int) -> str:
    """A fingerprint of the first bytes of `path` (at most `upto`): the cursor's `head`."""
    with path.open("rb") as handle:
        return hashlib.blake2b(handle.read(min(upto, _HEAD_BYTES)), digest_size=8).hexdigest()


def check_rotation(path: Path, cursor: FileCursor) -> bool:
    """Reset `cursor` when the file was replaced, truncated or rewritten; True when it was."""
    st = path.stat()
    rotated = (cursor.inode and st.st_ino != cursor.inode) or st.st_size < cursor.offset
    if not rotated and cursor.offset and cursor.head and head_of(path, cursor.offset) != cursor.head:
        rotated = True
    if rotated:
        cursor.offset, cursor.line, cursor.state = 0, 0, {}
    cursor.inode = st.st_ino
    cursor.size = st.st_size
    return bool(rotated)


def count_lines(path: Path, upto: int) -> int:
    """Newlines in the first `upto` bytes of `path`: the line count an older checkpoint lacks."""
    count = 0
    with path.open("rb") as handle:
        while upto > 0 and (chunk := handle.read(min(READ_CHUNK, upto))):
            count += chunk.count(b"\n")
            upto -= len(chunk)
    return count
