"""A compact English stemmer: the Porter2 ("Snowball English") algorithm, written out.

Small and dependency-free; `stem("running") == "run"`, `stem("generously") == "generous"`.
Results are cached because the same few thousand words make up most text.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["stem"]

_VOWELS = frozenset("aeiouy")
_DOUBLES = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
_LI_ENDINGS = frozenset("cdeghkmnrt")
_EXCEPTIONS = {
    "skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie", "idly": "idl",
    "gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli", "singly": "singl",
    "sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas", "cosmos": "cosmos",
    "bias": "bias", "andes": "andes",
}
_R1_PREFIXES = ("gener", "commun", "arsen", "past", "univers", "later", "emerg", "organ")
_AFTER_1A = frozenset(("inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed"))
_STEP2 = (
    ("ization", "ize"), ("ational", "ate"), ("fulness", "ful"), ("ousness", "ous"),
    ("iveness", "ive"), ("tional", "tion"), ("biliti", "ble"), ("lessli", "less"),
    ("entli", "ent"), ("ation", "ate"), ("alism", "al"), ("aliti", "al"), ("ousli", "ous"),
    ("iviti", "ive"), ("fulli", "ful"), ("enci", "ence"), ("anci", "ance"), ("abli", "able"),
    ("izer", "ize"), ("ator", "ate"), ("alli", "al"), ("bli", "ble"), ("ogi", "og"), ("li", ""),
)
_STEP3 = (
    ("ational", "ate"), ("tional", "tion"), ("alize", "al"), ("icate", "ic"), ("iciti", "ic"),
    ("ative", ""), ("ical", "ic"), ("ness", ""), ("ful", ""),
)
_STEP4 = (
    "ement", "ance", "ence", "able", "ible", "ment", "ant", "ent", "ism", "ate", "iti", "ous",
    "ive", "ize", "ion", "al", "er", "ic",
)


def _region(word: str, start: int) -> int:
    """Index after the first non-vowel that follows a vowel, from `start` (R1/R2 of Porter2)."""
    for i in range(start + 1, len(word)):
        if word[i] not in _VOWELS and word[i - 1] in _VOWELS:
            return i + 1
    return len(word)


def _short_syllable_end(word: str) -> bool:
    n = len(word)
    if n == 2:
        return word[0] in _VOWELS and word[1] not in _VOWELS
    return (n >= 3 and word[-3] not in _VOWELS and word[-2] in _VOWELS
            and word[-1] not in _VOWELS and word[-1] not in "wxY")


def _has_vowel(text: str) -> bool:
    return any(c in _VOWELS for c in text)


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Porter2 stem of a lower-case word; words of one or two letters come back unchanged."""
    if len(word) <= 2 or not word.isalpha():
        return word
    if word in _EXCEPTIONS:
        return _EXCEPTIONS[word]
    w = word.lstrip("'")
    if w.startswith("y"):
        w = "Y" + w[1:]
    w = "".join("Y" if c == "y" and i and w[i - 1] in _VOWELS else c for i, c in enumerate(w))
    prefix = next((p for p in _R1_PREFIXES if w.startswith(p)), None)
    r1 = len(prefix) if prefix else _region(w, 0)
    r2 = _region(w, r1)
    w = _step1a(w)
    if w in _AFTER_1A:
        return w
    w = _step1b(w, r1)
    if len(w) > 2 and w[-1] in "yY" and w[-2] not in _VOWELS:
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, r1, step2=True)
    w = _step3(w, r1, r2)
    w = _step4(w, r2)
    w = _step5(w, r1, r2)
    return w.replace("Y", "y")


def _step1a(w: str) -> str:
    for suffix in ("'s'", "'s", "'"):
        if w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith(("ied", "ies")):
        return w[:-2] if len(w) > 4 else w[:-1]
    if w.endswith(("us", "ss")):
        return w
    if w.endswith("s") and _has_vowel(w[:-2]):
        return w[:-1]
    return w


def _step1b(w: str, r1: int) -> str:
    for suffix in ("eedly", "eed"):
        if w.endswith(suffix):
            return w[: -len(suffix)] + "ee" if len(w) - len(suffix) >= r1 else w
    for suffix in ("ingly", "edly", "ing", "ed"):
        if w.endswith(suffix):
            stem_part = w[: -len(suffix)]
            if not _has_vowel(stem_part):
                return w
            if stem_part.endswith(("at", "bl", "iz")):
                return stem_part + "e"
            if stem_part.endswith(_DOUBLES) and not (len(stem_part) == 3 and stem_part[0] in "aeo"):
                return stem_part[:-1]
            if r1 >= len(stem_part) and _short_syllable_end(stem_part):
                return stem_part + "e"
            return stem_part
    return w


def _replace(w: str, rules: tuple[tuple[str, str], ...], r1: int, step2: bool = False) -> str:
    for suffix, repl in rules:
        if w.endswith(suffix):
            start = len(w) - len(suffix)
            if start < r1:
                return w
            if step2 and suffix == "ogi" and not w[:start].endswith("l"):
                return w
            if step2 and suffix == "li" and (start == 0 or w[start - 1] not in _LI_ENDINGS):
                return w
            return w[:start] + repl
    return w


def _step3(w: str, r1: int, r2: int) -> str:
    if w.endswith("ative"):
        return w[:-5] if len(w) - 5 >= r2 else w
    return _replace(w, _STEP3, r1)


def _step4(w: str, r2: int) -> str:
    for suffix in _STEP4:
        if w.endswith(suffix):
            start = len(w) - len(suffix)
            if start < r2:
                return w
            if suffix == "ion" and (start == 0 or w[start - 1] not in "st"):
                return w
            return w[:start]
    return w


def _step5(w: str, r1: int, r2: int) -> str:
    if w.endswith("e"):
        start = len(w) - 1
        if start >= r2 or (start >= r1 and not _short_syllable_end(w[:-1])):
            return w[:-1]
    elif w.endswith("l") and len(w) - 1 >= r2 and w.endswith("ll"):
        return w[:-1]
    return w
