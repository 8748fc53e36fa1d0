"""Token-cosine's top results from the row blocks that can hold them (block-max pruning): the same
results as reading every match of the window (`cosine_sparse`), at a cost that follows the blocks read.

A row's smoothed match is linear in its terms: term t adds scale_t * y_t(r) / K, y_t(r) being t's weight
at r plus context ** d times its weight at r's session neighbours d turns away (K: 1 + twice their sum),
times r's priors; the session leg adds scale_t * `session` * L_t[s], t's weights summed over the session
over the square root of its length. So per term and block of `block` rows (a setting), the most that t adds
there in each leg (each row's priors in, `TermBounds`: memories', and those of the kinds and sources a
query names, kept per such set), summed over a query's terms, bounds every row of the block. A query reads
its best blocks, takes each leg's limit-th score as a floor, and reads on (4x more of a leg's best blocks a
round, or every block over its floor, when fewer) until every block whose bound reaches a floor was read:
a row left out scores below both, so the top is the exhaustive one, and the blocks read are about those
over the top's own floors. A round scores only the blocks it adds (a row's score depends on its own
session alone) and keeps each leg's best so far. When no block holds every word (a name or a typo no
event holds), no row does: every row reached ranks (`_reached_part`), by the same bounds without the
tier's `every`. The maxima are made from a term's postings when a query first asks for it and kept while
the index's norms stand. A session they do not hold for (cut by the window, or grown since they were
made) is read whole, and so is every session met: its level sums all its turns. The blocks' bounds are
summed per super-block first and per block only where a leg looks (`cosine_levels`): a 90-day window
holds 3x the blocks at 3M rows as at 1M, and its top about as many.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from urchin.search import cosine_region
from urchin.search.assoc import TF_WEIGHT
from urchin.search.cosine_bounds import Bounds, Named
from urchin.search.cosine_kept import Kept, Part, Reach, Reached
from urchin.search.cosine_levels import Leg, Level
from urchin.search.cosine_query import Query, Scored, member, raw_scores
from urchin.search.cosine_region import Few
from urchin.search.cosine_sparse import _Ranking
from urchin.search.postings import distinct
from urchin.search.terms import named

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["Bounds", "top"]

# Its costs (rows per block, blocks per super-block, the postings below which a window is read whole, terms
# kept, blocks read first, rounds, the share of blocks worth it, growth) are the index's settings
# (cosine_settings.py).


def _named(index: TokenCosineIndex, words: set[str]) -> Named:
    """The kind and source codes whose priors the query's words name, as `_kind_prior` finds them."""
    s, kinds, sources = index.settings, index._fields["kind"], index._fields["source"]
    return (tuple(sorted(kinds[v] for v in named(kinds, words))) if s.kind > 0 else (),
            tuple(sorted(sources[v] for v in named(sources, words))) if s.named_source > 0 else ())


