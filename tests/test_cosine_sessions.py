"""Rows per session in a query's window (urchin.search.cosine_sessions): the window's own rows counted,
as the index grows, and a window asked again or moved costs the rows it moved by, not the rows it holds."""

from __future__ import annotations

import random

import numpy as np
import pytest

from urchin.event import Event
from urchin.search import cosine_sessions
from urchin.search.cosine import TokenCosineIndex

BASE = 1_700_000_000_000


def _events(rng: random.Random, start: int, n: int) -> list[Event]:
    return [Event(id=f"e{start + i}", timestamp="", content=f"w{rng.randrange(9)} deploy", ts_ms=BASE + start + i,
                  source="claude", kind="conversation",
                  session=None if rng.random() < 0.1 else f"s{rng.randrange(40 + start // 50)}")
            for i in range(n)]


def _counted(index: TokenCosineIndex, lo: int, hi: int) -> np.ndarray:
    codes = index._fields["session"].column.data[lo:hi]
    return np.bincount(codes[codes >= 0], minlength=len(index._fields["session"]) - 1)


def test_a_windows_session_lengths_are_its_rows_as_windows_move_and_the_index_grows() -> None:
    rng = random.Random(3)
    index = TokenCosineIndex()
    index.add_many(_events(rng, 0, 500))
    for step in range(150):
        if step % 12 == 0:      # new rows, and new sessions among them
            index.add_many(_events(rng, len(index), rng.randint(1, 60)))
        n = len(index)
        lo = rng.randrange(n)
        hi = rng.choice([n, rng.randrange(lo + 1, n + 1)])
        assert np.array_equal(index._session_lengths(lo, hi), _counted(index, lo, hi)), (step, lo, hi, n)


def test_a_window_asked_again_or_moved_counts_only_the_rows_it_crossed(monkeypatch: pytest.MonkeyPatch) -> None:
    index = TokenCosineIndex()
    index.add_many(_events(random.Random(5), 0, 4000))
    counted: list[int] = []
    count = cosine_sessions.count

    def counting(codes: np.ndarray, lo: int, hi: int, size: int) -> np.ndarray:
        counted.append(hi - lo)
        return count(codes, lo, hi, size)

    monkeypatch.setattr(cosine_sessions, "count", counting)
    index._session_lengths(3000, 4000)
    assert sum(counted) == 1000        # the first time: the window's rows
    counted.clear()
    index._session_lengths(3000, 4000)
    assert sum(counted) == 0
    index._session_lengths(3007, 4000)
    assert sum(counted) == 7
    index.add_many(_events(random.Random(6), 4000, 30))
    counted.clear()
    got = index._session_lengths(3010, 4030)       # "the last hour" a moment later: 3 rows out, 30 in
    assert sum(counted) == 33
    assert np.array_equal(got, _counted(index, 3010, 4030))
