"""Time as Urchin reads and writes it: RFC 3339 in, UTC with `Z` and milliseconds out
(`format_timestamp`, the one way), the range every stored time lies in, and the longest time window
a query may ask for. A leaf: standard library and the error tree only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from urchin.clipping import quoted
from urchin.errors import ValidationError

__all__ = ["parse_timestamp", "format_timestamp", "read_stored_timestamp", "canonical_moment", "epoch_ms",
           "CANONICAL_TIMESTAMP", "MIN_TIMESTAMP", "MAX_TIMESTAMP", "MAX_HOURS"]

# Every timestamp Urchin accepts, after conversion to UTC: formatting (4-digit years), arithmetic
# and PostgreSQL timestamptz all work inside it.
MIN_TIMESTAMP = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TIMESTAMP = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
MAX_HOURS = 10_000_000.0          # a time window of about 1,140 years reaches back before MIN_TIMESTAMP
CANONICAL_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")   # as `format_timestamp` writes


def parse_timestamp(value: Any, field_name: str = "timestamp") -> datetime:
    """RFC 3339 (or ISO 8601 with an offset) -> aware UTC datetime; naive times are taken as UTC."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field_name, "must be an RFC 3339 timestamp string")
    text = value.strip()
    if text[-1:] in "zZ":
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1) if "T" not in text else text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        moment = parsed.astimezone(UTC)
    except OverflowError:   # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        moment = None
    except ValueError:
        raise ValidationError(field_name, f"must be an RFC 3339 timestamp, got {quoted(value)}") from None
    if moment is None or not MIN_TIMESTAMP <= moment <= MAX_TIMESTAMP:
        raise ValidationError(field_name, f"must be between {format_timestamp(MIN_TIMESTAMP)} and "
                                          f"{format_timestamp(MAX_TIMESTAMP)} (UTC), got {quoted(value)}")
    return moment


def format_timestamp(moment: datetime | None = None, *, ms: bool = True) -> str:
    """The one way Urchin writes a time: UTC with `Z`, milliseconds unless `ms=False`
    (`2026-05-04T20:00:00.000Z`); `moment` defaults to now. A naive `moment` is taken as UTC."""
    moment = datetime.now(UTC) if moment is None else (
        moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC))
    # isoformat of an aware UTC time ends in "+00:00"; it always writes four year digits
    # (strftime's %Y does not below 1000) and costs half as much (once per event written).
    return moment.isoformat(timespec="milliseconds" if ms else "seconds")[:-6] + "Z"


def canonical_moment(value: Any) -> datetime | None:
    """The moment of a timestamp already written as Urchin writes it (`2026-09-05T18:41:50.563Z`, in
    range), as `parse_timestamp` reads it, without its general steps; None for any other value."""
    if not isinstance(value, str) or value[:1] == "0" or not CANONICAL_TIMESTAMP.fullmatch(value):
        return None
    try:
        moment = datetime.fromisoformat(value[:-1] + "+00:00")
    except ValueError:
        return None
    return moment if MIN_TIMESTAMP <= moment <= MAX_TIMESTAMP else None


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch, as `Event.ts_ms` holds them."""
    return int(moment.timestamp() * 1000)


def read_stored_timestamp(ts: str) -> tuple[str, datetime] | None:
    """A stored timestamp -> (canonical text, moment), or None when it does not parse."""
    if CANONICAL_TIMESTAMP.fullmatch(ts):
        try:
            return ts, datetime.fromisoformat(ts[:-1] + "+00:00")
        except ValueError:
            return None
    try:
        moment = parse_timestamp(ts)
    except ValidationError:
        return None
    return format_timestamp(moment), moment
