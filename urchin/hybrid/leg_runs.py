"""The question's leg runs over the index: which words and terms each leg ranks by and how it gathers
its candidates (`plan`), the keyword lists (full text), the semantic lists (token cosine, and an
embedder's at a share of the weight), related words, priors, and each list ranked with its session
context (`with_context`). `hybrid.py` runs them and `fusion.py` fuses what they return.

The constants are the ranking's, each chosen by leave-one-conversation-out CV on LoCoMo
(bench/locomo_hybrid.py --cv); a bench sets them on this module for a run.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Container, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from urchin.errors import EmbedderError
from urchin.hybrid.base import ContextRow, Embedder, Filter, IndexBackend, LegHit, Tier
from urchin.hybrid.schema import TS_CONFIG
from urchin.hybrid.sparse import idf, query_vector, term_id, term_ids, to_sparsevec, tokens
from urchin.params.context import ContextParams
from urchin.search import thesaurus
from urchin.search.cosine import EXPAND_TERMS, MEMORY_PRIOR, neighbour_weights
from urchin.search.terms import named, terms_of
from urchin.search.websearch import WebQuery, parse

if TYPE_CHECKING:
    from urchin.search.assoc import Associations

__all__ = ["LegRun", "Stats", "keyword_runs", "semantic_runs", "plan", "with_context", "query_weights",
           "related_weights", "named_sources", "KEYWORD_SHARE", "DENSE_SHARE", "RANK_BUDGET", "PIVOT"]

# Session context: a result's score adds its session neighbours' scores, CONTEXT ** distance, up to
# CONTEXT_TURNS on each side (a question's evidence is often the turns around the best match). Chosen
# by leave-one-conversation-out CV on LoCoMo (bench/locomo_hybrid.py --cv).
CONTEXT = {"keyword": 0.5, "semantic": 0.6}
CONTEXT_TURNS = {"keyword": 2, "semantic": 3}
COMMON_SHARE = 0.05               # keyword leg: words in more than this share of chunks are dropped
MIN_COMMON_DF = 20                # ...but in a small index no word is "common",
MAX_COMMON_DF = 5000              # and in a large one a word in 5,000 chunks already costs ~50 ms to rank
MAX_KEYWORDS = 12
MAX_CANDIDATE_TERMS = 16          # the rarest query terms that pick token-cosine candidates (speed at 1M)
RANK_BUDGET = 1000                # the most candidates a leg ranks (see `plan`)
# The token-cosine leg as `urchin semantic` ranks (urchin.search.cosine): pivoted length normalisation
# (a chunk's length counts PIVOT, the mean length the rest), and the thesaurus's related words at
# RELATED of the weight, at most RELATED_TERMS, their idf capped at the mean of the question's own.
PIVOT = 0.3
RELATED = 0.5
RELATED_TERMS = 80
LEARNED = 0.1         # the learned associations in the token-cosine leg, per similarity (LoCoMo CV, round five)
RELATED_MAX_SHARE = 0.02          # related words in more of the chunks than this add cost, not evidence
# What an agent chose to remember (MEMORY_KINDS) counts MEMORY_PRIOR more in each leg, as in token-cosine
# (the same constant); `memoryWeight` weighs memories again, in the fusion, as the caller asks.
# The keyword lists weigh this share of `fullTextWeight` in the fusion: ts_rank has no idf, and at equal
# weight its lists pulled the hybrid under the token-cosine leg (LoCoMo R@10 0.714 vs 0.723). Chosen by
# leave-one-conversation-out CV on LoCoMo (bench/locomo_hybrid.py --cv): 0.25 in all 5 folds with two
# turns of context in each leg; with three in the token-cosine leg, half of that (fullTextWeight 0.5
# at 0.25) in 4 of 5 folds, and k 20 in all.
KEYWORD_SHARE = 0.125


# The embedder's lists weigh an eighth of the token-cosine ones (see semantic_runs). Chosen by
# leave-one-conversation-out CV on LoCoMo with all-MiniLM-L6-v2 (bench/locomo_hybrid.py --cv, picked
# in 4 of 5 folds once the token-cosine leg took three turns of context; a quarter before): at a
# quarter the hybrid fell under the no-model one (R@10 0.738 vs 0.743), at an eighth it is level.
DENSE_SHARE = 0.125


@dataclass(slots=True)
class LegRun:
    leg: str            # keyword | semantic
    origin: str         # query | lex | vec | hyde
    query: str
    weight: float
    method: str
    hits: list[LegHit] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"leg": self.leg, "origin": self.origin, "query": self.query, "weight": self.weight,
                "method": self.method, "candidates": len(self.hits)}


class Stats:
    """The index's document frequencies, read once per question (each leg and the calibration need
    them): all the question's terms at once, before the legs start."""

    def __init__(self, backend: IndexBackend) -> None:
        self.backend, self.df, self.n_docs = backend, dict[int, int](), -1
        self.named: list[str] = []      # the sources the question names (see named_sources)
        self.lock = threading.Lock()

    def get(self, terms: Sequence[int], via: IndexBackend | None = None) -> tuple[dict[int, int], int]:
        """`via`: the caller's own connection, for a term not read yet (a leg on another thread must
        never use the other leg's connection)."""
        with self.lock:
            missing = [t for t in terms if t not in self.df]
            if missing or self.n_docs < 0:
                df, self.n_docs = (via or self.backend).term_stats(missing)
                self.df.update({t: df.get(t, 0) for t in missing})
            return {t: self.df[t] for t in terms if self.df[t]}, self.n_docs


