"""Token-cosine search: a incremental inverted index of weighted token vectors, in memory.

Scores are cosines of tf-idf vectors (tf weight 1 + ln tf, idf ln((N + 1) / (df + 0.5))), smoothed
by each event's neighbours in its session (a turn answers the one before it). Pure numpy, no model.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from urchin.event import Event
from urchin.search.query import check_limit, check_query
from urchin.search.tokens import tokenize

__all__ = ["Scored", "TokenCosineIndex", "event_terms"]

_FREEZE_POSTINGS = 1 << 18  # pending postings frozen into a CSR segment beyond this
_EXACT_REFRESH_POSTINGS = 1 << 21  # below this, document norms are refreshed at every query
_REFRESH_GROWTH = 0.01  # above it, norms are refreshed once the index has grown by 1%
_TF_WEIGHT = (1.0 + np.log(np.maximum(np.arange(256, dtype=np.float64), 1.0))).astype(np.float32)
_TF_WEIGHT[0] = 0.0


class Scored(NamedTuple):
    """One ranked event: its id, its score in (0, 1], and its row in the index."""

    id: str
    score: float
    row: int


def event_terms(event: Event) -> list[str]:
    """Terms an event is found by: its content, title, tags, source and workspace."""
    parts = [event.content, event.title or "", " ".join(event.tags), event.source, event.workspace or ""]
    return tokenize(" ".join(p for p in parts if p))


class _Column:
    """A growable 1-D numpy array (capacity doubles), so appends stay amortised O(1)."""

    def __init__(self, dtype: type | np.dtype, fill: float = 0) -> None:
        self.data = np.full(1024, fill, dtype=dtype)
        self.size = 0
        self.fill = fill

    def extend(self, values: np.ndarray | list) -> None:
        values = np.asarray(values, dtype=self.data.dtype)
        need = self.size + len(values)
        if need > len(self.data):
            grown = np.full(max(need, 2 * len(self.data)), self.fill, dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size:need] = values
        self.size = need

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class _Segment:
    """Frozen postings in CSR form: term t's rows are rows[indptr[t]:indptr[t+1]], ascending."""

    __slots__ = ("indptr", "rows", "tf")

    def __init__(self, indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray) -> None:
        self.indptr, self.rows, self.tf = indptr, rows, tf

    @classmethod
    def from_triples(cls, terms: np.ndarray, rows: np.ndarray, tf: np.ndarray, n_terms: int) -> _Segment:
        order = np.argsort(terms, kind="stable")  # stable: rows stay ascending within a term
        counts = np.bincount(terms, minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, rows[order].astype(np.int32), tf[order].astype(np.uint8))

    def terms(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.indptr) - 1, dtype=np.int32), np.diff(self.indptr))

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        if term + 1 >= len(self.indptr):
            return self.rows[:0], self.tf[:0]
        a, b = self.indptr[term], self.indptr[term + 1]
        return self.rows[a:b], self.tf[a:b]

    @property
    def nnz(self) -> int:
        return len(self.rows)


