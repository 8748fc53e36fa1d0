"""One score for every ranked list: the evidence a result holds, summed, then one stated map to 0-1.

A leaf (imports nothing of the package). Every ranked operation that promises a calibrated score
(`search_context`, `query_source`, `urchin semantic`) builds an `Evidence` per candidate, sorts by
`Scale.raw`, shows `Scale.shown(raw)` and filters `minScore` on that shown number, so the order, the
scores and the filter never disagree. Recall (or any caller that thresholds a score) calls `calibrated`.

raw = the sum of the parts (logit units):
    every   a tier: holding every word of the question (each OR group) adds more than all the other
            parts but `share` can ever add together, so one holding every word ranks above one holding
            some, and no prior, neighbour or related word lifts a result above it;
    share   x the share of the question's term weight (tf x idf^2) the result holds;
    related x the share of the related words' weight (thesaurus, learned associations) it holds;
    rank    x the ranker's own agreement in 0-1 (the fused RRF over the best possible for the hybrid,
            the context-smoothed token-cosine for `urchin semantic`): session neighbours and priors
            (decisions, a named source) act here, so they reorder results of comparable evidence only;
    dense   x the embedder's cosine, when its list found the result;
    bias    a constant.
shown = 1 / (1 + exp(-raw)), rounded to 4 places: the chance that a result at that score is evidence
for the question, as fitted on the LoCoMo dev split (bench/locomo_score.py). The weights were chosen
there by leave-one-conversation-out CV (the ratios for R@10, then the scale and bias by logistic fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Evidence", "Scale", "HYBRID", "TOKEN_COSINE", "EMBEDDER", "Z_SPAN", "z_unit", "calibrated", "shown",
           "PLACES"]

PLACES = 4          # scores are shown, and minScore compares, at this many decimal places


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one candidate holds for one question; every field in 0-1."""

    share: float            # of the question's term weight
    every: bool             # holds every word (every OR group)
    related: float = 0.0    # of the related words' weight
    rank: float = 0.0       # the ranker's own agreement (see the module doc)
    dense: float = 0.0      # the embedder's cosine, when it found the candidate


@dataclass(frozen=True, slots=True)
class Scale:
    """One ranker's weights, in logit units. `every` is derived: it exceeds the most that `related`,
    `rank` and `dense` can add, which is what makes it a tier."""

    name: str
    share: float
    related: float
    rank: float
    dense: float
    bias: float

    @property
    def every(self) -> float:
        return self.related + self.rank + self.dense + 0.01

    def parts(self, e: Evidence) -> dict[str, float]:
        return {"every": self.every if e.every else 0.0, "share": self.share * _unit(e.share),
                "related": self.related * _unit(e.related), "rank": self.rank * _unit(e.rank),
                "dense": self.dense * _unit(e.dense), "bias": self.bias}

    def raw(self, e: Evidence) -> float:
        return sum(self.parts(e).values())

    def score(self, e: Evidence) -> float:
        return shown(self.raw(e))

    def shown_raw(self, unbiased: float) -> float:
        """The score of a raw sum made without the bias (a ranker summing the other parts itself)."""
        return shown(unbiased + self.bias)

    def explain(self, e: Evidence) -> dict[str, Any]:
        """The parts (they add up to `raw`), the evidence they came from, and the map to the score."""
        raw = self.raw(e)
        return {"scale": self.name, "evidence": {"share": round(e.share, 6), "every": e.every,
                                                 "related": round(e.related, 6), "rank": round(e.rank, 6),
                                                 "dense": round(e.dense, 6)},
                "parts": {k: round(v, 6) for k, v in self.parts(e).items()}, "raw": round(raw, 6),
                "map": "score = 1 / (1 + exp(-raw)), rounded to 4 places", "score": shown(raw)}


def _unit(x: float) -> float:
    return 0.0 if not x > 0 else min(1.0, float(x))     # NaN and negatives count nothing


def shown(raw: float) -> float:
    """The one map from raw evidence to the 0-1 score every calibrated list shows and filters on."""
    if raw >= 0:
        value = 1.0 / (1.0 + math.exp(-raw))
    else:
        z = math.exp(raw)
        value = z / (1.0 + z)
    return round(value, PLACES)


# Fitted on LoCoMo dev (bench/locomo_score.py --cv): see bench/RESULTS.md, "One score".
# share : related : rank : dense = 0.25 : 0.25 : 4 : 1: the best for R@10 on LoCoMo dev (0.763) with a
# related word never weighing more than the words typed (leave-one-conversation-out CV of that grid
# 0.757), and the one of those that keeps every concept set (1 : 1 : 4 lost a held-out question); then
# x 0.4514 and bias -4.0059 by the logistic fit. The embedder's weight (a quarter of rank's) was not
# tuned (no model in that bench).
HYBRID = Scale("hybrid", share=0.1129, related=0.1129, rank=1.8057, dense=0.4514, bias=-4.0059)
# Token-cosine's own score already weighs the words (tf x idf, related words at half weight): adding
# share and related parts (CV on LoCoMo chose 1 : 1 : 4, R@10 0.759 in-sample) lowered every concept set
# (0.884 / 0.535 / 0.372 against 0.930 / 0.581 / 0.535), so rank alone, with the every-word tier
# (LoCoMo 0.757, concepts unchanged); scale and bias by the logistic fit.
TOKEN_COSINE = Scale("token-cosine", share=0.0, related=0.0, rank=2.1122, dense=0.0, bias=-3.0446)


# `urchin semantic` with an embedder: a cosine means different things from one model to the next, and
# from a broad question to a narrow one (a broad one's cosines all sit higher), so the evidence is the
# cosine's z-score against the query's own background, z = (cosine - mean) / spread over a fixed sample
# of the cache's rows (urchin.search.vectors.background), given as dense = z / Z_SPAN in 0-1 (z <= 0:
# nothing). The map: logistic regression of "is an evidence turn" on z, fitted on LoCoMo dev with
# all-MiniLM-L6-v2 (bench/locomo_dense_score.py; leave-one-conversation-out CV in bench/RESULTS.md,
# "Round fourteen"). No every-word tier: an embedder-only ranking is exempt from that rule.
Z_SPAN = 12.0
# Fitted on all five dev conversations: 0.4802 x z - 5.3950 (the folds: 0.46-0.56 x z, -5.28 to -5.87).
EMBEDDER = Scale("embedder", share=0.0, related=0.0, rank=0.0, dense=round(0.4802 * Z_SPAN, 4), bias=-5.3950)


def z_unit(z: float) -> float:
    """The embedder's evidence in 0-1: its z-score over Z_SPAN (the Scale's `dense` part)."""
    return 0.0 if not z > 0 else min(1.0, z / Z_SPAN)


def calibrated(e: Evidence, scale: Scale = HYBRID) -> float:
    """A result's calibrated score, for callers that threshold one (recall): the same number its list shows."""
    return scale.score(e)
