"""PostgreSQL connection strings: the one place that hides their credentials and writes them as URLs.

libpq takes two forms: a URL (`postgresql://user:password@host:5432/db?sslpassword=...`) and
keyword/value pairs (`user=ada password='it''s' host=db`, values quoted with `'` and escaped with
`\\`). `mask_dsn` hides every credential of either form (on text that does not parse, everything from
the first credential on), and is what anything printing or logging a DSN calls; `scrub` hides a
DSN's credentials inside other text (a driver's error message). `to_url` writes connection
parameters as a real, percent-encoded `postgresql://` URL. A leaf: no imports from the package.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, unquote

__all__ = ["CREDENTIALS", "MASK", "mask_dsn", "scrub", "to_url", "is_url"]

CREDENTIALS = frozenset({"password", "sslpassword"})   # libpq's keywords whose values are secrets
MASK = "***"
_URL = re.compile(r"postgres(?:ql)?://", re.I)
_CREDENTIAL_KEY = re.compile(r"\b(?:ssl)?password\s*=", re.I)


def is_url(dsn: str) -> bool:
    return bool(_URL.match(dsn.lstrip()))


def mask_dsn(dsn: str) -> str:
    """`dsn` with the value of every credential replaced by `***`; the rest as it was written."""
    spans = _url_secrets(dsn) if is_url(dsn) else _keyword_secrets(dsn)
    for start, end in sorted(spans, reverse=True):
        dsn = dsn[:start] + MASK + dsn[end:]
    return dsn


def scrub(text: str, dsn: str | None) -> str:
    """`text` (an error message, say) with every credential of `dsn` in it, and each word of one, hidden."""
    if not dsn:
        return text
    spans = _url_secrets(dsn) if is_url(dsn) else _keyword_secrets(dsn)
    secrets: set[str] = set()
    for start, end in spans:
        raw = dsn[start:end]
        for form in {raw, unquote(raw), _unescape(raw)}:
            secrets.add(form)
            secrets.update(word for word in form.split() if len(word) >= 3)
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def to_url(params: Mapping[str, object]) -> str:
    """`postgresql://user:password@host:port/dbname?other=...`, every part percent-encoded, that libpq
    reads back as `params`. What a URL's authority cannot hold plainly (a socket folder, several hosts)
    goes in the query instead."""
    rest = {k: str(v) for k, v in params.items() if v is not None}
    user, password = rest.pop("user", None), rest.pop("password", None)
    host, port, dbname = rest.get("host"), rest.get("port"), rest.pop("dbname", None)
    userinfo = quote(user or "", safe="") + (":" + quote(password, safe="") if password is not None else "")
    authority = userinfo + "@" if userinfo else ""
    if host and _plain_host(host):
        rest.pop("host")
        authority += f"[{host}]" if ":" in host else host
        if port and "," not in port:
            authority += ":" + rest.pop("port")
    path = "/" + quote(dbname, safe="") if dbname is not None else ""
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in rest.items())
    return f"postgresql://{authority}{path}" + (f"?{query}" if query else "")


def _plain_host(host: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]+", host))


def _url_secrets(dsn: str) -> list[tuple[int, int]]:
    """Spans of a URL's password (between the user's `:` and the last `@` before the query, so an
    unencoded `@` or `/` in it is still hidden) and of credential parameters in its query."""
    begin = _URL.match(dsn.lstrip())
    assert begin is not None
    start = len(dsn) - len(dsn.lstrip()) + begin.end()
    query_at = dsn.find("?", start)
    authority_end = query_at if query_at >= 0 else len(dsn)
    spans = []
    at = dsn.rfind("@", start, authority_end)
    if at >= 0:
        colon = dsn.find(":", start, at)
        if colon >= 0:
            spans.append((colon + 1, at))
    if query_at >= 0:
        pos = query_at + 1
        for pair in dsn[query_at + 1:].split("&"):
            key, eq, _ = pair.partition("=")
            if eq and unquote(key).strip().lower() in CREDENTIALS:
                spans.append((pos + len(key) + 1, pos + len(pair)))
            pos += len(pair) + 1
    return spans


def _keyword_secrets(dsn: str) -> list[tuple[int, int]]:
    """Spans of credential values in keyword/value text, parsed as libpq does; from the first credential
    keyword to the end when the text does not parse (a value with an unquoted space, an open quote)."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(dsn)
    try:
        while True:
            while i < n and dsn[i].isspace():
                i += 1
            if i >= n:
                return spans
            key_start = i
            while i < n and not dsn[i].isspace() and dsn[i] != "=":
                i += 1
            key = dsn[key_start:i]
            while i < n and dsn[i].isspace():
                i += 1
            if i >= n or dsn[i] != "=":
                raise ValueError(f"missing = after {key!r}")
            i += 1
            while i < n and dsn[i].isspace():
                i += 1
            start, i = _value(dsn, i)
            if key.lower() in CREDENTIALS:
                spans.append(start)
    except ValueError:
        first = _CREDENTIAL_KEY.search(dsn)
        return [(first.end(), n)] if first else spans


def _value(dsn: str, i: int) -> tuple[tuple[int, int], int]:
    """The span of the value starting at `i` (inside its quotes), and where parsing goes on."""
    n = len(dsn)
    if i < n and dsn[i] == "'":
        j = i + 1
        while j < n and dsn[j] != "'":
            j += 2 if dsn[j] == "\\" else 1
        if j >= n:
            raise ValueError("unterminated quoted value")
        return (i + 1, j), j + 1
    j = i
    while j < n and not dsn[j].isspace():
        j += 2 if dsn[j] == "\\" else 1
    return (i, min(j, n)), j


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)
