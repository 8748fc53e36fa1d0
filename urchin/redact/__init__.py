"""Secret redaction for the single write path: `[REDACTED:<type>]` in place of each secret.

`Redactor.redact_event` runs on every string of an event (id, labels, tags, actor, meta keys and
values: `_event.py`) before anything is written; `scan_text` reports masked findings for
`urchin redact --check`. Pure: no I/O (the stored id key is `_idkey.IdKey`, given by the caller).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from urchin.errors import ConfigError
from urchin.event import Event
from urchin.redact._decoded import may_hide, scans
from urchin.redact._event import MARKER, FieldRedactor, replace_spans
from urchin.redact._rules import (
    AFTER_KEY,
    AUTH_SCHEME,
    AWS_GOOGLE,
    BEARER,
    BEFORE_SEP,
    CLAUSE,
    CURL_USER,
    DASH_GATE,
    FLAG,
    GITHUB,
    JWT,
    KEY_CHARS,
    KEY_ENDINGS,
    KEY_LAST,
    KEY_WORDS,
    LETTERS,
    PEM,
    PLACEHOLDER,
    REST_OF_LINE,
    SEP,
    SHORT_TEXT,
    SK,
    SLACK,
    STRIPE,
    UNDERSCORE_GATE,
    URL_CRED,
    VALUE,
    YAML_TAIL,
    clean_left,
    keep_value,
    key_type,
    mask,
    prose,
)

__all__ = ["MARKER", "Finding", "Redactor", "redact_event", "redact_message", "redact_text", "scan_text"]


def _process_key() -> bytes:
    """Without a stored key (`IdKey`), ids holding a secret are hashed with one random key per
    process: unique and stable within it, never reversible."""
    global _PROCESS_KEY
    if _PROCESS_KEY is None:
        _PROCESS_KEY = os.urandom(32)
    return _PROCESS_KEY


_PROCESS_KEY: bytes | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One would-be redaction, safe to print: never the value, only a masked prefix."""

    type: str
    line: int
    column: int
    masked: str


Span = tuple[int, int, str]  # start, end, type


