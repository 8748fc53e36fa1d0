"""What a search index needs of a stored journal line, read without building an `Event`.

A token-cosine build (`search/cosine_extract.py`) reads millions of lines: `searchable_fields` reads a line
of our own shape inline, by `Event.from_record`'s rules, and hands any other (the reference shape, meta
fallbacks) to `from_record` itself, so both read every line the same (tests/test_cosine_extract.py).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from urchin.event import FIELD_NAMES, PROOF_FIELD, Event
from urchin.reference_shape import META_FALLBACKS
from urchin.timestamps import CANONICAL_TIMESTAMP, epoch_ms, read_stored_timestamp

__all__ = ["SearchableFields", "searchable_fields"]

# (id, ts_ms, source, kind, content, workspace, session, title, tags)
SearchableFields = tuple[str, int, str, str, str, str | None, str | None, str | None, tuple[str, ...]]

# the keys a stored line may have for `searchable_fields` to read it inline: `from_record` ignores the
# proof, so a line the write path signed (every line it makes) need not take the slow path
_STORED_KEYS = FIELD_NAMES | {PROOF_FIELD}


def searchable_fields(record: Any) -> SearchableFields | None:
    """What a search index needs of a stored line's object, read exactly as `Event.from_record` reads
    it, without building an `Event` (index builds read millions of lines). None when not an event."""
    if not isinstance(record, dict):
        return None
    meta = record.get("meta")
    if not record.keys() <= _STORED_KEYS or (isinstance(meta, dict) and not meta.keys().isdisjoint(META_FALLBACKS)):
        event = Event.from_record(record)  # the reference shape and meta fallbacks: the one slow path
        if event is None:
            return None
        return (event.id, event.ts_ms, event.source, event.kind, event.content, event.workspace,
                event.session, event.title, event.tags)
    get = record.get  # the rest is `from_record`'s rules, inlined: this runs once per line of a build
    content, event_id, ts = get("content"), get("id"), get("timestamp")
    if not (isinstance(content, str) and content and isinstance(event_id, str) and isinstance(ts, str)):
        return None
    base = _MINUTE_US.get(ts[:17])
    if base is not None and _SECONDS.fullmatch(ts, 17):   # a minute already read, and seconds in range
        ms = int((base + int(ts[17:19] + ts[20:23]) * 1000) / 1_000_000 * 1000)   # `epoch_ms`'s float steps
    else:
        read = _stored_ms(ts)
        if read is None:
            return None
        ms = read
    source, kind, workspace, session, title, tags = (
        get("source"), get("kind"), get("workspace"), get("session"), get("title"), get("tags"))
    return (event_id, ms,
            source if isinstance(source, str) and source else "unknown",
            kind if isinstance(kind, str) and kind else "note",
            content,
            workspace if isinstance(workspace, str) and workspace else None,
            session if isinstance(session, str) and session else None,
            title if isinstance(title, str) and title else None,
            tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ())


# A canonical timestamp's minute ("2026-09-05T18:41:") -> its microseconds since the epoch, for the
# lines of a build (in time order, ~1,440 minutes a day): a line of a known minute is read with one
# slice, a check of its seconds and integer steps. Bounded: cleared when full.
_MINUTE_US: dict[str, int] = {}
_MINUTES_KEPT = 4096
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECONDS = re.compile(r"[0-5][0-9]\.[0-9]{3}Z")     # ASCII digits only, as `fromisoformat` reads them


def _stored_ms(ts: str) -> int | None:
    """`searchable_fields`' timestamp read the general way (noting a canonical one's minute)."""
    if CANONICAL_TIMESTAMP.fullmatch(ts):
        try:
            moment = datetime.fromisoformat(ts[:-1] + "+00:00")
        except ValueError:
            return None
        if len(_MINUTE_US) >= _MINUTES_KEPT:
            _MINUTE_US.clear()
        # the microseconds `timestamp()` divides (an aware datetime: its difference from the epoch)
        delta = moment.replace(second=0, microsecond=0) - _EPOCH
        _MINUTE_US[ts[:17]] = (delta.days * 86_400 + delta.seconds) * 1_000_000
        return epoch_ms(moment)
    read = read_stored_timestamp(ts)
    return None if read is None else epoch_ms(read[1])
