"""Ids derived from an event's content (`claude:<session>:prompt:<digest>`, a shell command's
`shell:<shell>:<epoch>:<digest>`): how they are keyed, and how the ids they replace are found again.

A plain sha256 of the text let anyone holding the journal, or an ingest-only token posting a guessed
id, confirm a guessed prompt. Within `keyed_ids` (every collector run, every hook) `short_hash` is an
HMAC under the install key's derived-id subkey (`subkeys.py`: no oracle that names ids can make
it), so the hook and the collector reading the same transcript still make the same id. An event
collected before under its plain id is not stored again: `FormerIds` tells the collector.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from urchin.config import Settings
from urchin.subkeys import DERIVED_ID, subkey

__all__ = ["keyed_ids", "short_hash", "plain_hash", "former_id", "pending_former", "FormerIds"]

_MAX_FORMER = 100_000                       # keyed -> plain digests remembered per `keyed_ids` (a bound)
_HEX = re.compile(r"[0-9a-f]{16,64}")
_KEYED: ContextVar[tuple[bytes, dict[str, str]] | None] = ContextVar("urchin_keyed_ids", default=None)


@contextmanager
def keyed_ids(key: bytes) -> Iterator[dict[str, str]]:
    """Within: `short_hash` is keyed by `key` (the install key: its derived-id subkey is used);
    yields {keyed digest: the plain one it replaces}."""
    former: dict[str, str] = {}
    token = _KEYED.set((subkey(key, DERIVED_ID), former))
    try:
        yield former
    finally:
        _KEYED.reset(token)


def short_hash(*parts: str, length: int = 16) -> str:
    """The digest an id derived from `parts` carries: keyed within `keyed_ids`, else plain sha256
    (what ids were before: `former_id` finds those again)."""
    data = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    plain = hashlib.sha256(data).hexdigest()[:length]
    keyed = _KEYED.get()
    if keyed is None:
        return plain
    key, former = keyed
    digest = hmac.new(key, data, hashlib.sha256).hexdigest()[:length]
    if len(former) < _MAX_FORMER:
        former[digest] = plain
    return digest


def former_id(event_id: Any, former: Mapping[str, str]) -> str | None:
    """The id an item had before ids were keyed (each keyed digest in it back to its plain one), or
    None when it holds no keyed digest."""
    if not isinstance(event_id, str) or not former:
        return None
    out = event_id
    for part in _HEX.findall(event_id):
        if part in former:
            out = out.replace(part, former[part])
    return out if out != event_id else None


def plain_hash(*parts: str, length: int = 16) -> str:
    """A name's fitted suffix (`fit_names`): a name is no secret, and keeping it plain keeps it stable."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:length]


def pending_former() -> dict[str, str]:
    """The {keyed digest: plain digest} made so far within the current `keyed_ids` ({} outside)."""
    keyed = _KEYED.get()
    return keyed[1] if keyed else {}


class FormerIds:
    """Whether the journal holds (or forgot) an event under its former, unkeyed id: a transcript
    collected before ids were keyed is not stored a second time, nor a forgotten event brought back."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def held(self, former: Sequence[str | None]) -> dict[int, str]:
        """{index: "duplicate" | "suppressed"} for each former id the journal holds or forgot."""
        # imported here: a hook (which imports this module with its adapter) never asks
        from urchin.idindex import IdIndex
        from urchin.journal import Journal
        from urchin.tombstones import ForgetLog, forget_hash

        journal = Journal(self.settings.journal_path, self.settings.durability)
        if not journal.path.exists():
            return {}
        ids = IdIndex(journal)
        with journal.locked():
            ids.catch_up()
        forgotten = ForgetLog(journal).hashes()
        out: dict[int, str] = {}
        for index, event_id in enumerate(former):
            if not event_id:
                continue
            if forgotten and forget_hash(event_id) in forgotten:
                out[index] = "suppressed"
            elif ids.contains(event_id):
                out[index] = "duplicate"
        return out
