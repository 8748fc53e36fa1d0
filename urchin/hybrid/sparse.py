"""Token-cosine vectors for the semantic leg when no embedder is set: hashed tokens -> `sparsevec`.

Tokens come from the shared tokeniser of `urchin.search.terms` (the same tokens as `urchin semantic`);
token ids are hashed into `DIM` dimensions (crc32).
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import chain

from urchin.search.terms import WORD_PATTERN, word_terms
from urchin.search.terms import tokenize as tokens

__all__ = ["DIM", "MAX_NONZERO", "tokens", "term_id", "term_ids", "int_array", "doc_vector", "doc_columns",
           "query_vector", "to_sparsevec", "idf"]

DIM = 1 << 20
MAX_NONZERO = 1000          # keep vectors small; a 64 KiB tool output has thousands of distinct tokens

_LOG = [0.0] + [math.log(n) for n in range(1, 64)]
_WEIGHT_TEXT = [""] + [f"{1.0 + _LOG[tf]:.4g}" for tf in range(1, 64)]   # to_sparsevec's text of 1 + ln tf


class _Terms(dict[str, int]):
    """token -> hashed term id; a dict whose misses compute, so lookups stay in C (the feed's hot loop)."""

    def __missing__(self, token: str) -> int:
        if len(self) > 500_000:
            self.clear()
        term = self[token] = (zlib.crc32(token.encode("utf-8")) & (DIM - 1)) + 1   # sparsevec indices start at 1
        return term


_TERMS = _Terms()
_WORDS = re.compile(WORD_PATTERN)


class _WordIds(dict[str, tuple[int, ...]]):
    """raw word (a match of WORD_PATTERN) -> the term ids of its terms, `tokens` and `term_ids` in one
    lookup: the feed hashes the same few hundred thousand words millions of times."""

    def __missing__(self, raw: str) -> tuple[int, ...]:
        if len(self) > 500_000:
            self.clear()
        ids = self[raw] = tuple(map(_TERMS.__getitem__, word_terms(raw)))
        return ids


_WORD_IDS = _WordIds()


def term_id(word: str) -> int:
    return _TERMS[word]


def term_ids(words: Iterable[str]) -> Counter[int]:
    return Counter(map(_TERMS.__getitem__, words))


def int_array(values: Iterable[int]) -> str:
    """PostgreSQL's text form of an integer[]; COPY parses it ~4x faster than psycopg adapts a list."""
    return "{" + ",".join(map(str, values)) + "}"


def _top(counts: Counter[int]) -> Counter[int]:
    return Counter(dict(counts.most_common(MAX_NONZERO))) if len(counts) > MAX_NONZERO else counts


def doc_vector(text: str) -> dict[int, float]:
    """Sublinear tf weights (1 + ln tf) of the text's hashed tokens, the strongest MAX_NONZERO kept."""
    counts = _top(term_ids(tokens(text)))
    return {term: 1.0 + _LOG[tf] if tf < 64 else 1.0 + math.log(tf) for term, tf in counts.items()}


def doc_columns(text: str) -> tuple[str, str]:
    """`(int_array(sorted(w)), to_sparsevec(w))` of `w = doc_vector(text)`, the same text, made in one
    pass from the term counts (the weights' text comes from a table): the feed's per-row cost. The
    counts are `term_ids(tokens(text))`'s, each raw word's ids looked up once (`_WordIds`)."""
    counts = _top(Counter(chain.from_iterable(map(_WORD_IDS.__getitem__, _WORDS.findall(text)))))
    order = sorted(counts)
    text_of = _WEIGHT_TEXT
    body = ",".join([f"{term}:{text_of[tf]}" if tf < 64 else f"{term}:{1.0 + math.log(tf):.4g}"
                     for term, tf in zip(order, map(counts.__getitem__, order), strict=True)])
    return "{" + ",".join(map(str, order)) + "}", "{" + body + "}/" + str(DIM)


def idf(df: int, n_docs: int) -> float:
    return math.log((n_docs + 1) / (df + 0.5))


def query_vector(text: str, df: Mapping[int, int], n_docs: int, power: float = 2.0) -> dict[int, float]:
    """The query's weights: tf x idf^power. Documents carry no idf (it drifts as the index grows), so
    the query carries it for both sides; terms no document has are dropped (they cannot score)."""
    out: dict[int, float] = {}
    for term, tf in term_ids(tokens(text)).items():
        count = df.get(term, 0)
        if count > 0:
            out[term] = (1.0 + math.log(tf)) * max(idf(count, n_docs), 0.01) ** power
    return out


def to_sparsevec(weights: Mapping[int, float]) -> str:
    """pgvector's text form, `{3:0.5,17:1}/1048576`, indices ascending."""
    body = ",".join([f"{term}:{weights[term]:.4g}" for term in sorted(weights)])
    return "{" + body + "}/" + str(DIM)
