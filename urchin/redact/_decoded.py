"""Decoded views of a text, so secrets are found in text as tools print it.

Tool output is often URL-encoded (`%3D`, `%u003D`, four times: `%2525253D`), JSON- or C-escaped
(`\\n`, `\\u0022`, `\\U00000022`, octal `\\042`, twice: `\\\\n`), HTML-escaped (`&quot;`, `&#61;`, and
without the `;` browsers forgive: `&#61`, `&quot`), coloured (terminal escape sequences, backspace
overstrike), wrapped (backslash continuations, a terminal line wrap inside a token), or written with
look-alikes (a non-breaking space, `＝`, `⁼`, a soft hyphen or another invisible character inside a
word). `views` returns each decoded layer with a map back to the original text and the windows of it
that changed; the redactor scans those windows and widens what it finds to whole escapes of the
original: a false positive on a boundary rather than a leak. Plain text costs a few `in` checks.
"""

from __future__ import annotations

import html
import html.entities
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import lru_cache
from itertools import accumulate
from typing import Any, Protocol

__all__ = ["MAX_ROUNDS", "DecodedLayer", "decode", "may_hide", "scans", "views"]

# Decode while a round still changes the text, up to this many rounds (`%25` four times over, then
# `\\u0022`) and this many characters decoded in all per character of the text: bounded work.
MAX_ROUNDS = 6
MAX_WORK = 8
WINDOW = 1200  # a key, its separator and a 1 KiB value around a changed character; see `DecodedLayer.windows`
TOKEN_EDGE = re.compile(r"\S{0,16384}")  # a window reaches the ends of the tokens at its edges
# Decoded escapes that change no rule's match by themselves, only make escapes of the next round.
_INERT = frozenset(("%", "\\", "&"))
_EDGED = frozenset("es")  # ... unless a token that wants a word edge before it follows (`eyJ`, a bare `sk-`)

# Prefixed tokens a terminal may wrap, and the length after the prefix at which each is whole (or,
# without a fixed length, recognised at all): see `_wrapped`. The next line must start with the rest
# of a token only (not a key: `ANTHROPIC_MODEL=…` follows a key on a line of its own).
_WRAPPED = {"ghp_": 36, "gho_": 36, "ghu_": 36, "ghs_": 36, "ghr_": 36, "github_pat_": 82, "AKIA": 16,
            "ASIA": 16, "AIza": 35, "xoxa-": 10, "xoxb-": 10, "xoxp-": 10, "xoxo-": 10, "xoxs-": 10,
            "xoxr-": 10, "sk-ant-": 20, "sk-proj-": 20, "sk-svcacct-": 20, "sk-admin-": 20, "sk-": 20,
            "sk_live_": 16, "sk_test_": 16, "rk_live_": 16, "rk_test_": 16, "eyJ": 8}
_PARTS = sorted({p[:n] for p in _WRAPPED for n in range(3 if p[:3] != "git" else 6, len(p) + 1)}, key=len, reverse=True)
# The line may end inside the prefix itself (`github_pa` then `t_…`) once three characters of it
# (six of `github_pat_`) are on the first line: fewer are words (`git`, `sk`).
_GATE = tuple(sorted({p[:3] if p[:3] != "git" else p[:6] for p in _PARTS}))
# Every part is its gate and then token characters, which the possessive run takes anyway: a match
# from a part is the same match from its gate, so the regex names the gates only (an alternation of
# every part, tried at each `s`, `e`, `g` of the text, cost ~0.4 us a character).
_WRAP_TAIL = r"[A-Za-z0-9_.-]*+(?:\r\n?|\n)[A-Za-z0-9_.-]++)(?=[\s\"'`,;)\]}>]|\Z)"
_WRAP = re.compile(r"((?:" + "|".join(map(re.escape, _GATE)) + r")" + _WRAP_TAIL)
# `_WRAP` searched as is costs the square of a run: at each gate of a long run (`ghpghpghp…`) the
# possessive run goes to its end and finds no line end. Every gate of one run ends where the run does,
# so all match or none does: only the runs that end a line are looked at (each once, from its start),
# and `_WRAP` is tried at the first gate of each. Same matches as `_WRAP.finditer`, in linear time.
_LINE_END_RUN = re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]++(?=[\r\n])")
_GATE_AT = re.compile("|".join(map(re.escape, _GATE)))
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_.-]*+")
_LINE_ENDS = ("\r", "\n")
_FEW = 8  # gate occurrences `_wrap_gate` tries one by one before it scans the whole text
_GH_GATES = tuple(g for g in _GATE if g.startswith("gh"))
_A_GATES = tuple(g for g in _GATE if g.startswith("A"))
_K_GATES = tuple(g for g in _GATE if g.endswith("k_"))
_OTHER_GATES = tuple(g for g in _GATE if g not in _GH_GATES + _A_GATES + _K_GATES)