class Redactor:
    """Compiled once, reused for every event; thread-safe (its only state is a cache of clean strings)."""

    def __init__(self, extra_patterns: Mapping[str, str] | None = None, allow_patterns: Sequence[str] = (),
                 id_key: Callable[[], bytes] | None = None) -> None:
        self._extra: list[tuple[str, re.Pattern[str]]] = []
        for name, pattern in (extra_patterns or {}).items():
            if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]+", name):
                raise ConfigError(f"redact.extra: type name {name!r} must be lowercase [a-z0-9_]")
            self._extra.append((name, _compile(pattern, f"redact.extra.{name}")))
        self._allow = [_compile(p, "redact.allow") for p in allow_patterns]
        self._fields = FieldRedactor(self.spans, id_key or _process_key, plain_ids=not self._extra)

    @property
    def fingerprint(self) -> str:
        """"" with the built-in rules alone, else a short digest of the configured extra and allow
        rules: what was redacted under other rules (indexed file chunks) is redone when it changes."""
        if not self._extra and not self._allow:
            return ""
        spec = repr(([(n, p.pattern) for n, p in self._extra], [p.pattern for p in self._allow]))
        return hashlib.sha256(spec.encode("utf-8", "surrogatepass")).hexdigest()[:12]

    def describe(self) -> str:
        """The rules in force, in words (for `doctor` and the daemon's log): never a pattern's text."""
        extra = f"; extra: {', '.join(name for name, _ in self._extra)}" if self._extra else "; no extra rules"
        allow = f"; {len(self._allow)} allow pattern{'' if len(self._allow) == 1 else 's'}" if self._allow else ""
        return f"built-in rules{extra}{allow}"

    @classmethod
    def from_config(cls, section: Mapping[str, Any], id_key: Callable[[], bytes] | None = None) -> Redactor:
        """Build from the `[redact]` table: `extra = {name = "regex"}`, `allow = ["regex", ...]`."""
        if not isinstance(section, Mapping):
            raise ConfigError("redact: must be a table")
        unknown = set(section) - {"extra", "allow"}
        if unknown:
            raise ConfigError(f"redact: unknown setting {min(unknown)!r} (expected extra, allow)")
        extra = section.get("extra", {})
        allow = section.get("allow", [])
        if not isinstance(extra, Mapping) or not all(isinstance(v, str) for v in extra.values()):
            raise ConfigError("redact.extra: must be a table of name = \"regex\"")
        if not isinstance(allow, list) or not all(isinstance(v, str) for v in allow):
            raise ConfigError("redact.allow: must be a list of regex strings")
        return cls(extra, allow, id_key)

    # ---- finding spans ----------------------------------------------------------------------------
    def spans(self, text: str) -> list[Span]:
        """Secret spans in `text`, non-overlapping and sorted; allow-listed ones removed.

        The rules run on the text and on each decoded view of it (URL, JSON, C, HTML escapes, terminal
        colours, wraps and look-alikes, see `_decoded`), there only where decoding changed something;
        a span found in a view covers the escapes it came from.
        """
        found = self._rules(text)
        if may_hide(text):
            for view, windows in scans(text):
                for lo, hi in windows:
                    found.extend((*view.to_original(lo + start, lo + end), typ)
                                 for start, end, typ in self._rules(view.text[lo:hi]))
        if not found:
            return found
        return self._settle(text, found)

    def _rules(self, text: str) -> list[Span]:
        """Every rule's spans in `text` as it stands, unsorted.

        Every rule sits behind `in` checks (one-character ones are a memchr), so ordinary text
        costs a few microseconds; the regexes start with a literal so `re` skips ahead fast.
        """
        found: list[Span] = []
        add = found.append
        if "Y" in text and "PRIVATE KEY" in text:
            _each(PEM, text, "private_key", add)
        if "_" in text and UNDERSCORE_GATE.search(text):
            _underscore_rules(text, add)
        if "-" in text and DASH_GATE.search(text):
            self._dash_rules(text, add)
        if "A" in text and AWS_GOOGLE.search(text):
            for m in AWS_GOOGLE.finditer(text):
                add((m.start(), m.end(), "google_api_key" if m.group().startswith("AIza") else "aws_access_key_id"))
        if "J" in text and "eyJ" in text:
            _each(JWT, text, "jwt", add)
        if "@" in text and "://" in text:
            for m in URL_CRED.finditer(text):
                if not PLACEHOLDER.match(m.group(2)):
                    add((m.start(2), m.end(2), "url_credentials"))
        if "B" in text and "Bearer" in text:
            _each(BEARER, text, "bearer_token", add, group=1)
        if "=" in text or ":" in text:
            self._pairs(text, add)
        for name, pattern in self._extra:
            for m in pattern.finditer(text):
                if m.end() > m.start():
                    add((m.start(), m.end(), name))
        return found

    def _dash_rules(self, text: str, add: Any) -> None:
        """The rules whose secrets hold a `-` (behind `_rules`' gate on it)."""
        if "sk-" in text:
            for m in SK.finditer(text):
                self._sk(text, m, add)
        if "xox" in text:
            _each(SLACK, text, "slack_token", add)
        if "-u" in text:
            for m in CURL_USER.finditer(text):
                if not PLACEHOLDER.match(m.group(1)):
                    add((m.start(1), m.end(1), "basic_auth"))
        if " --" in text:
            self._flags(text, add)

    @staticmethod
    def _flags(text: str, add: Any) -> None:
        """`--password hunter2`, `--token "…"`: a flag that names a secret, then its value."""
        for m in FLAG.finditer(text):
            typed = key_type(m.group(1))
            if typed is not None and typed[1]:
                group = m.lastindex or 4
                value = m.group(group)
                if not keep_value(value, m.group(1), True, typed[0], group != 4):
                    add((m.start(group), m.end(group), typed[0]))

    @staticmethod
    def _sk(text: str, m: re.Match[str], add: Any) -> None:
        kind = m.group(1)
        if not kind and not clean_left(text, m.start(), "-"):
            return  # a bare `sk-` is ambiguous (`task-…`): only at a word edge or after an escape
        body = m.group()
        if not any(c.isdigit() for c in body):
            return  # `sk-some-hyphenated-name` is prose, not a key
        if kind == "ant-":
            add((m.start(), m.end(), "anthropic_key"))
        elif kind or "T3BlbkFJ" in body:
            add((m.start(), m.end(), "openai_key"))
        else:
            add((m.start(), m.end(), "sk_key"))

    def _pairs(self, text: str, add: Any) -> None:
        """`KEY=value`, `"key": "value"`, `key: value`, `export KEY=value`, `--key=value` pairs.

        Short text: look left of each separator. Long text: find each key word and look right.
        """
        if len(text) <= SHORT_TEXT:
            for sep_char in ":=":
                i = text.find(sep_char)
                while i != -1:
                    if text[i - 1] in KEY_LAST and not (sep_char == "=" and text[i - 1] == ":"):
                        head = text[max(0, i - 20):i].rstrip(BEFORE_SEP)
                        if head.lower().endswith(KEY_ENDINGS):
                            self._pair_at(text, i - 20 + len(head) if i >= 20 else len(head), add)
                    i = text.find(sep_char, i + 1)
            return
        low = text.lower()
        if len(low) != len(text):  # a few non-ASCII letters change length when lowered
            low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        for word in KEY_WORDS:
            p = low.find(word)
            while p != -1:
                end = p + len(word)
                tail = LETTERS.match(low, end)
                if tail is not None:
                    end = tail.end()
                if end < len(text) and text[end] in AFTER_KEY:
                    end = self._pair_at(text, end, add)
                p = low.find(word, end)

    def _pair_at(self, text: str, end: int, add: Any) -> int:
        """`end` is just past a key that may name a secret; parse separator and value.

        Returns where parsing stopped, so callers skip a long value instead of rescanning it.
        """
        sep = SEP.match(text, end)
        if sep is None:
            return end
        # Read the key backwards over at most 80 characters: bounded work whatever the input.
        key_match = KEY_CHARS.match(text[max(0, end - 80):end][::-1])
        if key_match is None:
            return end
        key = key_match.group()[::-1]
        key_start = end - len(key)
        if text[max(0, key_start - 2):key_start] == "//":
            return end  # `https://x-access-token:…@` is URL userinfo, handled as url_credentials
        typed = key_type(key)
        if typed is None:
            return end
        return self._value_at(text, sep, key, typed, add)

    def _value_at(self, text: str, sep: re.Match[str], key: str, typed: tuple[str, bool], add: Any) -> int:
        kind, strict = typed
        start = sep.end()
        if kind == "authorization" or kind == "secret" and key.lower().endswith("auth"):
            scheme = AUTH_SCHEME.match(text, start)
            if scheme:
                value = scheme.group(2).rstrip("\\")
                if not keep_value(value, key, True, kind, True):
                    word = scheme.group(1).lower()
                    typ = "basic_auth" if word == "basic" else "bearer_token" if word == "bearer" else kind
                    add((scheme.start(2), scheme.start(2) + len(value), typ))
                return scheme.end()
            if kind == "authorization" and text[start:start + 1] not in ("\"", "'", "\\"):
                # An unknown scheme (`AWS4-HMAC-SHA256 Credential=…, Signature=…`): the rest of the line.
                rest = REST_OF_LINE.match(text, start)
                if rest is None:
                    return start
                value = rest.group().rstrip()
                clause = CLAUSE.match(value).group().rstrip()  # type: ignore[union-attr]  # matches ""
                if prose(clause):
                    return start + len(clause)  # `(authorization: missing or wrong token); check …`
                if not keep_value(value, key, True, kind, False):
                    add((start, start + len(value), kind))
                return rest.end()
        value_match = VALUE.match(text, start)
        if value_match is None:
            return start
        group = value_match.lastindex or 4
        value = value_match.group(group)
        quoted = group != 4
        if not quoted:
            after = value_match.end()
            if text[after:after + 1] in ("(", "[", "."):
                return after  # `token = req.headers.get(…)`: a call, not a literal
            if sep.group(1) == ":":
                tail = YAML_TAIL.match(text, after)
                if tail is None:
                    return after  # `token: it expired` is prose; YAML values run to the end of the line
                if tail.group() in ("\"", "'", "`") and value.isalpha() and len(value) <= 16:
                    return after  # `Error("token: missing")`: a word in a message, not a header value
            value = value.rstrip("\\")
        if not keep_value(value, key, strict, kind, quoted):
            vstart = value_match.start(group)
            add((vstart, vstart + len(value), kind if strict else "high_entropy_secret"))
        return value_match.end()

    def _settle(self, text: str, found: list[Span]) -> list[Span]:
        """Drop spans inside an earlier one, merge partial overlaps, honour the allow-list."""
        found.sort(key=lambda s: (s[0], -s[1]))
        out: list[Span] = []
        for span in found:
            if out and span[0] < out[-1][1]:
                last = out[-1]
                if span[1] > last[1]:
                    out[-1] = (last[0], span[1], last[2])
                continue
            out.append(span)
        if self._allow:
            allowed = [(m.start(), m.end()) for p in self._allow for m in p.finditer(text)]
            out = [s for s in out if not any(a < s[1] and s[0] < b for a, b in allowed)]
        return out

    # ---- public operations ------------------------------------------------------------------------
    def redact_text(self, text: str) -> tuple[str, dict[str, int]]:
        """`text` with each secret replaced by `[REDACTED:<type>]`, and the count per type."""
        spans = self.spans(text)
        if not spans:
            return text, {}
        return replace_spans(text, spans)

    def scan_text(self, text: str) -> list[Finding]:
        """What `redact_text` would remove, with 1-based line and column and a masked value."""
        findings = []
        for start, end, typ in self.spans(text):
            line = text.count("\n", 0, start) + 1
            column = start - (text.rfind("\n", 0, start) + 1) + 1
            findings.append(Finding(typ, line, column, mask(text[start:end])))
        return findings

    def scan_lines(self, lines: Iterable[str], chunk_lines: int = 4096) -> Iterator[Finding]:
        """`scan_text` over a file read line by line (lines keep their `\n`), with the file's line
        numbers; memory stays bounded and a chunk never ends inside a private key block."""
        chunk: list[str] = []
        first = 1
        for line in lines:
            chunk.append(line)
            if len(chunk) >= chunk_lines and (len(chunk) >= 64 * chunk_lines or not _inside_pem(chunk)):
                yield from self._scan_chunk(chunk, first)
                first += len(chunk)
                chunk = []
        if chunk:
            yield from self._scan_chunk(chunk, first)

    def _scan_chunk(self, chunk: list[str], first: int) -> Iterator[Finding]:
        for finding in self.scan_text("".join(chunk)):
            yield Finding(finding.type, finding.line + first - 1, finding.column, finding.masked)

    def redact_event(self, event: Event, given: Mapping[str, Any] | None = None) -> Event:
        """The event with secrets removed from every field (see `urchin.redact._event`); the same
        object when there was none. `given` is the input `event` was validated from, if any: its
        tags, source and kind are checked in the case they were given."""
        return self._fields.event(event, given)

    def keeps(self, record: Mapping[str, Any]) -> bool:
        """True when a record `urchin.event.stored_as_given` accepted holds nothing to redact, by
        `redact_event`'s own first test (lookups, the rules over the content); False: ask `redact_event`."""
        return self._fields.keeps(record)

    def redact_id(self, event_id: str) -> str:
        """The id an event given `event_id` is stored under (itself unless it holds a secret)."""
        return self._fields.event_id(event_id)[0]