def with_own(flt: Filter, sub: WebQuery) -> Filter:
    """A sub-query's filter: the question's constraints and its own."""
    own = sub.constraint
    if not own or own == flt.constraint:
        return flt
    return replace(flt, constraint=f"{flt.constraint} {own}" if flt.constraint else own)


def keyword_runs(backend: IndexBackend, stats: Stats, p: ContextParams, flt: Filter, depth: int) -> list[LegRun]:
    subs = [("query", p.query, 2 * p.full_text_weight * KEYWORD_SHARE)]
    subs += [("lex", s.query, p.full_text_weight * KEYWORD_SHARE) for s in p.searches if s.type == "lex"]
    runs = []
    for origin, text, weight in subs:
        sub = parse(text)
        run = LegRun("keyword", origin, text, weight,
                     f"full-text ({TS_CONFIG}, any word, every word first, ts_rank)")
        words, tiers = _distinctive(stats, list(sub.words))
        if tiers:
            run.method += f", the best {RANK_BUDGET} candidates gathered in tiers"
        rows = backend.keyword(words, sub.constraint, with_own(flt, sub), depth, _turns("keyword"), sub.every,
                               tiers, RANK_BUDGET, prior(p), stats.named)
        run.hits = with_context(rows, CONTEXT["keyword"], depth)
        runs.append(run)
    return runs


def _distinctive(stats: Stats, words: list[str]) -> tuple[list[str], list[Tier]]:
    """The words the keyword leg ranks by, and how it gathers candidates (see `plan`): ts_rank has no
    idf, so a word in more than COMMON_SHARE of the chunks is dropped while a rarer one remains. A
    question of one word is planned too: alone, a common word ("error", in 15% of the chunks) had
    the leg rank every chunk holding it (150k at 1M events: 350 ms of the server's CPU)."""
    if not words:
        return words, []
    ids = {w: list(term_ids(tokens(w))) for w in words}
    df, n_docs = stats.get([t for ts in ids.values() for t in ts])
    # stop words (no term) carry no information, and a word in no chunk matches nothing: neither is
    # "the rarer word that remains" (the leg would search for it alone, and find nothing)
    freq = {w: max((df.get(t, 0) for t in ts), default=0) for w, ts in ids.items()}
    if not any(freq.values()):
        return ([w for w in words if ids[w]] or words)[:MAX_KEYWORDS], []
    return plan(freq, n_docs, MAX_KEYWORDS)


