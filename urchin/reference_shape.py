"""The reference Urchin's journal shape, folded into ours when a stored line is read.

The TypeScript reference writes `summary`, `metadata`, `provenance`, `identity` and `sessionId` beside
(or inside `meta` instead of) our fields; `Event.from_record` reads such a line into the same model
with these folds. A leaf of the standard library alone: the event model (`urchin/event.py`) calls it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["META_FALLBACKS", "actor_from_identity", "field_from_meta", "fold_extra"]

# meta keys a field is read from when the line lacks it: workspace, session (`sessionId`), title (`summary`)
META_FALLBACKS = ("workspace", "sessionId", "summary")


def field_from_meta(meta: dict[str, Any], key: str, limit: int, name: bool = True) -> str | None:
    """A field the reference kept in meta (`workspace`, `sessionId`, `summary`), taken out only when
    validation would accept it as that field; anything else stays in meta, so no stored line
    bypasses the field's rules (a 200 KB session, a terminal escape in a name)."""
    value = meta.get(key)
    if not isinstance(value, str) or not value or (name and not value.isprintable()) or "\x00" in value:
        return None
    if len(value) * 4 > limit and len(value.encode("utf-8", "surrogatepass")) > limit:
        return None
    del meta[key]
    return value


def actor_from_identity(identity: Any) -> dict[str, Any] | None:
    """The reference's `identity` ({accountId, deviceId} or similar) as our `actor` {account, device}."""
    if not isinstance(identity, dict):
        return None
    account = identity.get("account") or identity.get("accountId") or identity.get("account_id")
    device = identity.get("device") or identity.get("deviceId") or identity.get("device_id")
    actor = {k: v for k, v in (("account", account), ("device", device)) if isinstance(v, str)}
    return actor or None


def fold_extra(extra: dict[str, Any], meta: dict[str, Any]) -> None:
    """A line's keys that are no field of ours into `meta` (kept, never over a key meta has): the
    reference's `metadata` object key by key, anything else (`summary`, `provenance`, ...) as it is."""
    metadata = extra.pop("metadata", None)
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            meta.setdefault(key, value)
    elif metadata is not None:
        meta["metadata"] = metadata
    for key, value in extra.items():
        meta.setdefault(key, value)
