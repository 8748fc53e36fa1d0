"""Query parameters shared by every search: validation with clear errors, filters, windows, hits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from urchin.errors import QueryError
from urchin.event import Event, clean_text
from urchin.params.limits import MAX_LIMIT
from urchin.params.search import label_filter
from urchin.timestamps import MAX_HOURS, format_timestamp
from urchin.value_checks import check_number

__all__ = ["Filters", "Hit", "SearchResult", "check_query", "check_hours", "check_limit", "window_start_ms",
           "MAX_LIMIT", "one_line", "AUDIT", "hides_audit", "older_hint"]

AUDIT = ("urchin", "recall")   # (source, kind) of recall's audit events: out of every search by default


def check_query(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise QueryError("query", "must not be empty", message="query must not be empty")
    return clean_text(text)   # NUL and lone surrogates as the events store them (U+FFFD)


def check_hours(hours: Any, name: str = "hours") -> float:
    """A time window in hours: finite, greater than 0, at most `MAX_HOURS` (so `now - hours` is a date)."""
    if isinstance(hours, bool):
        raise QueryError(name, f"must be a number greater than 0, got {hours!r}")
    try:
        value = float(hours)
    except (TypeError, ValueError, OverflowError):
        raise QueryError(name, f"must be a number greater than 0, got {hours!r}") from None
    if not 0 < value <= MAX_HOURS:   # false for nan too
        raise QueryError(name, f"must be greater than 0 and at most {MAX_HOURS:.0f} (about 1,140 years), "
                               f"got {hours!r}")
    return value


def check_limit(limit: Any, maximum: int = MAX_LIMIT) -> int:
    return int(check_number(limit, "limit", whole=True, low=1, high=maximum, from_text=True))


def window_start_ms(hours: float, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    return int(now.timestamp() * 1000 - hours * 3_600_000)


def older_hint(ts_ms: int, now: datetime | None = None) -> dict[str, Any]:
    """`{timestamp, hours}` for a match older than the window: when it was, and a round window
    (1, 2, 5 times a power of ten hours) that reaches it, for "try --hours 1000"."""
    now = now or datetime.now(UTC)
    age = max(0.0, now.timestamp() * 1000 - ts_ms) / 3_600_000 * 1.01   # a little room: time moves on
    rounds = (step * 10 ** power for power in range(8) for step in (1, 2, 5))
    hours = next((h for h in rounds if h >= age), MAX_HOURS)
    stamp = format_timestamp(datetime.fromtimestamp(ts_ms / 1000, UTC), ms=False)
    return {"timestamp": stamp, "hours": int(min(hours, MAX_HOURS))}


def hides_audit(sources: Sequence[str], kinds: Sequence[str], session: str | None) -> bool:
    """Recall's audit events (source urchin, kind recall) are left out of every search (journal views
    and the hybrid index alike) unless asked for by name, or by their session (a session's own view
    shows what it was told: the viewer, session_context)."""
    return AUDIT[0] not in sources and AUDIT[1] not in kinds and session is None


@dataclass(frozen=True, slots=True)
class Filters:
    """Exact-match filters on event fields; `None` means any."""

    source: str | None = None
    workspace: str | None = None
    session: str | None = None
    kind: str | None = None

    @classmethod
    def of(cls, source: str | None = None, workspace: str | None = None, session: str | None = None,
           kind: str | None = None) -> Filters:
        return cls(label_filter(source, "source"), workspace or None, session or None, label_filter(kind, "kind"))

    def match(self, event: Event) -> bool:
        if self.hides(event):
            return False
        return ((self.source is None or event.source == self.source)
                and (self.workspace is None or event.workspace == self.workspace)
                and (self.session is None or event.session == self.session)
                and (self.kind is None or event.kind == self.kind))

    def hides(self, event: Event) -> bool:
        return (event.kind == AUDIT[1] and event.source == AUDIT[0]
                and hides_audit((self.source,) if self.source else (), (self.kind,) if self.kind else (),
                                self.session))

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("source", self.source), ("workspace", self.workspace),
                                  ("session", self.session), ("kind", self.kind)) if v is not None}


@dataclass(frozen=True, slots=True)
class Hit:
    event: Event
    score: float | None = None
    explain: dict[str, Any] | None = None   # how `score` was made, when asked (`urchin semantic --explain`)

    def to_dict(self) -> dict[str, Any]:
        out = self.event.to_dict()
        if self.score is not None:
            out["score"] = round(self.score, 6)
        if self.explain is not None:
            out["explain"] = self.explain
        return out


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What every front end formats: the hits, best or newest first, and how they were found."""

    hits: list[Hit]
    query: str | None = None
    mode: str = "substring"
    notes: list[str] = field(default_factory=list)
    weak: bool = False  # ranked search only: the best match is poor (or there is none); `hint` says what to try
    hint: str | None = None
    older: dict[str, Any] | None = None  # substring search found nothing: `{timestamp, hours}` of an older match

    @property
    def events(self) -> list[Event]:
        return [hit.event for hit in self.hits]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"events": [hit.to_dict() for hit in self.hits], "totalResults": len(self.hits),
                               "mode": self.mode}
        if self.query is not None:
            out["query"] = self.query
        if self.notes:
            out["notes"] = self.notes
        if self.weak:
            out["weak"] = True
            out["hint"] = self.hint
        if self.older:
            out["olderMatch"] = self.older
        return out


def one_line(event: Event, width: int = 200, score: float | None = None, device: bool = False) -> str:
    """`[2026-05-04T20:00:00Z] claude — content on one line, cut at 200 chars`; with `device`, the
    machine that wrote it too: `[...] claude on desk — ...` (team search)."""
    text = " ".join(event.content.split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    stamp = event.timestamp[:19] + "Z"
    prefix = f"[{stamp}] {event.source}"
    if device:
        prefix += f" on {(event.actor or {}).get('device') or 'an unnamed device'}"
    if score is not None:
        prefix += f" ({score:.3f})"
    return f"{prefix} — {text}"
