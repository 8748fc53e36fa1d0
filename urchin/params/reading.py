"""The typed parameters of the reading operations over a time window and of single events: `recent`,
`semantic`, `session_context`, `workspace_context`, `get` and `tail`, each validated when built.

The contract builds them at the edge (`Operation.build`, naming a bad field as the caller spelled it) and
`Memory` takes them as they are; a Python caller builds them too (`RecentParams(hours=2)`, or `Memory`'s
keywords), so no caller skips the checks. Built once, checked once: `__post_init__` is the only check, and
`parse` only maps names (and reads numbers from query-string text) before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Self, TypeVar

from urchin.errors import QueryError
from urchin.params.limits import MAX_LIMIT
from urchin.params.search import label_filter
from urchin.timestamps import MAX_HOURS
from urchin.value_checks import check_bool, check_number, describe, unknown_parameter

__all__ = ["RecentParams", "SemanticParams", "SessionParams", "WorkspaceParams", "GetParams", "TailParams",
           "TypedParams", "parse_fields", "set_checked", "required_text", "check_texts", "tags_of"]

T = TypeVar("T")


def parse_fields(cls: type[T], values: Mapping[str, Any], *, from_text: bool = False,
                 wire: Mapping[str, str] | None = None) -> T:
    """`cls` from values keyed by field name (`None`: the default); `from_text`: numbers and booleans may
    come as query-string text. The values are checked once, by `cls` when built."""
    names = {f.name: f for f in fields(cls)}   # type: ignore[arg-type]
    given: dict[str, Any] = {}
    for key, value in values.items():
        if key not in names:
            raise unknown_parameter(key, [(wire or {}).get(n, n) for n in names])
        if value is not None:
            given[key] = value
    for name, f in names.items():
        if name not in given:
            if f.default is MISSING:
                raise QueryError((wire or {}).get(name, name), "is required")
        elif from_text and isinstance(given[name], str) and f.type in ("float", "int", "bool"):
            label = (wire or {}).get(name, name)
            given[name] = check_bool(given[name], label, from_text=True) if f.type == "bool" else \
                check_number(given[name], label, whole=f.type == "int", from_text=True)
    return cls(**given)


class TypedParams:
    """The base of typed parameters whose `parse` only maps names: `parse(values, from_text=)` builds the
    class from values keyed by field name (`WIRE`: a field's wire name, for errors, when it differs)."""

    __slots__ = ()
    WIRE: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def parse(cls, values: Mapping[str, Any], *, from_text: bool = False) -> Self:
        return parse_fields(cls, values, from_text=from_text, wire=cls.WIRE)


def set_checked(params: object, **values: Any) -> None:
    """A frozen parameters object's fields, as its `__post_init__` checked them."""
    for name, value in values.items():
        object.__setattr__(params, name, value)


def _hours(value: Any) -> float:
    return check_number(value, "hours", whole=False, high=MAX_HOURS, above=0)


def _limit(value: Any, name: str = "limit", high: int = MAX_LIMIT) -> int:
    return int(check_number(value, name, whole=True, low=1, high=high))


def _text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise QueryError(name, f"must be a string, got {describe(value)}")
    return value or None


def required_text(value: Any, name: str) -> str:
    """A required text field: a string, not blank (kept as given)."""
    text = _text(value, name)
    if text is None or not text.strip():
        raise QueryError(name, "must not be empty", message=f"{name} must not be empty")
    return text


@dataclass(frozen=True, slots=True)
class RecentParams(TypedParams):
    """The latest events of a window, newest first, with the filters of `search`."""

    hours: float = 24
    limit: int = 20
    source: str | None = None
    workspace: str | None = None
    session: str | None = None
    kind: str | None = None

    def __post_init__(self) -> None:
        set_checked(self, hours=_hours(self.hours), limit=_limit(self.limit),
             source=label_filter(_text(self.source, "source"), "source"),
             workspace=_text(self.workspace, "workspace"), session=_text(self.session, "session"),
             kind=label_filter(_text(self.kind, "kind"), "kind"))



@dataclass(frozen=True, slots=True)
class SemanticParams(TypedParams):
    """Ranked search of what `query` is about, with the filters of `search` and a score floor."""

    query: str
    hours: float = 168
    limit: int = 10
    source: str | None = None
    workspace: str | None = None
    session: str | None = None
    kind: str | None = None
    min_score: float = 0.0
    explain: bool = False
    WIRE: ClassVar[Mapping[str, str]] = {"min_score": "minScore"}

    def __post_init__(self) -> None:
        set_checked(self, query=required_text(self.query, "query"), hours=_hours(self.hours), limit=_limit(self.limit),
             source=label_filter(_text(self.source, "source"), "source"),
             workspace=_text(self.workspace, "workspace"), session=_text(self.session, "session"),
             kind=label_filter(_text(self.kind, "kind"), "kind"),
             min_score=float(check_number(self.min_score, "minScore", whole=False, low=0, high=1)),
             explain=check_bool(self.explain, "explain"))



@dataclass(frozen=True, slots=True)
class SessionParams(TypedParams):
    """A session's latest events, oldest first."""

    session: str
    hours: float = 168
    limit: int = 50

    def __post_init__(self) -> None:
        set_checked(self, session=required_text(self.session, "session"), hours=_hours(self.hours),
                    limit=_limit(self.limit))



@dataclass(frozen=True, slots=True)
class WorkspaceParams(TypedParams):
    """A workspace's latest events, newest first."""

    workspace: str
    hours: float = 168
    limit: int = 40

    def __post_init__(self) -> None:
        set_checked(self, workspace=required_text(self.workspace, "workspace"), hours=_hours(self.hours),
             limit=_limit(self.limit))



@dataclass(frozen=True, slots=True)
class GetParams(TypedParams):
    """One event by id (as given; the facade maps an id that held a secret to its keyed hash)."""

    id: str

    def __post_init__(self) -> None:
        set_checked(self, id=required_text(self.id, "id").strip())



@dataclass(frozen=True, slots=True)
class TailParams(TypedParams):
    """The last `count` events in journal order."""

    count: int = 10

    def __post_init__(self) -> None:
        set_checked(self, count=_limit(self.count, "count"))


def check_texts(params: object, names: tuple[str, ...]) -> None:
    """Each of `names` None or a string, else a QueryError naming it."""
    for name in names:
        value = getattr(params, name)
        if value is not None and not isinstance(value, str):
            raise QueryError(name, f"must be a string, got {describe(value)}")


def tags_of(tags: Any) -> tuple[str, ...] | None:
    """Tags as given (lowercased later, by the event's rule), a tuple; empty is None."""
    if tags is None:
        return None
    if not isinstance(tags, list | tuple):
        raise QueryError("tags", f"must be an array of strings, got {describe(tags)}")
    for i, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise QueryError(f"tags[{i}]", f"must be a string, got {describe(tag)}")
    return tuple(tags) or None
