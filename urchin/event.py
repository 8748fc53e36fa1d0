"""The Event model: parse, validate, normalise and serialise one journal line.

Strict on the way in (`Event.from_input`: every rule names its field), tolerant on the way out
(`Event.from_record`: lines of the reference Urchin's TypeScript and Rust shapes read the same, the
TypeScript one's folds in `urchin/reference_shape.py`). Only the model: what a search index reads of
a stored line is `urchin/search/fields.py`'s; how a time is read and written is `urchin/timestamps.py`'s,
and how text is cut without leaving half a secret `urchin/clipping.py`'s. A leaf: imports nothing of
the package but `errors`, those two, new ids (`uuid7`) and the reference shape's folds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from urchin.clipping import clip, quoted
from urchin.errors import ValidationError
from urchin.reference_shape import actor_from_identity, field_from_meta, fold_extra
from urchin.timestamps import canonical_moment, epoch_ms, format_timestamp, parse_timestamp, read_stored_timestamp
from urchin.uuid7 import new_id

__all__ = [
    "Event",
    "PROOF_FIELD",
    "as_name",
    "check_label",
    "new_id",
    "FIELD_NAMES",
    "SOFT_CAP_BYTES",
    "HARD_LIMIT_BYTES",
    "TRUNCATION_MARKER",
    "MAX_META_DEPTH",
    "MAX_META_BYTES",
    "check_name",
    "clean_text",
    "MEMORY_KINDS",
    "RECORDED_KINDS",
]

# Memories: the kinds of event `urchin_remember` writes, what an agent chose to keep (the rest are
# conversations). textrawl's `memoryWeight` and token-cosine's memory prior weigh them.
MEMORY_KINDS = ("decision",)
# The kinds Urchin's own writers record (collectors, hooks, remember, the CLI): textrawl's `contentType`
# lists them. A caller's own kind (any label) is stored too; search_context's `kinds` filters by it.
RECORDED_KINDS = ("conversation", "decision", "tool_use", "command", "commit", "note", "capture", "agent", "error")

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
_FIELDS = ("id", "timestamp", "source", "kind", "content", "workspace", "session", "title",
           "brain", "tags", "actor", "meta")
FIELD_NAMES = frozenset(_FIELDS)   # an event's fields (a line's other keys go to meta)
PROOF_FIELD = "proof"   # the write path's mark on a line it made (urchin/proof.py); not part of the event
_OPTIONAL_STRINGS = ("workspace", "session", "title", "brain")
_LABELS: dict[str, str] = {}  # label normalisation is pure; imports see the same few thousands of times


def _label(value: Any, field_name: str) -> str:
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


def check_label(value: Any, field_name: str) -> str:
    """A source or kind as events store it (lowercase [a-z0-9._-]); a filter naming another can match nothing."""
    return _label(value, field_name)


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


def _tags(value: Any) -> tuple[str, ...]:
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


def _optional_string(name: str, text: str) -> str | None:
    """`title` is free text; `workspace`, `session` and `brain` are names."""
    if not text:
        return None
    if name != "title":
        return check_name(text, name)
    if len(text) > MAX_TITLE_LENGTH:
        raise ValidationError(name, f"must be at most {MAX_TITLE_LENGTH} characters, got {len(text)}")
    return clean_text(text)


def _actor(value: Any) -> dict[str, Any] | None:
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


# The last actor `_actor` accepted (a copy): a writer stamps the same {account, device} on every
# event, and a dict equal to one that passed passes too (of the values JSON gives, only an equal
# string equals a string and only None equals None), so the next equal one skips the checks (~1 us).
# A one-item list: a global set in place, one reference swapped at a time (threads may share it).
_ACTOR_SEEN: list[dict[str, Any] | None] = [None]


def _meta(value: Any) -> dict[str, Any] | None:
    """Plain JSON, at most `MAX_META_DEPTH` levels and `MAX_META_BYTES` serialised; a cleaned copy."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("meta", "must be a JSON object")
    try:
        blob: bytes | None = orjson.dumps(value, option=_PASSTHROUGH)
    except TypeError:   # orjson.JSONEncodeError too: the walk below names the field and the rule
        blob = None
    # Fast path (almost every event): no escape at all means no control character, NUL or DEL in any
    # key or string; no `null` means no NaN or infinity (orjson writes those as null); at most 32
    # brackets means at most 32 levels. Anything else takes the walk, which decides.
    if (blob is None or b"\\" in blob or b"null" in blob or b"\x7f" in blob
            or blob.count(b"{") + blob.count(b"[") > MAX_META_DEPTH):
        value = _json_value(value, "meta", 1)
        blob = orjson.dumps(value)
    size = len(blob)
    if size > MAX_META_BYTES:
        raise ValidationError("meta", f"is {size} bytes serialised, over the limit of {MAX_META_BYTES} bytes")
    return value or None


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


