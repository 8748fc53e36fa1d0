"""Decoded views of a text, so secrets are found in text as tools print it.

Tool output is often URL-encoded (`%3D`, twice: `%253D`), JSON-escaped (`\\n`, `\\"`, `\\u0022`, twice:
`\\\\n`), HTML-escaped (`&quot;`, `&#61;`), wrapped with backslash continuations, or written with
look-alike separators (a non-breaking space, a full-width `＝`). `views` yields each decoded layer with
a map back to the original text; the redactor scans every view and widens what it finds there to
whole escapes of the original: a false positive on a boundary rather than a leak. Plain text costs a
few `in` checks.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from collections.abc import Iterator

__all__ = ["MAX_ROUNDS", "View", "decode", "may_hide", "views"]

MAX_ROUNDS = 3  # e.g. URL-encoded twice inside a JSON string; bounded whatever the input
_ESCAPE = re.compile(
    r"%[0-9A-Fa-f]{2}"
    r"|\\(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|[nrtbf\"'\\/]|\r?\n[ \t]*)"
    r"|&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
    "|[\u00a0\u2000-\u200d\u2018\u2019\u201c\u201d\u201e\u202f\u205f\u2060\u2236\u3000"
    "\ufe55\ufe66\ufeff\uff01-\uff5e\ua789]"
)
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\", "/": "/"}
_LOOK_ALIKES = {
    **dict.fromkeys("\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000",
                    " "),
    **dict.fromkeys("\u200b\u200c\u200d\u2060\ufeff", ""),  # zero-width: may sit inside a token
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"',
    "\u2236": ":", "\ua789": ":", "\ufe55": ":", "\ufe66": "=",
}


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
    """One decoded layer of the layer below (the original text, or another view), with a map back."""

    __slots__ = ("text", "_inner", "_ends", "_outer_start", "_outer_end", "_below")

    def __init__(self, text: str, escapes: tuple[list[int], list[int], list[int], list[int]],
                 below: View | None) -> None:
        self.text = text
        # Per escape, in order: where its decoded text starts and ends in this view, and its span below.
        self._inner, self._ends, self._outer_start, self._outer_end = escapes
        self._below = below

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that `text[start:end]` was decoded from, widened to whole
        escapes at both ends."""
        start, end = self._char(start)[0], self._char(end - 1)[1]
        return (start, end) if self._below is None else self._below.to_original(start, end)

    def _char(self, pos: int) -> tuple[int, int]:
        """The span below that the character at `pos` comes from."""
        k = bisect_right(self._inner, pos) - 1
        if k < 0:
            return pos, pos + 1
        if pos < self._ends[k]:
            return self._outer_start[k], self._outer_end[k]
        below = self._outer_end[k] + pos - self._ends[k]
        return below, below + 1


def decode(text: str, below: View | None = None) -> View | None:
    """One layer of escapes decoded, or None when `text` has none."""
    inner: list[int] = []
    ends: list[int] = []
    outer_start: list[int] = []
    outer_end: list[int] = []
    parts: list[str] = []
    pos = size = 0
    for m in _ESCAPE.finditer(text):
        start, end = m.span()
        parts.append(text[pos:start])
        size += start - pos
        piece = _decoded(m.group())
        parts.append(piece)
        inner.append(size)
        size += len(piece)
        ends.append(size)
        outer_start.append(start)
        outer_end.append(end)
        pos = end
    if not inner:
        return None
    parts.append(text[pos:])
    return View("".join(parts), (inner, ends, outer_start, outer_end), below)


def views(text: str) -> Iterator[View]:
    """Each decoded layer of `text`, up to `MAX_ROUNDS`; nothing for text without escapes."""
    if not may_hide(text):
        return
    below: View | None = None
    current = text
    for _ in range(MAX_ROUNDS):
        view = decode(current, below)
        if view is None or view.text == current:
            return
        yield view
        if not may_hide(view.text):
            return
        below, current = view, view.text