def _wrap_matches(text: str) -> Iterator[re.Match[str]]:
    done = 0
    for run in _LINE_END_RUN.finditer(text):
        if run.start() < done:
            continue
        gate = _GATE_AT.search(text, run.start(), run.end())
        if gate is not None:
            found = _WRAP.match(text, gate.start())
            if found is not None:
                done = found.end()
                yield found


class _WrapSplit:
    """`_WRAP.split(text)` (the pieces `decode` wants), found by `_wrap_matches`."""

    def split(self, text: str) -> list[str]:
        pieces: list[str] = []
        at = 0
        for found in _wrap_matches(text):
            pieces += [text[at:found.start()], found.group(1)]
            at = found.end()
        pieces.append(text[at:])
        return pieces


_WRAP_SPLIT = _WrapSplit()
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_LEGACY = "|".join(sorted((k for k in html.entities.html5 if not k.endswith(";")), key=len, reverse=True))
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "e": "\x1b", '"': '"', "'": "'",
           "\\": "\\", "/": "/"}
# Not compatibility forms in Unicode's sense, but read as ASCII punctuation all the same.
_LOOK_ALIKES = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2236": ":",
                "\ua789": ":", "\u2028": "\n", "\u2029": "\n", "\x85": "\n"}
# Invisible but not of category Cf: a grapheme joiner, variation selectors, Hangul fillers.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0" + "".join(map(chr, range(0xFE00, 0xFE10))))


def _hex(digits: str) -> str:
    code = int(digits, 16)
    return chr(code) if code <= 0x10FFFF else ""


@lru_cache(maxsize=8192)
def _decoded(escape: str) -> str:
    head = escape[0]
    if head == "%":
        if escape[1] in "uU":
            return _hex(escape[2:])
        data = bytes.fromhex(escape.replace("%", ""))
        try:
            return data.decode()  # `%C2%A0` is one character of UTF-8
        except UnicodeDecodeError:
            return data.decode("latin-1")
    if head == "\\":
        second = escape[1]
        if second in "uUx":
            return _hex(escape[2:].strip("{}"))
        if second in "01234567":
            return chr(int(escape[1:], 8))
        return _SIMPLE.get(second, "")  # otherwise a line continuation: the lines join
    if head == "&":
        return html.unescape(escape)
    return _look_alike(head)


def _look_alike(char: str) -> str:
    if char in _LOOK_ALIKES:
        return _LOOK_ALIKES[char]
    if char in _INVISIBLE or unicodedata.category(char) == "Cf" or 0xE0000 <= ord(char) <= 0xE0FFF:
        return ""  # a soft hyphen, a zero-width or tag character: may sit inside a token
    return unicodedata.normalize("NFKC", char)  # `＝` is `=`, `⁼` is `=`, `𝐩` is `p`, NBSP a space


