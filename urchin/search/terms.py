"""Tokenisation for ranked search: Unicode words, case folding, stop words, Porter2 stems.

Identifiers (`snake_case`, `camelCase`, `pkg.module`, `src/path.py`) yield their parts, stemmed, and
the whole identifier, unstemmed, so both `cosine` and `urchin/search/cosine.py` find the same file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from itertools import chain

from urchin.search.stem import stem

__all__ = ["tokenize", "word_terms", "terms_of", "named", "STOP_WORDS", "MAX_TERM_LENGTH", "WORD_PATTERN"]

MAX_TERM_LENGTH = 64  # longer runs are blobs (base64, minified code), not words anyone searches

# Function words that carry no topic (about 120, the size that measured best on LoCoMo; a longer
# list such as scikit-learn's drops words like "first" or "last" that questions do hinge on).
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves s t d ll m re ve don didn doesn isn wasn aren weren
let also
""".split())

# A "word" may be joined by `.`, `/` or `'` to the next (paths, dotted names, contractions).
WORD_PATTERN = r"\w+(?:['’./]\w+)*"
_RAW = re.compile(WORD_PATTERN)
_APOSTROPHE = re.compile(r"['’]")
_SEPARATORS = re.compile(r"[./_]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_a-zA-Z]+")


def _term(word: str) -> str | None:
    """A lower-case part -> its stem, or None when it is a stop word or a lone character."""
    if word in STOP_WORDS or len(word) < 2 or len(word) > MAX_TERM_LENGTH:
        return None
    return stem(word)


def word_terms(raw: str) -> tuple[str, ...]:
    """Terms of one raw word (a match of WORD_PATTERN), uncached: callers cache (text repeats)."""
    if "'" in raw or "’" in raw:
        # Contractions and possessives: "caroline's" -> "caroline", "don't" -> dropped as a stop word.
        head = _APOSTROPHE.split(raw, 1)[0]
        rest = raw[len(head) + 1:]
        if rest.lower() in ("s", "t", "d", "ll", "m", "re", "ve") or not _SEPARATORS.search(rest):
            raw = head if rest.lower() in ("s", "t", "d", "ll", "m", "re", "ve") else head + rest
        else:
            raw = _APOSTROPHE.sub("", raw)
    lower = raw.lower()
    compound = _SEPARATORS.search(raw) is not None
    parts = [p for p in _SEPARATORS.split(raw) if p]
    if not compound and (raw.islower() or raw.isupper() or raw[1:].islower()):
        term = _term(lower)
        return (term,) if term else ()
    out: list[str] = []
    for part in parts:
        for piece in _CAMEL.findall(part) or [part]:
            term = _term(piece.lower())
            if term:
                out.append(term)
    if (len(out) > 1 or compound) and len(lower) <= MAX_TERM_LENGTH:
        out.append(lower)
    return tuple(out)


class _Cache(dict[str, tuple[str, ...]]):
    """raw token -> terms; a dict whose misses compute, so lookups stay in C (tokenising is hot)."""

    limit = 1 << 19

    def __missing__(self, raw: str) -> tuple[str, ...]:
        if len(self) >= self.limit:
            self.clear()
        terms = self[raw] = word_terms(raw)
        return terms


_CACHE = _Cache()


def tokenize(text: str) -> list[str]:
    """Terms of `text` in order, repeated as often as they occur (callers count them)."""
    return list(chain.from_iterable(map(_CACHE.__getitem__, _RAW.findall(text))))


def terms_of(words: Iterable[str]) -> frozenset[str]:
    """The terms of several words as one set (a query's -words: what a result must not hold)."""
    return frozenset(chain.from_iterable(map(tokenize, words)))


def named(values: Iterable[str | None], terms: Set[str]) -> list[str]:
    """The values (kinds, sources) a query's `terms` name: one of a value's terms is among them
    ("decisions" names `decision`, "what did Caroline say" names `caroline`)."""
    return [v for v in values if v is not None and not terms.isdisjoint(tokenize(v))]
