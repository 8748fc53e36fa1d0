"""The Event model: parse, validate, normalise and serialise one journal line.

Strict on the way in (`Event.from_input`: every rule names its field), tolerant on the way out
(`Event.from_record`: lines of the reference Urchin's TypeScript and Rust shapes read the same, the
TypeScript one's folds in `urchin/reference_shape.py`). Only the model: what a search index reads of
a stored line is `urchin/search/fields.py`'s; how a time is read and written is `urchin/timestamps.py`'s,
how text is cut without leaving half a secret `urchin/clipping.py`'s, and what each field may hold
`urchin/event_fields.py`'s. A leaf: imports nothing of the package but `errors`, those three, new ids
(`uuid7`) and the reference shape's folds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from urchin.errors import ValidationError
from urchin.event_fields import (  # the field rules; the names importers take from here are re-exported
    ACTOR_SEEN,
    HARD_LIMIT_BYTES,
    MAX_ID_LENGTH,
    MAX_META_BYTES,
    MAX_META_DEPTH,
    MAX_NAME_BYTES,
    MAX_TAGS,
    MAX_TITLE_LENGTH,
    SOFT_CAP_BYTES,
    TRUNCATION_MARKER,
    as_name,
    check_actor,
    check_content,
    check_label,
    check_meta,
    check_name,
    check_tags,
    clean_text,
    known_label,
    label,
    optional_string,
    plain_meta,
)
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
    "MAX_ID_LENGTH",
    "check_name",
    "clean_text",
    "MEMORY_KINDS",
    "RECORDED_KINDS",
    "stored_as_given",
]

# Memories: the kinds of event `urchin_remember` writes, what an agent chose to keep (the rest are
# conversations). textrawl's `memoryWeight` and token-cosine's memory prior weigh them.
MEMORY_KINDS = ("decision",)
# The kinds Urchin's own writers record (collectors, hooks, remember, the CLI): textrawl's `contentType`
# lists them. A caller's own kind (any label) is stored too; search_context's `kinds` filters by it.
RECORDED_KINDS = ("conversation", "decision", "tool_use", "command", "commit", "note", "capture", "agent", "error")


_FIELDS = ("id", "timestamp", "source", "kind", "content", "workspace", "session", "title",
           "brain", "tags", "actor", "meta")
FIELD_NAMES = frozenset(_FIELDS)   # an event's fields (a line's other keys go to meta)
PROOF_FIELD = "proof"   # the write path's mark on a line it made (urchin/proof.py); not part of the event
_OPTIONAL_STRINGS = ("workspace", "session", "title", "brain")
_STORED = ("id", "timestamp", "source", "kind", "content", "actor")   # what every event the write path makes has


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
        content, truncated = check_content(data.get("content"), soft_cap)
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
            optional[name] = value if ok else optional_string(name, value)
        actor = data.get("actor")
        if actor is not None and not (type(actor) is dict and actor == ACTOR_SEEN[0]):
            actor = check_actor(actor)
            ACTOR_SEEN[0] = actor.copy() if actor is not None and len(actor) <= 4 else None
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
        meta = check_meta(meta)
        return _made(event_id, timestamp, label(default_source if source is None else source, "source"),
                     label(default_kind if kind is None else kind, "kind"), content, optional["workspace"],
                     optional["session"], optional["title"], optional["brain"], check_tags(data.get("tags")), actor,
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
        content, truncated = check_content(self.content, soft_cap)
        if not truncated:
            return self
        return self.replace(content=content, meta={**(self.meta or {}), "truncated": True})

    def replace(self, **changes: Any) -> Event:
        data = {name: getattr(self, name) for name in _FIELDS}
        data["ts_ms"] = self.ts_ms
        data.update(changes)
        return _made(**data)


# Records already in the journal's own shape, without a proof (bench/gen_journal.py's lines): keys in
# `to_dict`'s order, the ones every stored event has present. Each key tuple is answered once: the
# optional fields it holds, or None when it is not that shape.
_SHAPES: dict[tuple[str, ...], tuple[str, ...] | None] = {}
_SHAPE_LIMIT = 1024
_UNSEEN = ("",)   # not in `_SHAPES` (a shape with no optional field is `()`)


def stored_as_given(record: dict[str, Any], soft_cap: int) -> bool:
    """True when `record` is in the journal's own shape and `Event.from_input`, then the soft cap, would
    keep every value of it as it is: the event made from it is then written as `orjson.dumps(record)`.
    Checks only, each the one `from_input` makes or a stricter one; False on anything unusual (the
    general path decides, and refuses what it refuses)."""
    keys = tuple(record)
    optional = _SHAPES.get(keys, _UNSEEN)
    if optional is _UNSEEN:
        optional = _shape(keys)
    if optional is None:
        return False
    event_id, content, actor = record["id"], record["content"], record["actor"]
    limit = min(soft_cap, HARD_LIMIT_BYTES)   # under it nothing is cut or refused
    if not (type(event_id) is str and event_id and len(event_id) <= MAX_ID_LENGTH and event_id.isprintable()
            and event_id.strip() == event_id
            and type(content) is str and content and not content.isspace() and clean_text(content) is content
            and len(content) <= limit and (content.isascii() or len(content) * 4 <= limit)
            and canonical_moment(record["timestamp"]) is not None
            and known_label(record["source"]) and known_label(record["kind"])
            and type(actor) is dict and actor and actor == ACTOR_SEEN[0]):
        return False
    for name in optional:
        value = record[name]
        if name == "tags":
            if not (type(value) is list and 0 < len(value) <= MAX_TAGS
                    and all(type(t) is str and t and t.isprintable() and len(t) * 4 <= MAX_NAME_BYTES
                            and t.strip().lower() == t for t in value) and len(set(value)) == len(value)):
                return False
        elif name == "meta":
            if not (type(value) is dict and value and (blob := plain_meta(value)) is not None
                    and len(blob) <= MAX_META_BYTES):
                return False
        elif not (type(value) is str and value and value.strip() == value and (
                value.isprintable() and len(value) * 4 <= MAX_NAME_BYTES if name != "title"
                else len(value) <= MAX_TITLE_LENGTH and clean_text(value) is value)):
            return False
    return True


def _shape(keys: tuple[str, ...]) -> tuple[str, ...] | None:
    at = [_FIELDS.index(k) if k in FIELD_NAMES else -1 for k in keys]
    ok = -1 not in at and at == sorted(set(at)) and all(k in keys for k in _STORED)
    optional = tuple(k for k in keys if k not in _STORED) if ok else None
    if len(_SHAPES) < _SHAPE_LIMIT:
        _SHAPES[keys] = optional
    return optional


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
