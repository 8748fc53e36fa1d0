"""Rows per session code in a query's row window, for the session leg (`cosine_sparse._levels`): a
window's counts are made from the nearest of the last few windows asked by counting only the rows that
crossed its ends, so a repeated or slowly moving window ("the last 7 days") costs the rows it moved by
and a copy per session, not a count of every row it holds (which grows with the journal).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

__all__ = ["WindowLengths", "count"]


def count(codes: np.ndarray, lo: int, hi: int, size: int) -> np.ndarray:
    """Rows per session code 0..size-1 among rows lo..hi-1 (code -1: no session, not counted)."""
    return np.bincount(codes[lo:hi] + 1, minlength=size + 1)[1:]


class WindowLengths:
    """The counts of the last `kept` windows (rows lo..hi-1) of one index. Rows are only ever
    appended and a row's session code never changes, so a window's counts stay true as the index
    grows (new sessions count 0 in it); each is a fresh array, never changed once handed out."""

    kept = 3

    def __init__(self) -> None:
        self._windows: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()

    def at(self, codes: np.ndarray, total: np.ndarray, lo: int, hi: int, n: int) -> np.ndarray:
        """Rows per session code in lo..hi-1 of the first `n` rows; `total`: every row's counts."""
        size = len(total)
        near, cost = None, min(hi - lo, lo + n - hi)     # counting the window, or the rest
        for window in self._windows:
            moved = abs(lo - window[0]) + abs(hi - window[1])
            if moved < cost:
                near, cost = window, moved
        if near == (lo, hi) and len(self._windows[near]) == size:
            self._windows.move_to_end(near)
            return self._windows[near]
        if near is None:
            out = count(codes, lo, hi, size) if 2 * (hi - lo) <= n else \
                total - count(codes, 0, lo, size) - count(codes, hi, n, size)
        else:
            out = np.zeros(size, dtype=np.int64)
            kept = self._windows[near]
            out[:len(kept)] = kept
            (a, b) = near
            for start, end, sign in ((lo, a, 1), (a, lo, -1), (b, hi, 1), (hi, b, -1)):
                if start < end:
                    crossed = count(codes, start, end, size)
                    out += crossed if sign > 0 else -crossed
        self._windows[lo, hi] = out
        self._windows.move_to_end((lo, hi))
        while len(self._windows) > self.kept:
            self._windows.popitem(last=False)
        return out

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._windows.values())
