"""Token-cosine ranking over the rows a query reaches, so its cost follows its terms, not the journal.

A query reaches its terms' postings in the window (the matches), their session neighbours up to
`context_turns` steps, and, for the session leg, the newest turns of each session it matches (that
leg adds the session's match to every turn of it, and among equal scores the newest win). The
scores are the same floats, added in the same order, as `cosine_dense.rank`'s passes
over every row of the window, so the results are identical (tests/test_cosine_sparse.py); `rank`
declines, and the caller makes those passes, where they would cost no more or this could differ.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from urchin.search.assoc import TF_WEIGHT
from urchin.search.cosine_query import Query, Scored, Scratch, member, merge, raw_scores
from urchin.search.postings import distinct
from urchin.search.scope import Scope
from urchin.search.score import Scale

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

log = logging.getLogger("urchin.search.cosine")
# Query, Scored, merge and raw_scores stay importable from here for cosine_dense (they live in cosine_query)
__all__ = ["Query", "Scored", "merge", "rank", "raw_scores"]

Postings = list[tuple[int, np.float32, np.ndarray, np.ndarray]]   # (term, scale, rows, tf) in adding order


def _exact(scale: Scale) -> bool:
    """Rows holding every word outscore all others (score.py's tier: the most a row without them can
    score is under `every`), and no row holds evidence but its terms' (share and related are 0, as for
    token-cosine): then only matches, their neighbours and sessions' newest turns can rank."""
    return scale.share == 0 and scale.related == 0 and scale.rank < scale.every


Pruning = Callable[["TokenCosineIndex", Query, list[list[tuple[int, ...]]], "_Ranking"], "list[Scored] | None"]


def rank(index: TokenCosineIndex, q: Query, pruning: Pruning | None = None) -> list[Scored] | None:
    """The query's results from the rows it reaches, or None where the passes over the window are
    due (they give the same results): a group word that is not a query term, or many matches of
    which few hold every word, or sessions too long to walk to their newest turns. `pruning`
    (urchin.search.cosine_prune.top) is asked first: its results, when it gives any, are the same."""
    groups = _group_terms(index, q)
    if groups is None or not _exact(q.scale):
        return None
    scratch = index.scratch()
    try:
        ranking = _Ranking(index, q, scratch)
        if pruning is not None:
            pruned = _pruned(pruning, index, q, groups, ranking)
            if pruned is not None:
                return pruned
            if index._scratch is not scratch:      # dropped by a failed pruning: fresh zeroed buffers
                scratch = index.scratch()
                ranking = _Ranking(index, q, scratch)
        return ranking.run(groups)
    except BaseException:
        index._scratch = None  # written and not zeroed again: never lent again
        raise


def _pruned(pruning: Pruning, index: TokenCosineIndex, q: Query, groups: list[list[tuple[int, ...]]],
            ranking: _Ranking) -> list[Scored] | None:
    """The pruning's results, or None. An error of its own is no damaged index (the caller rebuilds on
    an IndexError): the reading of every match, which meets a damaged posting as well, decides."""
    try:
        return pruning(index, q, groups, ranking)
    except (IndexError, ValueError):
        log.warning("token-cosine: block pruning failed; reading every match", exc_info=True)
        index.prune = False     # this index's queries read every match from now on
        index._scratch = None   # written and perhaps not zeroed again
        return None


def _group_terms(index: TokenCosineIndex, q: Query) -> list[list[tuple[int, ...]]] | None:
    """The query's word groups as term ids (alternatives of unknown words dropped: nothing holds
    them), or None when a group word is indexed but not one of the query's own terms (a row without
    any match could then hold every word: the passes handle that)."""
    own = set(list(q.weights)[:q.own])
    out = []
    for group in q.groups:
        alternatives = [[t for t in alt if t] for alt in group]
        alternatives = [alt for alt in alternatives if alt]
        if not alternatives:
            continue  # a group of stop words only asks nothing
        ids = []
        for alt in alternatives:
            if any(t not in index._vocab for t in alt):
                continue
            terms = tuple(dict.fromkeys(index._vocab[t] for t in alt))
            if not own.issuperset(terms):
                return None
            ids.append(terms)
        out.append(ids)
    return out


