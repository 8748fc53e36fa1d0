"""Decoded views of a text, so secrets are found in text as tools print it.

Tool output is often URL-encoded (`%3D`, twice: `%253D`), JSON-escaped (`\\n`, `\\"`, `\\u0022`, twice:
`\\\\n`), HTML-escaped (`&quot;`, `&#61;`), wrapped with backslash continuations, or written with
look-alike separators (a non-breaking space, a full-width `＝`). `views` returns each decoded layer
with a map back to the original text; the redactor scans every view and widens what it finds there
to whole escapes of the original: a false positive on a boundary rather than a leak. Plain text
costs a few `in` checks.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate

__all__ = ["MAX_ROUNDS", "View", "decode", "may_hide", "views"]

MAX_ROUNDS = 3  # e.g. URL-encoded twice inside a JSON string; bounded whatever the input
# One family of escapes per pattern, each behind its trigger: a pattern that starts with a literal
# lets `re` skip ahead fast, where one alternation of them all would cost ~0.15 us a character.
# One group around each: `split` keeps the escapes.
_FAMILIES = (
    ("%", re.compile(r"(%[0-9A-Fa-f]{2})")),
    ("\\", re.compile(r"(\\(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|[nrtbf\"'\\/]|\r?\n[ \t]*))")),
    ("&", re.compile(r"(&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});)")),  # needs `;`
    ("", re.compile("([\u00a0\u2000-\u200d\u2018\u2019\u201c\u201d\u201e\u202f\u205f\u2060\u2236\u3000"
                    "\ufe55\ufe66\ufeff\uff01-\uff5e\ua789])")),  # look-alikes: only in non-ASCII text
)
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\", "/": "/"}
_LOOK_ALIKES = {
    **dict.fromkeys("\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000",
                    " "),
    **dict.fromkeys("\u200b\u200c\u200d\u2060\ufeff", ""),  # zero-width: may sit inside a token
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"',
    "\u2236": ":", "\ua789": ":", "\ufe55": ":", "\ufe66": "=",
}


@lru_cache(maxsize=8192)
def _decoded(escape: str) -> str:
    head = escape[0]
    if head == "%":
        return chr(int(escape[1:], 16))
    if head == "\\":
        second = escape[1]
        if second in "ux":
            return chr(int(escape[2:], 16))
        return _SIMPLE.get(second, "")  # otherwise a line continuation: the lines join
    if head == "&":
        return html.unescape(escape)
    if "\uff01" <= head <= "\uff5e":
        return chr(ord(head) - 0xFEE0)  # full-width ASCII: `＝` is `=`, `ｐ` is `p`
    return _LOOK_ALIKES.get(head, head)


def may_hide(text: str) -> bool:
    """Can `text` hold an escape or a look-alike at all? (`in` checks: plain text costs ~nothing)."""
    return "%" in text or "\\" in text or "&" in text or not text.isascii()


class View:
    """One decoded layer of the layer below (the original text, or another view), with a map back.

    The map is built on first use: most views hold no secret, and a hostile text may hold a million
    escapes (decoding them costs one C-level split and a cached lookup each)."""

    __slots__ = ("text", "_pieces", "_escapes", "_below", "_inner", "_outer")

    def __init__(self, text: str, pieces: list[str], escapes: list[str], below: View | None) -> None:
        self.text = text
        self._pieces = pieces    # literal, decoded escape, literal, ...: `text` is their join
        self._escapes = escapes  # each escape as written in the layer below
        self._below = below
        self._inner: list[int] = []
        self._outer: list[int] = []

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that `text[start:end]` was decoded from, widened to whole
        escapes at both ends."""
        if not self._inner:
            below = self._pieces.copy()
            below[1::2] = self._escapes
            self._inner = list(accumulate(map(len, self._pieces), initial=0))
            self._outer = list(accumulate(map(len, below), initial=0))
        start, end = self._char(start)[0], self._char(end - 1)[1]
        return (start, end) if self._below is None else self._below.to_original(start, end)

    def _char(self, pos: int) -> tuple[int, int]:
        """The span below that the character at `pos` comes from."""
        k = bisect_right(self._inner, pos) - 1  # the piece holding `pos` (pieces before it may be empty)
        if k % 2:
            return self._outer[k], self._outer[k + 1]
        below = self._outer[k] + pos - self._inner[k]
        return below, below + 1


def decode(text: str, below: View | None = None) -> View | None:
    """One layer of every family of escapes decoded (each family a layer of its own, so the map
    stays exact), or None when `text` has none."""
    view = below
    for trigger, pattern in _FAMILIES:
        if (trigger in text and (trigger != "&" or ";" in text)) if trigger else not text.isascii():
            pieces = pattern.split(text)
            if len(pieces) > 1:
                escapes = pieces[1::2]
                pieces[1::2] = map(_decoded, escapes)
                text = "".join(pieces)
                view = View(text, pieces, escapes, view)
    return view if view is not below else None


def views(text: str) -> list[View]:
    """Each decoded layer of `text`, up to `MAX_ROUNDS`; none for text without escapes."""
    out: list[View] = []
    below: View | None = None
    current = text
    while len(out) < MAX_ROUNDS and may_hide(current):
        view = decode(current, below)
        if view is None or view.text == current:
            break
        out.append(view)
        below, current = view, view.text
    return out
