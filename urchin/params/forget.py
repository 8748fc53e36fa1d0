"""`forget`'s typed parameters: `ForgetParams`, validated when built.

What to forget (ids, a session, a substring of the content, a time range: all given must hold), and
whether to act (`confirm`; without it only a preview) and to rewrite the PostgreSQL tables (`purge`).
The contract's `forget` operation builds one at the edge (HTTP `POST /forget`, the MCP tool
`urchin_forget`, the CLI); `Memory.forget` takes it as it is, or builds one from a Python caller's keywords.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from urchin.clipping import quoted
from urchin.errors import QueryError, ValidationError
from urchin.params.reading import TypedParams, set_checked
from urchin.timestamps import parse_timestamp
from urchin.value_checks import check_bool

__all__ = ["ForgetParams", "MAX_IDS"]

MAX_IDS = 10_000


@dataclass(frozen=True, slots=True)
class ForgetParams(TypedParams):
    """The selectors as given (times as RFC 3339 text; `since_ms`/`until_ms` read them), checked."""

    ids: tuple[str, ...] | None = None
    session: str | None = None
    query: str | None = None
    since: str | None = None
    until: str | None = None
    confirm: bool = False
    purge: bool = False

    def __post_init__(self) -> None:
        ids = _ids(self.ids)
        for name in ("session", "query"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise QueryError(name, "must be a non-empty string")
        bounds = [_ms(getattr(self, name), name) for name in ("since", "until")]
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            raise QueryError("until", "must not be before since")
        if ids is None and self.session is None and self.query is None and bounds == [None, None]:
            raise QueryError("ids", "say what to forget: ids, session, query, or a time range (since/until)")
        set_checked(self, ids=ids, confirm=check_bool(self.confirm, "confirm"), purge=check_bool(self.purge, "purge"))

    @property
    def since_ms(self) -> int | None:
        return _ms(self.since, "since")

    @property
    def until_ms(self) -> int | None:
        return _ms(self.until, "until")


def _ids(ids: Any) -> tuple[str, ...] | None:
    if isinstance(ids, str):
        ids = [ids]
    if ids is None:
        return None
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) and i.strip() for i in ids):
        raise QueryError("ids", "must be a list of non-empty event ids")
    if len(ids) > MAX_IDS:
        raise QueryError("ids", f"at most {MAX_IDS} per call")
    return tuple(ids) or None


def _ms(value: Any, name: str) -> int | None:
    if value is None:
        return None
    try:
        moment: datetime = parse_timestamp(value, name)
        return int(moment.timestamp() * 1000)
    except ValidationError as exc:
        raise QueryError(name, exc.message.split(": ", 1)[-1]) from None
    except (OverflowError, ValueError):
        raise QueryError(name, f"must be an RFC 3339 timestamp in range, got {quoted(value)}") from None
