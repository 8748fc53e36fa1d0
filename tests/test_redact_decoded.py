"""Secrets inside encoded or escaped text: every value of the secret corpus (tests/test_redact.py),
after every encoding tools print (URL-encoded up to four times and as `%uXXXX`, JSON-escaped once or
twice, C octal and `\\U` escapes, HTML-escaped with or without `;`, terminal colours raw and
JSON-escaped, backspace overstrike, invisible characters inside words, compatibility look-alikes,
backslash continuations and terminal line wraps) and in the middle of long text, never survives:
on the redactor itself, through `urchin ingest`, and through a Claude hook whose response is a dict.

"Survives" means any 8 characters of the secret in a row, in the redacted text once the test's own
decoder (`_reveal`, independent of the redactor) has undone every encoding; the rule is
`urchin.redact._decoded`.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote

import orjson
import pytest

from tests.conftest import run_urchin
from tests.test_redact import CASES
from urchin.redact import redact_text
from urchin.redact._decoded import views

_FILLER = "The follower resumes from the stored byte offset; tests passed: 42, skipped: 1.\n" * 16


def _url(text: str) -> str:
    return quote(text, safe="")


def _separators(text: str, equals: str, colon: str, space: str) -> str:
    return text.replace(": ", colon).replace("=", equals).replace(" ", space)


# Invisible characters a token may carry inside: soft hyphen, zero-width, invisible separator,
# grapheme joiner, Mongolian vowel separator, word joiner, a tag character.
_INVISIBLE = "\u00ad\u200b\u2063\u034f\u180e\u2060\U000e0020"
_ANSI = "\x1b[01;31m\x1b[K"


def _ansi(text: str) -> str:
    """grep --color: the match coloured, values after a separator too."""
    return "\x1b[32m" + text.replace("=", "=" + _ANSI).replace(": ", ": \x1b[1m") + "\x1b[m\x1b[K"


def _invisible(text: str) -> str:
    return "".join(c + (_INVISIBLE[i % 7] if i % 5 == 4 and c.isalnum() else "") for i, c in enumerate(text))


def _wrap(text: str, width: int = 23) -> str:
    """A terminal `width` columns wide: every long line cut, wherever the cut falls."""
    return "\n".join(line[i:i + width] for line in text.split("\n") for i in range(0, max(len(line), 1), width))


# Each: the whole text as a tool may print it.
WHOLE: dict[str, Callable[[str], str]] = {
    "url": _url,
    "url twice": lambda t: _url(_url(t)),
    "json": lambda t: json.dumps(t),
    "json twice": lambda t: json.dumps(json.dumps(t)),
    "json \\u0022": lambda t: json.dumps(t, ensure_ascii=True).replace('\\"', "\\u0022"),
    "html": lambda t: html.escape(t),
    "html numeric": lambda t: t.replace('"', "&#34;").replace("=", "&#61;").replace(":", "&#x3A;"),
    "html in json": lambda t: json.dumps(html.escape(t)),
    "nbsp": lambda t: _separators(t, "=", ":\u00a0", "\u00a0"),
    "full-width": lambda t: _separators(t, "\uff1d", "\uff1a ", " "),
    "continuation": lambda t: t.replace("=", "=\\\n    ").replace(": ", ": \\\n    "),
    "url 4 times": lambda t: _url(_url(_url(_url(t)))),
    "%u": lambda t: "".join(f"%u{ord(c):04X}" for c in t),
    "octal": lambda t: "".join(f"\\{ord(c):03o}" for c in t),
    "octal separators": lambda t: re.sub(r"[^A-Za-z0-9_]", lambda m: f"\\{ord(m.group()):03o}", t),
    "\\U": lambda t: re.sub(r"[=:\"' ]", lambda m: f"\\U{ord(m.group()):08X}", t),
    "html no ;": lambda t: "".join(f"&#{ord(c)}" for c in t),
    "html named no ;": lambda t: t.replace('"', "&quot").replace("=", "&#61"),
    "ansi": _ansi,
    "ansi in json": lambda t: json.dumps(_ansi(t)),
    "overstrike": lambda t: "".join(c + "\b" + c for c in t),
    "invisible inside": _invisible,
    "nfkc look-alikes": lambda t: t.translate({ord("="): "\u207c", ord(":"): "\ufe55", ord(" "): "\u2002"}),
}
# Each: what may stand right before a bare token (then the token, then the closing form).
BEFORE = ["%3D", "%22", "%20", "%26", "%253D", "\\u0022", "\\n", "\\\\n", "\\t", "&quot;", "&#61;", "&#x3D;",
          "\u00a0", "\uff1d", "\u200b", "\\\n", _ANSI, "\x1b[0m", "\\u001b[32m", "\\\\u001b[32m", "\\042",
          "%u0022", "\\U00000022", "&#34", "&quot", "0x22", "%2525253D", "\\\\\\\\n", "\\\r", "\u2063",
          "\U000e0041"]
# Each: the secret cut by a terminal line wrap (after so many characters), or with an invisible
# character inside.
INSIDE = [lambda s: s[:10] + "\n" + s[10:], lambda s: s[:6] + "\n" + s[6:], lambda s: s[:12] + "\\\r" + s[12:],
          *(lambda s, c=c: s[:9] + c + s[9:] for c in _INVISIBLE)]


_TEMPLATES = "\n".join(t for t, _, _ in CASES)


def _fragments(secret: str) -> list[str]:
    """8 characters in a row of the secret, but not those its setting holds too (`Credenti…`)."""
    return [f for i in range(len(secret) - 7) if (f := secret[i:i + 8]) not in _TEMPLATES]


_REVEAL = (
    (re.compile(r"%u([0-9A-Fa-f]{4})"), lambda m: chr(int(m.group(1), 16))),
    (re.compile(r"\\U([0-9A-Fa-f]{8})|\\u([0-9A-Fa-f]{4})"), lambda m: chr(int(m.group(1) or m.group(2), 16))),
    (re.compile(r"\\([0-7]{3})"), lambda m: chr(int(m.group(1), 8))),
    (re.compile(r"\\\\"), lambda m: "\\"),
    (re.compile(r"\\[nt]|\\\r|\\\n *"), lambda m: {"\\n": "\n", "\\t": "\t"}.get(m.group(), "")),
    (re.compile(r"\x1b\[[0-9;]*[A-Za-z]|.\x08"), lambda m: ""),
)


def _reveal(text: str) -> str:
    """What a reader recovers from `text`, by other means than the redactor's: every encoding of
    this file undone, repeatedly."""
    for _ in range(6):
        new = html.unescape(unquote(text))
        for pattern, repl in _REVEAL:
            new = pattern.sub(repl, new)
        if not new.isascii():
            new = "".join(c for c in unicodedata.normalize("NFKC", new)
                          if unicodedata.category(c) != "Cf" and c not in "\u034f\u180e")
        if new == text:
            break
        text = new
    return text


def _survivors(text: str, secret: str, revealed: bool = False) -> list[str]:
    text = text if revealed else _reveal(text)
    return [f for f in _fragments(secret) if f in text]


def _bare(secret: str) -> bool:
    """Is the secret recognised with no label, between spaces (a prefixed token, a JWT, a PEM)?"""
    return not _survivors(redact_text(f"see {secret} now")[0], secret)


BARE = sorted({s for _, s, _ in CASES if _bare(s)})
PLAIN = [t.format(s=s) for t, s, _ in CASES]


@pytest.mark.parametrize("encoding", list(WHOLE))
def test_no_secret_survives_an_encoded_text(encoding: str) -> None:
    leaks = []
    for (template, secret, _), plain in zip(CASES, PLAIN, strict=True):
        encoded = WHOLE[encoding](plain)
        for text in (encoded, _FILLER + encoded + "\n" + _FILLER):  # short, and long (> 1 KiB) text
            redacted, counts = redact_text(text)
            if _survivors(redacted, secret) or not counts:
                leaks.append((template, len(text), _survivors(redacted, secret)[:1]))
    assert not leaks, f"{len(leaks)} of {2 * len(CASES)} leaked, first: {leaks[:3]}"


def test_no_token_survives_right_after_an_escape() -> None:
    # GitHub (5 + PAT), Anthropic, OpenAI (2), sk-, AWS (2), Google, Slack (2), Stripe (3), JWT, PEM (3)
    assert len(BARE) >= 20
    leaks = []
    for before, secret in ((b, s) for b in BEFORE for s in BARE):
        for text in (f"curl 'https://sso.example.com/login?next=%2Fapi%3Fkey{before}{secret}%26p%3D2'",
                     f'{{"out": "done{before}{secret}{before}ok"}}', _FILLER + "x" + before + secret + "\n" + _FILLER):
            if _survivors(redact_text(text)[0], secret):
                leaks.append((before, secret[:4], text[:60]))
    assert not leaks, f"{len(leaks)} leaked, first: {leaks[:3]}"


def test_no_token_survives_a_wrap_or_an_invisible_character_inside() -> None:
    leaks = []
    for inside, secret in ((f, s) for f in INSIDE for s in BARE if not s.startswith("-----")):
        for text in (f"token {inside(secret)}\nok", _FILLER + inside(secret) + " done\n" + _FILLER):
            if _survivors(redact_text(text)[0].replace("\n", ""), secret):
                leaks.append((repr(inside(secret)[:14]), text[:40]))
    assert not leaks, f"{len(leaks)} leaked, first: {leaks[:3]}"


def test_a_wrapped_long_line_keeps_no_secret() -> None:
    # A narrow terminal cuts every line, labelled values and tokens alike, wherever the cut falls.
    leaks = []
    for secret in (s for s in BARE if not s.startswith("-----")):
        redacted = redact_text(_wrap(f"echo {secret} | gh auth login --with-token"))[0]
        if _survivors(redacted.replace("\n", ""), secret):
            leaks.append(secret[:4])
    assert not leaks


def test_a_wrap_joins_no_ordinary_next_line() -> None:
    text = "token: " + BARE[0] + "\nDone in 2s\n# sk-learn\ntask-runner-abcdefghijklmnopqrstuvwxyz0123 ok"
    assert redact_text(text)[0].endswith("\nDone in 2s\n# sk-learn\ntask-runner-abcdefghijklmnopqrstuvwxyz0123 ok")


def test_a_view_maps_back_to_whole_escapes() -> None:
    text = "a%3Dghp_x%2526b\\\\u0022c&quot;d\u00a0e\uff1df\\\nz"
    layers = views(text)
    assert layers[3].text == 'a=ghp_x%26b\\u0022c"d e=fz'  # round one: URL, backslash, HTML, look-alike
    second = layers[-1]
    assert second.text == 'a=ghp_x&b"c"d e=fz'
    assert [text[slice(*second.to_original(i, i + 1))] for i in range(len(second.text))] == [
        "a", "%3D", "g", "h", "p", "_", "x", "%2526", "b", "\\\\u0022", "c", "&quot;", "d", "\u00a0", "e",
        "\uff1d", "f", "z"]


def test_plain_text_has_no_view() -> None:
    assert list(views("plain ascii text with = and : and \"quotes\"")) == []
    assert list(views("100% sure & done \\ here")) == []  # trigger characters, but no escape


def test_what_a_view_finds_is_counted_and_redacting_again_changes_nothing() -> None:
    text = "\n".join(WHOLE["url twice"](p) + " " + WHOLE["json twice"](p) for p in PLAIN)
    once, counts = redact_text(text)
    assert sum(counts.values()) >= len(CASES)
    assert redact_text(once) == (once, {})


def _journal_bytes(home: Path) -> bytes:
    return (home / "journal" / "events.jsonl").read_bytes()


def _assert_clean(data: bytes) -> None:
    text = _reveal(data.decode())
    leaked = {secret[:4]: hits for _, secret, _ in CASES if (hits := _survivors(text, secret, revealed=True))}
    assert not leaked, f"fragments on disk: {leaked}"


def test_urchin_ingest_stores_no_encoded_secret(urchin_home: Path) -> None:
    # Every encoding of every case, packed into few events (each under the soft cap: nothing is cut).
    pieces = [WHOLE[name](plain) for name in WHOLE for plain in PLAIN]
    pieces += [f"next=%2Fapi%3Fkey{before}{secret}%26p%3D2" for before in BEFORE for secret in BARE]
    batches, batch = [], ""
    for piece in pieces:
        if len(batch) + len(piece) > 60_000:
            batches.append(batch)
            batch = ""
        batch += piece + "\n"
    batches.append(batch)
    done = run_urchin("ingest", "-", "--source", "shell", input=batches[0])  # the command of the issue
    assert done.returncode == 0, done.stderr
    # The rest in one process: the same write path, a fraction of the start-up time.
    lines = b"\n".join(orjson.dumps({"content": content, "source": "shell"}) for content in batches[1:])
    done = run_urchin("import", "-", input=lines)
    assert done.returncode == 0, done.stderr
    _assert_clean(_journal_bytes(urchin_home))
    assert all(b'"redactions"' in line for line in _journal_bytes(urchin_home).splitlines())


def test_a_claude_hook_with_a_dict_response_stores_no_secret(urchin_home: Path) -> None:
    # The response has no stdout or content key: it is kept as JSON, newlines become `\n` text, and
    # a nested JSON string escapes them twice (`\\n`, `\\"`).
    log = "\n".join(PLAIN)
    payload = {"session_id": "s-1", "hook_event_name": "PostToolUse", "cwd": "/home/dev/shop",
               "tool_name": "mcp__ci__logs", "tool_use_id": "toolu_1", "tool_input": {"job": 7},
               "tool_response": {"log": log, "nested": json.dumps({"log": log}), "ok": True,
                                 "coloured": "\n".join(f"\x1b[32m{s}\x1b[0m" for s in BARE)}}
    done = run_urchin("hook", "claude", input=orjson.dumps(payload))
    assert done.returncode == 0, done.stderr
    data = _journal_bytes(urchin_home)
    assert len(data.splitlines()) == 1 and b"\\\\n" in data  # it was escaped twice on the way
    assert b"\\u001b[32m" in data  # and the colours JSON-escaped
    _assert_clean(data)
