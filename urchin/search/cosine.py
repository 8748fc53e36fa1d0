"""Token-cosine search: a incremental inverted index of weighted token vectors, in memory.

Scores are cosines of tf-idf vectors (tf weight 1 + ln tf, idf ln((N + 1) / (df + 0.5))), smoothed
by each event's neighbours in its session (a turn answers the one before it). Pure numpy, no model.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from urchin.event import Event
from urchin.journal import LineCheck
from urchin.search import cosine_dense, cosine_prune, cosine_sparse, cosine_state, cosine_weights, thesaurus
from urchin.search.assoc import TF_WEIGHT as _TF_WEIGHT
from urchin.search.assoc import Associations
from urchin.search.cosine_extract import LABELS, Batch, TermExtractor
from urchin.search.cosine_query import Query, Scored, Scratch, Window
from urchin.search.cosine_sessions import WindowLengths
from urchin.search.cosine_settings import DEFAULTS, RankingSettings
from urchin.search.cosine_state import NARROW, IndexState
from urchin.search.links import link_rows
from urchin.search.postings import Blob, Codes, Column, Segment, SplitColumn, Triples, release_pages, span, walk
from urchin.search.query import check_limit, check_query
from urchin.search.scope import SessionScopes
from urchin.search.score import TOKEN_COSINE
from urchin.search.terms import tokenize
from urchin.search.thesaurus import Thesaurus

__all__ = ["IndexState", "RankingSettings", "Scored", "TokenCosineIndex", "event_terms", "MEMORY_PRIOR",
           "NAMED_SOURCE_PRIOR", "EXPAND", "EXPAND_TERMS"]

_FREEZE_POSTINGS = 1 << 18  # pending postings frozen into a CSR segment beyond this
_MAX_MERGE_POSTINGS = 1 << 22  # segments are not merged beyond this: a merge needs old + new in memory
# The shipped priors and expansion, which the hybrid index's legs share (urchin/hybrid/): see RankingSettings.
MEMORY_PRIOR = DEFAULTS.memory  # a memory's score counts 1 + this
NAMED_SOURCE_PRIOR = DEFAULTS.named_source  # an event from a source the query names counts 1 + this
EXPAND, EXPAND_TERMS = DEFAULTS.expand, DEFAULTS.expand_terms   # learned associations: weight, how many


def event_terms(event: Event) -> list[str]:
    """Terms an event is found by: its content, title, tags, source and workspace."""
    parts = [event.content, event.title or "", " ".join(event.tags), event.source, event.workspace or ""]
    return tokenize(" ".join(p for p in parts if p))


def neighbour_weights(context: float, turns: int) -> list[float]:
    """The one session-context rule, shared by token-cosine and the hybrid legs: a neighbour `d` turns
    away (1 <= d <= `turns`) adds `context ** d` times its own match; `context` 0 adds nothing."""
    return [context ** d for d in range(1, turns + 1)] if context > 0 else []


class TokenCosineIndex:
    """Events in, ranked `Scored` ids out. Add events in any batch size, without rebuilding.

    Document frequencies, and so idf, are exact at every query. Document norms are recomputed
    (O(postings)) at the first query after adds while the index is small, and once it has grown by
    1% when it is large (over 2M postings), so a norm's idf is never more than 1% of events stale.
    Not thread-safe: callers serialise `add_many` and `search` (one lock in the daemon).

    An event's score adds its session neighbours' cosines (the events before and after it in the
    same session, by timestamp; `context_turns` on each side, weighted context ** distance), since
    a turn answers the one before it; the sum is divided by its maximum so scores stay in (0, 1].
    How it ranks, and which paths a query may take, is `settings` (`RankingSettings`, given at
    construction; the shipped values by default).
    """

    freeze_postings = _FREEZE_POSTINGS
    max_merge_postings = _MAX_MERGE_POSTINGS
    # True: every query makes the passes over every row of its window (`cosine_dense`: the reference that
    # cosine_sparse's ranking over the rows a query reaches is tested against; same results)
    reference = False
    # True: a query with many matches reads only the row blocks that can hold its top (cosine_prune;
    # the same results); False: it reads every match (tests compare the two)
    prune = True

    def __init__(self, settings: RankingSettings = DEFAULTS) -> None:
        self.thesaurus: Thesaurus | None = None
        self.settings = settings
        self.assoc: Associations | None = None
        self._vocab: MutableMapping[str, int] = {}    # a loaded index's is a `Vocabulary` (cosine_state.restore)
        self._extractor = TermExtractor(self._vocab)
        self._maps: dict[int, Column] = {}  # worker pid -> its term ids -> ours (parallel builds)
        self._df = Column(np.int32)
        self._segments: list[Segment] = []
        self._pending_terms = array("i")
        self._pending_rows = array("i")
        self._pending_tf = array("B")
        self._ts = Column(np.int64)
        # Windows: rows are in arrival order, mostly time order. `_ts_max` (the running maximum of ts)
        # is sorted, so a binary search bounds every in-order row of a window; the few late rows
        # (backfilled: ts below an earlier row's) are kept in `_late` and handled one by one.
        self._ts_max = Column(np.int64)
        self._late = Column(np.int32)
        self._norm = Column(np.float32, 1)
        self._norm_total = 0.0  # sum of the document norms (their mean pivots the length normalisation)
        self._prev = Column(np.int32, -1)
        self._next = Column(np.int32, -1)
        self._fields = {name: Codes(narrow=name in NARROW) for name in LABELS}
        self._session_last: dict[int, int] = {}
        self._session_rows = Column(np.int64)  # rows per session code (the session leg's lengths)
        self._scopes = SessionScopes()         # what a workspace's query may leave out (scope.py)
        self._window_lengths = WindowLengths()  # rows per session in the last windows asked
        self._scratch: Scratch | None = None   # zeroed buffers a query lends (cosine_sparse)
        self._id_bytes = Blob()
        self._id_end: Column | SplitColumn = Column(np.int64)   # a SplitColumn once loaded (from_state)
        self._refreshed_at = 0  # rows whose norms reflect the idf of the last full refresh
        self._norm_epoch = 0    # bumped when every norm is recomputed (cosine_prune's maxima then go)
        self.postings_read = 0  # postings the last query read (a work counter: tests, benchmarks)

    @property
    def settings(self) -> RankingSettings:
        """How this index ranks (see `RankingSettings`)."""
        return self._settings

    @settings.setter
    def settings(self, settings: RankingSettings) -> None:
        """Rank by `settings` from the next query on (benches try several on one index): the block maxima
        made with the old ones go; the thesaurus is loaded when related words are first wanted."""
        self._settings = settings
        # the one session-context rule (`neighbour_weights`): empty when context is 0
        self.context_weights = neighbour_weights(settings.context, settings.context_turns)
        self._bounds: cosine_prune.Bounds | None = None    # cosine_prune's per-term block maxima, made by queries
        if settings.related > 0 and self.thesaurus is None:
            self.thesaurus = thesaurus.default()

    @property
    def expand(self) -> float:
        """The learned associations' weight (`RankingSettings.expand`): 0, and the view learns none."""
        return self._settings.expand

    # ---- adding -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._ts.size

    def add(self, event: Event) -> int:
        """Index one event; returns its row."""
        self.add_many((event,))
        return len(self) - 1

    def add_many(self, events: Iterable[Event]) -> None:
        """Index events in order (each once: the journal has already removed duplicates)."""
        batch = list(events)
        if batch:
            self.add_batch(self._extractor.from_events(batch))

    def add_batch(self, batch: Batch) -> None:
        """Index a batch from this index's extractor (`extract_lines`) or from a worker process."""
        if not len(batch):
            return
        start = len(self)
        terms = batch.terms if not batch.worker else self._map_terms(batch)
        vocab_size = len(self._vocab)
        tf = batch.tf
        rows = np.repeat(np.arange(start, start + len(batch), dtype=np.int32), batch.sizes)
        self._df.extend(np.zeros(vocab_size - self._df.size, dtype=np.int32))
        self._df.data[:vocab_size] += np.bincount(terms, minlength=vocab_size).astype(np.int32)
        self._append_rows(batch, start)
        weights = _TF_WEIGHT[tf] * self._idf(terms)    # the batch's terms only (a daemon adds a few rows a call)
        norms = np.sqrt(np.bincount(rows - start, weights * weights, minlength=len(batch)))
        norms = np.where(norms > 0, norms, 1.0)
        self._norm.data[start:start + len(batch)] = norms
        self._norm_total += float(norms.sum())
        self._pending_terms.frombytes(terms.astype(np.int32, copy=False).tobytes())
        self._pending_rows.frombytes(rows.tobytes())
        self._pending_tf.frombytes(tf.tobytes())
        if len(self._pending_rows) >= self.freeze_postings:
            self._freeze()

    def extract_lines(self, lines: Iterable[tuple[int, bytes]], proof: LineCheck | None = None) -> Batch:
        """Journal lines -> a batch over this index's vocabulary (non-events are skipped; lines `proof`
        does not find proven are redacted first)."""
        return self._extractor.from_lines(lines, proof)

    def _map_terms(self, batch: Batch) -> np.ndarray:
        """A worker's term ids -> ours, interning the terms it saw first in this batch."""
        mapping = self._maps.setdefault(batch.worker, Column(np.int32))
        if mapping.size != batch.vocab_start:
            raise RuntimeError("worker batches arrived out of order")
        vocab = self._vocab
        mapping.extend(np.fromiter((vocab.setdefault(t, len(vocab)) for t in batch.new_terms), np.int32,
                                   len(batch.new_terms)))
        return mapping.view()[batch.terms]

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """For a large backlog: postings are frozen in segments of max_merge_postings, so each is
        moved once rather than merged again and again; afterwards, forget the workers' vocabularies
        and the word cache the build warmed."""
        freeze = self.freeze_postings
        self.freeze_postings = max(freeze, self.max_merge_postings)
        try:
            yield
        finally:
            self.freeze_postings = freeze
            if len(self._pending_rows) >= freeze:
                self._freeze()
            self._maps.clear()
            self._extractor.trim()

    def _append_rows(self, batch: Batch, start: int) -> None:
        n = len(batch)
        ts = batch.ts
        ts_max = np.maximum.accumulate(ts)
        if start:
            np.maximum(ts_max, self._ts_max.data[start - 1], out=ts_max)
        self._late.extend((np.flatnonzero(ts < ts_max) + start).astype(np.int32))
        self._ts.extend(ts)
        self._ts_max.extend(ts_max)
        self._norm.extend(np.ones(n, dtype=np.float32))
        self._prev.extend(np.full(n, -1, dtype=np.int32))
        self._next.extend(np.full(n, -1, dtype=np.int32))
        for name, codes in self._fields.items():
            codes.column.extend(np.fromiter(map(codes.__getitem__, batch.labels[name]), np.int32, n))
        joined = "".join(batch.ids).encode("utf-8")
        lengths = np.fromiter(map(len, batch.ids), dtype=np.int64, count=n)
        if len(joined) != int(lengths.sum()):  # some id is not ASCII: count bytes, not characters
            lengths = np.fromiter((len(i.encode("utf-8")) for i in batch.ids), dtype=np.int64, count=n)
        self._id_end.extend(len(self._id_bytes) + np.cumsum(lengths))
        self._id_bytes += joined
        sessions = self._fields["session"]
        new = sessions.column.data[start:start + n]
        self._session_rows.extend(np.zeros(len(sessions) - 1 - self._session_rows.size, dtype=np.int64))
        self._session_rows.data[:len(sessions) - 1] += np.bincount(new[new >= 0], minlength=len(sessions) - 1)
        self._scopes.add(new, self._fields["workspace"].column.data[start:start + n], len(sessions) - 1)
        link_rows(self._prev.data, self._next.data, self._ts.data, self._session_last, start, new, ts)

    def _pending(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.frombuffer(self._pending_terms, dtype=np.int32),
                np.frombuffer(self._pending_rows, dtype=np.int32),
                np.frombuffer(self._pending_tf, dtype=np.uint8))

    def _freeze(self) -> None:
        pending = self._pending()
        parts: list[Segment | Triples] = [pending]
        # Merge like an LSM tree: few segments, each merge at least halves the work of the next; but
        # none past max_merge_postings, so a merge never holds more than that twice (peak memory).
        size = len(pending[0])
        while self._segments and size * 2 >= self._segments[-1].nnz and (
                size + self._segments[-1].nnz <= self.max_merge_postings):
            older = self._segments.pop()
            parts.insert(0, older)
            size += older.nnz
        segment = Segment.build(parts, len(self._vocab))
        del parts, pending
        self._pending_terms, self._pending_rows, self._pending_tf = array("i"), array("i"), array("B")
        self._segments.append(segment)

    # ---- statistics -------------------------------------------------------------------------
    def _idf(self, terms: np.ndarray | None = None) -> np.ndarray:
        """Every term's idf, or those of `terms` (the same floats)."""
        n = len(self)
        df = self._df.view() if terms is None else self._df.data[terms]
        return np.log((n + 1.0) / (df + 0.5)).astype(np.float32)

    def segments_in(self, lo: int, hi: int) -> list[Segment]:
        """The frozen segments holding a row of lo..hi-1: a segment is made of rows added one after
        another, so a window meets a few of them, and a query asks only those for its terms' postings
        (each asked costs a look-up per term, whatever the window: 20 segments at 3M rows)."""
        if lo == 0 and hi >= len(self):
            return self._segments
        return [seg for seg in self._segments if seg.span[0] < hi and seg.span[1] >= lo]

    @property
    def nnz(self) -> int:
        return sum(s.nnz for s in self._segments) + len(self._pending_rows)

    def refresh(self) -> None:
        """Recompute every document norm with the current idf (O(postings))."""
        idf = self._idf()
        n = len(self)
        norm2 = np.zeros(n, dtype=np.float64)
        for rows, tf, terms in self._all_postings():
            w = _TF_WEIGHT[tf] * idf[terms]
            norm2 += np.bincount(rows, w * w, minlength=n)
        norms = np.sqrt(norm2).astype(np.float32)
        self._norm.data[:n] = np.where(norms > 0, norms, 1.0)
        self._norm_total = float(self._norm.data[:n].sum(dtype=np.float64))
        self._refreshed_at = n
        self._norm_epoch += 1
        self._bounds = None

    def _all_postings(self, since: int = 0,
                      chunk: int = 1 << 21) -> Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(rows, tf, terms) chunks of every posting (`postings.walk`; `since`: from the segments
        holding a row from there on)."""
        return walk(self._segments, self._pending() if self._pending_rows else None, chunk, since)

    def refresh_if_stale(self) -> None:
        """Refresh norms when the policy above says they are stale (queries call this)."""
        n, done = len(self), self._refreshed_at
        if n == done:
            return
        if self.nnz <= self._settings.exact_refresh_postings or n - done >= self._settings.refresh_growth * done:
            self.refresh()

    # ---- searching --------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        source: str | None = None,
        workspace: str | None = None,
        session: str | None = None,
        kind: str | None = None,
        limit: int = 10,
        exclude: Iterable[str] = (),
        groups: Sequence[Sequence[Sequence[str]]] | None = None,
    ) -> list[Scored]:
        """The `limit` best events for `query`, best first; ties go to the newer, then the lower id.

        Filters select results; a neighbour's match still counts as context when the neighbour
        itself is filtered out, but only neighbours inside the time window count. `exclude`: terms
        (the query's -words) that the thesaurus and the associations must not add back. `groups`: the
        query's words as OR groups of alternatives (each a list of tokens), for "holds every word"
        (default: each token of `query` is a group). A score is urchin.search.score.TOKEN_COSINE's, made
        of the evidence a row holds; the context-smoothed cosine with its priors is its `rank` part.
        """
        check_query(query)
        limit = check_limit(limit)
        wanted = {"source": source, "workspace": workspace, "session": session, "kind": kind}
        codes = {}
        for name, value in wanted.items():
            if value is not None:
                code = self._fields[name].get(value)
                if code is None:
                    return []
                codes[name] = code
        self.postings_read = 0
        tokens = tokenize(query)
        weights, own = cosine_weights.query_weights(self, tokens, frozenset(exclude))
        if not weights or not len(self):
            return []
        self.refresh_if_stale()
        lo, hi, late = self._row_range(since_ms, until_ms)
        if lo >= hi:
            return []
        settings = self._settings
        slots = min(limit, round(settings.session_slots * limit / 10)) if settings.session > 0 else 0
        asked = groups if groups is not None else [[[t]] for t in dict.fromkeys(tokens)]
        query_ = Query(weights, own, set(tokens), asked, Window(lo, hi, late, since_ms, until_ms), codes, limit,
                       slots, self.context_weights, TOKEN_COSINE)
        if not self.reference:
            ranked = cosine_sparse.rank(self, query_, cosine_prune.top if self.prune else None)
            if ranked is not None:
                return ranked
        return cosine_dense.rank(self, query_)

    def _row_range(self, since_ms: int | None, until_ms: int | None) -> tuple[int, int, bool]:
        """Rows to score, lo..hi-1, and whether late rows among them need their own time checked.

        Every in-order row of the window lies in the slice where the running maximum of ts is in
        the window; a late row with ts >= since also lies past lo (its running maximum is higher),
        but one with ts <= until may lie past hi, so hi grows to reach the last such row."""
        n = len(self)
        if since_ms is None and until_ms is None:
            return 0, n, False
        ts_max = self._ts_max.view()
        lo = 0 if since_ms is None else int(np.searchsorted(ts_max, since_ms, side="left"))
        hi = n if until_ms is None else int(np.searchsorted(ts_max, until_ms, side="right"))
        late = self._late.view()
        if hi < n and len(late):
            after = late[int(np.searchsorted(late, hi)):]
            ts = self._ts.data[after]
            inside = ts <= until_ms if since_ms is None else (ts <= until_ms) & (ts >= since_ms)
            if inside.any():
                hi = int(after[inside].max()) + 1
        a, b = span(late, lo, hi)
        return lo, hi, bool(b > a)


    def _scales(self, terms: dict[int, float], own: int) -> tuple[list[tuple[int, np.float32]], dict[int, float]]:
        """`cosine_weights.scales` of this index."""
        return cosine_weights.scales(self, terms, own)

    def _norms_at(self, norms: np.ndarray) -> np.ndarray:
        """Stored document norms -> the divisors of their cosines (pivoted length normalisation)."""
        pivot = self._settings.pivot
        if pivot < 1.0:
            pivoted = np.float32((1.0 - pivot) * self._norm_total / max(len(self), 1))
            return pivoted + np.float32(pivot) * norms
        return norms

    def _session_lengths(self, lo: int, hi: int) -> np.ndarray:
        """Rows per session code in lo..hi-1 (late rows outside the window's time included, as the
        reference counts them): kept for the whole index, and for the last windows asked, moved by
        the rows crossed (`cosine_sessions`). Not to be changed by the caller."""
        n, size = len(self), len(self._fields["session"]) - 1
        total = self._session_rows.data[:size]
        if lo == 0 and hi == n:
            return total
        return self._window_lengths.at(self._fields["session"].column.data, total, lo, hi, n)

    def session_rows(self, session: str, since_ms: int, labels: dict[str, str]) -> Iterator[int]:
        """The rows of `session` from `since_ms` on whose label fields hold `labels`, newest first:
        its rows are linked in time order, so this walks the session back from its newest row."""
        code = self._fields["session"].get(session)
        wanted = [(self._fields[name].column.data, self._fields[name].get(value)) for name, value in labels.items()]
        if code is None or any(c is None for _, c in wanted):
            return
        row, ts, prev = self._session_last.get(code, -1), self._ts.data, self._prev.data
        while row >= 0 and ts[row] >= since_ms:
            if all(column[row] == c for column, c in wanted):
                yield row
            row = int(prev[row])

    def scratch(self) -> Scratch:
        """Zeroed buffers as long as the index, for one query (see `cosine_query.Scratch`)."""
        if self._scratch is None or len(self._scratch) < len(self) + 1:
            self._scratch = Scratch(len(self) + 1 + len(self) // 8)
        return self._scratch

    def _kind_prior(self, scores: np.ndarray, kinds: np.ndarray, sources: np.ndarray, terms: set[str]) -> None:
        """`cosine_weights.kind_prior` of this index."""
        cosine_weights.kind_prior(self, scores, kinds, sources, terms)

    def _top(self, rows: np.ndarray, scores: np.ndarray, limit: int, match: np.ndarray) -> list[Scored]:
        if len(rows) > limit:
            kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            sel = scores >= kth  # everything tied with the k-th best stays for the tie-break
            rows, scores, match = rows[sel], scores[sel], match[sel]
        ts = self._ts.data[rows]
        order = np.lexsort((-ts, -scores))  # by score, then newer; ids settle exact ties below
        if len(order) > limit:
            last = order[limit - 1]
            tail = order[limit:]
            tied = tail[(scores[tail] == scores[last]) & (ts[tail] == ts[last])]
            order = np.concatenate([order[:limit], tied])
        picked = sorted((-float(scores[i]), -int(ts[i]), self._id(int(rows[i])), int(rows[i]), float(match[i]))
                        for i in order)
        return [Scored(eid, TOKEN_COSINE.shown_raw(-neg), row, min(m, 1.0), -neg)
                for neg, _, eid, row, m in picked[:limit]]

    def _id(self, row: int) -> str:
        ends = self._id_end
        if isinstance(ends, SplitColumn):
            end, start = ends.at(row), ends.at(row - 1) if row else 0
        else:
            end, start = int(ends.data[row]), int(ends.data[row - 1]) if row else 0
        return self._id_bytes[start:end].decode("utf-8")

    # ---- persistence (cosine_state.py) ---------------------------------------------------------
    def state(self, copy: bool = True) -> IndexState:
        """A copy to save (`cosine_state.take`; `copy` False: the columns themselves)."""
        return cosine_state.take(self, copy)

    @classmethod
    def from_state(cls, state: IndexState, settings: RankingSettings = DEFAULTS) -> TokenCosineIndex:
        """The index a state was taken of, ranking by `settings` with the state's session context.
        Raises ValueError when the state is inconsistent."""
        context, turns = float(state.meta["context"]), int(state.meta["context_turns"])
        index = cls(replace(settings, context=context, context_turns=turns))
        cosine_state.restore(index, state)
        return index

    def swap_segments(self, swap: Callable[[Segment], Segment]) -> None:
        """Replace each frozen segment by `swap(segment)`: the same postings, held elsewhere (a build
        writes segments to disk as they fill and keeps read-only maps of them, `TokenCosineView`)."""
        self._segments = [swap(segment) for segment in self._segments]

    def release_pages(self) -> int:
        """Drop the pages of the read-only maps (a saved index's postings and ids) and the per-row
        columns' file pages never written from this process's resident set; they stay in the page cache.
        Nothing may change the index meanwhile (the view's lock). Returns how many maps were released."""
        arrays = [a for s in self._segments for a in (s.indptr, s.rows, s.tf)] + [self._id_bytes.base]
        if isinstance(self._id_end, SplitColumn):
            arrays.append(self._id_end.base)
        return sum(release_pages(a) for a in arrays) + cosine_state.release_columns(self)

    def memory_bytes(self) -> int:
        """Bytes held by the index's arrays (the vocabulary dict and id strings included roughly)."""
        arrays = sum(s.indptr.nbytes + s.rows.nbytes + s.tf.nbytes for s in self._segments)
        arrays += len(self._pending_rows) * 9
        cols = [self._df, self._ts, self._ts_max, self._late, self._norm, self._prev, self._next]
        cols += [f.column for f in self._fields.values()] + [self._session_rows]
        arrays += self._id_end.nbytes if isinstance(self._id_end, SplitColumn) else self._id_end.data.nbytes
        arrays += self._scopes.nbytes + self._window_lengths.nbytes
        if self._scratch is not None:
            arrays += self._scratch.nbytes
        if self._bounds is not None:
            arrays += self._bounds.nbytes
        arrays += sum(c.data.nbytes for c in cols) + len(self._id_bytes)
        vocab = sum(49 + len(t) for t in self._vocab) + 100 * len(self._vocab)
        return arrays + vocab
