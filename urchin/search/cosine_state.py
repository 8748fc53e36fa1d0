"""A token-cosine index as plain arrays, and back: what `cosine_store` saves and loads.

`take` copies an index's columns, vocabulary, labels and pending postings (segments are shared: they
never change); `restore` fills a new index from them after cheap consistency checks (O(rows + terms),
never O(postings)), so a damaged save is refused, not served.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from urchin.search.cosine_extract import LABELS, TermExtractor
from urchin.search.postings import Blob, Codes, Column, Segment, SplitColumn, release_clean
from urchin.search.scope import SessionScopes
from urchin.search.vocab import Vocabulary

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["COLUMNS", "IndexState", "NARROW", "release_columns", "restore", "take"]

COLUMNS = ("ts", "norm", "prev", "next", "id_end")   # an index's per-row columns, saved as they are
# label fields of a few values, whose codes per row take the narrowest type they need (a byte, mostly:
# `postings.CodeColumn`); session codes stay int32 (many, and counted with their own arithmetic)
NARROW = ("source", "workspace", "kind")


@dataclass(slots=True)
class IndexState:
    """A consistent copy of an index, to save (`cosine_store`) and restore (`from_state`).

    `arrays` are owned copies (or immutable segment arrays), so the index can change while the
    state is written. `segments` are (indptr, rows, tf) per segment."""

    meta: dict[str, Any]
    vocab: list[str] | Vocabulary  # in id order (a loaded index's: its saved blob and the terms added since)
    labels: dict[str, list[str]]  # per label field, values in code order
    arrays: dict[str, np.ndarray]
    segments: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    # per column of `arrays`, a longer array it is the start of, rows added go on into (`map_with_room`)
    room: dict[str, np.ndarray] = field(default_factory=dict)


def take(index: TokenCosineIndex, copy: bool = True) -> IndexState:
    """A copy to save; O(rows + terms) copying, segments shared (they never change). `copy` False:
    the columns themselves, for a caller that changes nothing until the state is written (a build
    saving what it owns: no second copy of every column at each save)."""
    own: Any = np.copy if copy else (lambda a: a)
    arrays = {name: own(getattr(index, f"_{name}").view()) for name in COLUMNS}
    arrays["df"] = own(index._df.view())
    # saved so a load maps them instead of computing an owned 8-byte-a-row running maximum
    arrays["ts_max"], arrays["late"] = own(index._ts_max.view()), own(index._late.view())
    arrays["ids"] = index._id_bytes.array(copy)
    for name, codes in index._fields.items():
        arrays[f"label_{name}"] = own(codes.column.view())
    for name, values in zip(("terms", "rows", "tf"), index._pending(), strict=True):
        arrays[f"pending_{name}"] = values.copy()
    meta = {"rows": len(index), "terms": len(index._vocab), "refreshed_at": index._refreshed_at,
            "context": index.settings.context, "context_turns": len(index.context_weights)}
    vocab = index._vocab.copy() if isinstance(index._vocab, Vocabulary) else list(index._vocab)
    return IndexState(meta, vocab, {n: c.values_in_order() for n, c in index._fields.items()},
                      arrays, [(s.indptr, s.rows, s.tf) for s in index._segments])


def restore(index: TokenCosineIndex, state: IndexState) -> None:
    """Fill a new, empty `index` with what `state` holds (its settings are the caller's). Raises
    ValueError when the state is inconsistent."""
    meta, arrays = state.meta, state.arrays
    n, n_terms = int(meta["rows"]), int(meta["terms"])
    _check_state(state, n, n_terms)
    if isinstance(state.vocab, Vocabulary):   # checked for repeated terms when it was made
        index._vocab = state.vocab.copy()
    else:
        index._vocab.update(zip(state.vocab, range(n_terms), strict=True))
        if len(index._vocab) != n_terms:
            raise ValueError("vocabulary: repeated terms")
    index._df = Column.of(arrays["df"])
    fills = {"norm": 1, "prev": -1, "next": -1}
    for name in COLUMNS:
        setattr(index, f"_{name}", Column.of(arrays[name], fills.get(name, 0), state.room.get(name)))
    index._id_end = SplitColumn(arrays["id_end"])   # read per result only: never copied to grow
    index._id_bytes = Blob(arrays["ids"])      # not copied: a saved index's map
    for name in LABELS:
        index._fields[name] = Codes(state.labels[name], arrays[f"label_{name}"], state.room.get(f"label_{name}"),
                                    narrow=name in NARROW)
        if len(index._fields[name]) != len(state.labels[name]) + 1:
            raise ValueError(f"{name}: repeated values")
    index._segments = [Segment(*parts) for parts in state.segments]
    for name, kind in (("terms", "i"), ("rows", "i"), ("tf", "B")):
        setattr(index, f"_pending_{name}", array(kind, arrays[f"pending_{name}"].tobytes()))
    index._ts_max, index._late = _windows(arrays, state.room, n)
    sessions, nxt = arrays["label_session"], arrays["next"]
    ends = np.flatnonzero((sessions >= 0) & (nxt < 0))
    index._session_last = dict(zip(sessions[ends].tolist(), ends.tolist(), strict=True))
    index._session_rows = Column.of(np.bincount(sessions[sessions >= 0], minlength=len(state.labels["session"]))
                                    .astype(np.int64))
    index._scopes = SessionScopes.of(sessions, arrays["label_workspace"], len(state.labels["session"]))
    index._refreshed_at = int(meta["refreshed_at"])
    index._norm_total = float(index._norm.data[:n].sum(dtype=np.float64))
    index._extractor = TermExtractor(index._vocab)


def release_columns(index: TokenCosineIndex) -> int:
    """A loaded index's per-row columns (their copy-on-write maps) drop the file pages no row added or
    link changed (`postings.release_clean`): a question reads them across every row its terms reach,
    and they stayed resident after it. Nothing may change the index meanwhile. Returns how many did."""
    columns = [index._ts, index._ts_max, index._norm, index._prev, index._next,
               *(codes.column for codes in index._fields.values())]
    return sum(release_clean(column.data) > 0 for column in columns)


def _windows(arrays: dict[str, np.ndarray], room: dict[str, np.ndarray], n: int) -> tuple[Column, Column]:
    """`ts_max` and `late` as saved (a map, like `ts`), or computed from `ts` for a save made before
    they were saved (then `ts_max` is owned: 8 bytes a row of anonymous memory)."""
    if "ts_max" in arrays and "late" in arrays:
        return Column.of(arrays["ts_max"], room=room.get("ts_max")), Column.of(arrays["late"])
    ts = arrays["ts"]
    # owned, with the same room as the loaded columns (its untouched pages are never resident)
    whole = np.empty(n + len(room.get("ts", ts)) - len(ts), dtype=ts.dtype)
    ts_max = np.maximum.accumulate(ts, out=whole[:n]) if n else whole[:0]
    return Column.of(ts_max, room=whole), Column.of(np.flatnonzero(ts < ts_max).astype(np.int32))


def _check_state(state: IndexState, n: int, n_terms: int) -> None:
    """Cheap consistency checks (O(rows + terms), never O(postings)): shapes, bounds, sortedness."""
    arrays = state.arrays

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(what)

    need(len(state.vocab) == n_terms and len(arrays["df"]) == n_terms, "vocabulary: size")
    for name in (*COLUMNS, *(f"label_{x}" for x in LABELS)):
        need(arrays[name].ndim == 1 and len(arrays[name]) == n, f"{name}: length")
    if "ts_max" in arrays or "late" in arrays:
        ts_max, late = arrays.get("ts_max"), arrays.get("late")
        need(ts_max is not None and late is not None and ts_max.ndim == 1 and len(ts_max) == n
             and ts_max.dtype == arrays["ts"].dtype and late.ndim == 1 and late.dtype == np.int32, "ts_max: shape")
        assert ts_max is not None and late is not None
        need(not n or int(ts_max[-1]) == int(arrays["ts"].max()), "ts_max: maximum")
        need(not len(late) or (int(late.min()) >= 0 and int(late.max()) < n), "late: bounds")
    for name in ("prev", "next"):
        need(not n or (int(arrays[name].min()) >= -1 and int(arrays[name].max()) < n), f"{name}: bounds")
    for name in LABELS:
        codes = arrays[f"label_{name}"]
        need(codes.dtype.kind == "i" and (not n or (int(codes.min()) >= -1 and int(codes.max()) < len(
            state.labels[name]))), f"{name}: codes")
    ends = arrays["id_end"]
    need(not n or (int(ends[-1]) == len(arrays["ids"]) and bool((np.diff(ends) >= 0).all())), "ids: ends")
    pending = [arrays[f"pending_{x}"] for x in ("terms", "rows", "tf")]
    need(len({len(p) for p in pending}) == 1, "pending: lengths")
    if len(pending[0]):
        need(int(pending[0].max()) < n_terms and int(pending[1].max()) < n and int(pending[1].min()) >= 0,
             "pending: bounds")
    for indptr, rows, tf in state.segments:
        need(1 <= len(indptr) <= n_terms + 1 and int(indptr[0]) == 0, "segment: indptr")
        need(int(indptr[-1]) == len(rows) == len(tf) and bool((np.diff(indptr) >= 0).all()), "segment: sizes")
    need(0 <= int(state.meta["refreshed_at"]) <= n, "refreshed_at")
