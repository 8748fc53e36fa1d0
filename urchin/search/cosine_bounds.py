"""Block pruning's (`cosine_prune`) bounds: per term and block of rows, the most the term adds to a row's
match in each leg (its priors in), and each session's first and last row; made from a term's postings
when a query first asks for it and kept while the index's norms stand.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from urchin.event import MEMORY_KINDS
from urchin.search import cosine_region
from urchin.search.assoc import TF_WEIGHT
from urchin.search.cosine_query import member

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["Bounds", "Named", "TermBounds", "pivot_base", "widened"]

Named = tuple[tuple[int, ...], tuple[int, ...]]    # the kind codes and source codes a query names


class TermBounds(NamedTuple):
    """Per block, in float16 rounded up (still at least the float32 maxima) and bits: blocks of 64 rows
    at 3M rows, 5 bytes a block (~190 KB a term), not 9 (422 KB); and per super-block (`super_block`
    blocks), the most of its blocks' maxima in float32 (2 bytes a block at 4 blocks a super-block), so a
    query sums its terms over those first. Both legs side by side: one gather and one product for both."""

    maxima: np.ndarray   # (super-blocks, block, leg): per block (zeros to the last super-block's end), the
    #                      most of prior x y_t (divide by K), and of prior x y_t / K + session x L_t
    top: np.ndarray      # (super-blocks, leg): the most of `maxima` over each super-block's blocks, float32
    present: np.ndarray  # per block: the term occurs there, a bit each (np.packbits)

    def add(self, c0: int, c1: int, scale: float, sums: np.ndarray, buffer: np.ndarray) -> None:
        """Add each leg's maxima of super-blocks c0..c1-1 times `scale` to `sums` (c1 - c0, leg) in float32,
        through `buffer` (float16 products would round by more than `_MARGIN`, float32's by ~1e-7). Kept in
        float32 (float16's exact values): a float16 array's conversion costs ~10x its float32 product."""
        np.multiply(self.top[c0:c1], np.float32(scale), out=buffer)
        sums += buffer

    def packed(self, p0: int, p1: int) -> np.ndarray:
        """The presence bits' bytes p0..p1-1 (blocks 8 p0 .. 8 p1 - 1), zeros past the last block."""
        got = self.present[p0:p1]
        return got if len(got) == p1 - p0 else np.concatenate([got, np.zeros(p1 - p0 - len(got), dtype=np.uint8)])


class Bounds:
    """Per-term block maxima of one index, made at `rows` with the norms of `epoch` and blocks of
    `block` rows, and where each session's rows start and end (kept up to date as rows are added)."""

    def __init__(self, index: TokenCosineIndex) -> None:
        n = len(index)
        self.rows, self.epoch, self.base = n, index._norm_epoch, pivot_base(index)
        settings = index.settings    # dropped with the maxima when the index's settings change
        self.block, self.growth, self.kept = settings.block, settings.bound_growth, settings.bound_terms
        self.super = settings.super_block
        self.terms: OrderedDict[tuple[int, Named], TermBounds] = OrderedDict()
        self.first = np.zeros(0, dtype=np.int64)
        self.last = np.zeros(0, dtype=np.int64)
        self.seen = 0
        self.sessions(index)

    def fits(self, index: TokenCosineIndex) -> bool:
        n = len(index)
        grown = max(self.block, self.rows // self.growth)
        return index._norm_epoch == self.epoch and self.rows <= n <= self.rows + grown

    def sessions(self, index: TokenCosineIndex) -> None:
        """First and last row of every session, counting the rows added since the last call."""
        n, size = len(index), len(index._fields["session"]) - 1
        if len(self.first) < size:
            self.first = np.concatenate([self.first, np.full(size - len(self.first), n, dtype=np.int64)])
            self.last = np.concatenate([self.last, np.full(size - len(self.last), -1, dtype=np.int64)])
        codes = index._fields["session"].column.data[self.seen:n]
        has = codes >= 0
        rows = np.flatnonzero(has) + self.seen
        np.minimum.at(self.first, codes[has], rows)
        np.maximum.at(self.last, codes[has], rows)
        self.seen = n

    def term(self, index: TokenCosineIndex, term: int, named: Named = ((), ())) -> TermBounds:
        """`term`'s maxima with the priors of the kinds and sources a query names (`named`) in."""
        key = (term, named)
        got = self.terms.get(key)
        if got is None:
            got = self.terms[key] = _derive(index, term, self.rows, self.base, self.block, self.super, named)
            if len(self.terms) > self.kept:
                self.terms.popitem(last=False)
        else:
            self.terms.move_to_end(key)
        return got

    @property
    def nbytes(self) -> int:
        return sum(sum(a.nbytes for a in t) for t in self.terms.values()) + \
            self.first.nbytes + self.last.nbytes


def pivot_base(index: TokenCosineIndex) -> float:
    """The constant part of `_norms_at`'s divisor now (0 without pivoting)."""
    pivot = index.settings.pivot
    if pivot >= 1.0:
        return 0.0
    return float(np.float32((1.0 - pivot) * index._norm_total / max(len(index), 1)))


def _block_max(values: np.ndarray, blocks: int, block: int) -> np.ndarray:
    """Each block's maximum in float16, rounded up where float16 rounds below it."""
    padded = np.zeros(blocks * block, dtype=np.float32)
    padded[:len(values)] = values
    most = padded.reshape(blocks, block).max(axis=1)
    with np.errstate(over="ignore"):      # over float16's range (or rounded up past it): inf, still a bound
        half = most.astype(np.float16)
        low = half.astype(np.float32) < most
        half[low] = np.nextafter(half[low], np.float16(np.inf))
    return half


def _derive(index: TokenCosineIndex, term: int, n: int, base: float, block: int, size: int,
            named: Named) -> TermBounds:
    """A term's maxima per block of `block` rows over rows 0..n-1 (O(rows) once per term and `named`),
    each row's priors in: memories', and those of the kinds and sources `named` (`_kind_prior`'s)."""
    s = index.settings
    blocks = (n + block - 1) // block
    rows, tf = cosine_region.term_postings(index, term)
    made = rows < n             # rows added since are read whatever their bounds (`top`)
    rows, tf = rows[made], tf[made]
    divisor = np.float32(base) + np.float32(s.pivot) * index._norm.data[rows] if s.pivot < 1.0 \
        else index._norm.data[rows]
    x = (TF_WEIGHT[tf] / divisor).astype(np.float32)
    y = np.zeros(n, dtype=np.float32)
    y[rows] = x
    weights = index.context_weights
    for links in (index._prev.data[:n], index._next.data[:n]):
        hop, carried = rows, x
        for w in weights:
            hop = links[hop]
            linked = (hop >= 0) & (hop < n)
            hop, carried = hop[linked], carried[linked]
            y[hop] += carried * np.float32(w)     # a session is a chain: no row twice in one step
    kinds = index._fields["kind"]
    memories = [c for v in MEMORY_KINDS if (c := kinds.get(v)) is not None] if s.memory else []
    named_kinds, named_sources = named
    if named_kinds:
        y[member(kinds.column.data[:n], named_kinds, len(kinds))] *= np.float32(1.0 + s.kind)
    if memories:
        y[member(kinds.column.data[:n], memories, len(kinds))] *= np.float32(1.0 + s.memory)
    if named_sources:
        sources = index._fields["source"]
        y[member(sources.column.data[:n], named_sources, len(sources))] *= np.float32(1.0 + s.named_source)
    rank = _block_max(y, blocks, block)
    codes = index._fields["session"].column.data[:n]
    sessions = len(index._fields["session"]) - 1
    has = codes[rows] >= 0
    sums = np.bincount(codes[rows][has], x[has], minlength=sessions)
    level = np.append(sums / np.sqrt(np.maximum(index._session_rows.data[:sessions], 1)) * s.session,
                      0.0).astype(np.float32)
    y /= np.float32(1.0 + 2 * sum(weights))
    y += level[codes]                             # code -1: the appended 0
    present = np.packbits(np.bincount(rows // block, minlength=blocks) > 0)
    maxima = np.stack([_padded(rank, size), _padded(_block_max(y, blocks, block), size)], axis=2)
    return TermBounds(maxima, widened(maxima).max(axis=1), present)


def widened(half: np.ndarray) -> np.ndarray:
    """Non-negative float16 maxima as float32 at least as large, from their bits (numpy's conversion of
    float16 costs ~5 ns a value here, ~10x this): a normal value exactly, zero or a subnormal as a little
    more (at most 2^-14), inf as inf. Blocks and super-blocks are widened alike, so a super-block's
    maximum is still at least its blocks'."""
    bits = half.view(np.uint16).astype(np.uint32)
    out = ((bits << np.uint32(13)) + np.uint32(112 << 23)).view(np.float32)   # exponent 15 -> 127
    out[bits >= 0x7C00] = np.inf
    return out


def _padded(maxima: np.ndarray, size: int) -> np.ndarray:
    """The maxima and zeros to a whole number of super-blocks (of `size` blocks), a row each."""
    padded = np.zeros(-(-len(maxima) // size) * size, dtype=maxima.dtype)
    padded[:len(maxima)] = maxima
    return padded.reshape(-1, size)
