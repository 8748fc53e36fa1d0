"""Term associations learned from the journal itself: a truncated SVD (LSA) of its tf-idf matrix.

No model, no network. Each event is a document, its session neighbours folded in (weight
`context`), so words that travel together in a session come close even when no single event
holds both ("auth" in one turn, "OAuth" in the next). A query's terms are mapped into the latent
space and the nearest vocabulary terms are added to the query with weights below its own
(`Associations.expand`): lexical evidence keeps the lead, associations fill in where it is weak.

Bounded whatever the journal's size: at most `max_terms` terms (the most frequent with df >= 2,
minus the most common 1%) and the newest `max_docs` events are used, so memory is
O(max_docs * dim + max_terms * dim) and the vectors kept are max_terms * dim float16 values.
Built from the token-cosine index (`build`), saved beside it (`save` / `load`, `<index dir>.assoc.npz`),
rebuilt when the index has grown by half (`stale`).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from urchin.fileio import write_private
from urchin.search.vocab import Vocabulary

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["Associations", "build", "learn", "load", "path_beside", "TF_WEIGHT"]

# 1 + ln tf for tf < 256 (0 for 0): the tf weight token-cosine uses, shared so both weigh alike
TF_WEIGHT = (1.0 + np.log(np.maximum(np.arange(256, dtype=np.float64), 1.0))).astype(np.float32)
TF_WEIGHT[0] = 0.0

MAX_TERMS = 20_000
MAX_DOCS = 50_000
DIM = 64
_FORMAT = 1
_CHUNK = 1 << 20   # entries summed at a time (`_sums`)
# (rows, tf, terms) chunks of an index's postings, from the segments holding rows from `since` on
Postings = Callable[[int], Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]]


def path_beside(index_dir: Path) -> Path:
    """Where the model of the index saved in `index_dir` lives: a sibling file, `<dir>.assoc.npz`."""
    return index_dir.with_name(index_dir.name + ".assoc.npz")


class Associations:
    """Unit term vectors in a latent space; `expand` finds a query's related terms."""

    def __init__(self, terms: list[str], vectors: np.ndarray, rows: int) -> None:
        if vectors.ndim != 2 or len(terms) != vectors.shape[0]:
            raise ValueError("associations: terms and vectors differ in length")
        self.terms = terms
        self.vectors = vectors.astype(np.float32)
        self.rows = rows  # index rows the model was built from (to tell when it is stale)
        self._ids = {t: i for i, t in enumerate(terms)}

    def __len__(self) -> int:
        return len(self.terms)

    def related(self, term: str, n: int = 10) -> list[tuple[str, float]]:
        """The `n` terms nearest `term` (cosine), itself excluded."""
        return self.expand([term], n=n, floor=-1.0)

    def expand(self, query_terms: Iterable[str], *, n: int = 10, floor: float = 0.3) -> list[tuple[str, float]]:
        """Up to `n` (term, similarity) pairs nearest the query's centroid, similarity >= `floor`,
        the query's own terms excluded; [] when no query term is known."""
        own = set(query_terms)
        ids = [self._ids[t] for t in own if t in self._ids]
        if not ids or not len(self.terms):
            return []
        centre = self.vectors[ids].sum(axis=0)
        size = float(np.linalg.norm(centre))
        if size == 0:
            return []
        sims = self.vectors @ (centre / size)
        sims[ids] = -2.0
        take = min(n + len(ids), len(sims))
        best = np.argpartition(-sims, take - 1)[:take]
        best = best[np.argsort(-sims[best], kind="stable")]
        out = [(self.terms[i], float(sims[i])) for i in best if sims[i] >= floor and self.terms[i] not in own]
        return out[:n]

    def stale(self, rows: int) -> bool:
        """Worth rebuilding: the index has grown by half since (past 100 rows), or was rebuilt smaller."""
        return rows < self.rows or (rows >= 100 and rows >= 1.5 * max(self.rows, 1))

    def memory_bytes(self) -> int:
        return self.vectors.nbytes + sum(49 + len(t) for t in self.terms) + 100 * len(self.terms)

    def save(self, path: Path) -> Path:
        """Write the model to `path` (0600), atomically."""
        blob = "\n".join(self.terms).encode("utf-8")
        buffer = io.BytesIO()
        np.savez(buffer, format=np.array([_FORMAT, self.rows], dtype=np.int64),
                 terms=np.frombuffer(blob, dtype=np.uint8), vectors=self.vectors.astype(np.float16))
        write_private(path, buffer.getvalue())
        return path


