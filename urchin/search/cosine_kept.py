"""What block pruning (`cosine_prune`) keeps between its rounds: each leg's best rows over the blocks read
so far, in the tiered ranking (`Kept`) and in the ranking without tiers (`Reached`), and each leg's floor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from urchin.search.cosine_query import Query, Scored, merge

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["Floors", "Kept", "Part", "Reach", "Reached", "Rows", "session_floor"]

# a read's rows holding every word, each leg's best (the session leg's None: no row has a session), and
# whether a match there has a session (`_evaluate`)
Part = tuple[int, list[Scored], list[Scored] | None, bool]
Rows = tuple[np.ndarray, np.ndarray, np.ndarray]    # rows, their raw scores and matches
# `_reached_part`'s: rows ranked, each leg's candidates, whether a match there has a session
Reach = tuple[int, Rows, Rows, bool]


class Kept:
    """The best `limit` rows of each leg over the blocks read so far, how many of their rows hold every
    word, and whether a match there has a session (the reference's session leg may differ if none)."""

    def __init__(self, index: TokenCosineIndex, q: Query) -> None:
        self.ts, self.q, self.limit = index._ts.data, q, q.limit
        self.ranked: list[Scored] = []
        self.by_session: list[Scored] = []
        # rows holding every word, a match with a session, the `whole` sessions ranked (by the first read)
        self.tier, self.sessions, self.whole = 0, False, False

    def add(self, part: Part | Reach) -> None:
        tier, ranked, by_session, sessions = part
        assert isinstance(ranked, list) and not isinstance(by_session, tuple)
        self.tier += tier
        self.sessions |= sessions
        self.whole = True
        self.ranked = self._best(self.ranked, ranked)
        # a part without a session leg: none of its rows has a session, their boost is 0
        self.by_session = self._best(self.by_session, ranked if by_session is None else by_session)

    def floors(self) -> Floors | None:
        """The ranked leg's `limit`-th row and the session leg's floor (`session_floor`), or None while
        unknown."""
        if self.tier < self.limit or (self.q.slots and not self.sessions):
            return None
        return _floors(self.ranked, self.by_session, self.q)

    def result(self) -> list[Scored]:
        q = self.q
        return merge(self.ranked, self.by_session, q.limit, q.slots, lambda row: True) if q.slots else self.ranked

    def _best(self, a: list[Scored], b: list[Scored]) -> list[Scored]:
        """`TokenCosineIndex._top`'s order (score, then newer, then id) over both."""
        if not b:
            return a
        ts = self.ts
        return sorted(a + b, key=lambda s: (-s.raw, -int(ts[s.row]), s.id))[:self.limit]


class Reached:
    """`Kept` of the ranking without tiers (`_reached_part`): each leg's rows scoring at least its
    `limit`-th best so far (ties kept), as arrays (row, raw, match); ranked by `_top` once, at the end
    (a top of `limit` + 500 rows, a query with phrases, was most of its cost when made each round)."""

    def __init__(self, index: TokenCosineIndex, q: Query) -> None:
        self.index, self.q = index, q
        empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)
        self.legs = [empty, empty]
        self.sessions, self.whole = False, False

    def add(self, part: Part | Reach) -> None:
        _, ranked, by_session, sessions = part
        self.sessions |= sessions
        self.whole = True
        if isinstance(ranked, list) or not isinstance(by_session, tuple):    # `_evaluate`'s: nothing there
            return
        self.legs = [self._best(kept, new) for kept, new in zip(self.legs, (ranked, by_session), strict=True)]

    def _best(self, a: Rows, b: Rows) -> Rows:
        rows, raw, match = (np.concatenate([x, y]) for x, y in zip(a, b, strict=True))
        if len(raw) > self.q.limit:
            keep = raw >= np.partition(raw, len(raw) - self.q.limit)[len(raw) - self.q.limit]
            rows, raw, match = rows[keep], raw[keep], match[keep]
        return rows, raw, match

    def floors(self) -> Floors | None:
        q, (ranked, by_session) = self.q, self.legs
        if len(ranked[1]) < q.limit or (q.slots and (len(by_session[1]) < q.limit or not self.sessions)):
            return None
        top = self.index._top     # `limit` rows of each leg (and ties): a few look-ups of ids
        return _floors(top(*ranked[:2], q.limit, ranked[2]),
                       top(*by_session[:2], q.limit, by_session[2]) if q.slots else [], q)

    def result(self) -> list[Scored]:
        q, top = self.q, self.index._top
        ranked = top(*self.legs[0][:2], q.limit, self.legs[0][2])
        return merge(ranked, top(*self.legs[1][:2], q.limit, self.legs[1][2]), q.limit, q.slots,
                     lambda row: False) if q.slots else ranked


class Floors(NamedTuple):
    """Each leg's floor: a row left out that scores under it cannot change the results, nor one scoring
    as much that sorts after its row (older, `TokenCosineIndex._top`'s order). The session leg's inf, row
    -1, without that leg."""

    rank: float
    rank_row: int
    sess: float
    sess_row: int


def _floors(ranked: list[Scored], by_session: list[Scored], q: Query) -> Floors:
    last = ranked[q.limit - 1]
    if not q.slots:
        return Floors(last.raw, last.row, np.inf, -1)
    taken = session_floor(ranked, by_session, q.limit, q.slots)
    return Floors(last.raw, last.row, taken.raw, taken.row)


def session_floor(ranked: list[Scored], by_session: list[Scored], limit: int, slots: int) -> Scored:
    """The session leg's floor: the last of its rows `merge` takes, the `slots`-th of its
    best not among the ranked leg's first `limit - slots` (the `limit`-th of its own when fewer). Once the
    ranked leg's top is exact (its blocks over its floor read), a row scoring under it in the session leg
    cannot change the merge: the rows taken before it are read, and sort before it."""
    out = {s.row for s in ranked[:limit - slots]}
    taken = [s for s in by_session if s.row not in out][:slots]
    return taken[-1] if len(taken) == slots else by_session[limit - 1]