class _Codes:
    """Interns the values of one label field (source, workspace, ...) as small ints; None is -1."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.column = _Column(np.int32, -1)

    def code(self, value: str | None) -> int:
        if value is None:
            return -1
        return self.codes.setdefault(value, len(self.codes))


class TokenCosineIndex:
    """Events in, ranked `Scored` ids out. Add events in any batch size, without rebuilding.

    Document frequencies, and so idf, are exact at every query. Document norms are recomputed
    (O(postings)) at the first query after adds while the index is small, and once it has grown by
    1% when it is large (over 2M postings), so a norm's idf is never more than 1% of events stale.
    Not thread-safe: callers serialise `add_many` and `search` (one lock in the daemon).

    An event's score adds its session neighbours' cosines (the events before and after it in the
    same session, by timestamp; `context_turns` on each side, weighted context ** distance), since
    a turn answers the one before it; the sum is divided by its maximum so scores stay in (0, 1].
    """

    freeze_postings = _FREEZE_POSTINGS

    def __init__(self, *, context: float = 0.5, context_turns: int = 2) -> None:
        """`context` weighs a session neighbour's match, times `context` per step of distance."""
        if not 0.0 <= context <= 1.0 or context_turns < 0:
            raise ValueError("context must be in [0, 1] and context_turns >= 0")
        self.context = context
        self.context_turns = context_turns if context > 0 else 0
        self._vocab: dict[str, int] = {}
        self._df = _Column(np.int32)
        self._segments: list[_Segment] = []
        self._pending_terms = array("i")
        self._pending_rows = array("i")
        self._pending_tf = array("B")
        self._ts = _Column(np.int64)
        self._norm = _Column(np.float32, 1)
        self._prev = _Column(np.int32, -1)
        self._next = _Column(np.int32, -1)
        self._fields = {name: _Codes() for name in ("source", "workspace", "session", "kind")}
        self._session_last: dict[int, int] = {}
        self._id_bytes = bytearray()
        self._id_end = _Column(np.int64)
        self._ts_sorted = True
        self._refreshed_at = 0  # rows whose norms reflect the idf of the last full refresh

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
        if not batch:
            return
        start = len(self)
        names: list[str] = []
        counts: list[int] = []
        sizes: list[int] = []
        for event in batch:
            tally = Counter(event_terms(event))
            names.extend(tally)
            counts.extend(tally.values())
            sizes.append(len(tally))
        vocab = self._vocab
        for term in set(names).difference(vocab):  # set algebra keeps the per-term work in C
            vocab[term] = len(vocab)
        terms = np.fromiter(map(vocab.__getitem__, names), dtype=np.int32, count=len(names))
        tf = np.minimum(np.asarray(counts, dtype=np.int64), 255).astype(np.uint8)
        rows = np.repeat(np.arange(start, start + len(batch), dtype=np.int32), sizes)
        grown = np.bincount(terms, minlength=len(vocab)).astype(np.int32)
        self._df.extend(np.zeros(len(vocab) - self._df.size, dtype=np.int32))
        self._df.data[: len(vocab)] += grown
        self._append_rows(batch, start)
        weights = _TF_WEIGHT[tf] * self._idf()[terms]
        norms = np.sqrt(np.bincount(rows - start, weights * weights, minlength=len(batch)))
        self._norm.data[start:start + len(batch)] = np.where(norms > 0, norms, 1.0)
        self._pending_terms.frombytes(terms.tobytes())
        self._pending_rows.frombytes(rows.tobytes())
        self._pending_tf.frombytes(tf.tobytes())
        if len(self._pending_rows) >= self.freeze_postings:
            self._freeze()

    def _append_rows(self, batch: list[Event], start: int) -> None:
        ts = np.fromiter((e.ts_ms for e in batch), dtype=np.int64, count=len(batch))
        last = self._ts.data[start - 1] if start else ts[0]
        if ts[0] < last or (len(ts) > 1 and bool((ts[1:] < ts[:-1]).any())):
            self._ts_sorted = False
        self._ts.extend(ts)
        self._norm.extend(np.ones(len(batch), dtype=np.float32))
        self._prev.extend(np.full(len(batch), -1, dtype=np.int32))
        self._next.extend(np.full(len(batch), -1, dtype=np.int32))
        for name, codes in self._fields.items():
            code = codes.code
            codes.column.extend(np.fromiter((code(getattr(e, name)) for e in batch), np.int32, len(batch)))
        ids = [e.id.encode("utf-8") for e in batch]
        self._id_end.extend(len(self._id_bytes) + np.cumsum([len(i) for i in ids], dtype=np.int64))
        self._id_bytes += b"".join(ids)
        sessions = self._fields["session"].column.data
        for row in range(start, start + len(batch)):
            if sessions[row] >= 0:
                self._link(int(sessions[row]), row, int(ts[row - start]))

    def _link(self, session: int, row: int, ts: int) -> None:
        """Insert `row` into its session's list, ordered by timestamp (late arrivals walk back)."""
        last = self._session_last.get(session)
        prev, ts_col = last, self._ts.data
        while prev is not None and prev >= 0 and ts_col[prev] > ts:
            prev = int(self._prev.data[prev])
        nxt = self._next.data[prev] if prev is not None and prev >= 0 else (
            self._first_of(last) if last is not None else -1)
        if prev is not None and prev >= 0:
            self._next.data[prev] = row
            self._prev.data[row] = prev
        if nxt >= 0:
            self._prev.data[nxt] = row
            self._next.data[row] = nxt
        else:
            self._session_last[session] = row

    def _first_of(self, row: int) -> int:
        while self._prev.data[row] >= 0:
            row = int(self._prev.data[row])
        return row

    def _freeze(self) -> None:
        terms = np.frombuffer(self._pending_terms, dtype=np.int32).copy()
        rows = np.frombuffer(self._pending_rows, dtype=np.int32).copy()
        tf = np.frombuffer(self._pending_tf, dtype=np.uint8).copy()
        self._pending_terms, self._pending_rows, self._pending_tf = array("i"), array("i"), array("B")
        self._segments.append(_Segment.from_triples(terms, rows, tf, len(self._vocab)))
        # Merge like an LSM tree: few segments, each merge at least halves the work of the next.
        while len(self._segments) > 1 and self._segments[-1].nnz * 2 >= self._segments[-2].nnz:
            newer, older = self._segments.pop(), self._segments.pop()
            self._segments.append(_Segment.from_triples(
                np.concatenate([older.terms(), newer.terms()]),
                np.concatenate([older.rows, newer.rows]),
                np.concatenate([older.tf, newer.tf]),
                len(self._vocab)))

    # ---- statistics -------------------------------------------------------------------------
    def _idf(self) -> np.ndarray:
        n = len(self)
        return np.log((n + 1.0) / (self._df.view() + 0.5)).astype(np.float32)

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
        self._refreshed_at = n

    def _all_postings(self, chunk: int = 1 << 21) -> Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for seg in self._segments:
            for a in range(0, seg.nnz, chunk):
                b = min(a + chunk, seg.nnz)
                terms = np.searchsorted(seg.indptr, np.arange(a, b), side="right") - 1
                yield seg.rows[a:b], seg.tf[a:b], terms
        if self._pending_rows:
            yield (np.frombuffer(self._pending_rows, dtype=np.int32),
                   np.frombuffer(self._pending_tf, dtype=np.uint8),
                   np.frombuffer(self._pending_terms, dtype=np.int32))

    def _maybe_refresh(self) -> None:
        n, done = len(self), self._refreshed_at
        if n == done:
            return
        if self.nnz <= _EXACT_REFRESH_POSTINGS or n - done >= _REFRESH_GROWTH * done:
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
    ) -> list[Scored]:
        """The `limit` best events for `query`, best first; ties go to the newer, then the lower id.

        Filters select results; a neighbour's match still counts as context when the neighbour
        itself is filtered out, but only neighbours inside the time window count.
        """
        check_query(query)
        limit = check_limit(limit)
        wanted = {"source": source, "workspace": workspace, "session": session, "kind": kind}
        codes = {}
        for name, value in wanted.items():
            if value is not None:
                code = self._fields[name].codes.get(value)
                if code is None:
                    return []
                codes[name] = code
        terms = Counter(self._vocab[t] for t in tokenize(query) if t in self._vocab)
        if not terms or not len(self):
            return []
        self._maybe_refresh()
        lo, hi = self._row_range(since_ms, until_ms)
        if lo >= hi:
            return []
        scores = self._cosines(terms, lo, hi)
        if self.context_turns:
            scores = self._with_context(scores, lo, hi)
        cand = np.flatnonzero(scores[: hi - lo])
        rows = cand + lo
        keep = np.ones(len(rows), dtype=bool)
        if not self._ts_sorted and (since_ms is not None or until_ms is not None):
            ts = self._ts.data[rows]
            keep &= (ts >= (since_ms if since_ms is not None else ts.min())) & (
                ts <= (until_ms if until_ms is not None else ts.max()))
        for name, code in codes.items():
            keep &= self._fields[name].column.data[rows] == code
        rows, found = rows[keep], scores[cand[keep]]
        return self._top(rows, found, limit)

    def _row_range(self, since_ms: int | None, until_ms: int | None) -> tuple[int, int]:
        """Rows to score: a slice by binary search when rows are in time order, else all."""
        n = len(self)
        if not self._ts_sorted:
            return 0, n
        ts = self._ts.view()
        lo = 0 if since_ms is None else int(np.searchsorted(ts, since_ms, side="left"))
        hi = n if until_ms is None else int(np.searchsorted(ts, until_ms, side="right"))
        return lo, hi

    def _cosines(self, terms: Counter[int], lo: int, hi: int) -> np.ndarray:
        """Cosine of the query with rows lo..hi-1 (one spare zero slot at the end, for context)."""
        idf = self._idf()
        qw = {t: (1.0 + np.log(c)) * float(idf[t]) for t, c in terms.items()}
        qnorm = float(np.sqrt(sum(w * w for w in qw.values())))
        acc = np.zeros(hi - lo + 1, dtype=np.float32)
        pending = None
        if self._pending_rows:
            pending = (np.frombuffer(self._pending_terms, dtype=np.int32),
                       np.frombuffer(self._pending_rows, dtype=np.int32),
                       np.frombuffer(self._pending_tf, dtype=np.uint8))
        for term, weight in qw.items():
            if weight <= 0:
                continue
            scale = np.float32(weight * float(idf[term]) / qnorm)
            for seg in self._segments:
                rows, tf = seg.postings(term)
                if lo > 0 or hi < len(self):
                    a, b = np.searchsorted(rows, (lo, hi))
                    rows, tf = rows[a:b], tf[a:b]
                acc[rows - lo] += _TF_WEIGHT[tf] * scale
            if pending is not None:
                hit = np.flatnonzero(pending[0] == term)
                rows, tf = pending[1][hit], pending[2][hit]
                inside = (rows >= lo) & (rows < hi)
                acc[rows[inside] - lo] += _TF_WEIGHT[tf[inside]] * scale
        acc[:-1] /= self._norm.data[lo:hi]
        return acc

    def _with_context(self, scores: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Add each row's session neighbours' cosines, weighted context ** distance, then rescale."""
        spare = hi - lo  # index of the zero slot: neighbours that are missing or outside the window

        def relative(links: np.ndarray) -> np.ndarray:
            rel = links - lo
            rel[(links < lo) | (links >= hi)] = spare
            return np.append(rel, spare)

        out = scores.copy()
        total = 1.0
        for links in (self._prev.data[lo:hi], self._next.data[lo:hi]):
            step = relative(links)
            hop = step
            weight = 1.0
            for _ in range(self.context_turns):
                weight *= self.context
                out += weight * scores[hop]
                hop = step[hop]
                total += weight
        out /= total
        return out

    def _top(self, rows: np.ndarray, scores: np.ndarray, limit: int) -> list[Scored]:
        if len(rows) > limit:
            kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            sel = scores >= kth  # everything tied with the k-th best stays for the tie-break
            rows, scores = rows[sel], scores[sel]
        ts = self._ts.data[rows]
        order = np.lexsort((-ts, -scores))  # by score, then newer; ids settle exact ties below
        if len(order) > limit:
            last = order[limit - 1]
            tail = order[limit:]
            tied = tail[(scores[tail] == scores[last]) & (ts[tail] == ts[last])]
            order = np.concatenate([order[:limit], tied])
        picked = sorted((-float(scores[i]), -int(ts[i]), self._id(int(rows[i])), int(rows[i])) for i in order)
        return [Scored(eid, min(-neg, 1.0), row) for neg, _, eid, row in picked[:limit]]

    def _id(self, row: int) -> str:
        end = int(self._id_end.data[row])
        start = int(self._id_end.data[row - 1]) if row else 0
        return self._id_bytes[start:end].decode("utf-8")

    def memory_bytes(self) -> int:
        """Bytes held by the index's arrays (the vocabulary dict and id strings included roughly)."""
        arrays = sum(s.indptr.nbytes + s.rows.nbytes + s.tf.nbytes for s in self._segments)
        arrays += len(self._pending_rows) * 9
        cols = [self._df, self._ts, self._norm, self._prev, self._next, self._id_end]
        cols += [f.column for f in self._fields.values()]
        arrays += sum(c.data.nbytes for c in cols) + len(self._id_bytes)
        vocab = sum(49 + len(t) for t in self._vocab) + 100 * len(self._vocab)
        return arrays + vocab
