"""`Memory.status`: the home at a glance (the journal's counts, ephemeral mode, the substring index,
the daemon, the embedder, the database), read without opening a database."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import orjson

from urchin.config import Settings
from urchin.facade.hybrid import HybridIndex
from urchin.facade.semantic import SemanticViews
from urchin.facade.writing import WritePath
from urchin.journal import Journal
from urchin.search.substring import SubstringSearcher
from urchin.timestamps import format_timestamp

if TYPE_CHECKING:
    from urchin.ephemeral import EphemeralStatus
    from urchin.hybrid.base import SkippedEvents
    from urchin.jsontypes import JSONObject

__all__ = ["HomeStatus", "home_status"]


class HomeStatus(TypedDict):
    """`Memory.status()`: what `urchin status`, `/status` and the MCP tool show (the daemon's route sets
    `daemon` to its own fuller state)."""

    journal: str
    sizeBytes: int
    events: int
    firstTimestamp: str | None
    lastTimestamp: str | None
    invalidLines: int
    tornRecords: int
    ephemeral: EphemeralStatus
    substringIndex: JSONObject
    daemon: JSONObject | None
    embedder: JSONObject | None
    database: str
    home: str
    now: str
    indexSkippedEvents: NotRequired[SkippedEvents]


def home_status(settings: Settings, journal: Journal, write: WritePath, substring: SubstringSearcher,
                semantic: SemanticViews, index: HybridIndex) -> HomeStatus:
    stats = journal.stats()
    out: HomeStatus = {
        "journal": stats.path,
        "sizeBytes": stats.size_bytes,
        "events": stats.events,
        "firstTimestamp": stats.first_timestamp,
        "lastTimestamp": stats.last_timestamp,
        "invalidLines": stats.invalid_lines,
        "tornRecords": stats.torn_records,
        "ephemeral": write.ingestor.ephemeral.state().to_dict(),
        "substringIndex": substring.index_state(),
        "daemon": _daemon_state(settings),
        "embedder": semantic.state(),
        "database": (("URCHIN_DATABASE_URL" if settings.database_url else f"embedded ({settings.pg_dir})")
                     + "; `urchin index --status` for the hybrid index"),
        "home": str(settings.home),
        "now": format_timestamp(ms=False),
    }
    service = index.opened
    skipped = service.skipped_events() if service is not None else None
    if skipped:   # rows the index database refused while this process fed it
        out["indexSkippedEvents"] = skipped
    return out


def _daemon_state(settings: Settings) -> dict[str, Any] | None:
    """The daemon named in daemon.json, when its pid is alive (cheap: no connection)."""
    try:
        info = orjson.loads(settings.daemon_file.read_bytes())
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
    return {"pid": info["pid"], "address": info.get("address"), "started": info.get("started")}