def _content(value: Any, soft_cap: int) -> tuple[str, bool]:
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


@dataclass(frozen=True, slots=True)
class Event:
    """One journal line. `ts_ms` is derived from `timestamp` and never serialised."""

    id: str
    timestamp: str
    source: str
    kind: str
    content: str
    workspace: str | None = None
    session: str | None = None
    title: str | None = None
    brain: str | None = None
    tags: tuple[str, ...] = ()
    actor: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    ts_ms: int = field(default=0, compare=False, repr=False)

    # ---- strict construction (every write path) -------------------------------------------
    @classmethod
    def from_input(
        cls,
        data: Mapping[str, Any],
        *,
        now: datetime | None = None,
        soft_cap: int = SOFT_CAP_BYTES,
        default_source: str = "manual",
        default_kind: str = "note",
    ) -> Event:
        """Validate and normalise user input; raises `ValidationError` naming the field."""
        if type(data) is not dict and not isinstance(data, Mapping):   # an ABC check costs ~0.5 us a call
            raise ValidationError("event", "must be a JSON object")
        content, truncated = _content(data.get("content"), soft_cap)
        raw_id = data.get("id")
        ts_value = data.get("timestamp")
        if ts_value is None:
            moment = now or datetime.now(UTC)
            timestamp = format_timestamp(moment)
        else:
            # already canonical (imports, replays): formatting again would give the same string
            canonical = canonical_moment(ts_value)
            if canonical is not None:
                moment, timestamp = canonical, ts_value
            else:
                moment = parse_timestamp(ts_value)
                timestamp = format_timestamp(moment)
        if raw_id is None:
            event_id = new_id()
        elif not isinstance(raw_id, str) or not raw_id.strip():
            raise ValidationError("id", "must be a non-blank string")
        else:
            event_id = raw_id.strip()
            if len(event_id) > MAX_ID_LENGTH:
                raise ValidationError("id", f"must be at most {MAX_ID_LENGTH} characters, got {len(event_id)}")
            check_name(event_id, "id", 4 * MAX_ID_LENGTH)
        source = data.get("source")
        kind = data.get("kind")
        optional: dict[str, str | None] = {}
        for name in _OPTIONAL_STRINGS:
            value = data.get(name)
            if value is None:
                optional[name] = None
                continue
            if not isinstance(value, str):
                raise ValidationError(name, "must be a string")
            value = value.strip()
            # a printable name short enough in any encoding: what `check_name` answers first, inline
            ok = name != "title" and value and value.isprintable() and len(value) * 4 <= MAX_NAME_BYTES
            optional[name] = value if ok else _optional_string(name, value)
        actor = data.get("actor")
        if actor is not None and not (type(actor) is dict and actor == _ACTOR_SEEN[0]):
            actor = _actor(actor)
            _ACTOR_SEEN[0] = actor.copy() if actor is not None and len(actor) <= 4 else None
        meta = data.get("meta")
        if meta is not None and not isinstance(meta, dict):
            raise ValidationError("meta", "must be a JSON object")
        unknown = {} if data.keys() <= FIELD_NAMES else {k: v for k, v in data.items() if k not in FIELD_NAMES}
        if unknown or truncated:
            meta = dict(meta or {})
            for key, value in unknown.items():
                meta.setdefault(key, value)
            if truncated:
                meta["truncated"] = True
        meta = _meta(meta)
        return _made(event_id, timestamp, _label(default_source if source is None else source, "source"),
                     _label(default_kind if kind is None else kind, "kind"), content, optional["workspace"],
                     optional["session"], optional["title"], optional["brain"], _tags(data.get("tags")), actor,
                     meta, epoch_ms(moment))

    # ---- tolerant reading (journal lines, imports of old data) ----------------------------
    @classmethod
    def from_record(cls, record: Any) -> Event | None:
        """Read a stored line's object in any known shape; None when it is not an event."""
        if not isinstance(record, dict):
            return None
        content = record.get("content")
        if not isinstance(content, str) or not content:
            return None
        event_id = record.get("id")
        ts = record.get("timestamp")
        if not isinstance(event_id, str) or not isinstance(ts, str):
            return None
        read = read_stored_timestamp(ts)
        if read is None:
            return None
        ts, moment = read
        meta = record.get("meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        extra = {k: v for k, v in record.items() if k not in FIELD_NAMES and k != PROOF_FIELD}
        if extra:
            fold_extra(extra, meta)
        tags = record.get("tags")
        actor = record.get("actor") if isinstance(record.get("actor"), dict) else None
        if actor is None and "identity" in meta:
            actor = actor_from_identity(meta.pop("identity"))
        return _made(
            event_id,
            ts,
            _str(record.get("source")) or "unknown",
            _str(record.get("kind")) or "note",
            content,
            _str(record.get("workspace")) or field_from_meta(meta, "workspace", MAX_NAME_BYTES),
            _str(record.get("session")) or field_from_meta(meta, "sessionId", MAX_NAME_BYTES),
            _str(record.get("title")) or field_from_meta(meta, "summary", MAX_TITLE_LENGTH, name=False),
            _str(record.get("brain")),
            tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
            actor,
            meta or None,
            epoch_ms(moment),
        )

    @classmethod
    def from_json(cls, line: bytes | str) -> Event | None:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        # orjson reads 1,024 levels but writes 254: a stored line nested deeper than Urchin ever writes
        # (by hand, or by another tool) is not an event, or every answer holding it would fail.
        if _brackets(line) > MAX_META_DEPTH and _nested_deeper(record, MAX_META_DEPTH + 1):
            return None
        return cls.from_record(record)

    # ---- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "timestamp": self.timestamp,
            "source": self.source,
            "kind": self.kind,
            "content": self.content,
        }
        # written out, not a loop over `_OPTIONAL_STRINGS`: this runs once per line written
        if self.workspace is not None:
            out["workspace"] = self.workspace
        if self.session is not None:
            out["session"] = self.session
        if self.title is not None:
            out["title"] = self.title
        if self.brain is not None:
            out["brain"] = self.brain
        if self.tags:
            out["tags"] = list(self.tags)
        if self.actor:
            out["actor"] = self.actor
        if self.meta:
            out["meta"] = self.meta
        return out

    def to_json(self) -> bytes:
        """One journal line, without the trailing newline."""
        return orjson.dumps(self.to_dict())

    def capped(self, soft_cap: int) -> Event:
        """This event with content cut at `soft_cap` bytes (with a marker and `meta.truncated`)."""
        content, truncated = _content(self.content, soft_cap)
        if not truncated:
            return self
        return self.replace(content=content, meta={**(self.meta or {}), "truncated": True})

    def replace(self, **changes: Any) -> Event:
        data = {name: getattr(self, name) for name in _FIELDS}
        data["ts_ms"] = self.ts_ms
        data.update(changes)
        return _made(**data)


