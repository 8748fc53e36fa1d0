"""`search_context`'s typed parameters: `ContextParams`, validated when built.

`ContextParams.parse(mapping)` accepts the camelCase wire names (and snake_case) and raises a
`QueryError` naming the field and the rule (`searches[2].type: must be lex, vec or hyde`); the contract's
`context` operation calls it at the edge (naming the field as the caller spelled it), and the index takes
the result as it is. `ContextParams.build(**keywords)` is the same validator for a Python caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from urchin.errors import QueryError, ValidationError
from urchin.event import check_name, clean_text
from urchin.params.limits import (
    DEFAULT_LIVE_BYTE_BUDGET,
    HYDE_WORDS,
    MAX_CONTEXT_LIMIT,
    MAX_CONTEXT_TOKEN_BUDGET,
    MAX_K,
    MAX_LIVE_BYTE_BUDGET,
    MAX_QUERY_CHARS,
    MAX_SEARCHES,
    MAX_WEIGHT,
    MODES,
    SEARCH_TYPES,
    STRATEGIES,
)
from urchin.timestamps import MAX_HOURS, format_timestamp, parse_timestamp
from urchin.value_checks import camel, check_bool, check_number, describe, unknown_parameter

__all__ = ["ContextParams", "SubQuery", "BOUNDS", "DEFAULTS", "WIRE_NAMES"]

# (minimum, maximum) of each number, by attribute; hours' minimum is exclusive
BOUNDS: dict[str, tuple[float, float]] = {
    "full_text_weight": (0, MAX_WEIGHT), "semantic_weight": (0, MAX_WEIGHT), "memory_weight": (0, MAX_WEIGHT),
    "k": (1, MAX_K), "hours": (0, MAX_HOURS), "min_score": (0, 1), "limit": (1, MAX_CONTEXT_LIMIT),
    "token_budget": (1, MAX_CONTEXT_TOKEN_BUDGET), "per_file_cap": (1, MAX_CONTEXT_LIMIT),
    "live_byte_budget": (0, MAX_LIVE_BYTE_BUDGET),
}


@dataclass(frozen=True, slots=True)
class SubQuery:
    type: str      # lex | vec | hyde
    query: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "query": self.query}


@dataclass(frozen=True, slots=True)
class ContextParams:
    """Validated parameters; times are aware UTC datetimes (hours already turned into `since`)."""

    query: str
    strategy: str = "hybrid"
    searches: tuple[SubQuery, ...] = ()
    full_text_weight: float = 1.0
    semantic_weight: float = 1.0
    k: int = 20                           # RRF constant, by leave-one-conversation-out CV on LoCoMo
    sources: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    workspace: str | None = None
    session: str | None = None
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    include_memories: bool = True
    include_conversations: bool = True
    memory_weight: float = 1.0
    min_score: float = 0.0
    limit: int = 10
    token_budget: int | None = None
    explain: bool = False
    per_file_cap: int = 3                 # passages per workspace file, applied after fusion
    mode: str = "indexed"                 # live: also read cataloged (over-cap) files at query time
    live_byte_budget: int = DEFAULT_LIVE_BYTE_BUDGET
    hours: float | None = field(default=None, compare=False)
    devices: tuple[str, ...] = ()         # team: only events fed by these machines (default: every device)
    accounts: tuple[str, ...] = ()
    # sourceIds as given (they are in `sources` too) until `resolve_source_ids` checks them against the
    # sources and workspace roots that exist; `roots`: the workspace roots among them (their files)
    source_ids: tuple[str, ...] = field(default=(), compare=False)
    roots: tuple[str, ...] = ()

    @classmethod
    def parse(cls, data: Mapping[str, Any], now: datetime | None = None, *, from_text: bool = False
              ) -> ContextParams:
        """From wire names (or snake_case); numbers are read from text either way (`from_text` is the
        contract's flag for query strings, which this needs not)."""
        if not isinstance(data, Mapping):
            raise QueryError("params", "must be an object")
        values: dict[str, Any] = {}
        for key, value in data.items():
            attr = WIRE_NAMES.get(key) or (key if key in WIRE_NAMES.values() else None)
            if attr is None:
                raise unknown_parameter(key, WIRE_NAMES)
            if value is not None:
                values[attr] = value
        return cls.build(now=now, **values)

    @classmethod
    def build(cls, *, now: datetime | None = None, **v: Any) -> ContextParams:
        """Validate keyword arguments (snake_case); `None` means the default."""
        known = [f.name for f in fields(cls)]
        for key in v:   # a misspelt keyword is refused, never silently ignored
            if key not in known:
                raise unknown_parameter(key, known)
        v = {key: value for key, value in v.items() if value is not None}
        d = DEFAULTS

        def number(attr: str) -> float:
            return _number(v.get(attr, d[attr]), camel(attr), minimum=BOUNDS[attr][0], maximum=BOUNDS[attr][1])

        def whole(attr: str) -> int:
            low, high = BOUNDS[attr]
            return _whole(v.get(attr, d[attr]), camel(attr), int(low), int(high))

        query = _text(v.get("query"), "query")
        strategy = _choice(v.get("strategy", d["strategy"]), "strategy", STRATEGIES)
        since = _time(v.get("since"), "since")
        until = _time(v.get("until"), "until")
        hours = v.get("hours")
        if hours is not None:
            hours = _number(hours, "hours", minimum=BOUNDS["hours"][0], maximum=BOUNDS["hours"][1], exclusive=True)
            if since is not None:
                raise QueryError("hours", "cannot be combined with since (give one window)")
            since = (now or datetime.now(UTC)) - timedelta(hours=hours)
        if since is not None and until is not None and until <= since:
            raise QueryError("until", "must be later than since")
        include_memories = _bool(v.get("include_memories", d["include_memories"]), "includeMemories")
        include_conversations = _bool(v.get("include_conversations", d["include_conversations"]),
                                      "includeConversations")
        if not include_memories and not include_conversations:
            raise QueryError("includeConversations", "includeMemories and includeConversations cannot both be false")
        params = cls._trusted(
            query=query, strategy=strategy, searches=_searches(v.get("searches")),
            full_text_weight=number("full_text_weight"), semantic_weight=number("semantic_weight"), k=whole("k"),
            sources=tuple(dict.fromkeys(_labels(v.get("sources"), "sources") + _labels(v.get("source_ids"),
                                                                                       "sourceIds"))),
            source_ids=_names(v.get("source_ids"), "sourceIds"),
            kinds=_labels(v.get("kinds"), "kinds"),
            workspace=_optional_text(v.get("workspace"), "workspace"),
            session=_optional_text(v.get("session"), "session"),
            tags=_labels(v.get("tags"), "tags"),
            since=since, until=until,
            include_memories=include_memories, include_conversations=include_conversations,
            memory_weight=number("memory_weight"), min_score=number("min_score"), limit=whole("limit"),
            token_budget=None if v.get("token_budget") is None else whole("token_budget"),
            explain=_bool(v.get("explain", d["explain"]), "explain"),
            per_file_cap=whole("per_file_cap"),
            mode=_choice(v.get("mode", d["mode"]), "mode", MODES),
            live_byte_budget=whole("live_byte_budget"),
            hours=hours,
            devices=_names(v.get("devices"), "devices"),
            accounts=_names(v.get("accounts"), "accounts"),
        )
        params._check_weights()
        return params

    def __post_init__(self) -> None:
        """Built directly (`ContextParams(query=...)`, or `dataclasses.replace`): the same checks as `build`.
        Cheap where it matters: `build` (every front end's path) constructs with `_trusted`, which skips
        this, so a query's parameters are checked exactly once either way."""
        given = {name: value for name, value in self._fields().items()
                 if name in ("roots", "source_ids", "query") or value != DEFAULTS.get(name)}
        kept = {name: given.pop(name, ()) for name in ("roots", "source_ids")}
        times = {name: given[name] for name in ("since", "until")
                 if isinstance(given.get(name), datetime) and given[name].tzinfo is not None}
        given.update({name: format_timestamp(moment) for name, moment in times.items()})
        if given.get("since") is not None:   # hours already became since (a copy of a built one): since holds
            given.pop("hours", None)
        checked = type(self).build(**given)
        for name, value in checked._fields().items():
            if name == "source_ids":
                value = _names(kept[name] or None, "sourceIds")
            elif name == "roots":
                value = kept[name]
            elif name in times:
                value = times[name]   # as given (to the microsecond), once checked
            elif name == "hours" and value is None:
                value = self.hours
            object.__setattr__(self, name, value)

    @classmethod
    def _trusted(cls, **values: Any) -> ContextParams:
        """An instance of values `build` has just checked, without checking them again (`__post_init__`)."""
        self = object.__new__(cls)
        for name, default, factory in _FIELDS:
            value = values[name] if name in values else default if factory is None else factory()
            object.__setattr__(self, name, value)
        return self

    def _fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def wire_values(self) -> dict[str, Any]:
        """By wire name, as `POST /context` reads them (`urchin.params.wire.to_wire`): the daemon builds the
        same. `sourceIds` go as given, apart from `sources` (which hold them too); a window given in hours
        goes as `hours`, so the daemon counts it from its own now."""
        from urchin.params.wire import field_values

        ids = {s.lower() for s in self.source_ids}
        out = field_values(self, skip=("roots", "sources", "since" if self.hours is not None else "hours"))
        sources = [s for s in self.sources if s not in ids]
        return {**out, "sources": sources} if sources else out

    def _check_weights(self) -> None:
        if self.strategy == "keyword" and self.full_text_weight == 0:
            raise QueryError("fullTextWeight", "must be greater than 0 with strategy keyword")
        if self.strategy == "semantic" and self.semantic_weight == 0:
            raise QueryError("semanticWeight", "must be greater than 0 with strategy semantic")
        if self.strategy == "hybrid" and self.full_text_weight == 0 and self.semantic_weight == 0:
            raise QueryError("fullTextWeight", "fullTextWeight and semanticWeight cannot both be 0")
        if self.include_memories and not self.include_conversations and self.memory_weight == 0:
            raise QueryError("memoryWeight", "must be greater than 0 when only memories are searched")

    def resolve_source_ids(self, known: list[str], roots: list[str]) -> ContextParams:
        """`sourceIds` checked as `query_source` checks its source (issue 32): a workspace root's name
        (its files; the root wins over a journal source of the same name, as there) or a source the
        index holds; any other id is an error naming the known ones, never a silently empty answer."""
        if not self.source_ids:
            return self
        unknown = [s for s in self.source_ids if s not in roots and s.lower() not in known]
        if unknown:
            names = sorted(set(known) | set(roots))
            raise QueryError("sourceIds", f"unknown source {unknown[0]!r} (known: {', '.join(names) or 'none yet'})")
        picked = tuple(s for s in self.source_ids if s in roots)
        ids = {s.lower() for s in self.source_ids}
        journal = {s.lower() for s in self.source_ids if s not in roots}
        sources = tuple(s for s in self.sources if s not in ids or s in journal)
        return self._trusted(**{**self._fields(), "sources": sources, "roots": picked, "source_ids": ()})

    def filters_dict(self) -> dict[str, Any]:
        """The filters in play, in wire names, for the coverage block."""
        out: dict[str, Any] = {}
        for name, value in (("sources", list(self.sources)), ("kinds", list(self.kinds)),
                            ("workspace", self.workspace), ("session", self.session), ("tags", list(self.tags)),
                            ("since", _iso(self.since)), ("until", _iso(self.until)),
                            ("devices", list(self.devices)), ("accounts", list(self.accounts)),
                            ("roots", list(self.roots))):
            if value:
                out[name] = value
        if not self.include_memories:
            out["includeMemories"] = False
        if not self.include_conversations:
            out["includeConversations"] = False
        return out


# (name, default, default factory) of each field, for `_trusted`: read once, not per query
_FIELDS: tuple[tuple[str, Any, Any], ...] = tuple(
    (f.name, f.default, None if f.default_factory is MISSING else f.default_factory) for f in fields(ContextParams))

# Each attribute's default (`None`: not given), and wire name -> attribute (snake_case is accepted too);
# `sourceIds` adds to `sources`; `roots` is resolved from them, never given.
DEFAULTS: dict[str, Any] = {f.name: None if f.default is MISSING else f.default
                            for f in fields(ContextParams) if f.name != "roots"}
WIRE_NAMES: dict[str, str] = {camel(attr): attr for attr in DEFAULTS}


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else format_timestamp(moment)


def _text(value: Any, name: str) -> str:
    if value is not None and not isinstance(value, str):
        raise QueryError(name, f"must be a string, got {describe(value)}")
    if value is None or not value.strip():
        raise QueryError(name, "must not be empty", message=f"{name} must not be empty")
    if len(value) > MAX_QUERY_CHARS:
        raise QueryError(name, f"must be at most {MAX_QUERY_CHARS} characters, got {len(value)}")
    return clean_text(value.strip())   # NUL and lone surrogates as the events store them (U+FFFD)


def _name(value: str, name: str) -> str:
    try:
        return check_name(value, name)
    except ValidationError as exc:
        raise QueryError(name, exc.rule) from None


def _optional_text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise QueryError(name, "must be a string")
    return _name(value.strip(), name) or None


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in choices:
        raise QueryError(name, f"must be {', '.join(choices[:-1])} or {choices[-1]}, got {value!r}")
    return str(text)


def _bool(value: Any, name: str) -> bool:
    return check_bool(value, name)


def _number(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None,
            exclusive: bool = False) -> float:
    return float(check_number(value, name, whole=False, low=None if exclusive else minimum, high=maximum,
                              above=minimum if exclusive else None, from_text=True))


def _whole(value: Any, name: str, low: int, high: int) -> int:
    return int(check_number(value, name, whole=True, low=low, high=high, from_text=True))


def _labels(value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise QueryError(name, "must be a list of strings")
    out: dict[str, None] = {}
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise QueryError(f"{name}[{i}]", "must be a non-empty string")
        out.setdefault(_name(item.strip().lower(), f"{name}[{i}]"), None)
    return tuple(out)


def _names(value: Any, name: str) -> tuple[str, ...]:
    """Like `_labels` but case kept: device and account names are compared as they were written."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise QueryError(name, "must be a list of strings")
    out: dict[str, None] = {}
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip() or "\x00" in item or len(item) > 256:
            raise QueryError(f"{name}[{i}]", "must be a non-empty string of at most 256 characters, without NUL")
        out.setdefault(item.strip(), None)
    return tuple(out)


def _time(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_timestamp(value, name)
    except ValidationError as exc:
        raise QueryError(name, exc.rule) from None


def _searches(value: Any) -> tuple[SubQuery, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise QueryError("searches", "must be a list of {type, query} objects")
    if not 1 <= len(value) <= MAX_SEARCHES:
        raise QueryError("searches", f"must hold 1 to {MAX_SEARCHES} sub-queries, got {len(value)}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, SubQuery):
            item = item.to_dict()
        if not isinstance(item, Mapping):
            raise QueryError(f"searches[{i}]", "must be an object {type, query}")
        extra = set(item) - {"type", "query"}
        if extra:
            raise QueryError(f"searches[{i}].{sorted(extra)[0]}", "unknown field (known: type, query)")
        kind = item.get("type")
        if kind not in SEARCH_TYPES:
            raise QueryError(f"searches[{i}].type", f"must be lex, vec or hyde, got {kind!r}")
        text = _text(item.get("query"), f"searches[{i}].query")
        words = len(text.split())
        if kind == "hyde" and not HYDE_WORDS[0] <= words <= HYDE_WORDS[1]:
            raise QueryError(f"searches[{i}].query", f"a hyde passage must be {HYDE_WORDS[0]}-{HYDE_WORDS[1]} words "
                                                     f"(a hypothetical answer), got {words}")
        out.append(SubQuery(kind, text))
    return tuple(out)
