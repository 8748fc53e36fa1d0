"""Token-cosine's passes over every row of a query's window: the exhaustive scorer.

The reference the other paths are tested against (`cosine_sparse` ranks over the rows a query reaches,
`cosine_prune` over the row blocks that can hold its top; both give these ids, order and scores, bit for
bit), and the path they hand a query back to where they would cost more. Dense float32 arrays over the
window: cosines, session context, the kind and memory priors, the session leg, the every-word tier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from urchin.search.assoc import TF_WEIGHT as _TF_WEIGHT
from urchin.search.cosine_sparse import Query, Scored, merge, raw_scores

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["cosines", "rank", "with_context"]


def rank(index: TokenCosineIndex, q: Query) -> list[Scored]:
    """The query's results from the passes over every row of its window (see the module's docstring)."""
    lo, hi, late = q.window.lo, q.window.hi, q.window.late
    since_ms, until_ms = q.window.since, q.window.until
    scores, evidence = cosines(index, q.weights, q.own, lo, hi)
    outside = None
    if late:  # rows in range whose own time is outside the window: no score, no context
        ts = index._ts.data[lo:hi]
        outside = np.zeros(hi - lo + 1, dtype=bool)
        if since_ms is not None:
            outside[:-1] |= ts < since_ms
        if until_ms is not None:
            outside[:-1] |= ts > until_ms
        scores[outside] = 0
    hit = np.flatnonzero(scores[:-1] != 0)   # a bool array's nonzero: ~10x a float array's
    if index.context_weights:
        smoothed = with_context(index, scores, lo, hi, hit)
    else:
        smoothed = scores.copy()
    index._kind_prior(smoothed[:-1], index._fields["kind"].column.data[lo:hi],
                      index._fields["source"].column.data[lo:hi], q.words)
    boosted = _with_session(index, scores, smoothed, lo, hi, hit) if q.slots else None
    every = _every(index, q.groups, lo, hi)
    base = evidence + every * np.float32(q.scale.every)
    ranked = _ranked(index, raw_scores(base, smoothed, q.scale), lo, hi, outside, q.codes, q.limit, smoothed)
    if boosted is None:
        return ranked
    by_session = _ranked(index, raw_scores(base, boosted, q.scale), lo, hi, outside, q.codes, q.limit, boosted)
    return merge(ranked, by_session, q.limit, q.slots, lambda row: bool(every[row - lo]))


def _ranked(index: TokenCosineIndex, scores: np.ndarray, lo: int, hi: int, outside: np.ndarray | None,
           codes: dict[str, int], limit: int, match: np.ndarray) -> list[Scored]:
    """Final (raw) scores of rows lo..hi-1 -> the `limit` best that pass the filters; `match`: the
    smoothed cosines they were made from (the hits carry them)."""
    if outside is not None:
        scores[outside] = 0
    view = scores[: hi - lo]
    if not codes and len(view) > index.settings.sampled_top * limit:
        # The limit-th best of a sample is at most the limit-th best of all: only rows scoring
        # at least that can be in the top, and they are few (~sqrt(rows x limit)).
        sample = view[:: max(1, int(np.sqrt(len(view) / limit)))]
        floor = np.partition(sample, len(sample) - limit)[len(sample) - limit]
        if floor > 0:
            cand = np.flatnonzero(view >= floor)
            return index._top(cand + lo, view[cand], limit, match[cand])
    cand = np.flatnonzero(view != 0)
    if codes:
        keep = np.ones(len(cand), dtype=bool)
        for name, code in codes.items():
            keep &= index._fields[name].column.data[cand + lo] == code
        cand = cand[keep]
    return index._top(cand + lo, scores[cand], limit, match[cand])


def cosines(index: TokenCosineIndex, terms: dict[int, float], own: int, lo: int,
            hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Cosine of the query with rows lo..hi-1 (one spare zero slot at the end, for context), see
    `TokenCosineIndex._scales`. Also each row's evidence part of its raw score (the same slots): the score's
    `share` times the share of the own terms' weight (tf x idf^2) it holds, plus `related` times
    the related terms' share."""
    scales, part = index._scales(terms, own)
    acc = np.zeros(hi - lo + 1, dtype=np.float32)
    held = np.zeros(hi - lo + 1, dtype=np.float32)
    pending = index._pending() if index._pending_rows else None
    segments = index.segments_in(lo, hi)
    for term, scale in scales:
        for seg in segments:
            rows, tf = seg.postings_in(term, lo, hi) if lo > 0 or hi < len(index) else seg.postings(term)
            acc[rows - lo] += _TF_WEIGHT[tf] * scale
            index.postings_read += len(rows)
            if term in part:
                held[rows - lo] += np.float32(part[term])
        if pending is not None:
            hit = np.flatnonzero(pending[0] == term)
            rows, tf = pending[1][hit], pending[2][hit]
            inside = (rows >= lo) & (rows < hi)
            acc[rows[inside] - lo] += _TF_WEIGHT[tf[inside]] * scale
            index.postings_read += int(inside.sum())
            if term in part:
                held[rows[inside] - lo] += np.float32(part[term])
    acc[:-1] /= index._norms_at(index._norm.data[lo:hi])
    held[-1] = 0
    return acc, held


