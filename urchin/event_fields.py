"""What each field of an event may hold, checked at the edge: labels (`source`, `kind`), names (ids,
workspace, session, tags, actor, meta keys), free text, tags, actor, meta (plain JSON, bounded) and
content (soft cap, hard limit), each refusal naming its field and rule. `Event.from_input`
(urchin/event.py) applies them; the parameters of queries reuse the label, name and text rules.
A leaf: imports nothing of the package but `errors` and `clipping`.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from urchin.clipping import clip, quoted
from urchin.errors import ValidationError

__all__ = [
    "ACTOR_SEEN",
    "HARD_LIMIT_BYTES",
    "MAX_ID_LENGTH",
    "MAX_META_BYTES",
    "MAX_META_DEPTH",
    "MAX_NAME_BYTES",
    "MAX_TAGS",
    "MAX_TITLE_LENGTH",
    "SOFT_CAP_BYTES",
    "TRUNCATION_MARKER",
    "as_name",
    "check_actor",
    "check_content",
    "check_label",
    "check_meta",
    "check_name",
    "check_tags",
    "clean_text",
    "known_label",
    "label",
    "optional_string",
    "plain_meta",
]

SOFT_CAP_BYTES = 64 * 1024
HARD_LIMIT_BYTES = 1024 * 1024
TRUNCATION_MARKER = "\n[… truncated by urchin: {dropped} bytes dropped]"
MAX_ID_LENGTH = 256
MAX_LABEL_LENGTH = 64
# workspace, session, brain, a tag, an actor value, in UTF-8 bytes: PostgreSQL's btree and GIN index
# entries hold about 2,700 bytes at most, and these columns are indexed
MAX_NAME_BYTES = 1024
MAX_TITLE_LENGTH = 64 * 1024
MAX_TAGS = 256
MAX_META_DEPTH = 32               # meta itself is level 1
MAX_META_BYTES = 256 * 1024       # serialised
MAX_ACTOR_KEYS = 16
_INT_RANGE = (-(1 << 63), (1 << 64) - 1)   # what orjson (and any JSON reader with 64-bit ints) can hold
# meta is plain JSON: orjson must refuse (not convert) dataclasses, datetimes and subclasses
_PASSTHROUGH = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS

# The one rule for characters, applied at the edge so that whatever validates can be serialised,
# stored, indexed and fed (PostgreSQL text cannot hold NUL; UTF-8 cannot hold a lone surrogate):
# names (ids, workspace, session, brain, tags, actor, meta keys) refuse every control character and
# lone surrogates; free text (content, title, meta string values) keeps tabs, newlines and other
# control characters (real tool output) and has NUL and lone surrogates replaced by U+FFFD.
_NAME_BAD = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_TEXT_BAD = re.compile(r"[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"

_LABEL = re.compile(r"[a-z0-9._-]+")
_LABELS: dict[str, str] = {}  # label normalisation is pure; imports see the same few thousands of times


def label(value: Any, field_name: str) -> str:
    known = _LABELS.get(value) if isinstance(value, str) else None
    if known is not None:
        return known
    if not isinstance(value, str):
        raise ValidationError(field_name, "must be a string")
    text = value.strip().lower()
    if not text:
        raise ValidationError(field_name, "must not be blank")
    if len(text) > MAX_LABEL_LENGTH or not _LABEL.fullmatch(text):
        raise ValidationError(field_name, f"must be lowercase [a-z0-9._-], at most {MAX_LABEL_LENGTH} characters")
    if len(_LABELS) < 4096:
        _LABELS[value] = text
    return text


def known_label(value: Any) -> bool:
    """`value` is a label `label` has seen and keeps as it is (lookups only)."""
    return type(value) is str and _LABELS.get(value) == value


def check_label(value: Any, field_name: str) -> str:
    """A source or kind as events store it (lowercase [a-z0-9._-]); a filter naming another can match nothing."""
    return label(value, field_name)


def check_name(value: str, field_name: str, limit: int = MAX_NAME_BYTES) -> str:
    """A name (id, workspace, session, tag, meta key ...): no control characters, no lone surrogates,
    at most `limit` bytes of UTF-8."""
    # C speed: isprintable() is False for every control character and surrogate
    if value.isprintable() and (len(value) * 4 <= limit or len(value.encode("utf-8")) <= limit):
        return value
    bad = _NAME_BAD.search(value)
    if bad:
        raise ValidationError(field_name, f"must not contain control characters or lone surrogates "
                                          f"(found U+{ord(bad.group()):04X})")
    size = len(value.encode("utf-8"))
    if size > limit:
        raise ValidationError(field_name, f"must be at most {limit} bytes (UTF-8), got {size}")
    return value


def as_name(value: str, limit: int = MAX_NAME_BYTES) -> str:
    """A name derived from data an adapter does not control (a folder name, a branch): control
    characters and lone surrogates become U+FFFD and it is cut to `limit` bytes, so that what an
    agent did is never lost because of where it did it. Names given by a caller are checked instead."""
    value = _NAME_BAD.sub(REPLACEMENT, value)
    return clip(value, limit, in_bytes=True)


def clean_text(value: str) -> str:
    """Free text with NUL and lone surrogates replaced by U+FFFD (everything else is kept)."""
    if "\x00" not in value and (value.isascii() or not _TEXT_BAD.search(value)):
        return value
    return _TEXT_BAD.sub(REPLACEMENT, value)


def check_tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValidationError("tags", "must be a list of strings")
    if len(value) > MAX_TAGS:
        raise ValidationError("tags", f"must hold at most {MAX_TAGS} tags, got {len(value)}")
    seen: dict[str, None] = {}
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValidationError("tags", "must be a list of strings")
        tag = check_name(item.strip().lower(), f"tags[{i}]")
        if tag:
            seen.setdefault(tag, None)
    return tuple(seen)


def optional_string(name: str, text: str) -> str | None:
    """`title` is free text; `workspace`, `session` and `brain` are names."""
    if not text:
        return None
    if name != "title":
        return check_name(text, name)
    if len(text) > MAX_TITLE_LENGTH:
        raise ValidationError(name, f"must be at most {MAX_TITLE_LENGTH} characters, got {len(text)}")
    return clean_text(text)


def check_actor(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("actor", "must be an object like {account, device}")
    if len(value) > MAX_ACTOR_KEYS:
        raise ValidationError("actor", f"must hold at most {MAX_ACTOR_KEYS} keys")
    for key, item in value.items():
        if (isinstance(key, str) and key.isprintable() and len(key) <= MAX_ID_LENGTH // 4 and (
                item is None or isinstance(item, str) and item.isprintable() and len(item) <= MAX_NAME_BYTES // 4)):
            continue   # the stamped {account, device} of every event: checked at C speed
        if not isinstance(key, str):
            raise ValidationError("actor", "keys must be strings")
        check_name(key, "actor", MAX_ID_LENGTH)
        if item is not None and not isinstance(item, str):
            raise ValidationError(f"actor.{key}", "must be a string")
        if item is not None:
            check_name(item, f"actor.{key}")
    return value or None


# The last actor `check_actor` accepted (a copy): a writer stamps the same {account, device} on every
# event, and a dict equal to one that passed passes too (of the values JSON gives, only an equal
# string equals a string and only None equals None), so the next equal one skips the checks (~1 us).
# A one-item list: a global set in place, one reference swapped at a time (threads may share it).
ACTOR_SEEN: list[dict[str, Any] | None] = [None]


def check_meta(value: Any) -> dict[str, Any] | None:
    """Plain JSON, at most `MAX_META_DEPTH` levels and `MAX_META_BYTES` serialised; a cleaned copy."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("meta", "must be a JSON object")
    blob = plain_meta(value)
    if blob is None:
        value = _json_value(value, "meta", 1)
        blob = orjson.dumps(value)
    size = len(blob)
    if size > MAX_META_BYTES:
        raise ValidationError("meta", f"is {size} bytes serialised, over the limit of {MAX_META_BYTES} bytes")
    return value or None


