"""A loaded token-cosine vocabulary: term -> id without a Python object per term.

The saved terms stay one UTF-8 blob in id order (`vocab.bin` as saved) with each term's start and the
ids in byte order: a lookup is a binary search over the blob among the terms sharing its first two
bytes; terms added since the load go to a small dict. At 405k terms (3M events): ~12 MB, not ~52 MB.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from itertools import chain

import numpy as np

__all__ = ["Vocabulary"]

_BUCKETS = 1 << 16   # a term's first two bytes


class Vocabulary(MutableMapping[str, int]):
    """term -> id: the saved terms (ids 0..n-1, in `blob`'s order) and a dict of terms added since
    (ids from n on, handed out by the caller as `len(vocab)`, as with a dict). Saved terms are never
    removed or renumbered."""

    def __init__(self, blob: bytes, starts: np.ndarray, order: np.ndarray, buckets: np.ndarray,
                 added: dict[str, int] | None = None) -> None:
        self._blob = blob
        self._n = len(order)
        self._arrays = (starts, order, buckets)
        # memoryviews: indexed one int at a time, fast. `buckets[p]..buckets[p + 1]`: the positions in
        # `order` of the terms whose first two bytes are p (big-endian; a one-byte term's second is 0)
        self._starts, self._order, self._buckets = starts.data, order.data, buckets.data
        self._added: dict[str, int] = {} if added is None else added

    @classmethod
    def of(cls, blob: bytes) -> Vocabulary:
        """The vocabulary of a saved `vocab.bin` (terms joined by newlines). ValueError on a repeated term."""
        data = np.frombuffer(blob, dtype=np.uint8)
        if not len(data):
            return cls(blob, np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(_BUCKETS + 1, np.int32))
        breaks = np.flatnonzero(data == 10)
        # term i is blob[starts[i]:starts[i + 1] - 1]
        starts = np.concatenate([[0], breaks + 1, [len(data) + 1]]).astype(np.int64)
        lengths = np.diff(starts) - 1
        width = max(int(lengths.max()), 1)
        fixed = np.zeros((len(lengths), width), np.uint8)     # each term NUL-padded (terms hold no NUL)
        for size in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == size)
            for j in range(size):
                fixed[rows, j] = data[starts[rows] + j]
        keys = fixed.view(f"S{width}").ravel()
        order = np.argsort(keys, kind="stable").astype(np.int32)   # bytes order: a str's order in UTF-8
        ordered = keys[order]
        if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):
            raise ValueError("vocabulary: repeated terms")
        second = fixed[:, 1] if width > 1 else np.zeros(len(fixed), np.uint8)
        heads = (fixed[:, 0].astype(np.int32) << 8 | second)[order]
        del fixed, keys, ordered
        buckets = np.searchsorted(heads, np.arange(_BUCKETS + 1)).astype(np.int32)
        return cls(blob, starts, order, buckets)

    # ---- lookups ------------------------------------------------------------------------------
    def _find(self, term: str) -> int:
        """The saved id of `term`, or -1."""
        key = term.encode("utf-8", "surrogatepass")
        if not key:
            return -1
        blob, starts, order = self._blob, self._starts, self._order
        head = key[0] << 8 | (key[1] if len(key) > 1 else 0)
        lo, hi = self._buckets[head], self._buckets[head + 1]
        end = hi
        while lo < hi:
            mid = (lo + hi) >> 1
            i = order[mid]
            if blob[starts[i]:starts[i + 1] - 1] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < end:
            i = order[lo]
            if blob[starts[i]:starts[i + 1] - 1] == key:
                return int(i)
        return -1

    def get(self, term: str, default: int | None = None) -> int | None:  # type: ignore[override]
        found = self._added.get(term)
        if found is not None:
            return found
        i = self._find(term) if isinstance(term, str) else -1
        return default if i < 0 else i

    def __getitem__(self, term: str) -> int:
        found = self.get(term)
        if found is None:
            raise KeyError(term)
        return found

    def __contains__(self, term: object) -> bool:
        return term in self._added or isinstance(term, str) and self._find(term) >= 0

    def setdefault(self, term: str, default: int) -> int:
        found = self.get(term)
        if found is None:
            self._added[term] = found = default
        return found

    def __setitem__(self, term: str, value: int) -> None:
        if self._find(term) >= 0:
            raise ValueError(f"{term!r} is a saved term: its id never changes")
        self._added[term] = value

    def __delitem__(self, term: str) -> None:
        raise TypeError("terms are never removed from a vocabulary")

    def __len__(self) -> int:
        return self._n + len(self._added)

    # ---- in id order --------------------------------------------------------------------------
    def saved_terms(self) -> list[str]:
        return self._blob.decode("utf-8").split("\n") if self._n else []

    def __iter__(self) -> Iterator[str]:
        return chain(self.saved_terms(), list(self._added))

    def terms_at(self, ids: list[int]) -> list[str]:
        """The terms of `ids` (saved or added), decoding only those."""
        blob, starts, n = self._blob, self._starts, self._n
        added = {i: term for term, i in self._added.items()} if any(i >= n for i in ids) else {}
        return [blob[starts[i]:starts[i + 1] - 1].decode("utf-8") if i < n else added[i] for i in ids]

    def __reversed__(self) -> Iterator[str]:
        """Newest first; the saved terms decoded only when the walk gets to them."""
        blob, starts = self._blob, self._starts
        saved = (blob[starts[i]:starts[i + 1] - 1].decode("utf-8") for i in range(self._n - 1, -1, -1))
        return chain(reversed(list(self._added)), saved)

    def copy(self) -> Vocabulary:
        """A copy to save while the index goes on (the saved part is shared: it never changes)."""
        return Vocabulary(self._blob, *self._arrays, dict(self._added))

    def to_bytes(self) -> bytes:
        """As `vocab.bin` is saved: every term in id order, joined by newlines."""
        if not self._added:
            return self._blob
        tail = "\n".join(self._added).encode("utf-8")
        return self._blob + b"\n" + tail if self._n else tail

    @property
    def nbytes(self) -> int:
        return len(self._blob) + sum(a.nbytes for a in self._arrays) + 150 * len(self._added)