def plan(df: dict[Any, int], n_docs: int, most: int) -> tuple[list[Any], list[Tier]]:
    """Which of a question's items (words, or term ids) a leg ranks by, and how it gathers candidates.

    Items in more than COMMON_SHARE of the chunks (at most MAX_COMMON_DF) are dropped while a rarer
    one remains, and the rarest `most` kept: the leg ranks every chunk holding any of them. But it
    never ranks more than RANK_BUDGET chunks (at 1M chunks each costs ~8 us): when the kept items'
    chunks number more, or every item is common (each word of "how do we deploy the server config"
    is in 13% of a 1M-event journal), it ranks by all the items and gathers its candidates in tiers,
    best first, until the budget is full: the chunks holding every item, all but the commonest, ...,
    then any kept item (or the rarest alone), each tier's newest first (see PgLegs._leg).
    A question whose kept items' chunks fit the budget - the common case - runs no tier.
    """
    ranked = sorted((k for k in df if df[k] > 0), key=lambda k: (df[k], str(k)))[:most]
    if not ranked:
        return [], []
    common = max(min(COMMON_SHARE * n_docs, MAX_COMMON_DF), MIN_COMMON_DF)
    kept = [k for k in ranked if df[k] <= common]
    if kept and sum(df[k] for k in kept) <= RANK_BUDGET:
        return kept, []
    tiers = [Tier(tuple(ranked[:n]), every=True) for n in range(len(ranked), 1, -1)]
    return ranked, [*tiers, Tier(tuple(kept or ranked[:1]), every=False)]


def semantic_runs(backend: IndexBackend, stats: Stats, p: ContextParams, flt: Filter, depth: int,
                   embedder: Embedder | None, skipped: list[str], assoc: Associations | None = None
                   ) -> list[LegRun]:
    """Token-cosine lists always; with an embedder, its dense lists too, at `DENSE_SHARE` of the weight.

    A small general-purpose model alone ranks conversational evidence far below token-cosine
    (LoCoMo R@10 0.30 vs 0.70), and fused as an equal leg it drags the hybrid under its best leg
    (0.61 vs keyword 0.68); at a half or a quarter of the weight it still pulls the hybrid under the
    no-model one. At an eighth the dense lists add what they find (concept queries) without outvoting
    the others.
    """
    subs = [("query", p.query, 2 * p.semantic_weight)]
    subs += [(s.type, s.query, p.semantic_weight) for s in p.searches if s.type in ("vec", "hyde")]
    runs = [LegRun("semantic", origin, text, weight, "") for origin, text, weight in subs]
    for run in runs:
        run.method = "token-cosine (sparsevec, tf x idf^2)"
        sub = parse(run.query)     # -exclusions and OR are no scoring terms: they filter (see hybrid._filter)
        weights, df, n_docs = query_weights(stats, sub.positive, backend)
        rows = []
        related = related_weights(stats, sub, weights, backend, assoc)
        if weights or related:
            # the terms that pick candidates (every term still scores): see `plan`
            terms, tiers = plan({t: df.get(t, 0) for t in weights}, n_docs, MAX_CANDIDATE_TERMS)
            if tiers:
                run.method += f", the best {RANK_BUDGET} candidates gathered in tiers"
            elif related:
                # related words pick candidates too (an answer may hold none of the question's words),
                # rarest first, while the budget lasts
                room = RANK_BUDGET - sum(df.get(t, 0) for t in terms)
                for term in sorted(related, key=lambda t: (stats.df.get(t, 0), t)):
                    if stats.df.get(term, 0) <= room:
                        terms.append(term)
                        room -= stats.df.get(term, 0)
            if related:
                run.method += f", {len(related)} related words (thesaurus{', learned' if assoc else ''})"
            if terms:
                pivot = ((1 - PIVOT) * backend.norm_mean(n_docs or stats.n_docs), PIVOT)
                rows = backend.sparse(to_sparsevec({**related, **weights}), [] if tiers else terms,
                                      with_own(flt, sub), depth, _turns("semantic"), tiers, RANK_BUDGET, pivot,
                                      prior(p), stats.named)
        run.hits = with_context(rows, CONTEXT["semantic"], depth)
    if embedder is None:
        return runs
    dense = [LegRun("semantic", origin, text, weight * DENSE_SHARE, "") for origin, text, weight in subs]
    try:
        vectors = embedder.embed([parse(r.query).positive or r.query for r in dense])
    except EmbedderError as exc:
        skipped.append(f"embedder lists skipped, token-cosine only: the embedder failed ({exc.message})")
        return runs
    for run, vector in zip(dense, vectors, strict=True):
        run.method = f"embeddings ({embedder.fingerprint}, HNSW cosine)"
        run.hits = backend.dense(embedder.fingerprint, vector, with_own(flt, parse(run.query)), depth)
    return runs + dense


