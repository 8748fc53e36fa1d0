"""The rows a round of block pruning (`cosine_prune`) reads: the row ranges of its blocks and of the
sessions they meet, and the query's terms' postings there, one gather per segment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from urchin.search.cosine_sparse import Postings
from urchin.search.postings import span

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex
    from urchin.search.cosine_bounds import Bounds
    from urchin.search.postings import Segment

__all__ = ["Few", "few", "merged", "postings", "region", "term_postings"]

# A query term in at most 1/_FEW of the rows is read once a query (its rows in the window) and each round
# looks its ranges up there, not in every segment (19 look-ups a term and round at 3M rows).
_FEW = 64
Few = dict[int, tuple[np.ndarray, np.ndarray]]     # a term's rows in the window and their tf (`few`)


def term_postings(index: TokenCosineIndex, term: int,
                  segments: list[Segment] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`term`'s rows (ascending) and tf in `segments` (every one by default) and the pending postings."""
    rows, tf = [], []
    for seg in index._segments if segments is None else segments:
        r, f = seg.postings(term)
        rows.append(r)
        tf.append(f)
    if index._pending_rows:
        terms, r, f = index._pending()
        mine = terms == term
        rows.append(r[mine])
        tf.append(f[mine])
    return np.concatenate(rows).astype(np.int64), np.concatenate(tf)


def region(index: TokenCosineIndex, blocks: list[int], whole: np.ndarray, bounds: Bounds, lo: int,
            hi: int) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """Disjoint row ranges [starts, ends) in the window: the blocks, and the span of every session
    their rows belong to and of `whole` (a span may hold other sessions' rows: they are read, not
    ranked). None when that is too many rows to be worth it."""
    codes, size = index._fields["session"].column.data, bounds.block
    at = np.asarray(blocks, dtype=np.int64) * size
    starts, ends = np.maximum(at, lo), np.minimum(at + size, hi)
    # The sessions their rows belong to: a whole block's codes as a row of the column seen as rows of
    # `size` (one gather, not one per row), a block the window cuts row by row; marked in a table over
    # every session code, its last place taking code -1 (none). (A sort of every row's code was most
    # of the cost of a large read.)
    whole_block = (starts == at) & (ends == at + size) & (ends <= len(codes))
    met = [np.asarray(codes[:len(codes) // size * size]).reshape(-1, size)[at[whole_block] // size].ravel()]
    met += [codes[a:b] for a, b in zip(starts[~whole_block].tolist(), ends[~whole_block].tolist(), strict=True)]
    seen = np.zeros(len(bounds.first) + 1, dtype=bool)
    for part in met:
        seen[part] = True
    seen[whole] = True
    sessions = np.flatnonzero(seen[:-1])
    spans_start = np.maximum(bounds.first[sessions], lo)
    spans_end = np.minimum(bounds.last[sessions] + 1, hi)
    keep = spans_end > spans_start
    starts, ends = merged(np.concatenate([starts, spans_start[keep]]), np.concatenate([ends, spans_end[keep]]))
    if int((ends - starts).sum()) > 4 * len(blocks) * size + (1 << 14):
        return None, None
    return starts, ends


def merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > reach[:-1]
    groups = np.cumsum(new) - 1
    out_ends = np.zeros(int(groups[-1]) + 1 if len(groups) else 0, dtype=np.int64)
    np.maximum.at(out_ends, groups, ends)
    return starts[new], out_ends


def few(index: TokenCosineIndex, scales: list[tuple[int, np.float32]], lo: int,
         hi: int) -> Few:
    """The rows (ascending) and tf in lo..hi-1 of each of the query's terms in at most 1/`_FEW` of the rows."""
    df, segments = index._df.data, index.segments_in(lo, hi)     # a week's window: a few of 19 at 3M rows
    out = {}
    for term, _ in scales:
        if int(df[term]) * _FEW <= len(index):
            rows, tf = term_postings(index, term, segments)
            a, b = span(rows, lo, hi)
            out[term] = rows[a:b], tf[a:b]
    return out


def postings(index: TokenCosineIndex, scales: list[tuple[int, np.float32]], starts: np.ndarray,
              ends: np.ndarray, few: Few) -> Postings:
    """(term, scale, rows, tf) of the query's terms in the ranges, in `scales`' order, as
    `_Ranking._postings` adds them (the same float sums): the terms in `few` from their rows read once a
    query, the others one gather per segment for all of them (a gather per term and segment was most of
    a small read's cost: 19 segments at 3M rows)."""
    edges = np.column_stack([starts, ends]).ravel()
    first, last = int(starts[0]), int(ends[-1])
    out: Postings = []
    many = [(term, scale) for term, scale in scales if term not in few]
    for seg in index._segments if many else ():
        span = seg.span
        if span[0] >= last or span[1] < first:
            continue
        i0, i1 = int(np.searchsorted(ends, span[0], side="right")), int(np.searchsorted(starts, span[1], side="right"))
        if i1 > i0:
            _gather(out, many, seg.indptr, seg.rows, seg.tf, edges[2 * i0:2 * i1])
    if index._pending_rows and many:
        terms, rows, tf = index._pending()
        for term, scale in many:
            mine = terms == term
            if mine.any():
                _gather(out, [(term, scale)], np.array([0, int(mine.sum())]), rows[mine], tf[mine], edges, 0)
    for term, scale in scales:
        if term in few and len(few[term][0]):
            rows, tf = few[term]
            _gather(out, [(term, scale)], np.array([0, len(rows)]), rows, tf, edges, 0)
    place = {term: i for i, (term, _) in enumerate(scales)}
    out.sort(key=lambda p: place[p[0]])     # stable: a row's sum adds its terms in `scales`' order
    return out


def _gather(out: Postings, scales: list[tuple[int, np.float32]], indptr: np.ndarray, rows: np.ndarray,
            tf: np.ndarray, edges: np.ndarray, only: int | None = None) -> None:
    """Append to `out` each term's postings (rows[indptr[t]:indptr[t + 1]], ascending) in the ranges
    [edges[2i], edges[2i + 1]); `only`: the one term's run is indptr[only:only + 2]."""
    owners, pieces = [], []
    keys = edges.astype(rows.dtype, copy=False)     # the rows' own type (`postings.span`: no cast of the rows)
    for k, (term, _) in enumerate(scales):
        at = term if only is None else only
        if at + 1 >= len(indptr):
            continue
        p, r = int(indptr[at]), int(indptr[at + 1])
        if p < r:
            owners.append(k)
            pieces.append(rows[p:r].searchsorted(keys) + p)
    if not pieces:
        return
    ab = np.concatenate(pieces)
    a, lengths = ab[0::2], ab[1::2] - ab[0::2]
    per_term = lengths.reshape(len(pieces), -1).sum(axis=1)
    total = int(per_term.sum())
    if not total:
        return
    offsets = np.repeat(a - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)
    got_rows, got_tf = rows[offsets].astype(np.intp), tf[offsets]     # int32 indexes ~3x slower
    start = 0
    for k, end in zip(owners, np.cumsum(per_term).tolist(), strict=True):
        if end > start:
            out.append((scales[k][0], scales[k][1], got_rows[start:end], got_tf[start:end]))
        start = end
