"""A query's bounds over its window's row blocks for block pruning (`cosine_prune`), in two levels: per
super-block (`super_block` blocks), its terms' maxima summed over every super-block of the window; per
block, only inside the super-blocks a leg looks into (its best first, then those reaching its floor), so
the work per block follows the blocks kept, not the window's blocks (3x as many at 3M rows as at 1M over
the same 90 days). A super-block's bound is at least each of its blocks' (the same float32 steps over
larger addends), so a super-block under a floor holds no block over it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from urchin.search.cosine_bounds import Bounds, TermBounds, pivot_base, widened
from urchin.search.cosine_query import Query

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["Leg", "Level"]

# Not a setting: a match summed in float32 in another order may pass its bound by a rounding, never by this.
_MARGIN = 1 + 1e-4
# A window of fewer blocks than this many first reads has every block's bounds made at once: the first
# reads' best blocks are in ~40% of a week's super-blocks at 3M rows, and one pass costs less than several.
_EAGER = 32


class Level:
    """A query's bounds over the window's blocks b0..b1-1, in two levels: per super-block (`super_block`
    blocks, aligned: blocks c0 S .. c1 S - 1), summed over its terms for every super-block of the window;
    per block, summed only inside the super-blocks a leg looks into (`blocks`), so the work per block
    follows the blocks kept, not the window's (a short window: every block at once, as the first reads
    would look into most super-blocks). A super-block's bound is at least each of its blocks'. Which
    blocks hold every word (the tier) is exact per block (the terms' presence bits ANDed a byte at a
    time); no block holding every word is `reach` (`_Ranking._reached`'s ranking: every block is in)."""

    def __init__(self, index: TokenCosineIndex, q: Query, groups: list[list[tuple[int, ...]]],
                 terms: dict[int, tuple[TermBounds, float]], bounds: Bounds, b0: int, b1: int) -> None:
        size = self.size = bounds.super
        c0, c1 = b0 // size, (b1 - 1) // size + 1
        self.start, self.made, self.block, self.terms = c0 * size, bounds.rows, bounds.block, list(terms.values())
        self.ts_max = index._ts_max.view()
        n = (c1 - c0) * size
        p0, p1 = self.start // 8, (self.start + n + 7) // 8
        bits = np.full(p1 - p0, 0xFF, dtype=np.uint8)
        packed = {t: tb.packed(p0, p1) for t, (tb, _) in terms.items()}
        for alternatives in groups:
            ok = np.zeros(p1 - p0, dtype=np.uint8)
            for alt in alternatives:
                both = np.full(p1 - p0, 0xFF, dtype=np.uint8)
                for t in alt:
                    both &= packed[t]
                ok |= both
            bits &= ok
        tier = np.unpackbits(bits)[self.start % 8:self.start % 8 + n].astype(bool)
        inside = np.zeros(n, dtype=bool)
        inside[b0 - self.start:b1 - self.start] = True
        tier &= inside
        # No block holds every word (a word no event holds, or words never in one block): no row does, and
        # the ranking is `_Ranking._reached`'s with no tier (matches, their neighbours, matched sessions'
        # turns), each row's bound its block's without `every`
        self.reach = not tier.any()
        self.tier = inside if self.reach else tier
        now = pivot_base(index)
        self.factor = max(1.0, bounds.base / now if now > 0 else 1.0) * _MARGIN
        self.k, self.slots = 1.0 + 2 * sum(q.context), q.slots
        self.every, self.rank = 0.0 if self.reach else q.scale.every, q.scale.rank
        # the most a row can score (`raw_scores`): rows scoring that much sort newest first, so a block whose
        # rows are all older than a floor's row at that score holds none that can enter (`over`)
        self.most_raw = float(np.float32(self.every) + np.float32(self.rank) * np.float32(1.0))
        # match bounds: the rank leg's sums are divided by K (the context's weights), the session leg's not
        self.scales = np.array([self.factor / self.k, self.factor], dtype=np.float32)
        self.read = np.zeros(n, dtype=bool)
        self.done = np.full(c1 - c0, b1 - b0 < _EAGER * index.settings.first_blocks)
        if self.done[0]:    # the first reads would look into most super-blocks: every block at once
            self.bound = self._bounds(self.tier, _sums(self.terms, slice(c0, c1)).reshape(-1, 2))
            self.top = self.bound.reshape(-1, size, 2).max(axis=1)
            return
        sums, buffer = np.zeros((c1 - c0, 2), dtype=np.float32), np.empty((c1 - c0, 2), dtype=np.float32)
        for tb, scale in self.terms:
            tb.add(c0, c1, scale, sums, buffer)
        self.top = self._bounds(np.asarray(self.tier.reshape(-1, size).any(axis=1)), sums)
        self.bound = np.empty((n, 2))     # per block of the super-blocks expanded, and leg

    def mark(self, blocks: list[int]) -> None:
        """`blocks` (absolute) were read."""
        at = np.asarray(blocks, dtype=np.int64) - self.start
        self.read[at[(at >= 0) & (at < len(self.read))]] = True

    def _bounds(self, tier: np.ndarray, sums: np.ndarray) -> np.ndarray:
        """Each leg's bound (rows, leg) of blocks or super-blocks with the terms' `sums` (rows, leg): the
        same steps for both, so a super-block's is at least its blocks'. -inf where no row can rank."""
        bound = _as_raw(self.every, self.rank, sums * self.scales)
        bound[~tier] = -np.inf
        if not self.slots:
            bound[:, 1] = -np.inf
        return bound

    def newest(self, at: np.ndarray) -> np.ndarray:
        """The latest time blocks `at` hold (relative; of a super-block: its last block's)."""
        return self.ts_max[np.minimum((self.start + at + 1) * self.block, self.made) - 1]

    def blocks(self, supers: np.ndarray) -> np.ndarray:
        """The blocks (relative to the first super-block's first) of `supers`, their bounds made."""
        size = self.size
        new = supers[~self.done[supers]]
        if len(new):
            self.done[new] = True
            at = (new[:, None] * size + np.arange(size)).ravel()
            self.bound[at] = self._bounds(self.tier[at], _sums(self.terms, new + self.start // size).reshape(-1, 2))
        return (supers[:, None] * size + np.arange(size)).ravel()


class Leg:
    """A leg's blocks by falling bound, those that can reach the most a row can score newest first
    (`over`). Before a floor is known, the best of the blocks of its best super-blocks (twice as many
    blocks as asked: not a sort of every block of the window, 47k blocks of 64 rows at 90 d and 3M rows);
    after, the best of the blocks over the floor (every block that can still enter is there)."""

    def __init__(self, level: Level, leg: int) -> None:
        self.level, self.leg = level, leg
        self.key = self._key(level.top[:, leg], (np.arange(len(level.done)) + 1) * level.size - 1)
        self.over_at: np.ndarray | None = None      # the blocks over the last floor (relative)

    def _key(self, bound: np.ndarray, at: np.ndarray) -> np.ndarray:
        most = self.level.most_raw
        capped = bound > most      # at the cap: newest first (a super-block's key is its newest block's)
        return np.where(capped, most + 1 + at, bound) if capped.any() else bound

    def first(self, k: int) -> np.ndarray:
        """Up to `k` blocks (absolute) holding every word, of the highest bounds."""
        level = self.level
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        if self.over_at is not None:
            at = self.over_at
            key = self._key(level.bound[at, self.leg], at)
        elif level.done.all():      # every block's bounds made (a short window): the best of them
            at = np.arange(len(level.bound))
            key = self._key(level.bound[at, self.leg], at)
        else:
            supers, live = np.arange(len(self.key)), int((self.key > -np.inf).sum())
            m = min(-(-8 * k // level.size), live)
            while True:
                best, after = _most(self.key, supers, m)
                at = level.blocks(best)
                key = self._key(level.bound[at, self.leg], at)
                if m >= live:
                    break
                m = self._more(key, k, after, supers, m)
                if not m:
                    break
        held = key > -np.inf
        at, key = at[held], key[held]
        if len(key) > k:
            at = at[np.argpartition(-key, k)[:k]]
        return level.start + at

    def over(self, floor: float, floor_ts: int, read: np.ndarray, enough: int) -> tuple[int, np.ndarray, bool]:
        """The blocks that can hold a row entering the leg over its floor: their bound reaches it, and when
        the floor is the most a row can score, they hold a row as new as the floor's (`_top`: newer first).
        Looked for inside the super-blocks that can hold such a block, the best first, until more than
        `enough` are found, the best `enough` of the window's among them (the next round reads no more than
        those), and one not `read` (a mask of the window's): (how many were found, those not read
        (absolute), whether that is all of them)."""
        level = self.level
        if level.done.all():        # every block's bounds made: all of them at once
            at, left = self._over(None, floor, floor_ts, read)
            self.over_at = at
            return len(at), level.start + left, True
        over = level.top[:, self.leg] >= floor
        if floor >= level.most_raw:
            over[over] = level.newest(np.flatnonzero(over) * level.size + level.size - 1) >= floor_ts
        supers = np.flatnonzero(over)
        m = max(1, -(-2 * enough // level.size))
        while True:
            best, after = _most(self.key, supers, m)
            at, left = self._over(best, floor, floor_ts, read)
            if len(best) == len(supers):
                break
            m = self._more(self._key(level.bound[at, self.leg], at), enough, after, supers, m) if \
                enough and len(left) else 2 * m
            if not m:
                break
        self.over_at = at
        return len(at), level.start + left, len(best) == len(supers)

    def _more(self, key: np.ndarray, k: int, after: float, supers: np.ndarray, m: int) -> int:
        """How many of `supers` to look into for the best `k` blocks, `key` those of the best `m` (`after`:
        the next one's key), or 0 when those hold them: every block of the best k has a key, and so its
        super-block, at least the k-th of those found. So as many as reach it, at most twice `m`."""
        if (key > -np.inf).sum() < k:
            return 2 * m
        kth = float(np.partition(key, len(key) - k)[len(key) - k])
        return 0 if kth >= after else min(int((self.key[supers] >= kth).sum()), 2 * m)

    def _over(self, supers: np.ndarray | None, floor: float, floor_ts: int,
              read: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`over`'s blocks in `supers` (None: every super-block), and those of them not read."""
        level = self.level
        if supers is None:
            at = np.flatnonzero(level.bound[:, self.leg] >= floor)
        else:
            at = level.blocks(supers)
            at = at[level.bound[at, self.leg] >= floor]
        if floor >= level.most_raw:
            at = at[level.newest(at) >= floor_ts]
        return at, at[~read[at]]


def _sums(terms: list[tuple[TermBounds, float]], supers: np.ndarray | slice) -> np.ndarray:
    """Each block of `supers`' maxima times its term's scale, summed over the terms in their order, in
    float32: `TermBounds.add`'s steps, so at most its super-block's sum (each addend is, and rounding is
    monotone). Gathered for every term first, then widened and scaled at once (a call each per term was
    most of the cost of a few hundred super-blocks)."""
    if isinstance(supers, slice):
        gathered = np.stack([tb.maxima[supers] for tb, _ in terms])
    else:
        gathered = np.empty((len(terms), len(supers), *terms[0][0].maxima.shape[1:]), dtype=np.float16)
        for i, (tb, _) in enumerate(terms):
            np.take(tb.maxima, supers, axis=0, out=gathered[i])
    scaled = widened(gathered)
    scaled *= np.array([scale for _, scale in terms], dtype=np.float32)[:, None, None, None]
    sums = np.zeros(scaled.shape[1:], dtype=np.float32)
    for part in scaled:
        sums += part
    return sums


def _most(key: np.ndarray, supers: np.ndarray, m: int) -> tuple[np.ndarray, float]:
    """The `m` of `supers` of the highest `key` (in no order) and the next one's key (-inf: none left):
    a partition, not a sort (a stable sort of 12k super-blocks' keys: ~1 ms)."""
    if m >= len(supers):
        return supers, -np.inf
    part = np.argpartition(-key[supers], m)
    return supers[part[:m]], float(key[supers[part[m]]])


def _as_raw(every: float, rank: float, match: np.ndarray) -> np.ndarray:
    """The raw score a row whose match is at most `match` can reach, in the scorer's own float32 arithmetic
    (`cosine_query.raw_scores`), one ulp up: rounded float32 steps are monotone, so no row's raw passes it.
    (Bounds in float64 fell below a float32 raw by its rounding of `every`, up to ~1e-7, which a small
    match's relative margin does not cover: tied scores then cut the newest rows off the top.)"""
    m = np.minimum(match, 1.0).astype(np.float32)
    raw = np.float32(every) + np.float32(rank) * m
    return np.nextafter(raw, np.float32(np.inf)).astype(np.float64)