def _rows_with(index: TokenCosineIndex, term: int, lo: int, hi: int) -> np.ndarray:
    """The rows lo..hi-1 holding `term`, relative to lo."""
    out = []
    for seg in index.segments_in(lo, hi):
        rows, _ = seg.postings_in(term, lo, hi)
        out.append(rows - lo)
    if index._pending_rows:
        terms, rows, _ = index._pending()
        rows = rows[terms == term]
        out.append(rows[(rows >= lo) & (rows < hi)] - lo)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _every(index: TokenCosineIndex, groups: Sequence[Sequence[Sequence[str]]], lo: int, hi: int) -> np.ndarray:
    """1.0 for the rows holding every word (in each group, every token of one alternative), else 0
    (one spare slot, 0). Stop words are no terms; a group of only those asks nothing."""
    every = np.zeros(hi - lo + 1, dtype=np.float32)
    first = True
    for group in groups:
        alternatives = [[t for t in alt if t] for alt in group]
        alternatives = [alt for alt in alternatives if alt]
        if not alternatives:
            continue
        ok = np.zeros(hi - lo + 1, dtype=bool)
        for alt in alternatives:
            if any(t not in index._vocab for t in alt):
                continue
            count = np.zeros(hi - lo + 1, dtype=np.int32)
            for t in dict.fromkeys(alt):
                count[_rows_with(index, index._vocab[t], lo, hi)] += 1
            ok |= count == len(set(alt))
        every = ok.astype(np.float32) if first else every * ok
        first = False
    every[-1] = 0
    return every


def _with_session(index: TokenCosineIndex, scores: np.ndarray, smoothed: np.ndarray, lo: int, hi: int,
                  hit: np.ndarray) -> np.ndarray:
    """Add to each row `session` times its session's match: the sum of the session's cosines over
    the square root of its length in the window (long sessions do not win by length alone).
    `hit`: the rows (relative to lo) whose cosine is not zero; only their sessions' sums change."""
    codes = index._fields["session"].column.data[lo:hi]
    size = len(index._fields["session"])
    hit_codes = codes[hit]
    matched = hit_codes >= 0
    out = smoothed.copy()
    if not matched.any():
        return out
    sums = np.bincount(hit_codes[matched], scores[hit[matched]], minlength=size)  # zeros add nothing
    lengths = np.bincount(codes + 1, minlength=size + 1)      # slot 0: rows without a session
    level = np.zeros(size + 1, dtype=np.float32)
    level[1:] = sums / np.sqrt(np.maximum(lengths[1:], 1))
    out[:-1] += np.float32(index.settings.session) * level[codes + 1]   # + 0 where the session has no match
    return out


def with_context(index: TokenCosineIndex, scores: np.ndarray, lo: int, hi: int, hit: np.ndarray) -> np.ndarray:
    """Add each row's session neighbours' cosines, weighted context ** distance, then rescale.

    A row gathers from neighbours 1..turns away while every step stays in the window. When few
    rows match (`hit`, relative to lo), each instead adds its cosine to the rows it is a
    neighbour of, walking the inverse links: the same sums, added in the same order, so the
    same floats, at a cost that follows the matches instead of the window."""
    if len(hit) * index.settings.sparse_context < hi - lo:
        return _scatter_context(index, scores, lo, hi, hit)
    spare = hi - lo  # index of the zero slot: neighbours that are missing or outside the window

    def relative(links: np.ndarray) -> np.ndarray:
        rel = links - lo
        rel[(links < lo) | (links >= hi)] = spare
        return np.append(rel, spare)

    out = scores.copy()
    gathered = np.empty_like(scores)      # one buffer for every step (no temporaries per step)
    weights = index.context_weights
    for links in (index._prev.data[lo:hi], index._next.data[lo:hi]):
        step = relative(links)
        hop = step
        for weight in weights:
            np.take(scores, hop, out=gathered)
            gathered *= weight
            out += gathered
            hop = step[hop]
    out /= 1.0 + 2 * sum(weights)
    return out


def _scatter_context(index: TokenCosineIndex, scores: np.ndarray, lo: int, hi: int, hit: np.ndarray) -> np.ndarray:
    out = scores.copy()
    weights = index.context_weights
    values = scores[hit]
    # gathering from previous turns is giving to next ones, and then the other way round
    for links in (index._next.data, index._prev.data):
        rows, carried = hit + lo, values
        for weight in weights:
            rows = links[rows]
            inside = (rows >= lo) & (rows < hi)
            rows, carried = rows[inside], carried[inside]
            out[rows - lo] += carried * weight    # a session is a chain: no row twice in one step
    out /= 1.0 + 2 * sum(weights)
    return out
