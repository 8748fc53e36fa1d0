"""Redaction of a whole event: every string it carries passes the same text rules.

Fields, as `Redactor.redact_event` applies them:
- content, title, workspace, session, brain: secrets become `[REDACTED:<type>]`;
- tags, source, kind: checked in the case they were *given* (validation lowercases them, which
  would hide `AKIA…`, `AIza…`, `eyJ…`), then lowercased again; a source or kind holding a secret
  becomes the label `redacted-<type>` so the event still validates when read back or imported;
- meta and actor: every key and every string value at any depth (a key that names a secret takes
  its whole string value);
- id: an id holding a secret becomes `redacted-<keyed hash of the id>` (see `_idkey`).
A secret found in one field is removed from every field (writers derive fields from each other:
a collector's id embeds the session, a workspace is the last part of meta's cwd, where the
context that made it recognisable may be gone). Every replacement is counted in
`meta.redactions`. Look-alikes (commit SHAs, UUIDs) pass everywhere: there is one rule set.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from urchin.event import Event
from urchin.redact._idkey import redacted_id
from urchin.redact._rules import keep_value, key_type

__all__ = ["FieldRedactor", "MARKER", "LABEL_MARKER", "replace_spans"]

MARKER = "[REDACTED:{}]"
LABEL_MARKER = "redacted-{}"
Span = tuple[int, int, str]
Spans = Callable[[str], list[Span]]
_CACHE_LIMIT = 8192
_PLAIN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{40}|[0-9a-f]{64}")
_SPREAD_MIN = 8  # shorter secrets (`password=dev`) are not chased through other fields: `device`


def replace_spans(text: str, spans: list[Span]) -> tuple[str, dict[str, int]]:
    """`text` with each span replaced by `[REDACTED:<type>]`, and the count per type."""
    parts: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    for start, end, typ in spans:
        parts.append(text[pos:start])
        parts.append(MARKER.format(typ))
        counts[typ] = counts.get(typ, 0) + 1
        pos = end
    parts.append(text[pos:])
    return "".join(parts), counts


@dataclass
class _Found:
    """What one event's pass has removed so far: counts per type, and the secrets themselves."""

    counts: dict[str, int] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)  # secret text -> type

    def add(self, counts: dict[str, int], secrets: dict[str, str]) -> None:
        for typ, n in counts.items():
            self.counts[typ] = self.counts.get(typ, 0) + n
        self.secrets.update(secrets)