class Levels(NamedTuple):
    """Matched session codes, ascending, and the boost each adds to its rows."""

    sessions: np.ndarray
    boost: np.ndarray
    size: int       # session codes there are

    def at(self, codes: np.ndarray) -> np.ndarray:
        """The boost of rows with these session codes (0: no session, or one not matched)."""
        if len(codes) * 4 > self.size:      # many rows: through a table over every code
            table = np.zeros(self.size + 1, dtype=np.float32)
            table[self.sessions + 1] = self.boost
            return table.take(codes + 1)      # (`member`: take, not indexing, with int32 codes)
        i = np.minimum(np.searchsorted(self.sessions, codes), len(self.sessions) - 1)
        return np.where(self.sessions[i] == codes, self.boost[i], np.float32(0))


def _flags(rows: np.ndarray, flags: np.ndarray) -> Callable[[int], bool]:
    """row -> its flag, for rows ascending (False for a row not among them)."""
    def flag(row: int) -> bool:
        i = int(np.searchsorted(rows, row))
        return i < len(rows) and int(rows[i]) == row and bool(flags[i])
    return flag


class _Ranking:
    """One query's pass over the rows it reaches (absolute row numbers throughout)."""

    def __init__(self, index: TokenCosineIndex, q: Query, scratch: Scratch) -> None:
        self.index, self.q, self.scratch = index, q, scratch
        self.settings = index.settings      # its costs: dense_share, sort_share, walk_budget (cosine_settings)
        self.lo, self.hi = q.window.lo, q.window.hi
        code = q.codes.get("workspace")      # a workspace filter: only its scope is read (scope.py)
        self.scope = Scope(index, code) if code is not None else None
        self._lengths: np.ndarray | None = None

    def run(self, groups: list[list[tuple[int, ...]]]) -> list[Scored] | None:
        q, acc = self.q, self.scratch.a
        postings = self._postings()
        self.index.postings_read += sum(len(p[2]) for p in postings)
        if self._passes_cheaper(groups, postings):
            return None
        for _, scale, rows, tf in postings:
            acc[rows] += TF_WEIGHT[tf] * scale      # in the reference's order: the same float sums
        matched = self._rows(postings)
        try:
            scores = acc[matched] / self.index._norms_at(self.index._norm.data[matched])
            outside = q.window.outside(self.index._ts.data[matched]) if q.window.late else None
            if outside is not None and outside.any():
                scores[outside] = 0
            else:
                outside = None
            acc[matched] = scores               # acc is now the reference's `scores`, absolute rows
            every = self._every(groups, postings, matched)
            hit, hit_scores, hit_every = matched, scores, every
            if outside is not None:             # else every match is in the window, its score > 0
                keep = scores != 0
                hit, hit_scores, hit_every = matched[keep], scores[keep], every[keep]
            tier = hit[hit_every & self._eligible(hit)] if q.codes else hit[hit_every]
            if len(tier) >= q.limit:
                return self._tiered(tier, hit, hit_scores)
            if len(hit) * self.settings.dense_share >= self.hi - self.lo:
                return None
            acc[matched] = every                # from here on: the every-word flag of each match
            return self._reached(hit, hit_scores)
        finally:
            acc[matched] = 0

    def _passes_cheaper(self, groups: list[list[tuple[int, ...]]], postings: Postings) -> bool:
        """Decided from the postings' lengths before any is added: the matches will be over 1/8 of the
        window (one term alone has that many rows) and fewer than `limit` can hold every word (a group's
        rarest term of its commonest alternative has fewer rows), so `run` would hand back anyway."""
        sizes: dict[int, int] = {}
        for term, _, rows, _ in postings:
            sizes[term] = sizes.get(term, 0) + len(rows)
        if max(sizes.values(), default=0) * self.settings.dense_share < self.hi - self.lo:
            return False
        bound = min((max((min(sizes.get(t, 0) for t in alt) for alt in alternatives), default=0)
                     for alternatives in groups), default=0)
        return bound < self.q.limit

    # ---- the matches ----------------------------------------------------------------------------
    def _postings(self) -> Postings:
        """(term, scale, rows, tf) per term and segment, pending postings last, as the reference adds them;
        with a workspace filter, only the rows of its scope (urchin.search.scope: the others cannot
        change a score of its rows)."""
        index, lo, hi = self.index, self.lo, self.hi
        scope = self.scope.keep if self.scope is not None else None
        scales, _ = index._scales(self.q.weights, self.q.own)
        whole = lo == 0 and hi == len(index)
        pending = None
        if index._pending_rows:
            terms, rows, tf = index._pending()
            wanted = member(terms, [t for t, _ in scales], len(index._vocab))
            terms, rows, tf = terms[wanted], rows[wanted], tf[wanted]
            inside = (rows >= lo) & (rows < hi)
            if scope is not None:
                inside[inside] = scope(rows[inside])
            pending = terms[inside], rows[inside], tf[inside]
        out = []
        segments = index.segments_in(lo, hi)
        for term, scale in scales:
            for seg in segments:
                rows, tf = seg.postings(term) if whole else seg.postings_in(term, lo, hi)
                if scope is not None and len(rows):
                    kept = scope(rows)
                    rows, tf = rows[kept], tf[kept]
                if len(rows):
                    out.append((term, scale, rows.astype(np.intp), tf))   # int32 indexes ~3x slower
            if pending is not None:
                mine = pending[0] == term
                if mine.any():
                    out.append((term, scale, pending[1][mine].astype(np.intp), pending[2][mine]))
        return out

    def _written(self, buffer: np.ndarray, parts: list[np.ndarray]) -> np.ndarray:
        """The rows of the window where `buffer` is not 0, ascending: the rows in `parts` (every row
        written there holds a positive sum). By a look at the workspace's scope rows when they are
        fewer than the parts' rows, else by sorting those when few, else by a scan of the window."""
        total = sum(len(p) for p in parts)
        if not total:
            return np.zeros(0, dtype=np.int64)
        scope = self.scope.rows(self.lo, self.hi) if self.scope is not None else None
        if scope is not None and len(scope) <= total * self.settings.sort_share:
            return scope[np.take(buffer, scope) != 0].astype(np.int64)
        if total * self.settings.sort_share < self.hi - self.lo:
            return distinct(np.concatenate(parts).astype(np.int64, copy=False))
        # `!= 0` first: numpy's nonzero of a float array branches per element (~10x a bool array's)
        return np.flatnonzero(buffer[self.lo:self.hi] != 0) + self.lo

    def _rows(self, postings: Postings) -> np.ndarray:
        """The rows holding any term, ascending (every posting added to scratch a is > 0)."""
        return self._written(self.scratch.a, [p[2] for p in postings])

    def _every(self, groups: list[list[tuple[int, ...]]], postings: Postings, matched: np.ndarray) -> np.ndarray:
        """Whether each matched row holds every word (in each group, every term of one alternative);
        counted in scratch b, zeroed again. No group asking anything: no row does."""
        if not groups:
            return np.zeros(len(matched), dtype=bool)
        count = self.scratch.b
        by_term: dict[int, list[np.ndarray]] = {}
        for term, _, rows, _ in postings:
            by_term.setdefault(term, []).append(rows)
        if all(len(alternatives) == 1 for alternatives in groups):     # no OR: every term of every group
            terms = {t for alternatives in groups for t in alternatives[0]}
            parts = [rows for t in terms for rows in by_term.get(t, [])]
            for rows in parts:
                count[rows] += 1
            every = count[matched] == len(terms)      # one count and one look, not one per group
            for rows in parts:
                count[rows] = 0
            return every
        every = np.ones(len(matched), dtype=bool)
        for alternatives in groups:
            ok = np.zeros(len(matched), dtype=bool)
            for alt in alternatives:
                parts = [rows for t in alt for rows in by_term.get(t, [])]
                for rows in parts:
                    count[rows] += 1
                ok |= count[matched] == len(alt)
                for rows in parts:
                    count[rows] = 0
            every &= ok
        return every

    def _eligible(self, rows: np.ndarray) -> np.ndarray:
        """Rows passing the label filters."""
        keep = np.ones(len(rows), dtype=bool)
        for name, code in self.q.codes.items():
            keep &= self.index._fields[name].column.data[rows] == code
        return keep

    def _priors(self, smoothed: np.ndarray, rows: np.ndarray) -> None:
        fields = self.index._fields
        self.index._kind_prior(smoothed, fields["kind"].column.data[rows], fields["source"].column.data[rows],
                               self.q.words)

    def _levels(self, hit: np.ndarray, hit_scores: np.ndarray) -> Levels | None:
        """The matched sessions and what the reference's `cosine_dense._with_session` adds to each of their rows:
        `session` times the session's cosines summed (in row order, as there) over the square root
        of its length in the window. None when no match has a session."""
        index = self.index
        codes = index._fields["session"].column.data[hit]
        has = codes >= 0
        if not has.any():
            return None
        size = len(index._fields["session"]) - 1
        if 4 * len(hit) < size:             # few matches: their sessions by sorting
            sessions = distinct(codes[has])
            which = np.searchsorted(sessions, codes[has])
            sums = np.bincount(which, hit_scores[has], minlength=len(sessions))
        else:                               # many: a sum per session code
            sums = np.bincount(codes[has], hit_scores[has], minlength=size)
            sessions = np.flatnonzero(sums != 0)
            sums = sums[sessions]
        if self._lengths is None:       # once per query (cosine_prune asks for several sets of rows)
            self._lengths = index._session_lengths(self.lo, self.hi)
        lengths = self._lengths[sessions]
        level = (sums / np.sqrt(np.maximum(lengths, 1))).astype(np.float32)
        return Levels(sessions, np.float32(self.settings.session) * level, size)

    # ---- many hold every word: only they can rank -----------------------------------------------
    def _tiered(self, tier: np.ndarray, hit: np.ndarray, hit_scores: np.ndarray) -> list[Scored]:
        """At least `limit` eligible rows hold every word: they outscore every other row in both
        legs, so the ranking is theirs alone; their context is gathered from the scores in scratch a."""
        return self._tiered_legs(tier, hit, hit_scores)[2]

    def _tiered_legs(self, tier: np.ndarray, hit: np.ndarray,
                     hit_scores: np.ndarray) -> tuple[list[Scored], list[Scored] | None, list[Scored]]:
        """`_tiered`'s two legs (the session leg None when there is none) and their merge."""
        q, index = self.q, self.index
        smoothed = self._gathered(tier)
        self._priors(smoothed, tier)
        base = np.float32(q.scale.every)        # every tier row's evidence (a float32 added to each: the same sums)
        ranked = index._top(tier, raw_scores(base, smoothed, q.scale), q.limit, smoothed)
        levels = self._levels(hit, hit_scores) if q.slots else None
        if levels is None:
            return ranked, None, ranked if not q.slots else merge(ranked, ranked, q.limit, q.slots, lambda row: True)
        boosted = smoothed + levels.at(index._fields["session"].column.data[tier])
        by_session = index._top(tier, raw_scores(base, boosted, q.scale), q.limit, boosted)
        return ranked, by_session, merge(ranked, by_session, q.limit, q.slots, lambda row: True)

    def _gathered(self, rows: np.ndarray) -> np.ndarray:
        """The reference's `cosine_dense.with_context` at `rows` (matches in the window): neighbours' scores gathered
        step by step, in its order. The reference stops a walk where it leaves rows lo..hi-1; this one
        walks on, adding only zeros: rows past that point are outside the window's time (a session's
        links follow time, and every row outside lo..hi-1 has its time outside the window), so their
        scores in scratch a are 0. A missing link (-1) stays -1 down the walk (or-ed with the sign of
        the step before: the row it reads then is whatever, the result -1 again), and -1 reads scratch
        a's last value, past every row, always 0 (`Scratch`): x 0 adds nothing, the same floats."""
        scores = self.scratch.a
        out = scores[rows]
        if not self.q.context:
            return out
        for links in (self.index._prev.data, self.index._next.data):
            hop = rows
            for step, weight in enumerate(self.q.context):
                # `take`, not indexing: links are int32, which indexing converts first (~1.3x the walk)
                linked = links.take(hop)
                if step:
                    linked |= hop >> (8 * hop.itemsize - 1)     # -1 where the step before was -1
                hop = linked
                gathered = scores.take(hop)
                gathered *= weight
                out += gathered
        out /= 1.0 + 2 * sum(self.q.context)
        return out

    # ---- few hold every word: matches, their neighbours and the matched sessions' newest turns ---
    def _reached(self, hit: np.ndarray, hit_scores: np.ndarray) -> list[Scored] | None:
        q, index, flags, spread = self.q, self.index, self.scratch.a, self.scratch.b
        rows = written = self._scattered(hit, hit_scores)
        try:
            smoothed = spread[rows] / (1.0 + 2 * sum(q.context)) if q.context else spread[rows]
            self._priors(smoothed, rows)
            every = flags[rows] > 0
            keep = self._eligible(rows)
            if q.window.late:
                keep &= ~q.window.outside(index._ts.data[rows])
            rows, smoothed, every = rows[keep], smoothed[keep], every[keep]
            base = np.where(every, np.float32(q.scale.every), np.float32(0)).astype(np.float32)
            ranked = index._top(rows, raw_scores(base, smoothed, q.scale), q.limit, smoothed)
            levels = self._levels(hit, hit_scores) if q.slots else None
            holds = _flags(rows, every)
            if levels is None:
                return ranked if not q.slots else merge(ranked, ranked, q.limit, q.slots, holds)
            boosted = smoothed + levels.at(index._fields["session"].column.data[rows])
            raw = raw_scores(base, boosted, q.scale)
            newest = self._newest_turns(levels, raw)
            if newest is None:
                return None
            extra, extra_raw, extra_match = newest
            by_session = index._top(np.concatenate([rows, extra]), np.concatenate([raw, extra_raw]), q.limit,
                                    np.concatenate([boosted, extra_match]))
            return merge(ranked, by_session, q.limit, q.slots, holds)
        finally:
            spread[written] = 0

    def _scattered(self, hit: np.ndarray, hit_scores: np.ndarray) -> np.ndarray:
        """The reference's `cosine_dense._scatter_context` into scratch b (not yet divided); returns the rows it
        wrote (the matches and their neighbours in the window), ascending."""
        return self._written(self.scratch.b, self._scatter(hit, hit_scores))   # each holds a positive sum

    def _scatter(self, hit: np.ndarray, hit_scores: np.ndarray) -> list[np.ndarray]:
        """`_scattered`'s writes, returning the rows of each step (a row may be in several)."""
        spread, lo, hi = self.scratch.b, self.lo, self.hi
        spread[hit] = hit_scores
        written = [hit]
        # gathering from previous turns is giving to next ones, and then the other way round
        for links in (self.index._next.data, self.index._prev.data):
            rows, carried = hit, hit_scores
            for weight in self.q.context:
                rows = links[rows].astype(np.intp)
                inside = (rows >= lo) & (rows < hi)
                rows, carried = rows[inside], carried[inside]
                spread[rows] += carried * weight   # a session is a chain: no row twice in one step
                written.append(rows)
        return written

    def _newest_turns(self, levels: Levels, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The session leg's rows the matches do not reach: every in-window turn of a matched session
        scores that session's level alone, so they tie within it and the newest win (then the lower id).
        Per session, its newest `limit` eligible turns (and those tied with the last in time), walking
        back from its newest turn; sessions in falling level, while one can still enter the top.
        None: the walk grew past its budget."""
        q, index, spread = self.q, self.index, self.scratch.b
        sessions, level = levels.sessions, levels.boost
        alone = raw_scores(np.zeros(len(level), dtype=np.float32), level, q.scale)   # each session's other turns
        best = raw if len(raw) <= q.limit else np.partition(raw, len(raw) - q.limit)[len(raw) - q.limit:]
        top = best.tolist()             # the limit best so far (a min-heap once full)
        heapq.heapify(top)
        since, until = q.window.since, q.window.until
        ts, prev, last_of = index._ts.data, index._prev.data, index._session_last
        filters = [(index._fields[name].column.data, code) for name, code in q.codes.items()]
        rows: list[int] = []
        scores: list[float] = []
        matches: list[float] = []
        steps = 0
        for i in np.argsort(-alone, kind="stable").tolist():
            value = float(alone[i])
            if value <= 0 or (len(top) >= q.limit and value < top[0]):
                break
            row, got, edge = last_of[int(sessions[i])], 0, None
            while row >= 0 and (since is None or ts[row] >= since):
                steps += 1
                if steps > self.settings.walk_budget:
                    return None
                stamp = int(ts[row])
                if until is not None and stamp > until:
                    row = int(prev[row])
                    continue
                if edge is not None and stamp < edge:
                    break
                if spread[row] == 0 and all(column[row] == code for column, code in filters):
                    rows.append(row)
                    scores.append(value)
                    matches.append(float(level[i]))
                    got += 1
                    if got == q.limit:
                        edge = stamp    # later ones only while tied in time
                    if len(top) < q.limit:
                        heapq.heappush(top, value)
                    else:
                        heapq.heappushpop(top, value)
                row = int(prev[row])
        return (np.asarray(rows, dtype=np.int64), np.asarray(scores, dtype=np.float32),
                np.asarray(matches, dtype=np.float32))