def plain_meta(value: dict[str, Any]) -> bytes | None:
    """`value` serialised, when `check_meta` keeps it as it is without walking it; None when the walk
    decides (it may clean a string or refuse). Almost every event's meta takes this path."""
    try:
        blob = orjson.dumps(value, option=_PASSTHROUGH)
    except TypeError:   # orjson.JSONEncodeError too: the walk names the field and the rule
        return None
    # No escape at all means no control character, NUL or DEL in any key or string; no `null` means
    # no NaN or infinity (orjson writes those as null); at most 32 brackets means at most 32 levels.
    if (b"\\" in blob or b"null" in blob or b"\x7f" in blob
            or blob.count(b"{") + blob.count(b"[") > MAX_META_DEPTH):
        return None
    return blob


def _json_value(value: Any, where: str, depth: int) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise ValidationError(where, "must be an integer within 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(where, "must be a finite number")
        return value
    if not isinstance(value, (dict, list, tuple)):
        raise ValidationError(where, f"must be JSON (string, number, boolean, null, list or object), "
                                     f"not {type(value).__name__}")
    if depth > MAX_META_DEPTH:
        raise ValidationError("meta", f"must be nested at most {MAX_META_DEPTH} levels deep")
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(where, "keys must be strings")
            try:
                check_name(key, where, MAX_META_BYTES)
            except ValidationError as exc:
                raise ValidationError(where, f"key {quoted(key)} {exc.rule}") from None
            out[key] = _json_value(item, f"{where}.{quoted(key, repr_=False)}", depth + 1)
        return out
    return [_json_value(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]


def check_content(value: Any, soft_cap: int) -> tuple[str, bool]:
    if value is None:
        raise ValidationError("content", "is required")
    if not isinstance(value, str):
        raise ValidationError("content", "must be a string")
    value = clean_text(value)
    if not value or value.isspace():   # what strip() would empty, without copying the text
        raise ValidationError("content", "must not be blank")
    size = len(value) if value.isascii() else len(value.encode("utf-8"))
    if size > HARD_LIMIT_BYTES:
        raise ValidationError("content", f"is {size} bytes, over the hard limit of {HARD_LIMIT_BYTES} bytes")
    if size <= soft_cap:
        return value, False
    kept = clip(value, soft_cap, in_bytes=True)
    return kept + TRUNCATION_MARKER.format(dropped=size - len(kept.encode("utf-8"))), True