@lru_cache(maxsize=1)
def _look_alike_set() -> frozenset[str]:
    """Every character `_look_alike` reads as ASCII or as nothing (built once, on the first
    non-ASCII text: ~0.1 s). Other non-ASCII text (CJK, Cyrillic, accents) is left alone."""
    ranges = (range(0x80, 0x10000), range(0x1D400, 0x1D800), range(0x1F100, 0x1F200), range(0xE0000, 0xE1000))
    chars = []
    for code in (c for r in ranges for c in r):
        char = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        mapped = _look_alike(char)
        if mapped != char and mapped.isascii():
            chars.append(char)
    return frozenset(chars)


def _look_alike_gate(text: str) -> bool:
    """Does `text` hold a look-alike? Exact, and cheap on ASCII text with a few other characters:
    only its non-ASCII runs are looked up (the regex over every look-alike, about 5,600 characters
    mostly outside the BMP, cost ~0.6 us a character of any text)."""
    return not text.isascii() and not _look_alike_set().isdisjoint("".join(_NON_ASCII.findall(text)))


def _look_alikes(text: str) -> re.Pattern[str]:
    """A pattern for the look-alikes `text` holds (the same splits as one over all of them)."""
    present = _look_alike_set().intersection("".join(_NON_ASCII.findall(text)))
    return _char_class(frozenset(present) if len(present) <= 256 else _look_alike_set())


@lru_cache(maxsize=256)
def _char_class(chars: frozenset[str]) -> re.Pattern[str]:
    spans: list[list[int]] = []
    for code in sorted(map(ord, chars)):
        if spans and spans[-1][1] == code - 1:
            spans[-1][1] = code
        else:
            spans.append([code, code])
    return re.compile("([" + "".join(f"{chr(a)}-{chr(b)}" if b > a else re.escape(chr(a)) for a, b in spans) + "])")


def _wrapped(escape: str) -> str:
    """A line ending in a token, then the start of the next line: joined when the first part is
    too short to be the whole token, or the second looks random (letters and digits) rather than a
    word (`ghp_…` then `Done`). A bare `sk-` joins only with a digit before the cut (`# sk-learn`)."""
    cut = escape.index("\n") if "\n" in escape else escape.index("\r")
    run, tail = escape[:cut].rstrip("\r"), escape[cut + 1:]
    joined = run + tail
    for prefix, whole in _WRAPPED.items():
        if joined.startswith(prefix):
            if prefix == "sk-" and not any(c.isdigit() for c in run):
                return escape
            short = len(run) - len(prefix) < whole
            random = any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail)
            return joined if short or random or len(tail) >= 12 and not tail.isalpha() else escape
    return escape


def _wrap_gate(text: str) -> bool:
    if "\n" not in text and "\r" not in text:
        return False
    # The gates `text` holds, found by `in` checks nested under a common first one (this runs on
    # most texts); a Stripe prefix counts only with what can follow it in a key (`k_l`, `k_t`) or a
    # line end inside it, since `_wrapped` joins nothing else after `sk_`, `rk_`.
    gates = [g for g in _GH_GATES if g in text] if "gh" in text else []
    gates += [g for g in _OTHER_GATES if g in text]
    if "A" in text:
        gates += [g for g in _A_GATES if g in text]
    if "k_" in text and ("k_l" in text or "k_t" in text or "k_\n" in text or "k_\r" in text):
        gates += [g for g in _K_GATES if g in text]
    elif not gates:
        return False
    # Then exactly: does `_WRAP` match at one of them? ("throughput" holds `ghp`, and a line ends in
    # most texts.) `_WRAP` matches at a gate exactly when it matches at the first gate of the token
    # run holding it (the possessive run ends where the run does), so each run is tried once per
    # gate: a `find` and an anchored match or two per occurrence, no scan of every character. Past
    # `_FEW` occurrences (hostile text) `_wrap_matches` decides, in linear time.
    seen = 0
    for gate in gates:
        at = text.find(gate)
        while at != -1:
            seen += 1
            if seen > _FEW:
                return next(_wrap_matches(text), None) is not None
            end = _TOKEN_RUN.match(text, at).end()  # type: ignore[union-attr]  # matches ""
            if text[end:end + 1] in _LINE_ENDS and _WRAP.match(text, at) is not None:
                return True
            at = text.find(gate, end)
    return False


