"""Casefolded journal blocks, kept between queries (bounded, newest use first) for substring search.

Finding a query in a block means casefolding it first: ~0.5 ms for a 64 KiB block with a few
non-ASCII lines, which made a phrase of two common words (many candidate blocks, few matches)
cost 50-150 ms at 1M events. A folded block is bytes with the same lines as the raw block:
ASCII lines lowered, other lines decoded, casefolded and encoded back as UTF-8, so the UTF-8 of a
casefolded query is found in a folded line exactly when the query is in that line's folded text
(UTF-8 matches only whole characters). Newlines survive both steps, so line numbers agree with
the raw block. The daemon keeps the folded blocks it has used twice, up to a byte budget: a block
folded once (a scan of the whole journal for a rare word, the first `/search` of the day) is not
kept, so a scan does not push out the blocks that queries come back to, nor fill the budget with
blocks read once (the first `/search` of a 1M-event daemon's start filled all 96 MB; the bench's
30 hot cells use 12 MB).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import orjson

__all__ = ["FoldCache", "fold_block", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 96 << 20
_SEEN = 16384     # keys of blocks folded once, remembered for their second fold (newest kept)


def fold_block(data: bytes) -> bytes:
    """`data` (complete JSON lines) with each line's text casefolded, same line count, UTF-8.

    A line with a `\\u` escape (which can hide a character of the content from its raw text) also
    gets its decoded content, folded, with newlines as spaces, appended after a space: whatever the
    parsed content holds is then in the folded line, with no escape left to special-case.
    """
    if data.isascii() and b"\\u" not in data:
        return data.lower()
    return b"\n".join(_fold_line(line) for line in data.split(b"\n"))


def _fold_line(line: bytes) -> bytes:
    folded = (line.lower() if line.isascii()
              else line.decode("utf-8", "surrogateescape").casefold().encode("utf-8", "surrogateescape"))
    if b"\\u" not in line:
        return folded
    try:
        content = orjson.loads(line).get("content")
    except (orjson.JSONDecodeError, AttributeError):
        return folded
    if not isinstance(content, str):
        return folded
    text = content.casefold().replace("\n", " ").replace("\r", " ")
    return folded + b" " + text.encode("utf-8", "surrogatepass")


class FoldCache:
    """Folded blocks by key, least recently used dropped first past `budget` bytes; thread-safe.
    A block is kept when it is put a second time (its key remembered from the first, among the
    newest `_SEEN` keys): blocks folded once never take the budget.

    Keys name a block's bytes within one journal file; `owner` (the file's inode) empties the cache
    when the journal is replaced (compaction), so a key can never name another file's bytes."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self.size = 0
        self._blocks: OrderedDict[Hashable, bytes] = OrderedDict()
        self._seen: OrderedDict[Hashable, None] = OrderedDict()   # folded once, not kept
        self._owner: Hashable = None
        self._lock = threading.Lock()

    def get(self, owner: Hashable, key: Hashable) -> bytes | None:
        with self._lock:
            if owner != self._owner:
                self._blocks.clear()
                self._seen.clear()
                self.size = 0
                self._owner = owner
                return None
            folded = self._blocks.get(key)
            if folded is not None:
                self._blocks.move_to_end(key)
            return folded

    def put(self, owner: Hashable, key: Hashable, folded: bytes) -> None:
        if len(folded) > self.budget:
            return
        with self._lock:
            if owner != self._owner or key in self._blocks:
                return
            if key not in self._seen:   # folded for the first time: remember the key only
                self._seen[key] = None
                if len(self._seen) > _SEEN:
                    self._seen.popitem(last=False)
                return
            del self._seen[key]
            self._blocks[key] = folded
            self.size += len(folded)
            while self.size > self.budget:
                _, dropped = self._blocks.popitem(last=False)
                self.size -= len(dropped)

    def __len__(self) -> int:
        return len(self._blocks)
