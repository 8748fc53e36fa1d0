"""The redactor's decoded views cost nothing on text that cannot hold an escape (issue 34: redacting
more must not cost the ingest targets), and skipping them is a proof, not a guess.

Rule: `may_hide(text)` (whether the views are built at all) is true exactly when some family of
escapes can match: one of `%`, `\\`, `&`, ESC, backspace, or a look-alike character, or a token a
terminal wrapped (the wrap family's regex matches). Non-ASCII text without a look-alike (`café`,
`日本語`, an emoji) is plain, and so is a line that ends in a word holding a token's prefix
(`throughput` holds `ghp`) unless a token starts the next line. Checked here against
reference patterns written the long way (every look-alike character; every part of every prefix).
"""

from __future__ import annotations

import random
import re
from functools import cache

from urchin.redact._decoded import _PARTS, _look_alike, may_hide

_SINGLE = ("%", "\\", "&", "\x1b", "\b")   # families gated by one character: `in` is already exact
# Pieces of text: prefixes and their parts, token characters, line ends, delimiters, plain non-ASCII
# and look-alikes (NBSP, a ligature, the Kelvin sign, full-width `=`, a math letter, a tag, a ZWSP).
_ATOMS = ("ghp_", "gho", "ghr", "gh", "github_pa", "github_pat_", "t_", "xoxb-", "xox", "sk-", "sk-ant-", "sk_live_",
          "sk_", "rk_test_", "AKIA", "ASI", "AIza", "eyJ", "throughput", "abc123", "Z9", "x", "\n", "\r\n", "\r",
          " ", "\t", '"', "'", ",", ")", "]", ".", "-", "_", "=", "token", "café", "日本語", "Ελληνικά", "🚀", "ü",
          "\u00a0", "ﬁ", "\u212a", "＝", "\U0001d429", "\U000e0041", "\u200b", "\u2028", "’")


@cache
def _look_alikes() -> frozenset[str]:
    codes = (*range(0x80, 0xD800), *range(0xE000, 0x10000), *range(0x1D400, 0x1D800), *range(0x1F100, 0x1F200),
             *range(0xE0000, 0xE1000))
    return frozenset(c for c in map(chr, codes) if _look_alike(c) != c and _look_alike(c).isascii())


# The wrap family's pattern with every part of every prefix spelled out, as it was first written.
_WRAP_LONG = re.compile(r"((?:" + "|".join(map(re.escape, _PARTS)) + r")[A-Za-z0-9_.-]*+(?:\r\n?|\n)[A-Za-z0-9_.-]++)"
                        r"(?=[\s\"'`,;)\]}>]|\Z)")


def _can_hide(text: str) -> bool:
    return (any(c in text for c in _SINGLE) or not _look_alikes().isdisjoint(text)
            or _WRAP_LONG.search(text) is not None)


def _texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ATOMS) for _ in range(rng.randint(1, 40))) for _ in range(count)]


def test_views_are_skipped_exactly_when_no_family_can_match() -> None:
    texts = _texts(4000, 34) + ["Throughput\nstays flat, café ✅", "ghp_abc\nDEF123 next", "AKIAIOSFODNN\n7EXAMPLE",
                                "sk-proj-12\nabcd", "key\u00a0= v", "日本語のテキスト\n", "emoji ✅ 🚀\nthroughput\n"]
    wrong = [t for t in texts if may_hide(t) != _can_hide(t)]
    assert not wrong, f"{len(wrong)} texts misjudged, e.g. {wrong[:3]!r}"


def test_plain_text_with_other_characters_is_plain() -> None:
    for text in ("naïve café, Größe: 12 — 日本語のテキスト, emoji ✅ 🚀", "benchmark throughput\n  rose 3x\n",
                 "see ghp docs\nnext line", "İstanbul\nσίσυφος throughput\n"):
        assert not may_hide(text), text



def test_wrapped_tokens_are_found_as_the_regex_finds_them_in_linear_time() -> None:
    """The wrap family searched as one regex costs the square of a run (`ghpghp…` after a line end:
    60 KB took 2.2 s, a 1 MB event minutes, stalling every event behind it). It is found by the runs
    that end a line instead: the same pieces as `_WRAP.split`, on texts built to wrap and not, and a
    hostile 900 KB run in well under a second."""
    import time

    from urchin.redact import Redactor
    from urchin.redact._decoded import _WRAP, _WRAP_SPLIT

    rng = random.Random(3434)
    for _ in range(4000):
        text = "".join(rng.choice(_ATOMS) for _ in range(rng.randint(1, 40)))
        assert _WRAP_SPLIT.split(text) == _WRAP.split(text), repr(text)
    redactor = Redactor()
    for hostile in ("x\ny " + "ghp" * 300_000, "ghp_" + "a" * 900_000 + "\n", ("sk-1 " * 4 + "\n") * 100_000):
        started = time.process_time()
        redactor.redact_text(hostile)
        assert time.process_time() - started < 3, "a hostile run costs the square of its length again"


def test_wrap_gate_never_skips_a_join_the_wrap_family_would_make() -> None:
    """The wrap gate tries each prefix found with a `find` and anchored matches (a few of them,
    then the linear scan): on texts dense with prefixes, line ends and near-misses, whenever it
    says no, decoding the wrap family changes nothing; and it says yes only where `_WRAP` matches."""
    from urchin.redact._decoded import _FEW, _WRAP, _wrap_gate, _wrapped

    rng = random.Random(3435)
    atoms = ("ghp_", "ghp", "throughput", "github_pat_", "xoxb-", "sk-", "sk-proj-", "sk_", "sk_live_", "k_t", "rk_",
             "AKIA", "ASI", "AIza", "eyJ", "Ab9", "x", "-", ".", "_", "\n", "\r\n", "\r", " ", '"', ")", "café")
    texts = ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 3 * _FEW + 30))) for _ in range(6000)]
    for text in texts:
        pieces = _WRAP.split(text)
        pieces[1::2] = map(_wrapped, pieces[1::2])
        if not _wrap_gate(text):
            assert "".join(pieces) == text, repr(text)
        else:
            assert _WRAP.search(text) is not None, repr(text)
