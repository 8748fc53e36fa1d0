"""Text cut without leaving half a secret: `quoted` for a bad value in an error, `clip` for content
and summaries. A cut through a token drops the token's kept part, since the redactor no longer
recognises the start of a secret it cannot see whole. Standard library only: any layer may use it.
"""

from __future__ import annotations

import re

__all__ = ["quoted", "clip"]

_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.~:]+$")  # the end of a cut value that may be part of a secret
# What a secret (or an escape inside one, `%2F`, `\u0022`) is made of; `clip` drops a cut run of them.
_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=.~:%\\"
_MAX_TOKEN = 8192  # a longer run is data (a base64 blob), not a secret: only its last 8 KiB go


def quoted(value: str, limit: int = 40, repr_: bool = True) -> str:
    """At most `limit` characters of a bad value, to quote in an error: a longer one is cut before the
    token it would cut through, since the redactor at the edge no longer recognises half a secret."""
    if len(value) > limit:
        value = _TOKEN_TAIL.sub("", value[:limit]) + "…"
    return repr(value) if repr_ else value


def clip(text: str, limit: int, in_bytes: bool = False) -> str:
    """At most `limit` characters (UTF-8 bytes with `in_bytes`) of `text`, whole characters; a cut
    through a token drops the token's kept part (up to `_MAX_TOKEN` characters), so no cut leaves a
    recognisable start of a secret (`ghp_…`, `AKIA…`, `password: hunt…`) that the rules no longer
    match. The cut is the caller's to mark."""
    if in_bytes:
        if (len(text) if text.isascii() else len(text.encode("utf-8"))) <= limit:
            return text
        kept = text.encode("utf-8")[:limit].decode("utf-8", "ignore")
    elif len(text) <= limit:
        return text
    else:
        kept = text[:limit]
    if kept and kept[-1] in _TOKEN_CHARS and text[len(kept)] in _TOKEN_CHARS:
        tail = kept[-_MAX_TOKEN:]
        kept = kept[:len(kept) - len(tail)] + tail.rstrip(_TOKEN_CHARS)
    return kept
