"""What the ranked views share: a query's websearch constraints (phrases, -words), the hint shown
when ranked search found nothing or only a weak match, and how a token-cosine hit's score was made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from urchin.event import Event
from urchin.search.cosine import Scored
from urchin.search.query import Hit
from urchin.search.score import TOKEN_COSINE, Evidence
from urchin.search.terms import terms_of, tokenize
from urchin.search.websearch import WebQuery, parse

__all__ = ["CONSTRAINED_EXTRA", "WEAK_SCORE", "constraints", "cosine_explain", "weakness"]

# Below this best token-cosine score (calibrated, urchin.search.score) a match is weak: on LoCoMo, a
# sixth of the questions, whose top 10 holds evidence at R@10 0.55 against the rest's 0.80.
WEAK_SCORE = 0.085


def weakness(hits: list[Hit], mode: str) -> str | None:
    """A hint when ranked search found nothing or only a poor match (None: the results look sound)."""
    if hits and (not mode.startswith("token-cosine") or (hits[0].score or 0.0) >= WEAK_SCORE):
        return None
    found = "no match" if not hits else "only weak matches"
    if mode.startswith("token-cosine"):
        return (f"{found}: token-cosine finds events that share words with the query, or words related to them "
                "(a thesaurus of software work, and words the journal uses alongside them); try `urchin search` for "
                "an exact word or phrase, or configure an embedder "
                "(URCHIN_EMBEDDER_URL) to search by meaning")
    return f"{found}: try `urchin search` for an exact word or phrase"


CONSTRAINED_EXTRA = 500   # token-cosine candidates ranked beyond `limit` when phrases or -words filter them


_CAPPED = "a session-leg pick: capped at the score above it, so scores never rise down the list"


def cosine_explain(s: Scored) -> dict[str, Any]:
    """How a token-cosine hit's score was made (score.TOKEN_COSINE's parts add up to `raw`): `rank` is
    the context-smoothed cosine with its priors (decisions, a named source, learned associations), at
    most 1; `every` the tier of a hit holding every word. `raw` is the ranker's own float32 sum."""
    every = s.raw - TOKEN_COSINE.rank * s.match > TOKEN_COSINE.every / 2
    out = TOKEN_COSINE.explain(Evidence(share=0.0, every=every, rank=s.match))
    out["raw"] = round(s.raw + TOKEN_COSINE.bias, 6)
    if s.score < TOKEN_COSINE.shown_raw(s.raw):
        out["capped"] = _CAPPED
    out["score"] = s.score
    return out


def constraints(query: str, parsed: WebQuery | None = None) -> tuple[str, Callable[[Event], bool] | None]:
    """(what to rank by: the query without -words and OR, a test every hit must pass or None).

    The websearch language of every leg: a "phrase" must occur (case and spacing aside), an -excluded
    word must not (as a term, so `-deploy` drops "deploys" too). `parsed`: `parse(query)`, when the
    caller has it.
    """
    q = parse(query) if parsed is None else parsed
    if not q.phrases and not q.excluded and not q.excluded_phrases:
        return q.positive or query, None
    phrases = [" ".join(p.lower().split()) for p in q.phrases]
    out_phrases = [" ".join(p.lower().split()) for p in q.excluded_phrases]
    excluded = terms_of(q.excluded)

    def holds(event: Event) -> bool:
        text = f"{event.title or ''} {event.content}"
        flat = " ".join(text.lower().split())
        return (all(p in flat for p in phrases) and not any(p in flat for p in out_phrases)
                and not (excluded & set(tokenize(text))))

    return q.positive or query, holds