def _once(build: Callable[[], re.Pattern[str]]) -> Callable[[str], re.Pattern[str]]:
    """A family's pattern, the same for every text: compiled on first use."""
    cached = lru_cache(1)(build)
    return lambda text: cached()


class _Splits(Protocol):
    def split(self, string: str) -> list[Any]: ...


_Family = tuple[Callable[[str], bool], Callable[[str], _Splits], Callable[[str], str]]
# One family of escapes per pattern (for a given text), each behind a cheap gate and starting with a
# literal where it can (`re` then skips ahead fast). One group around each: `split` keeps the escapes. The order matters
# within a round: `\\u001b[32m` becomes ESC in the backslash family, then goes in the terminal family.
_FAMILIES: tuple[_Family, ...] = (
    (lambda t: "%" in t, _once(lambda: re.compile(
        r"(%(?:[C-Fc-f][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){1,3}|[0-9A-Fa-f]{2}|[uU][0-9A-Fa-f]{4}))")), _decoded),
    (lambda t: "\\" in t, _once(lambda: re.compile(
        r"(\\(?:u[0-9A-Fa-f]{4}|u\{[0-9A-Fa-f]{1,6}\}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}|[0-7]{3}"
        r"|[nrtbfe\"'\\/]|(?:\r\n?|\n)[ \t]*))")), _decoded),
    (lambda t: "&" in t, _once(lambda: re.compile(
        r"(&(?:#[0-9]{1,7};?|#[xX][0-9A-Fa-f]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};|(?:" + _LEGACY + ")))")), _decoded),
    (lambda t: "\x1b" in t, _once(lambda: re.compile(
        r"(\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)|[@-Z\\-_]))")), lambda e: ""),
    (lambda t: "\b" in t, _once(lambda: re.compile(r"([^\b]\x08)")), lambda e: ""),  # overstrike
    (_look_alike_gate, _look_alikes, _decoded),
    (_wrap_gate, lambda t: _WRAP_SPLIT, _wrapped),
)


def may_hide(text: str) -> bool:
    """Can `text` hold an escape or a look-alike at all? (`in` checks: plain text costs ~nothing)."""
    return ("%" in text or "\\" in text or "&" in text or "\x1b" in text or "\b" in text
            or _look_alike_gate(text) or _wrap_gate(text))


