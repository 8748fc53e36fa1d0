"""The websearch query language, parsed once: bare words, "quoted phrases", -exclusions and OR.

A leaf (imports nothing of the package), so every leg that reads a query - the keyword leg, the
semantic legs, live file reads - parses it the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["WebQuery", "parse", "split_websearch"]

_PHRASE = re.compile(r'"([^"]*)"?')
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class WebQuery:
    words: tuple[str, ...]       # bare words, lower case, split on non-word characters, in order
    phrases: tuple[str, ...]     # "quoted phrases" as written (stripped)
    excluded: tuple[str, ...]    # -words as written, without the leading '-'

    @property
    def constraint(self) -> str | None:
        """The phrases and exclusions in websearch_to_tsquery syntax, or None when there are none."""
        text = " ".join([f'"{p}"' for p in self.phrases] + [f"-{w}" for w in self.excluded])
        return text or None


def parse(text: str) -> WebQuery:
    phrases = tuple(p.strip() for p in _PHRASE.findall(text) if p.strip())
    rest = _PHRASE.sub(" ", text).split()
    excluded = tuple(w[1:] for w in rest if w.startswith("-") and len(w) > 1)
    words: dict[str, None] = {}
    for w in rest:
        if w.startswith("-") or w.lower() == "or":
            continue
        for piece in _WORD.findall(w.lower()):
            words.setdefault(piece, None)
    return WebQuery(tuple(words), phrases, excluded)


def split_websearch(text: str) -> tuple[list[str], str | None]:
    """Bare words (ranked as any-of) and the websearch constraints that must hold (phrases, -words).

    websearch_to_tsquery ANDs every word, which finds little for a natural-language question; an OR
    of the words ranked by ts_rank finds far more (LoCoMo R@10 in bench/RESULTS.md).
    """
    query = parse(text)
    return list(query.words), query.constraint