def top(index: TokenCosineIndex, q: Query, groups: list[list[tuple[int, ...]]],
        ranking: _Ranking) -> list[Scored] | None:
    """The query's results when at least `limit` rows hold every word (then only they rank, see
    `_Ranking._tiered`), or when no block holds every word (a word no event holds: `_Ranking._reached`'s
    ranking without tiers), and the blocks to read are few; else None (the caller reads every match)."""
    if q.codes or not groups or q.window.until is not None or not q.context:
        return None
    named_codes = _named(index, q.words)    # "errors", "decisions": their rows' maxima carry that prior
    scales, _ = index._scales(q.weights, q.own)
    lo, hi, s = q.window.lo, q.window.hi, index.settings
    if not _worth(index, q, scales, all(groups)):
        return None
    bounds = index._bounds
    if bounds is None or not bounds.fits(index):
        bounds = index._bounds = Bounds(index)
    bounds.sessions(index)
    made, block = bounds.rows, bounds.block
    b0, b1 = lo // block, (min(hi, made) - 1) // block + 1
    if b1 <= b0:
        return None
    terms = {term: (bounds.term(index, term, named_codes), float(scale)) for term, scale in scales}
    level = Level(index, q, groups, terms, bounds, b0, b1)
    # sessions the maxima do not hold for: cut by the window, or grown since they were made
    first, last = bounds.first, bounds.last
    whole = np.flatnonzero(((first < lo) & (last >= lo)) | ((first < hi) & (last >= hi)) | (last >= made))
    fresh = np.arange(made // block, (hi - 1) // block + 1) if hi > made else np.zeros(0, dtype=np.int64)
    by_rank, by_sess = Leg(level, 0), Leg(level, 1)
    chosen: set[int] = set(fresh.tolist())
    read: set[int] = set()
    wanted: set[int] = set()    # blocks over a floor, not read yet, that the legs' best missed
    kept: Kept | Reached = Reached(index, q) if level.reach else Kept(index, q)
    rare = cosine_region.few(index, scales, lo, hi)
    # blocks read of each leg's best (none for a query without a session leg)
    size, most = [s.first_blocks, s.first_blocks if q.slots else 0], (b1 - b0) // s.read_share
    for _ in range(s.rounds):
        best = np.concatenate([by_rank.first(size[0]), by_sess.first(size[1])])
        chosen |= set(best.tolist()) | wanted
        if len(chosen) > most:
            return None
        new = sorted(chosen - read)
        # Each block is scored once: its rows' scores depend on their own sessions alone (read whole),
        # so the best of the blocks read so far is the best of each round's best, kept.
        try:
            part = _evaluate(index, q, groups, ranking, scales, rare, new, whole, bounds, not kept.whole,
                             level.reach) if new or not kept.whole else (0, [], None, False)
        except _Declined:
            return None
        if part is not None:
            read.update(new)
            level.mark(new)
            kept.add(part)
        floors = kept.floors() if part is not None else None
        if floors is None:
            # too wide a region, too few rows holding every word (or ranked at all), or no match has a
            # session: read more
            size = [4 * n for n in size]
            continue
        ts = index._ts.data
        over = [by_rank.over(floors.rank, int(ts[floors.rank_row]), level.read, 4 * size[0]),
                by_sess.over(floors.sess, int(ts[floors.sess_row]) if floors.sess_row >= 0 else 0, level.read,
                             4 * size[1])]
        if not any(len(left) for _, left, _ in over) and all(every for _, _, every in over):
            return kept.result()    # every block whose bound reaches a floor was read
        # The floors rise as more of the best blocks are read, and the blocks over them fall: read 4x as
        # many of a leg's best, or every block over its floor now when that is fewer (then none is left
        # over); a leg whose blocks over its floor were all read reads no more
        counts = [found if every else max(found, 4 * n + 1) for (found, _, every), n in zip(over, size, strict=True)]
        wanted = set().union(*(set(left.tolist()) for (_, left, _), n, m in zip(over, size, counts, strict=True)
                               if m <= n))
        size = [n if m <= n else min(4 * n, m) for n, m in zip(size, counts, strict=True)]
    return None


def _worth(index: TokenCosineIndex, q: Query, scales: list[tuple[int, np.float32]], tiered: bool) -> bool:
    """Whether pruning would read fewer postings than reading every match of the window, by more than its
    own cost (`min_postings`): the terms' postings in the window (estimated: the window's share of each
    term's) less those of its first read (its share of the window's blocks). Reading every match reads
    them twice when no row can hold every word (a group with no term: `_Ranking.run`, then the passes)."""
    s, lo, hi, n = index.settings, q.window.lo, q.window.hi, len(index)
    blocks = (hi - lo) // s.block
    first = (2 if q.slots else 1) * s.first_blocks
    if blocks // s.read_share < first:      # the first read alone would be more of the window than is worth it
        return False
    df = index._df.data
    postings = sum(int(df[t]) for t, _ in scales) * (hi - lo) / max(n, 1)
    return postings * ((1 if tiered else 2) - first / max(blocks, 1)) >= s.min_postings


class _Declined(Exception):
    """A row the maxima were not made for holds every word: the bounds without `every` do not hold."""


def _evaluate(index: TokenCosineIndex, q: Query, groups: list[list[tuple[int, ...]]], ranking: _Ranking,
              scales: list[tuple[int, np.float32]], few: Few, blocks: list[int], whole: np.ndarray,
              bounds: Bounds, first: bool, reach: bool = False) -> Part | Reach | None:
    """The reference's tiered ranking over the rows of `blocks` holding every word, with the sessions they
    meet read whole, exact for those rows; with `first`, also of every session in `whole` (later, those
    sessions' rows are left out: the first part ranked them). (rows holding every word, the ranked leg's
    best `limit`, the session leg's or None when no row has a session, whether a match has a session).
    None: the region grew too large. With `reach` (no row holds every word), `_reached_part`'s ranking."""
    lo, hi = q.window.lo, q.window.hi
    if not blocks and not len(whole):
        return 0, [], None, False
    starts, ends = cosine_region.region(index, blocks, whole if first else whole[:0], bounds, lo, hi)
    if starts is None or ends is None:
        return None
    if not len(starts):
        return 0, [], None, False
    postings = cosine_region.postings(index, scales, starts, ends, few)
    index.postings_read += sum(len(p[2]) for p in postings)
    if not postings:
        return 0, [], None, False
    acc = ranking.scratch.a
    for _, scale, rows, tf in postings:
        acc[rows] += TF_WEIGHT[tf] * scale      # the reference's order: the same float sums
    matched = distinct(np.concatenate([p[2] for p in postings]), runs=True)   # `_Ranking._rows`'s
    try:
        scores = acc[matched] / index._norms_at(index._norm.data[matched])
        if q.window.late:
            scores[q.window.outside(index._ts.data[matched])] = 0
        acc[matched] = scores
        every = ranking._every(groups, postings, matched) if all(groups) else np.zeros(len(matched), dtype=bool)
        hit, hit_scores, hit_every = matched, scores, every
        if q.window.late:
            keep = scores != 0
            hit, hit_scores, hit_every = matched[keep], scores[keep], every[keep]
        if reach:
            if hit_every.any():     # a row added since the maxima were made
                raise _Declined
            return _reached_part(index, q, ranking, blocks, whole, bounds, first, hit, hit_scores)
        tier = hit[hit_every]
        # ranked: the rows of the blocks (their sessions were read whole) and of `whole`, not the other
        # sessions' rows a span holds (theirs were not: their blocks were left out by their bounds)
        inside = np.zeros(max(blocks, default=0) + 1, dtype=bool)
        inside[blocks] = True
        block = tier // bounds.block
        keep = (block < len(inside)) & inside[np.minimum(block, len(inside) - 1)]
        if len(whole):
            in_whole = member(index._fields["session"].column.data[tier], whole.tolist(), len(bounds.first))
            keep = keep | in_whole if first else keep & ~in_whole
        tier = tier[keep]
        sessions = bool((index._fields["session"].column.data[hit] >= 0).any())
        if not len(tier):
            return 0, [], None, sessions
        ranked, by_session, _ = ranking._tiered_legs(tier, hit, hit_scores)
        return len(tier), ranked, by_session, sessions
    finally:
        acc[matched] = 0


def _reached_part(index: TokenCosineIndex, q: Query, ranking: _Ranking, blocks: list[int], whole: np.ndarray,
                  bounds: Bounds, first: bool, hit: np.ndarray, hit_scores: np.ndarray) -> Reach:
    """`_Ranking._reached` (no row holding every word) over the rows of `blocks` and, with `first`, of
    `whole`'s sessions (later, without them), exact for those rows: their sessions were read whole. The
    ranked leg: the rows the matches reach (their own or a neighbour's); the session leg: those with their
    session's level, and every other turn of a matched session with the level alone (`_newest_turns`'
    candidates: the top keeps the newest of tied turns as it does there)."""
    codes = index._fields["session"].column.data
    size, lo, hi = bounds.block, q.window.lo, q.window.hi
    at = np.asarray(blocks, dtype=np.int64) * size
    rows = (at[:, None] + np.arange(size)).ravel()
    rows = rows[(rows >= lo) & (rows < hi)]
    if len(whole):      # (not in order: neither the legs' tops nor the priors need it)
        rows = rows[~member(codes[rows], whole.tolist(), len(bounds.first))]
        if first:
            starts, ends = cosine_region.merged(np.maximum(bounds.first[whole], lo),
                                                np.minimum(bounds.last[whole] + 1, hi))   # spans may overlap
            extra = np.concatenate([np.arange(a, b) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
                                   + [np.zeros(0, dtype=np.int64)])
            rows = np.concatenate([rows, extra[member(codes[extra], whole.tolist(), len(bounds.first))]])
    spread = ranking.scratch.b
    written = ranking._scatter(hit, hit_scores)     # not `_scattered`: the rows are those above, unsorted
    try:
        reached = spread[rows] != 0
        if q.window.late:
            inside = ~q.window.outside(index._ts.data[rows])
            rows, reached = rows[inside], reached[inside]
        levels = ranking._levels(hit, hit_scores) if q.slots else None
        level_all = levels.at(codes[rows]) if levels is not None else None
        others, rows = rows[~reached], rows[reached]
        smoothed = spread[rows] / (1.0 + 2 * sum(q.context))
        ranking._priors(smoothed, rows)
        ranked = rows, raw_scores(np.zeros(len(rows), dtype=np.float32), smoothed, q.scale), smoothed
        sessions = bool((codes[hit] >= 0).any())
        if level_all is None:       # no session leg, or no match has a session: the ranked leg's rows
            return len(rows), ranked, ranked, sessions
        boosted = smoothed + level_all[reached]
        level = level_all[~reached]
        alone = raw_scores(np.zeros(len(level), dtype=np.float32), level, q.scale)
        turns = alone > 0
        by_session = (np.concatenate([rows, others[turns]]),
                      np.concatenate([raw_scores(np.zeros(len(rows), dtype=np.float32), boosted, q.scale),
                                      alone[turns]]),
                      np.concatenate([boosted, level[turns]]))
        return len(rows) + int(turns.sum()), ranked, by_session, sessions
    finally:
        for part in written:
            spread[part] = 0