class FieldRedactor:
    """Applies one rule set to every field of an event; its only state is a cache of clean strings."""

    def __init__(self, spans: Spans, id_key: Callable[[], bytes], plain_ids: bool = True) -> None:
        """`plain_ids`: a UUID or hex digest id skips the rules (not when extra patterns might match)."""
        self._spans = spans
        self._id_key = id_key
        self._plain_ids = plain_ids
        self._cache: dict[tuple[Any, str], str] = {}
        self._clean_labels: set[str] = set()

    def event(self, event: Event, given: Mapping[str, Any] | None = None) -> Event:
        """The event with secrets removed everywhere; the same object when there was none.

        Clean strings are cached, so the usual event (a fresh UUID, repeated labels, tags, actor and
        meta keys) costs one pass of the rules over its content and a few dictionary lookups."""
        cache = self._cache
        if (self._rest_clean(event, given)
                and (_PLAIN_ID.fullmatch(event.id) if self._plain_ids else not self._spans(event.id))
                and ((None, event.content) in cache or not self._spans(event.content))):
            return event
        found = _Found()
        fields: dict[str, Any] = {"content": self.string(None, event.content, found)}
        for name in ("title", "workspace", "session", "brain"):
            value = getattr(event, name)
            fields[name] = value if not value or (None, value) in cache else self.string(None, value, found)
        for name in ("source", "kind"):
            fields[name] = self._label(getattr(event, name), _given(given, name), found)
        fields["tags"] = self._tags(event.tags, given.get("tags") if given else None, found)
        fields["actor"] = self.walk(event.actor, found) if event.actor else event.actor
        fields["meta"] = self.walk(event.meta, found) if event.meta else event.meta
        id_spans = [] if self._plain_ids and _PLAIN_ID.fullmatch(event.id) else self._spans(event.id)
        if id_spans:
            found.add(*_secrets(event.id, id_spans))
        if not found.counts:
            return event
        needles = sorted((s for s in found.secrets if len(s) >= _SPREAD_MIN), key=len, reverse=True)
        if needles:
            fields = _spread(fields, needles, found)
        derived = None if id_spans else _holds(event.id, needles, found)
        if id_spans or derived:
            fields["id"] = redacted_id(self._id_key(), event.id)
            if derived:
                _count(found.counts, derived)
        meta = dict(fields["meta"] or {})
        old = meta.get("redactions")
        merged = dict(old) if isinstance(old, dict) else {}
        for typ, n in found.counts.items():
            prior = merged.get(typ)
            merged[typ] = (prior if isinstance(prior, int) else 0) + n
        meta["redactions"] = merged
        fields["meta"] = meta
        changed = {k: v for k, v in fields.items() if v is not getattr(event, k)}
        return event.replace(**changed)

    def _rest_clean(self, event: Event, given: Mapping[str, Any] | None) -> bool:
        """Lookups only: every field but content and id is a string already found clean."""
        cache = self._cache
        for value in (event.title, event.workspace, event.session, event.brain):
            if value and (None, value) not in cache:
                return False
        labels = self._clean_labels
        if event.source not in labels or event.kind not in labels:
            return False
        if given:
            if given.get("source", event.source) != event.source or given.get("kind", event.kind) != event.kind:
                return False  # given in another case: the full path checks that
            tags = given.get("tags")
            if tags and (not isinstance(tags, (list, tuple)) or tuple(tags) != event.tags):
                return False
        for tag in event.tags:
            if (None, tag) not in cache:
                return False
        return not (event.actor and not self._clean_dict(event.actor)
                    or event.meta and not self._clean_dict(event.meta))

    def keeps(self, record: Mapping[str, Any]) -> bool:
        """`event`'s first test, for a record `urchin.event.stored_as_given` accepted (the event made
        from it holds its values as they are, and it is its own `given`): True when that event would
        come back unchanged from it. The same lookups, the same rules over the content; False
        whenever `event` would look further (it decides then)."""
        if not self._plain_ids or not _PLAIN_ID.fullmatch(record["id"]):
            return False
        labels, cache = self._clean_labels, self._cache
        if record["source"] not in labels or record["kind"] not in labels:
            return False
        for name in ("title", "workspace", "session", "brain"):
            value = record.get(name)
            if value is not None and (None, value) not in cache:
                return False
        for tag in record.get("tags", ()):
            if (None, tag) not in cache:
                return False
        meta = record.get("meta")
        if not self._clean_dict(record["actor"]) or meta and not self._clean_dict(meta):
            return False
        content = record["content"]
        return (None, content) in cache or not self._spans(content)

    def event_id(self, event_id: str) -> tuple[str, dict[str, int]]:
        """An id holding a secret -> `redacted-<keyed hash>`, with the count of what it held."""
        spans = self._spans(event_id)
        if not spans:
            return event_id, {}
        return redacted_id(self._id_key(), event_id), _secrets(event_id, spans)[0]

    def _label(self, label: str, given: str | None, found: _Found) -> str:
        """A new label when the source or kind (as given, before lowercasing) held a secret."""
        probe = given.strip() if given is not None and given.strip().lower() == label else label
        if probe in self._clean_labels:
            return label
        spans = self._spans(probe)
        if not spans:
            if len(self._clean_labels) > _CACHE_LIMIT:
                self._clean_labels.clear()
            self._clean_labels.add(probe)
            return label
        found.add(*_secrets(probe, spans))
        return LABEL_MARKER.format(spans[0][2])

    def _tags(self, tags: tuple[str, ...], given: Any, found: _Found) -> tuple[str, ...]:
        """Checked as given, then lowercased and deduplicated as validation does."""
        if not tags:
            return tags
        raw: Any = tags
        if given is not None and (not isinstance(given, (list, tuple)) or tuple(given) != tags):
            raw = [t.strip() for t in given if t.strip()] if _strings(given) else []
            if tuple(dict.fromkeys(t.lower() for t in raw)) != tags:
                raw = tags  # not what validation made of `given`: check the tags themselves
        cache = self._cache
        for tag in raw:
            if (None, tag) not in cache:
                break
        else:
            return tags
        seen = sum(found.counts.values())
        new = [self.string(None, tag, found).lower() for tag in raw]
        return tags if sum(found.counts.values()) == seen else tuple(dict.fromkeys(new))

    def walk(self, value: Any, found: _Found) -> Any:
        """Redact every key and string in JSON-like data; unchanged containers are returned as is."""
        if isinstance(value, dict):
            if self._clean_dict(value):
                return value
            pairs = [(self.string(None, k, found) if isinstance(k, str) else k,
                      self.string(k, v, found) if isinstance(v, str) else self.walk(v, found))  # typed by the key
                     for k, v in value.items()]
            return _rebuilt(value, pairs)
        if isinstance(value, (list, tuple)):
            items = [self.string(None, v, found) if isinstance(v, str) else self.walk(v, found) for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                return tuple(items) if isinstance(value, tuple) else items
        return value

    def _clean_dict(self, value: dict[Any, Any]) -> bool:
        """Every key and value is a cached clean string (or a number, bool, null): nothing to do.
        A (key, value) pair is cached only once its key is, so one lookup answers for both."""
        cache = self._cache
        for k, v in value.items():
            kind = type(v)
            if kind is str:
                if (k, v) not in cache:
                    return False
            elif kind is dict or kind is list or kind is tuple or (None, k) not in cache:
                return False
        return True

    def string(self, key: Any, value: str, found: _Found) -> str:
        """A string under a key that names a secret goes whole (`{"api_key": "…"}`).

        Short clean (key, value) pairs repeat across events (`"tool": "Bash"`), so they are cached;
        a value that held a secret is never kept in the cache.
        """
        cache_key = (key, value)
        if cache_key in self._cache:
            return value
        typed = key_type(key) if isinstance(key, str) else None
        if typed is not None and value and not keep_value(value, key, typed[1], typed[0], True):
            typ = typed[0] if typed[1] else "high_entropy_secret"
            found.add({typ: 1}, {value: typ})
            return MARKER.format(typ)
        spans = self._spans(value)
        if spans:
            found.add(*_secrets(value, spans))
            return replace_spans(value, spans)[0]
        if len(value) < 256 and (key is None or (None, key) in self._cache):
            if len(self._cache) > _CACHE_LIMIT:
                self._cache.clear()
            self._cache[cache_key] = value
        return value


def _secrets(text: str, spans: list[Span]) -> tuple[dict[str, int], dict[str, str]]:
    counts: dict[str, int] = {}
    secrets: dict[str, str] = {}
    for start, end, typ in spans:
        _count(counts, typ)
        secrets[text[start:end]] = typ
    return counts, secrets


def _spread(fields: dict[str, Any], needles: list[str], found: _Found) -> dict[str, Any]:
    """Remove every secret found anywhere from every field, as written or lowercased."""
    def scrub(value: str) -> str:  # the same object when there was nothing to remove
        for needle in needles:
            typ = found.secrets[needle]
            for form in dict.fromkeys((needle, needle.lower())):
                if form in value:
                    for _ in range(value.count(form)):
                        _count(found.counts, typ)
                    value = value.replace(form, MARKER.format(typ))
        return value

    out = dict(fields)
    for name in ("content", "title", "workspace", "session", "brain"):
        if out[name]:
            out[name] = scrub(out[name])
    for name in ("source", "kind"):
        typ = _holds(out[name], needles, found)
        if typ is not None:
            _count(found.counts, typ)
            out[name] = LABEL_MARKER.format(typ)
    tags = [scrub(t) for t in out["tags"]]
    if any(a is not b for a, b in zip(tags, out["tags"], strict=True)):
        out["tags"] = tuple(dict.fromkeys(t.lower() for t in tags))
    for name in ("actor", "meta"):
        if out[name]:
            out[name] = _map_strings(out[name], scrub)
    return out


def _holds(value: str, needles: list[str], found: _Found) -> str | None:
    """The type of the first secret `value` holds, as written or lowercased; None when clean."""
    for needle in needles:
        if needle in value or needle.lower() in value:
            return found.secrets[needle]
    return None


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """`fn` over every key and string in JSON-like data; unchanged containers returned as is."""
    if isinstance(value, dict):
        return _rebuilt(value, [(fn(k) if isinstance(k, str) else k,
                                 fn(v) if isinstance(v, str) else _map_strings(v, fn)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        items = [fn(v) if isinstance(v, str) else _map_strings(v, fn) for v in value]
        if any(a is not b for a, b in zip(items, value, strict=True)):
            return tuple(items) if isinstance(value, tuple) else items
    return value


def _rebuilt(value: dict[Any, Any], pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """`value` itself when no key or value changed; else a new dict in which keys that held
    different secrets stay different keys (`~2`)."""
    if all(nk is k and nv is v for (nk, nv), (k, v) in zip(pairs, value.items(), strict=True)):
        return value
    out: dict[Any, Any] = {}
    for k, v in pairs:
        key, n = k, 1
        while key in out:
            n += 1
            key = f"{k}~{n}"
        out[key] = v
    return out


def _count(counts: dict[str, int], typ: str) -> None:
    counts[typ] = counts.get(typ, 0) + 1


def _given(given: Mapping[str, Any] | None, name: str) -> str | None:
    value = given.get(name) if given else None
    return value if isinstance(value, str) else None


def _strings(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