class DecodedLayer:
    """One decoded layer of the layer below (the original text, or another view), with a map back.

    The map is built on first use: most views hold no secret, and a hostile text may hold a million
    escapes (decoding them costs one C-level split and a cached lookup each)."""

    __slots__ = ("text", "_pieces", "_escapes", "_below", "_inner", "_outer")

    def __init__(self, text: str, pieces: list[str], escapes: list[str], below: DecodedLayer | None) -> None:
        self.text = text
        self._pieces = pieces    # literal, decoded escape, literal, ...: `text` is their join
        self._escapes = escapes  # each escape as written in the layer below
        self._below = below
        self._inner: list[int] = []
        self._outer: list[int] = []

    def _build(self) -> None:
        if not self._inner:
            below = self._pieces.copy()
            below[1::2] = self._escapes
            self._inner = list(accumulate(map(len, self._pieces), initial=0))
            self._outer = list(accumulate(map(len, below), initial=0))

    def windows(self) -> list[tuple[int, int]]:
        """The parts of `text` where a rule can match otherwise than in the layer below: around each
        escape whose decoding is more than a `%`, `\\` or `&` for the next round, `WINDOW` wide and
        out to the ends of the tokens there. A secret that needs no such escape was found below."""
        text, pieces = self.text, self._pieces
        decoded = pieces[1::2]
        inert = decoded.count("%") + decoded.count("\\") + decoded.count("&")  # C-level counts
        if inert == len(decoded) and not any(c + e in text for c in _INERT for e in _EDGED):
            return []  # `%252525` one round down: nothing for a rule yet
        if (len(decoded) - inert) * WINDOW >= len(text):
            return [(0, len(text))]  # dense: windows would cover it all anyway
        self._build()
        inner, escapes = self._inner, self._escapes
        merged: list[list[int]] = []
        for k in range(1, len(pieces), 2):
            after = text[inner[k + 1]:inner[k + 1] + 1]
            if pieces[k] == escapes[k // 2] or pieces[k] in _INERT and after not in _EDGED:
                continue
            start, end = inner[k] - WINDOW, inner[k + 1] + WINDOW
            if merged and start <= merged[-1][1]:
                merged[-1][1] = end
            else:
                merged.append([start, end])
        spans: list[tuple[int, int]] = []
        for start, end in merged:
            start = _token_start(text, max(0, start))
            end = TOKEN_EDGE.match(text, min(end, len(text))).end()  # type: ignore[union-attr]  # matches ""
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        return spans

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that `text[start:end]` was decoded from, widened to whole
        escapes at both ends."""
        self._build()
        start, end = self._char(start)[0], self._char(end - 1)[1]
        return (start, end) if self._below is None else self._below.to_original(start, end)

    def _char(self, pos: int) -> tuple[int, int]:
        """The span below that the character at `pos` comes from."""
        k = bisect_right(self._inner, pos) - 1  # the piece holding `pos` (pieces before it may be empty)
        if k % 2:
            return self._outer[k], self._outer[k + 1]
        below = self._outer[k] + pos - self._inner[k]
        return below, below + 1


def _token_start(text: str, start: int) -> int:
    lo = max(0, start - 16384)
    edge = max(text.rfind(" ", lo, start), text.rfind("\n", lo, start), text.rfind("\t", lo, start))
    return edge + 1 if edge >= 0 or not lo else lo


def decode(text: str, below: DecodedLayer | None = None) -> list[DecodedLayer]:
    """One layer of every family of escapes decoded, each family a layer of its own so the map
    stays exact (none when `text` has no escape)."""
    out: list[DecodedLayer] = []
    for gate, pattern, decoded in _FAMILIES:
        if gate(text):
            pieces = pattern(text).split(text)
            if len(pieces) > 1:
                escapes = pieces[1::2]
                pieces[1::2] = map(decoded, escapes)
                joined = "".join(pieces)
                if joined != text:
                    text = joined
                    below = DecodedLayer(text, pieces, escapes, below)
                    out.append(below)
    return out


def views(text: str) -> list[DecodedLayer]:
    """Each decoded layer of `text`, while a round still changes it: up to `MAX_ROUNDS` rounds and
    `MAX_WORK` characters decoded per character of `text`; none for text without escapes."""
    return [layer for layers in _rounds(text) for layer in layers]


def scans(text: str) -> list[tuple[DecodedLayer, list[tuple[int, int]]]]:
    """What the rules must read beyond `text`: each view and its windows. A round that changed most
    of the text is read once, whole, in its last layer (which holds every family's decoding)."""
    out: list[tuple[DecodedLayer, list[tuple[int, int]]]] = []
    for layers in _rounds(text):
        windows = [layer.windows() for layer in layers]
        if any(w == [(0, len(layer.text))] for w, layer in zip(windows, layers, strict=True)):
            out.append((layers[-1], [(0, len(layers[-1].text))]))
        else:
            out.extend((layer, w) for layer, w in zip(layers, windows, strict=True) if w)
    return out


def _rounds(text: str) -> list[list[DecodedLayer]]:
    out: list[list[DecodedLayer]] = []
    budget = MAX_WORK * len(text) + 4096
    current = text
    for _ in range(MAX_ROUNDS):
        if budget <= 0 or not may_hide(current):
            break
        layers = decode(current, out[-1][-1] if out else None)
        if not layers:
            break
        out.append(layers)
        current = layers[-1].text
        budget -= sum(len(layer.text) for layer in layers)
    return out
