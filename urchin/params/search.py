"""`search`'s typed parameters: `SearchParams`, validated when built.

The contract's `search` operation builds one at the edge (naming a bad field as the caller spelled
it); `Memory.search` and the searchers below take it as it is. A Python caller builds one too
(`SearchParams("deploy", hours=24)`, or `Memory.search`'s keywords), so no caller skips the checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from urchin.errors import QueryError, ValidationError
from urchin.event import check_label, clean_text
from urchin.params.limits import MAX_LIMIT, SEARCH_HOURS, SEARCH_LIMIT, SEARCH_SCOPES
from urchin.timestamps import MAX_HOURS
from urchin.value_checks import check_number, describe, unknown_parameter

__all__ = ["SearchParams", "label_filter"]


@dataclass(frozen=True, slots=True)
class SearchParams:
    """Literal search: `query` as the events store text, `source` and `kind` in the form events store
    them (lowercase), an empty workspace or session meaning any; `scope` local (this journal) or team
    (every device's events in the shared database)."""

    query: str
    hours: float = SEARCH_HOURS
    limit: int = SEARCH_LIMIT
    source: str | None = None
    workspace: str | None = None
    session: str | None = None
    kind: str | None = None
    scope: str = "local"

    def __post_init__(self) -> None:
        query = _text(self.query, "query")
        if not query.strip():
            raise QueryError("query", "must not be empty", message="query must not be empty")
        # in the order the fields are declared, each field's type and bounds first, then the filters' form
        checked: dict[str, Any] = {
            "query": clean_text(query),   # NUL and lone surrogates as the events store them (U+FFFD)
            "hours": check_number(self.hours, "hours", whole=False, high=MAX_HOURS, above=0),
            "limit": check_number(self.limit, "limit", whole=True, low=1, high=MAX_LIMIT),
            **{name: _text(getattr(self, name), name) or None for name in ("source", "workspace", "session", "kind")},
            "scope": _choice(self.scope, "scope", SEARCH_SCOPES),
        }
        checked["source"] = label_filter(checked["source"], "source")
        checked["kind"] = label_filter(checked["kind"], "kind")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @classmethod
    def of(cls, query: str, **given: Any) -> SearchParams:
        """From a Python caller's keywords; `None` means the default (as `Memory.search` takes them)."""
        return cls(query, **{k: v for k, v in given.items() if v is not None})

    @classmethod
    def parse(cls, values: Mapping[str, Any], *, from_text: bool = False) -> SearchParams:
        """From values keyed by field name (`None`: the default); `from_text`: numbers may come as text
        (query strings), read as the same check reads them."""
        known = [f.name for f in fields(cls)]
        for key in values:
            if key not in known:
                raise unknown_parameter(key, known)
        given = {k: v for k, v in values.items() if v is not None}
        if from_text:
            for name, whole in (("hours", False), ("limit", True)):
                if isinstance(given.get(name), str):
                    given[name] = check_number(given[name], name, whole=whole, from_text=True)
        if "query" not in given:
            raise QueryError("query", "is required")
        return cls(**given)


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise QueryError(name, f"must be a string, got {describe(value)}")
    return value


def label_filter(text: str | None, name: str) -> str | None:
    """A source/kind filter in the form events store (lowercase [a-z0-9._-]): another could match nothing."""
    if not text:
        return None
    try:
        return check_label(text, name)
    except ValidationError as exc:
        raise QueryError(name, f"{exc.rule}, got {text!r}") from None


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    text = _text(value, name).strip().lower()
    if text not in choices:
        raise QueryError(name, f"must be one of {', '.join(choices)}, got {describe(value)}")
    return text
