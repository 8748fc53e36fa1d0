"""A token-cosine query as the rankers receive it (its weights, window, filters and legs), the ranked
events they give back, the zeroed buffers a query lends, and the steps every path shares: the raw
score of a row and the merge of the two legs (`cosine_sparse`, `cosine_dense`, `cosine_prune`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from urchin.search.score import Scale

__all__ = ["Query", "Scored", "Scratch", "Window", "member", "merge", "raw_scores"]


class Scored(NamedTuple):
    """One ranked event: its id, its score (calibrated, urchin.search.score.TOKEN_COSINE), its row in
    the index, its match: the context-smoothed cosine with its priors, at most 1 (the rank part), and
    its raw score without the bias, as ranked (`score` is its map, or lower where `merge` capped it)."""

    id: str
    score: float
    row: int
    match: float = 0.0
    raw: float = 0.0


@dataclass(frozen=True, slots=True)
class Window:
    """Rows lo..hi-1 hold every row of the time window; with `late`, also some outside it (by ts)."""

    lo: int
    hi: int
    late: bool
    since: int | None
    until: int | None

    def outside(self, ts: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ts), dtype=bool)
        if self.late and self.since is not None:
            out |= ts < self.since
        if self.late and self.until is not None:
            out |= ts > self.until
        return out


@dataclass(frozen=True, slots=True)
class Query:
    weights: dict[int, float]   # term id -> query weight; the first `own` are the query's own terms
    own: int
    words: set[str]
    groups: Sequence[Sequence[Sequence[str]]]
    window: Window
    codes: dict[str, int]       # label filters: field -> code
    limit: int
    slots: int                  # the session leg's places (0: none)
    context: list[float]        # neighbour weights per step (urchin.search.cosine.neighbour_weights)
    scale: Scale                # the raw score's parts (urchin.search.score.TOKEN_COSINE)


class Scratch:
    """Two float32 buffers as long as the index, zero everywhere between queries: a query scatters
    into them, reads back what it wrote and zeroes it again, so it costs what it touches (a fresh
    `np.zeros` of the window is a memset of it). A query that fails drops them (`index._scratch`).
    They are longer than the index (`TokenCosineIndex.scratch`): their last value, past every row, is
    never written, so a missing link (-1) used as a row reads 0 (`cosine_sparse._Ranking._gathered`)."""

    __slots__ = ("a", "b")

    def __init__(self, n: int) -> None:
        self.a = np.zeros(n, dtype=np.float32)
        self.b = np.zeros(n, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.a)

    @property
    def nbytes(self) -> int:
        return self.a.nbytes + self.b.nbytes


def member(codes: np.ndarray, wanted: Sequence[int], size: int) -> np.ndarray:
    """`np.isin(codes, wanted)` through a lookup table over the `size` codes (a code of -1, none, is
    never wanted): one gather instead of a sort of the whole column (`take`: ~2x indexing's speed with
    codes of a byte or four, which indexing converts first)."""
    table = np.zeros(size + 1, dtype=bool)
    table[np.asarray(wanted, dtype=np.int64)] = True
    return table.take(codes)


def raw_scores(evidence: np.ndarray | np.float32, rank: np.ndarray, scale: Scale) -> np.ndarray:
    """Each row's raw score without the bias (`scale`: urchin.search.score.TOKEN_COSINE): its evidence
    (every word, share, related words; one float32 for every row alike) plus `rank` times the smoothed
    cosine with its priors, at most 1. A row the query does not reach at all stays 0 (it is no result)."""
    out = evidence + np.float32(scale.rank) * np.minimum(rank, np.float32(1.0))
    out[rank <= 0] = 0
    return out


def merge(ranked: list[Scored], by_session: list[Scored], limit: int, slots: int,
          every: Callable[[int], bool]) -> list[Scored]:
    """The best `limit - slots` by match, then the session leg's best not yet in, then the rest by match.
    A session pick's score is capped at the last score before it, so scores never rise down the list;
    one not holding every word never takes the place of one that does (`every`: those rows)."""
    out = ranked[:limit - slots]
    seen = {s.row for s in out}
    rest = ranked[limit - slots:]
    tiered = any(every(s.row) for s in rest)
    for extra in (by_session, rest):
        for s in extra:
            if len(out) >= limit:
                return out
            if tiered and extra is by_session and not every(s.row):
                continue
            if s.row not in seen:
                seen.add(s.row)
                cap = out[-1].score if out else 1.0
                out.append(s if s.score <= cap else s._replace(score=cap))
    return out
