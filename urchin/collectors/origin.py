"""Where a collected event came from: its upstream file, line range and a keyed hash of those bytes.

A transcript collector records `meta.origin = {"path", "lines": [first, last], "hash"}` on every
event it reads: `path` the upstream file (absolute), `lines` 1-based, `hash` 128 bits (hex) of
HMAC-SHA256 over the exact upstream bytes of those lines (the newlines between them, none after).
The hash is keyed with the install's key (`redact-id.key`) because those bytes are read before
redaction: a plain digest of a line whose other parts the event shows would let anyone holding the
journal confirm a guessed password, and an `origin` forged over HTTP could probe transcripts.

`upstream_status` says whether the file still holds those bytes. It reads only a file inside the
collector's configured folders (checked as written, then resolved once and checked again, and
opened exactly as resolved), and returns a status, never the bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from urchin.collectors.text import Item
from urchin.workspace.beneath import Outside, Tree

__all__ = ["Origin", "origin_hash", "origin_of", "upstream_status", "TRANSCRIPT_SOURCES"]

TRANSCRIPT_SOURCES = ("claude", "codex", "copilot", "gemini")   # the collectors that cite their lines
_DOMAIN = b"urchin-origin-v1\x00"     # the id key also names redacted ids: a hash here is never one there
_HASH = re.compile(r"[0-9a-f]{32}")
MAX_LINE = 2**31 - 1      # line numbers are stored as PostgreSQL integers: a larger one is no origin
_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)   # a FIFO swapped in does not hang the open


def origin_hash(key: bytes, data: bytes) -> str:
    """The `hash` of an origin: keyed, so it confirms nothing to someone without the key."""
    return hmac.new(key, _DOMAIN + data, hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Origin:
    path: str
    first: int
    last: int
    hash: str

    def location(self) -> dict[str, Any]:
        """The `upstream` block of a citation (wire names)."""
        return {"path": self.path, "startLine": self.first, "endLine": self.last, "contentHash": self.hash}


def origin_of(meta: Mapping[str, Any] | None) -> Origin | None:
    """`meta.origin` when it has the shape a collector writes; anything else (an event from before
    origins, or a hand-made one) counts as no origin."""
    raw = meta.get("origin") if isinstance(meta, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    path, lines, digest = raw.get("path"), raw.get("lines"), raw.get("hash")
    if not (isinstance(path, str) and os.path.isabs(path) and "\x00" not in path
            and isinstance(digest, str) and _HASH.fullmatch(digest) and isinstance(lines, list) and len(lines) == 2
            and all(type(n) is int for n in lines) and 1 <= lines[0] <= lines[1] <= MAX_LINE):
        return None
    return Origin(path, lines[0], lines[1], digest)


def upstream_status(origin: Origin, folders: Sequence[Path], key: bytes) -> tuple[str, str | None]:
    """(`unchanged` | `changed` | `missing` | `unchecked`, why when unchecked) for `origin`'s lines.

    Only a path inside `folders` (a collector's transcript folders) is ever opened, and it is opened
    beneath the folder's fd (`workspace.beneath`): a symlink swapped in on the way cannot lead out.
    """
    outside = ("unchecked", "the path is outside the transcript folders of this event's collector")
    base = next((b for b in (os.path.abspath(f) for f in folders) if _inside(origin.path, [b])), None)
    if base is None:
        return outside                         # not even looked at: no lstat of /etc/passwd
    rel = origin.path[len(base):].lstrip(os.sep)
    try:
        fd = _open_below(base, rel)
    except Outside:
        return outside                         # a symlink leading out
    except FileNotFoundError:
        return "missing", None
    except (OSError, RuntimeError) as exc:
        return "unchecked", f"the file cannot be opened: {getattr(exc, 'strerror', None) or exc}"
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return "missing", None
        digest = _span_hash(handle, origin.first, origin.last, key)
    return ("unchanged" if digest == origin.hash else "changed"), None


def _open_below(base: str, rel: str) -> int:
    """`rel` opened beneath the collector's folder `base` (as configured, symlinks in it resolved);
    `base` itself when it is the collector's file (`~/.claude/history.jsonl`)."""
    real = os.path.realpath(base, strict=True)
    if not rel:
        return os.open(real, _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    with Tree(os.open(real, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)), Path(real)) as tree:
        return tree.open(rel, _OPEN_FLAGS)[0]


def _inside(path: str, bases: Sequence[str]) -> bool:
    """`path` is one of `bases` or below one, as written: absolute, no `.`/`..` or empty parts."""
    if not os.path.isabs(path) or "\x00" in path:
        return False
    parts = path.split(os.sep)[1:]
    if any(p in ("", ".", "..") for p in parts):
        return False
    return any(path == base or path.startswith(base.rstrip(os.sep) + os.sep) for base in bases)


def _span_hash(handle: BinaryIO, first: int, last: int, key: bytes) -> str | None:
    """`origin_hash` of lines `first`..`last` (complete ones only), streamed; None when the file ends first."""
    mac = hmac.new(key, _DOMAIN, hashlib.sha256)
    line = 1
    while chunk := handle.read(_CHUNK):
        pos = 0
        if line < first:
            ahead = chunk.count(b"\n")
            if line + ahead < first:            # the whole chunk lies before the span
                line += ahead
                continue
            while line < first:
                pos = chunk.index(b"\n", pos) + 1
                line += 1
        while pos < len(chunk):
            nl = chunk.find(b"\n", pos)
            if nl < 0:
                mac.update(chunk[pos:])
                break
            mac.update(chunk[pos:nl])
            if line == last:
                return mac.hexdigest()[:32]
            mac.update(b"\n")
            line += 1
            pos = nl + 1
    return None


# ---- a batch of lines, and the events made from it citing them ------------------------------
class Lines(list[tuple[int, bytes]]):
    """A batch of complete lines as (byte offset, bytes) pairs, the first being line `first` (1-based)
    of `path`: what `LineCollector.parse` reads, and what the events it makes cite (`origin.py`)."""

    def __init__(self, lines: Iterable[tuple[int, bytes]], path: str, first: int, key: Callable[[], bytes]) -> None:
        super().__init__(lines)
        self.path = path
        self.first = first
        self.key = key

    def origin(self, index: int) -> dict[str, Any]:
        """`meta.origin` of an event made from line `index` of the batch (the raw bytes, before redaction)."""
        number = self.first + index
        return {"path": self.path, "lines": [number, number], "hash": origin_hash(self.key(), self[index][1])}

    def cite(self, index: int, items: Iterable[Item | None]) -> list[Item | None]:
        """`items`, made from line `index`, each with that line as its origin (hashed only if there are any)."""
        items = list(items)
        return with_origin(items, self.origin(index)) if any(items) else items

    def one(self, index: int) -> Lines:
        return Lines([self[index]], self.path, self.first + index, self.key)


def with_origin(items: Iterable[Item | None], origin: dict[str, Any] | None) -> list[Item | None]:
    """`items` with `meta.origin` set (left alone when `origin` is None)."""
    out = list(items)
    if origin is not None:
        for item in out:
            if item:
                item["meta"] = {**(item.get("meta") or {}), "origin": {**origin}}
    return out