def load(path: Path) -> Associations | None:
    """The model saved at `path`, or None when there is none or it is unreadable (callers rebuild)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            fmt, rows = (int(x) for x in data["format"])
            terms_blob = bytes(data["terms"])
            vectors = np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if fmt != _FORMAT:
        return None
    terms = terms_blob.decode("utf-8").split("\n") if terms_blob else []
    try:
        return Associations(terms, vectors, rows)
    except ValueError:
        return None


def build(index: TokenCosineIndex, *, dim: int = DIM, context: float = 0.5, max_terms: int = MAX_TERMS,
          max_docs: int = MAX_DOCS, seed: int = 0) -> Associations:
    """LSA over the newest `max_docs` rows of `index` (randomised SVD, two power iterations)."""
    n = len(index)
    vocab = index._vocab  # noqa: SLF001 - the index's own vocabulary, in id order
    terms = vocab if isinstance(vocab, Vocabulary) else list(vocab)
    return learn(terms, index._df.view(), index._prev.data[:n], index._next.data[:n],  # noqa: SLF001
                 index._all_postings, dim=dim, context=context, max_terms=max_terms, max_docs=max_docs, seed=seed)


def learn(vocab: Sequence[str] | Vocabulary, df: np.ndarray, prev: np.ndarray, nxt: np.ndarray, postings: Postings, *,
          dim: int = DIM, context: float = 0.5, max_terms: int = MAX_TERMS, max_docs: int = MAX_DOCS,
          seed: int = 0) -> Associations:
    """`build` from an index's parts alone (a process that loads only these: `urchin.search.assoc_child`):
    its vocabulary in id order and `df`, its rows' session links `prev`/`nxt` (one per row), and
    `postings(since)`, (rows, tf, terms) chunks holding at least every posting from row `since` on.
    Memory: 12 bytes per (row, term) entry of the newest `max_docs` rows and their neighbours."""
    n = len(prev)
    if n < 2 or not len(vocab):
        return Associations([], np.zeros((0, dim), np.float32), n)
    lo = max(0, n - max_docs)
    docs = n - lo
    keep = _pick_terms(df, n, max_terms)
    term_map = np.full(len(df), -1, dtype=np.int32)
    term_map[keep] = np.arange(len(keep), dtype=np.int32)
    idf = np.log((n + 1.0) / (df + 0.5)).astype(np.float32)
    links = [np.asarray(side[lo:n], dtype=np.int32) - lo for side in (prev, nxt)] if context > 0 else []
    parts: list[list[np.ndarray]] = []
    for rows, tf, terms in postings(lo):
        sel = (rows >= lo) & (term_map[terms] >= 0)
        if not sel.any():
            continue
        r = (rows[sel] - lo).astype(np.int32, copy=False)
        t = term_map[terms[sel]]
        w = TF_WEIGHT[tf[sel]] * idf[terms[sel]]
        parts.append([r, t, w])
        for side in links:  # the term also counts, weaker, in the neighbour's document
            to = side[r]
            ok = (to >= 0) & (to < docs)
            parts.append([to[ok], t[ok], (w[ok] * context).astype(np.float32)])
    if not parts:
        return Associations([], np.zeros((0, dim), np.float32), n)
    r, t, w = (_joined(parts, i) for i in range(3))
    del parts
    doc_norm = np.sqrt(_sums(r, docs, lambda part: w[part] * w[part])).astype(np.float32)
    w /= np.where(doc_norm > 0, doc_norm, 1.0)[r]
    vectors = _lsa(r, t, w, docs, len(keep), dim, seed)
    kept = keep.tolist()
    names = vocab.terms_at(kept) if isinstance(vocab, Vocabulary) else [vocab[i] for i in kept]
    return Associations(names, vectors, n)


def _joined(parts: list[list[np.ndarray]], i: int) -> np.ndarray:
    """The `i`th array of every part, concatenated, each dropped once copied (never all held twice)."""
    out = np.concatenate([part[i] for part in parts])
    for part in parts:
        part[i] = out[:0]
    return out


def _sums(bins: np.ndarray, size: int, weights: Callable[[slice], np.ndarray]) -> np.ndarray:
    """`np.bincount(bins, w, minlength=size)` for the float32 weights `w` whose part `weights(part)`
    gives: the same float64 sums in the same order, a chunk at a time. bincount copied all of `bins`
    to int64 and `w` to float64 first, beside `w` itself and its factors (~24 bytes an entry: the
    learning child's peak); `np.add.at` adds in place in the entries' order."""
    out = np.zeros(size, dtype=np.float64)
    for a in range(0, len(bins), _CHUNK):
        part = slice(a, a + _CHUNK)
        np.add.at(out, bins[part], weights(part).astype(np.float64))
    return out


def _times(w: np.ndarray, column: np.ndarray, at: np.ndarray) -> Callable[[slice], np.ndarray]:
    """The weights `w * column[at]`, a part at a time (`_sums`)."""
    return lambda part: w[part] * column[at[part]]


def _pick_terms(df: np.ndarray, n: int, max_terms: int) -> np.ndarray:
    """Terms worth associating: seen in >= 2 events, not in the top 1% of frequency, at most
    `max_terms` of them (the most frequent first: rare terms have no reliable neighbours)."""
    ok = np.flatnonzero((df >= 2) & (df <= max(2, int(0.2 * n))))
    if len(ok) > max_terms:
        ok = ok[np.argsort(-df[ok], kind="stable")[:max_terms]]
        ok.sort()
    return ok


def _lsa(r: np.ndarray, t: np.ndarray, w: np.ndarray, docs: int, n_terms: int, dim: int, seed: int) -> np.ndarray:
    """Unit term vectors U * S of a rank-`dim` randomised SVD of the terms x docs matrix (r, t, w)."""
    k = max(1, min(dim, n_terms - 1, docs - 1))
    width = min(k + 10, n_terms, docs)
    rng = np.random.default_rng(seed)

    # A column at a time, each gathered from a contiguous row of m.T (a column of m is strided: its
    # gather touches a cache line per entry); the sums are the same, in the same order.
    def times_docs(m: np.ndarray) -> np.ndarray:  # X @ m: (terms x docs) @ (docs x width)
        out = np.empty((m.shape[1], n_terms), dtype=np.float32)
        for j, column in enumerate(np.ascontiguousarray(m.T)):
            out[j] = _sums(t, n_terms, _times(w, column, r))
        return out.T

    def times_terms(m: np.ndarray) -> np.ndarray:  # X.T @ m: (docs x terms) @ (terms x width)
        out = np.empty((m.shape[1], docs), dtype=np.float32)
        for j, column in enumerate(np.ascontiguousarray(m.T)):
            out[j] = _sums(r, docs, _times(w, column, t))
        return out.T

    q, _ = np.linalg.qr(times_docs(rng.standard_normal((docs, width)).astype(np.float32)))
    for _ in range(2):
        z, _ = np.linalg.qr(times_terms(q))
        q, _ = np.linalg.qr(times_docs(z))
    b = times_terms(q).T  # width x docs
    ub, s, _ = np.linalg.svd(b, full_matrices=False)
    u = (q @ ub[:, :k]) * s[:k]
    norms = np.linalg.norm(u, axis=1, keepdims=True)
    return (u / np.where(norms > 0, norms, 1.0)).astype(np.float32)
