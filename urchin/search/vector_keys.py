"""Which row of a vector cache (urchin/search/vectors.py) holds an event: a 64-bit hash of its id,
looked up in a sorted array, without holding a million Python strings.

Keys appended since the last merge sit in a dict until there are `MERGE_AT` of them, then are merged
into the sorted arrays in one sort.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["KeyIndex", "key_of", "MERGE_AT"]

MERGE_AT = 65536  # recent keys kept in a dict until they are merged into the sorted array


def key_of(event_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "little")


class KeyIndex:
    """Key -> row, for the rows of one cache."""

    def __init__(self, keys: np.ndarray | None = None) -> None:
        """The index of rows 0.. whose keys are `keys` (in row order)."""
        keys = np.zeros(0, np.uint64) if keys is None else keys.astype(np.uint64)
        order = np.argsort(keys, kind="stable")
        self._sorted_keys = keys[order]
        self._sorted_rows = order.astype(np.int64)   # the row of each sorted key
        self._recent: dict[int, int] = {}            # key -> row, merged into the sorted arrays in bulk

    def row_of(self, key: int) -> int | None:
        row = self._recent.get(key)
        if row is not None:
            return row
        keys = self._sorted_keys
        i = int(np.searchsorted(keys, np.uint64(key)))
        return int(self._sorted_rows[i]) if i < len(keys) and int(keys[i]) == key else None

    def add(self, keys: list[int], first_row: int) -> None:
        """`keys` are those of rows `first_row`, `first_row + 1`, ..."""
        self._recent.update(zip(keys, range(first_row, first_row + len(keys)), strict=True))
        if len(self._recent) >= MERGE_AT:
            merged = np.concatenate([self._sorted_keys, np.fromiter(self._recent, np.uint64, len(self._recent))])
            merged_rows = np.concatenate([self._sorted_rows,
                                          np.fromiter(self._recent.values(), np.int64, len(self._recent))])
            order = np.argsort(merged, kind="stable")
            self._sorted_keys, self._sorted_rows = merged[order], merged_rows[order]
            self._recent = {}