def query_weights(stats: Stats, text: str, via: IndexBackend | None = None
                   ) -> tuple[dict[int, float], dict[int, int], int]:
    """The query's term weights (tf x idf^2), with the index's document frequencies they came from."""
    counts = term_ids(tokens(text))
    if not counts:
        return {}, {}, 0
    df, n_docs = stats.get(list(counts), via)
    return query_vector(text, df, n_docs), df, n_docs


def named_sources(backend: IndexBackend, query: str) -> list[str]:
    """The indexed sources the question names, matched like words ("what did Caroline say" -> caroline):
    their chunks count more in each leg (NAMED_SOURCE_PRIOR, in pg_legs), as in token-cosine."""
    words = set(tokens(parse(query).positive))
    return named(backend.known_sources(), words) if words else []


def prior(p: ContextParams) -> float:
    """The memory prior of this question's legs: none when memories weigh nothing in the fusion."""
    return MEMORY_PRIOR if p.include_memories and p.memory_weight > 0 else 0.0


def related_weights(stats: Stats, sub: WebQuery, own: dict[int, float], via: IndexBackend | None = None,
                     assoc: Associations | None = None) -> dict[int, float]:
    """Words related to the question, as token-cosine query weights, the way token-cosine adds them:
    the thesaurus's (see urchin.search.thesaurus) at RELATED x nearness, then up to EXPAND_TERMS of the
    associations learned from the journal (`assoc`, the token-cosine view's) at EXPAND x similarity
    (at most 1); each times idf^2, the idf capped at the mean of the question's own words (a rare
    related word never outweighs the words typed; uncapped when no word of the question is indexed).
    Words in no chunk, or in more than RELATED_MAX_SHARE of them, or among the -words, are left out."""
    near, learned = _related(sub, own, assoc)
    if not near and not learned:
        return {}
    df, n_docs = stats.get([*near, *(t for t, _ in learned)], via)
    most = max(RELATED_MAX_SHARE * n_docs, 50)
    for tid, weight in [(t, w) for t, w in learned if 0 < df.get(t, 0) <= most][:EXPAND_TERMS]:
        near.setdefault(tid, weight)
    own_df, _ = stats.get(list(own), via)
    own_idf = [idf(own_df[t], n_docs) for t in own if t in own_df]
    cap = sum(own_idf) / len(own_idf) if own_idf else math.inf
    return {t: weight * min(idf(df[t], n_docs), cap) ** 2 for t, weight in near.items() if 0 < df.get(t, 0) <= most}