def _each(pattern: re.Pattern[str], text: str, typ: str, add: Any, group: int = 0) -> None:
    """Every match of `pattern` (its `group`) as a span of type `typ`."""
    for m in pattern.finditer(text):
        add((m.start(group), m.end(group), typ))


def _underscore_rules(text: str, add: Any) -> None:
    """The rules whose secrets hold a `_` (behind `_rules`' gate on it)."""
    _each(GITHUB, text, "github_token", add)   # prefixes no word holds: no left edge to check
    if "k_live_" in text or "k_test_" in text:
        for m in STRIPE.finditer(text):
            start = m.start() - 1
            if start >= 0 and text[start] in "sr":
                add((start, m.end(), "stripe_key"))


def _compile(pattern: str, where: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"{where}: pattern must be a non-empty string")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{where}: bad pattern {pattern!r}: {exc}") from None


def _inside_pem(chunk: list[str]) -> bool:
    """Does the chunk end between a private key's BEGIN line and its END line?"""
    for line in reversed(chunk):
        if "-----END" in line:
            return False
        if "-----BEGIN" in line and "PRIVATE KEY" in line:
            return True
    return False


_DEFAULT = Redactor()


def redact_text(text: str) -> tuple[str, dict[str, int]]:
    """`Redactor().redact_text` with the built-in rules only."""
    return _DEFAULT.redact_text(text)


def redact_message(text: str) -> str:
    """An error message as a front end shows or logs it: what it quotes of the input (a field, a
    path, an id, a timestamp) never carries a secret. Every edge (CLI, HTTP, MCP) calls this."""
    return _DEFAULT.redact_text(text)[0] if text else text


def redact_event(event: Event, given: Mapping[str, Any] | None = None) -> Event:
    return _DEFAULT.redact_event(event, given)


def scan_text(text: str) -> list[Finding]:
    return _DEFAULT.scan_text(text)
