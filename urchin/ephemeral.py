"""Ephemeral mode: a file-backed flag every writer in every process checks before appending.

`$URCHIN_HOME/ephemeral` holds `{"started_at", "until"}`; while it is on, writes are dropped and
reported `suppressed`. An expired flag switches itself off. Suppressed writes are counted in
`$URCHIN_HOME/ephemeral.stats` so `urchin status` can show them.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypedDict

import orjson

from urchin.fileio import ensure_private_dir, write_private
from urchin.timestamps import format_timestamp, parse_timestamp

__all__ = ["Ephemeral", "EphemeralState", "EphemeralStatus"]


class EphemeralStatus(TypedDict):
    """`EphemeralState.to_dict()`: on or off, since and until when, writes suppressed in all."""

    on: bool
    startedAt: str | None
    until: str | None
    suppressedTotal: int


@dataclass(frozen=True, slots=True)
class EphemeralState:
    on: bool
    started_at: str | None = None
    until: str | None = None
    suppressed_total: int = 0

    def to_dict(self) -> EphemeralStatus:
        return {"on": self.on, "startedAt": self.started_at, "until": self.until,
                "suppressedTotal": self.suppressed_total}

    def describe(self) -> str:
        if not self.on:
            return f"ephemeral mode: off ({self.suppressed_total} writes suppressed so far)"
        until = f" until {self.until}" if self.until else " until turned off"
        return f"ephemeral mode: on since {self.started_at}{until} ({self.suppressed_total} writes suppressed so far)"


class Ephemeral:
    def __init__(self, home: Path) -> None:
        self.path = home / "ephemeral"
        self.stats_path = home / "ephemeral.stats"

    def is_on(self, now: datetime | None = None) -> bool:
        """`state(now).on` without the suppressed count (every write asks: one failed open when off)."""
        return self._state(now, count=False).on

    def state(self, now: datetime | None = None) -> EphemeralState:
        return self._state(now, count=True)

    def _state(self, now: datetime | None, count: bool) -> EphemeralState:
        now = now or datetime.now(UTC)
        total = self._suppressed_total() if count else 0
        try:
            record = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return EphemeralState(False, suppressed_total=total)
        except (OSError, orjson.JSONDecodeError):
            # An unreadable flag still means the user asked for privacy: fail closed.
            return EphemeralState(True, suppressed_total=total)
        until = record.get("until") if isinstance(record, dict) else None
        if isinstance(until, str):
            try:
                expired = parse_timestamp(until) <= now
            except Exception:
                expired = False
            if expired:
                self.path.unlink(missing_ok=True)
                return EphemeralState(False, suppressed_total=total)
        started = record.get("started_at") if isinstance(record, dict) else None
        return EphemeralState(True, started if isinstance(started, str) else None,
                              until if isinstance(until, str) else None, total)

    def start(self, minutes: float | None = None, now: datetime | None = None) -> EphemeralState:
        now = now or datetime.now(UTC)
        record = {"started_at": format_timestamp(now),
                  "until": format_timestamp(now + timedelta(minutes=minutes)) if minutes else None}
        write_private(self.path, orjson.dumps(record))
        return self.state(now)

    def end(self) -> EphemeralState:
        self.path.unlink(missing_ok=True)
        return self.state()

    def count_suppressed(self, n: int) -> None:
        if n <= 0:
            return
        ensure_private_dir(self.stats_path.parent)
        fd = os.open(self.stats_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 4096, 0)
            try:
                total = int(orjson.loads(raw).get("suppressed_total", 0)) if raw else 0
            except (orjson.JSONDecodeError, AttributeError, ValueError):
                total = 0
            data = orjson.dumps({"suppressed_total": total + n})
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)

    def _suppressed_total(self) -> int:
        try:
            return int(orjson.loads(self.stats_path.read_bytes()).get("suppressed_total", 0))
        except (OSError, orjson.JSONDecodeError, AttributeError, ValueError):
            return 0