def _related(sub: WebQuery, own: Container[int], assoc: Associations | None
             ) -> tuple[dict[int, float], list[tuple[int, float]]]:
    """The thesaurus's related words (term -> weight before idf) and the learned ones, in order, that
    `related_weights` weighs: neither among the question's own terms nor its -words."""
    excluded = terms_of(sub.excluded)
    words = tokens(sub.positive)
    near: dict[int, float] = {}
    if RELATED > 0:
        for term, closeness in thesaurus.default().expand(words, n=RELATED_TERMS):
            tid = term_id(term)
            if tid not in own and term not in excluded:
                near.setdefault(tid, RELATED * closeness)
    learned: list[tuple[int, float]] = []
    if assoc is not None and LEARNED > 0:
        learned = [(tid, min(LEARNED * sim, 1.0)) for term, sim in assoc.expand(words, n=EXPAND_TERMS * 3)
                   if (tid := term_id(term)) not in own and tid not in near and term not in excluded]
    return near, learned


def related_candidates(text: str, assoc: Associations | None) -> list[int]:
    """Every term `related_weights` may read the frequency of for `text` (its own and related words):
    read with the question's own before the legs start, so a question reads frequencies once."""
    sub = parse(text)
    own = set(term_ids(tokens(sub.positive)))
    near, learned = _related(sub, (), assoc)
    return sorted({*own, *near, *(t for t, _ in learned)})


def _turns(leg: str) -> int:
    return len(neighbour_weights(CONTEXT[leg], CONTEXT_TURNS[leg]))


def with_context(rows: Sequence[ContextRow], context: float, limit: int) -> list[LegHit]:
    """Rank the leg's candidates and their neighbours by own score + each neighbour's, weighted by
    `neighbour_weights` (the rule token-cosine uses), times the row's prior (memory, named source)."""
    score: dict[str, float] = {}
    kind: dict[str, str] = {}
    at: dict[str, datetime] = {}
    around: dict[str, dict[str, int]] = {}
    factor: dict[str, float] = {}
    for row in rows:
        score[row.chunk_id] = row.score
        kind[row.chunk_id] = row.kind
        at[row.chunk_id] = row.occurred_at
        if row.prior != 1.0:
            factor[row.chunk_id] = row.prior
        if row.distance:
            around.setdefault(row.anchor, {})[row.chunk_id] = row.distance
    # two neighbours on either side of one anchor are up to twice its reach apart
    reach = 2 * max((abs(d) for sides in around.values() for d in sides.values()), default=0)
    weights = neighbour_weights(context, reach)
    if weights:
        total = _smoothed(score, around, {d: weights[abs(d) - 1] for d in range(-reach, reach + 1) if d})
    else:
        total = {r.chunk_id: r.score for r in rows if r.distance == 0}
    if factor:
        total = {c: s * factor.get(c, 1.0) for c, s in total.items()}
    # best first, then newer, then by key: three stable sorts with C-level keys (each row's key tuple,
    # timestamp() included, cost as much as the scoring)
    ranked = sorted(total)
    ranked.sort(key=at.__getitem__, reverse=True)
    ranked.sort(key=total.__getitem__, reverse=True)
    ranked = ranked[:limit]
    return [LegHit(c, total[c], kind[c], at[c]) for c in ranked]


def _smoothed(score: dict[str, float], around: dict[str, dict[str, int]], weight: dict[int, float]
              ) -> dict[str, float]:
    """Each chunk's score plus its window mates' (every pair in one anchor's window knows its distance;
    a pair in two windows keeps its first place and the last window's distance), summed in that order."""
    links: dict[str, dict[str, int]] = {}
    for anchor, sides in around.items():
        group = [(anchor, 0), *sides.items()]
        for a, da in group:
            mates = links.get(a)
            if mates is None:
                mates = links[a] = {}
            mates.update({b: db - da for b, db in group if b != a})
    none: dict[str, int] = {}
    return {c: s + sum([weight[d] * score[n] for n, d in links.get(c, none).items()]) for c, s in score.items()}
