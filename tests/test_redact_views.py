"""Secrets inside encoded or escaped text: every value of the secret corpus (tests/test_redact.py),
after every encoding tools print (URL-encoded once or twice, JSON-escaped once or twice, HTML-escaped,
look-alike separators, backslash continuations) and in the middle of long text, never survives:
on the redactor itself, through `urchin ingest`, and through a Claude hook whose response is a dict.

"Survives" means any 8 characters of the secret in a row; the rule is `urchin.redact._views`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest

from tests.conftest import run_urchin
from tests.test_redact import CASES
from urchin.redact import redact_text
from urchin.redact._views import views

_FILLER = "The follower resumes from the stored byte offset; tests passed: 42, skipped: 1.\n" * 16


def _url(text: str) -> str:
    return quote(text, safe="")


def _separators(text: str, equals: str, colon: str, space: str) -> str:
    return text.replace(": ", colon).replace("=", equals).replace(" ", space)


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
}
# Each: what may stand right before a bare token (then the token, then the closing form).
BEFORE = ["%3D", "%22", "%20", "%26", "%253D", "\\u0022", "\\n", "\\\\n", "\\t", "&quot;", "&#61;", "&#x3D;",
          "\u00a0", "\uff1d", "\u200b", "\\\n"]


_TEMPLATES = "\n".join(t for t, _, _ in CASES)


def _fragments(secret: str) -> list[str]:
    """8 characters in a row of the secret, but not those its setting holds too (`Credenti…`)."""
    return [f for i in range(len(secret) - 7) if (f := secret[i:i + 8]) not in _TEMPLATES]


def _survivors(text: str, secret: str) -> list[str]:
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


def test_a_view_maps_back_to_whole_escapes() -> None:
    text = "a%3Dghp_x%2526b\\\\u0022c&quot;d\u00a0e\uff1df\\\nz"
    [first, second] = list(views(text))
    assert first.text == 'a=ghp_x%26b\\u0022c"d e=fz'
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
    text = data.decode()
    leaked = {secret[:4]: hits for _, secret, _ in CASES if (hits := _survivors(text, secret))}
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
    for content in batches:
        done = run_urchin("ingest", "-", "--source", "shell", input=content)
        assert done.returncode == 0, done.stderr
    _assert_clean(_journal_bytes(urchin_home))
    assert all(b'"redactions"' in line for line in _journal_bytes(urchin_home).splitlines())


def test_a_claude_hook_with_a_dict_response_stores_no_secret(urchin_home: Path) -> None:
    # The response has no stdout or content key: it is kept as JSON, newlines become `\n` text, and
    # a nested JSON string escapes them twice (`\\n`, `\\"`).
    log = "\n".join(PLAIN)
    payload = {"session_id": "s-1", "hook_event_name": "PostToolUse", "cwd": "/home/dev/shop",
               "tool_name": "mcp__ci__logs", "tool_use_id": "toolu_1", "tool_input": {"job": 7},
               "tool_response": {"log": log, "nested": json.dumps({"log": log}), "ok": True}}
    done = run_urchin("hook", "claude", input=orjson.dumps(payload))
    assert done.returncode == 0, done.stderr
    data = _journal_bytes(urchin_home)
    assert len(data.splitlines()) == 1 and b"\\\\n" in data  # it was escaped twice on the way
    _assert_clean(data)
