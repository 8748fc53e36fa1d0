"""Redaction of a whole event: every string it carries passes the same text rules.

Fields, as `Redactor.redact_event` applies them:
- content, title, workspace, session, brain: secrets become `[REDACTED:<type>]`;
- tags, source, kind: checked in the case they were *given* (validation lowercases them, which
  would hide `AKIA…`, `AIza…`, `eyJ…`), then lowercased again; a source or kind holding a secret
  becomes the label `redacted-<type>` so the event still validates when read back or imported;
- meta and actor: every key and every string value at any depth (a key that names a secret takes
  its whole string value);
- id: an id holding a secret becomes `redacted-<keyed hash of the id>` (see `_idkey`).
Every replacement is counted in `meta.redactions`. Look-alikes (commit SHAs, UUIDs) pass
everywhere, as they do in content: there is one rule set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from urchin.event import Event
from urchin.redact._idkey import redacted_id
from urchin.redact._rules import keep_value, key_type

__all__ = ["FieldRedactor", "MARKER", "LABEL_MARKER"]

MARKER = "[REDACTED:{}]"
LABEL_MARKER = "redacted-{}"
TextRule = Callable[[str], tuple[str, dict[str, int]]]
Spans = Callable[[str], list[tuple[int, int, str]]]
_CACHE_LIMIT = 8192


class FieldRedactor:
    """Applies one text rule to every field of an event; its only state is a cache of clean strings."""

    def __init__(self, text_rule: TextRule, spans: Spans, id_key: Callable[[], bytes]) -> None:
        self._text = text_rule
        self._spans = spans
        self._id_key = id_key
        self._cache: dict[tuple[Any, str], tuple[str, dict[str, int]]] = {}

    def event(self, event: Event, given: Mapping[str, Any] | None = None) -> Event:
        """The event with secrets removed everywhere; the same object when there was none."""
        content, counts = self._text(event.content)  # a fresh dict: ours to extend
        changes: dict[str, Any] = {}
        for name in ("title", "workspace", "session", "brain"):
            value = getattr(event, name)
            if value:
                new = self.string(None, value, counts)
                if new is not value:
                    changes[name] = new
        for name in ("source", "kind"):
            label = self._label(getattr(event, name), _given(given, name), counts)
            if label is not None:
                changes[name] = label
        tags = self._tags(event.tags, given.get("tags") if given else None, counts)
        if tags is not None:
            changes["tags"] = tags
        if event.actor:
            actor = self.walk(event.actor, counts)
            if actor is not event.actor:
                changes["actor"] = actor
        new_id, id_counts = self.event_id(event.id)
        if id_counts:
            changes["id"] = new_id
            _merge(counts, id_counts)
        meta = self.walk(event.meta, counts) if event.meta else event.meta
        if not counts:
            return event
        meta = dict(meta or {})
        old = meta.get("redactions")
        merged = dict(old) if isinstance(old, dict) else {}
        for typ, n in counts.items():
            prior = merged.get(typ)
            merged[typ] = (prior if isinstance(prior, int) else 0) + n
        meta["redactions"] = merged
        return event.replace(content=content, meta=meta, **changes)

    def event_id(self, event_id: str) -> tuple[str, dict[str, int]]:
        """An id holding a secret -> `redacted-<keyed hash>`, with the count of what it held."""
        spans = self._spans(event_id)
        if not spans:
            return event_id, {}
        counts: dict[str, int] = {}
        for _, _, typ in spans:
            counts[typ] = counts.get(typ, 0) + 1
        return redacted_id(self._id_key(), event_id), counts

    def _label(self, label: str, given: str | None, counts: dict[str, int]) -> str | None:
        """A new label when the source or kind (as given, before lowercasing) held a secret."""
        probe = given.strip() if given is not None and given.strip().lower() == label else label
        spans = self._spans(probe)
        if not spans:
            return None
        for _, _, typ in spans:
            counts[typ] = counts.get(typ, 0) + 1
        return LABEL_MARKER.format(spans[0][2])

    def _tags(self, tags: tuple[str, ...], given: Any, counts: dict[str, int]) -> tuple[str, ...] | None:
        """New tags when any held a secret: checked as given, then lowercased and deduplicated as
        validation does. None when nothing changed."""
        raw = [t.strip() for t in given if t.strip()] if _strings(given) else []
        if tuple(dict.fromkeys(t.lower() for t in raw)) != tags:
            raw = list(tags)  # not what validation made of `given`: check the tags themselves
        if not raw:
            return None
        seen = sum(counts.values())
        new = [self.string(None, tag, counts).lower() for tag in raw]
        if sum(counts.values()) == seen:
            return None
        return tuple(dict.fromkeys(new))

    def walk(self, value: Any, counts: dict[str, int]) -> Any:
        """Redact every key and string in JSON-like data; unchanged containers are returned as is."""
        if isinstance(value, dict):
            return self._walk_dict(value, counts)
        if isinstance(value, (list, tuple)):
            items = [self.string(None, v, counts) if isinstance(v, str) else self.walk(v, counts) for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                return tuple(items) if isinstance(value, tuple) else items
        return value

    def _walk_dict(self, value: dict[Any, Any], counts: dict[str, int]) -> dict[Any, Any]:
        pairs: list[tuple[Any, Any]] | None = None
        for n, (k, v) in enumerate(value.items()):
            nk = self.string(None, k, counts) if isinstance(k, str) else k
            if isinstance(v, str):
                nv: Any = self.string(k, v, counts)  # typed by the key as given: `api_key` takes its value
            elif isinstance(v, (dict, list, tuple)):
                nv = self.walk(v, counts)
            else:
                nv = v
            if pairs is None and (nk is not k or nv is not v):
                pairs = list(value.items())[:n]
            if pairs is not None:
                pairs.append((nk, nv))
        if pairs is None:
            return value
        out: dict[Any, Any] = {}
        for k, v in pairs:
            key, n = k, 1
            while key in out:  # two keys that held different secrets stay two keys
                n += 1
                key = f"{k}~{n}"
            out[key] = v
        return out

    def string(self, key: Any, value: str, counts: dict[str, int]) -> str:
        """A string under a key that names a secret goes whole (`{"api_key": "…"}`).

        Short clean (key, value) pairs repeat across events (`"tool": "Bash"`), so they are cached;
        a value that held a secret is never kept in the cache.
        """
        cache_key = (key, value)
        hit = self._cache.get(cache_key)
        if hit is None:
            hit = self._string_uncached(key, value)
            if len(value) < 256 and not hit[1]:
                if len(self._cache) > _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[cache_key] = hit
        if hit[1]:
            _merge(counts, hit[1])
            return hit[0]
        return value

    def _string_uncached(self, key: Any, value: str) -> tuple[str, dict[str, int]]:
        typed = key_type(key) if isinstance(key, str) else None
        if typed is not None and value and not keep_value(value, key, typed[1], typed[0], True):
            typ = typed[0] if typed[1] else "high_entropy_secret"
            return MARKER.format(typ), {typ: 1}
        return self._text(value)


def _given(given: Mapping[str, Any] | None, name: str) -> str | None:
    value = given.get(name) if given else None
    return value if isinstance(value, str) else None


def _strings(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _merge(into: dict[str, int], counts: dict[str, int]) -> None:
    for typ, n in counts.items():
        into[typ] = into.get(typ, 0) + n
