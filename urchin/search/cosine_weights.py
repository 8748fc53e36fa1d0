"""What a token-cosine query's terms weigh: the query's own terms and the related ones added to them,
each term's factor on its postings and its evidence part, and the priors of the kinds and sources a
query names (the same for every path: `cosine_sparse`, `cosine_dense`, `cosine_prune`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from urchin.event import MEMORY_KINDS
from urchin.search.cosine_query import member
from urchin.search.score import TOKEN_COSINE
from urchin.search.terms import named

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["kind_prior", "query_weights", "scales"]


def query_weights(index: TokenCosineIndex, tokens: list[str],
                  exclude: frozenset[str] = frozenset()) -> tuple[dict[int, float], int]:
    """Term id -> tf weight of the query (1 + ln tf), and how many of them are the query's own (the
    first, in order). Related terms follow: the thesaurus's, weight `related` times their nearness,
    then `assoc`'s, weight `expand` times their similarity (never more than 1)."""
    terms = Counter(index._vocab[t] for t in tokens if t in index._vocab)
    weights = {t: 1.0 + float(np.log(c)) for t, c in terms.items()}
    own = len(weights)
    # Related terms as common as a tenth of the journal's words add little and cost postings:
    # only those in at most `expand_df` of the events (and at least 50) are added.
    s = index._settings
    cap = max(50, int(s.expand_df * len(index)))
    df = index._df.data
    if index.thesaurus is not None and s.related > 0 and s.related_terms:
        for term, near in index.thesaurus.expand(tokens, n=s.related_terms):
            tid = index._vocab.get(term)
            if tid is not None and tid not in weights and df[tid] <= cap and term not in exclude:
                weights[tid] = s.related * near
    told = len(weights)
    if index.assoc is not None and s.expand > 0 and s.expand_terms:
        for term, sim in index.assoc.expand(tokens, n=s.expand_terms * 3):
            tid = index._vocab.get(term)
            if tid is not None and tid not in weights and df[tid] <= cap and term not in exclude:
                weights[tid] = min(s.expand * sim, 1.0)
                if len(weights) >= told + s.expand_terms:
                    break
    return weights, own


def scales(index: TokenCosineIndex, terms: dict[int, float],
           own: int) -> tuple[list[tuple[int, np.float32]], dict[int, float]]:
    """Per query term, in the order its postings are added, the factor its tf weights are multiplied
    by (those of weight 0 left out); and each term's evidence part (see `cosine_dense.cosines`). The first `own`
    terms are the query's, the rest related ones. A related term's idf, on both sides, is capped at
    the mean idf of the query's own terms: a rare related word must not outweigh the words the
    user typed (in a small journal, "postgresql" would beat "database" itself)."""
    ids = list(terms)
    n = len(index)
    idf = np.log((n + 1.0) / (index._df.data[ids] + 0.5)).astype(np.float32)  # as _idf(), for these only
    mine = [float(x) for x in idf[:own]]
    cap = sum(mine) / len(mine) if mine else float("inf")
    qidf = {t: float(idf[i]) if i < own else min(float(idf[i]), cap) for i, t in enumerate(ids)}
    qw = {t: tfw * qidf[t] for t, tfw in terms.items()}
    qnorm = float(np.sqrt(sum(w * w for w in qw.values())))
    mine_total = sum(terms[t] * qidf[t] ** 2 for t in ids[:own]) or 1.0
    near_total = sum(terms[t] * qidf[t] ** 2 for t in ids[own:]) or 1.0
    part = {t: w for i, t in enumerate(ids) if terms[t] > 0 and qidf[t] > 0
            and (w := (TOKEN_COSINE.share / mine_total if i < own else TOKEN_COSINE.related / near_total)
                 * terms[t] * qidf[t] ** 2) > 0}
    # the document's weight is tf x idf: a capped term's is scaled down by the same factor
    scales = [(t, np.float32(w * qidf[t] / qnorm)) for t, w in qw.items() if w > 0]
    return scales, part


def kind_prior(index: TokenCosineIndex, scores: np.ndarray, kinds: np.ndarray, sources: np.ndarray,
               terms: set[str]) -> None:
    """Raise rows whose kind the query names (any kind, its name matched like words) by `kind`,
    memories by `memory`, and rows whose source the query names by `named_source`. `kinds` and
    `sources`: the rows' codes, beside `scores` (changed in place)."""
    s, field, names = index._settings, index._fields["kind"], index._fields["source"]
    kinds_named = [field[v] for v in named(field, terms)] if s.kind > 0 else []
    memories = [code for value in MEMORY_KINDS if (code := field.get(value)) is not None] if s.memory else []
    speakers = [names[v] for v in named(names, terms)] if s.named_source > 0 else []
    if kinds_named:
        np.multiply(scores, np.float32(1.0 + s.kind), out=scores, where=member(kinds, kinds_named, len(field)))
    if memories:
        np.multiply(scores, np.float32(1.0 + s.memory), out=scores, where=member(kinds, memories, len(field)))
    if speakers:
        np.multiply(scores, np.float32(1.0 + s.named_source), out=scores,
                    where=member(sources, speakers, len(names)))
