"""The websearch query language, parsed once: bare words, "quoted phrases", -exclusions and OR.

A leaf (imports nothing of the package), so every leg that reads a query - the keyword leg, the
semantic legs, live file reads, `urchin semantic` over events - parses it the same way:
- bare words rank (any of them finds a document; one holding every word outranks one holding some);
- `a OR b` makes one group: either word satisfies it;
- "quoted phrases" and -exclusions (-word, -"phrase") are filters: a candidate without the phrase, or
  with an excluded word or phrase, is not a result of any leg (they are never scoring terms).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["WebQuery", "parse", "split_websearch", "unquoted", "unheld_phrases"]

_PHRASE = re.compile(r'"([^"]*)"?')
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class WebQuery:
    words: tuple[str, ...]       # bare words, lower case, split on non-word characters, in order
    phrases: tuple[str, ...]     # "quoted phrases" as written (stripped)
    excluded: tuple[str, ...]    # -words as written, without the leading '-'
    groups: tuple[tuple[str, ...], ...] = ()   # AND of OR groups; each alternative is a bare token's words
    kept: str = ""               # the text without -exclusions, OR and quote marks (repeats kept)
    excluded_phrases: tuple[str, ...] = ()   # -"quoted phrases": a candidate holding one is no result

    @property
    def constraint(self) -> str | None:
        """The phrases and exclusions in websearch_to_tsquery syntax, or None when there are none."""
        text = " ".join([f'"{p}"' for p in self.phrases] + [f"-{w}" for w in self.excluded]
                        + [f'-"{p}"' for p in self.excluded_phrases])
        return text or None

    @property
    def positive(self) -> str:
        """What the query looks for, as text: its words and phrases, never its -exclusions or OR."""
        return self.kept or " ".join(list(self.words) + list(self.phrases))

    @property
    def every(self) -> str | None:
        """Every word (with OR groups as alternatives) in to_tsquery syntax: the 'holds them all' test."""
        parts = []
        for group in self.groups:
            alternatives = [" & ".join(_WORD.findall(alt)) for alt in group]
            alternatives = [a for a in alternatives if a]
            if alternatives:
                parts.append("(" + " | ".join(f"({a})" for a in alternatives) + ")")
        return " & ".join(parts) or None


def parse(text: str) -> WebQuery:
    quoted = [(m.group(1).strip(), _excluded_at(text, m.start())) for m in _PHRASE.finditer(text)]
    phrases = tuple(p for p, out in quoted if p and not out)
    excluded_phrases = tuple(p for p, out in quoted if p and out)
    rest = _PHRASE.sub(" ", text).split()
    excluded = tuple(w[1:] for w in rest if w.startswith("-") and len(w) > 1)
    words: dict[str, None] = {}
    groups: list[list[str]] = []
    join_next = False
    for w in rest:
        if w.startswith("-"):
            join_next = False
            continue
        if w.lower() == "or":
            join_next = bool(groups)
            continue
        pieces = _WORD.findall(w.lower())
        if not pieces:
            continue
        for piece in pieces:
            words.setdefault(piece, None)
        alternative = " ".join(pieces)
        if join_next:
            groups[-1].append(alternative)
        else:
            groups.append([alternative])
        join_next = False
    kept = " ".join([w for w in rest if not w.startswith("-") and w.lower() != "or"] + list(phrases))
    return WebQuery(tuple(words), phrases, excluded, tuple(tuple(g) for g in groups), kept, excluded_phrases)


def unquoted(text: str) -> str:
    """The query with its required "phrases" as bare words (a -"phrase" and -words kept): what to
    suggest when no result holds a phrase. The language never relaxes a phrase by itself."""
    return " ".join(_PHRASE.sub(lambda m: m.group(0) if _excluded_at(text, m.start()) else f" {m.group(1)} ",
                                text).split())


def _excluded_at(text: str, start: int) -> bool:
    return start > 0 and text[start - 1] == "-"


def unheld_phrases(text: str, where: str) -> dict[str, object] | None:
    """What an empty answer says when the query has "phrases" no candidate held: the phrases, why the
    answer is empty, and the unquoted query to try instead. None when the query has no phrase."""
    phrases = parse(text).phrases
    if not phrases:
        return None
    suggestion = unquoted(text)
    return {"phrases": list(phrases), "suggestion": suggestion,
            "note": (f"no {where} holds the quoted phrase{'s' if len(phrases) > 1 else ''} "
                     f"{', '.join(repr(p) for p in phrases)}: a phrase is "
                     f"a requirement, so the answer is empty; to search its words instead, query {suggestion!r}")}


def split_websearch(text: str) -> tuple[list[str], str | None]:
    """Bare words (ranked as any-of) and the websearch constraints that must hold (phrases, -words).

    websearch_to_tsquery ANDs every word, which finds little for a natural-language question; an OR
    of the words ranked by ts_rank finds far more (LoCoMo R@10 in bench/RESULTS.md).
    """
    query = parse(text)
    return list(query.words), query.constraint