class _Open:
    """`Event`'s slots without its frozen guard. The dataclass's `__init__` stores each of an event's
    13 fields through `object.__setattr__` (~4 us an event on this project's machine, paid by every
    event validated or read back); `_made` stores them as plain attributes of this twin (~1 us), then
    makes it the `Event` it is: the layout is the same, so Python lets `__class__` change, and from
    then on it is frozen like any other."""

    __slots__ = Event.__slots__   # made by @dataclass(slots=True)


def _made(id: str, timestamp: str, source: str, kind: str, content: str, workspace: str | None,
          session: str | None, title: str | None, brain: str | None, tags: tuple[str, ...],
          actor: dict[str, Any] | None, meta: dict[str, Any] | None, ts_ms: int) -> Event:
    """`Event(...)` with every field given, the same object, built at the speed of plain stores."""
    made: Any = _Open()
    made.id = id
    made.timestamp = timestamp
    made.source = source
    made.kind = kind
    made.content = content
    made.workspace = workspace
    made.session = session
    made.title = title
    made.brain = brain
    made.tags = tags
    made.actor = actor
    made.meta = meta
    made.ts_ms = ts_ms
    made.__class__ = Event
    event: Event = made
    return event


def _brackets(line: bytes | str) -> int:
    if isinstance(line, str):
        return line.count("{") + line.count("[")
    return line.count(b"{") + line.count(b"[")


def _nested_deeper(value: Any, limit: int) -> bool:
    """True when `value` holds objects or arrays more than `limit` levels deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
