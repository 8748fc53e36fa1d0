"""Parameters declared once: `Param` and `Operation`, and the one function that validates them.

A `Param` names a parameter three ways (the `Memory` keyword, the wire name of HTTP and MCP, the
CLI flag) and states its type, default, bounds and help once. `Operation.parse` checks a caller's
values against them and names a bad field the way that caller spelled it: `--from-line` in the
CLI, `fromLine` over HTTP and MCP; for an operation with typed parameters (`search`, `context`:
`urchin/params/`), `Operation.build` makes them instead, the one check of their values. Front ends
generate their schemas and options from these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from urchin.errors import QueryError
from urchin.value_checks import check_bool, check_number, describe, unknown_parameter

if TYPE_CHECKING:
    from urchin.facade.api import Facade

__all__ = ["Param", "Operation", "Caller", "describe", "MISSING"]

Caller = Literal["cli", "wire"]
Kind = Literal["text", "int", "number", "bool", "texts", "objects"]
P = TypeVar("P")   # an operation's parsed parameters: its typed parameters, or `parse`'s keywords
R = TypeVar("R")   # what its run returns (the facade method's result)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of one operation; `default` MISSING means required (or `None`: optional, no default)."""

    name: str                              # the Memory keyword
    kind: Kind = "text"
    help: str = ""
    default: Any = None
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None             # exclusive minimum (hours > 0)
    choices: tuple[str, ...] = ()
    wire: str = ""                         # HTTP and MCP name; default: `name`
    flag: str = ""                         # CLI flag; default: --name-with-dashes; "" with positional
    positional: bool = False               # a CLI argument, not a flag (then the CLI calls it `name`)
    max_chars: int | None = None
    blank_ok: bool = False                 # required, but blank is checked later (event content: one rule)
    unset: str = "none"                    # what no value means, for "(default: ...)": "any", "no window"
    negatable: bool = False                # a bool flag with its --no- form (--include-memories/--no-...)
    wire_only: bool = False                # no CLI flag (an alias kept for the wire: sourceIds)
    items: Mapping[str, Any] | None = field(default=None, hash=False)   # objects: one item's JSON Schema
    min_items: int | None = None           # objects: how many items
    max_items: int | None = None
    metavar: str = ""                      # CLI: how the flag's value is written (TYPE:TEXT)
    from_flag: Callable[[str], Any] | None = None   # CLI: one flag value as the wire's (TYPE:TEXT -> object)

    @property
    def wire_name(self) -> str:
        return self.wire or self.name

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def spelled(self, caller: Caller) -> str:
        """The field name an error gives this caller."""
        if caller == "cli" and not self.wire_only:
            return self.name if self.positional else self.flag_name
        return self.wire_name

    def default_text(self) -> str:
        if self.required:
            return "required"
        if self.default is None:
            return f"default: {self.unset}"
        return f"default {describe(self.default)}"

    def bounds_text(self) -> str:
        """The bounds as the CLI help states them: `1 to 1000`, `at least 0`, `over 0, at most 10000000`."""
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            return f"{describe(low)} to {describe(high)}"
        parts = [f"over {describe(self.above)}"] if self.above is not None else []
        parts += [f"at least {describe(low)}"] if low is not None else []
        parts += [f"at most {describe(high)}"] if high is not None else []
        return ", ".join(parts)


class Typed(Protocol):
    """An operation's typed parameters (`urchin/params/`): built from values keyed by field name, checked
    when built; `QueryError`s name the field by its wire name."""

    @classmethod
    def parse(cls, values: Mapping[str, Any], /, *, from_text: bool = False) -> Any: ...


@dataclass(frozen=True, slots=True)
class Operation(Generic[P, R]):
    """One operation: its parameters in order, and the aliases HTTP accepts (`q` for `query`).

    `typed`: the operation's typed parameters; `build` makes them at the edge and the layers below take
    them as they are. `run(target, params)`: the operation's one call of the facade (`Memory` or the
    daemon client), which every front end makes (`call`: parse, then run). `Operation[P, R]` takes
    parameters `P` and answers `R`: `OPERATIONS` declares both for each operation, so mypy checks
    each run against the facade and each front end against what its operation answers.
    """

    name: str
    params: tuple[Param, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    typed: type[Typed] | str | None = None   # the class, or "module:Class" (loaded on first use: start-up)
    respell_free_text: bool = True   # False: a free-text field's error keeps its wire name on every caller
    runner: Callable[[Facade, P], R] | None = field(default=None, compare=False)   # (target, params) -> result

    def run(self, target: Facade, params: P) -> R:
        """The operation on `target` (a `Facade`: `Memory` or the daemon client) with parsed parameters."""
        assert self.runner is not None, f"{self.name} has no run"
        return self.runner(target, params)

    def call(self, target: Facade, values: Mapping[str, Any], caller: Caller, *, from_text: bool = False) -> R:
        """Parse `values` once, here at the edge, and run the operation on `target` with them."""
        params: Any = self.build(values, caller, from_text=from_text) if self.typed else \
            self.parse(values, caller, from_text=from_text)   # an operation without typed ones takes parse's
        return self.run(target, params)

    def typed_class(self) -> type[Typed]:
        """The typed parameters' class; one declared by its import path is imported now, on first use."""
        assert self.typed is not None, f"{self.name} has no typed parameters"
        if isinstance(self.typed, str):
            from importlib import import_module

            module, _, name = self.typed.partition(":")
            return getattr(import_module(module), name)
        return self.typed

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def build(self, values: Mapping[str, Any], caller: Caller, *, from_text: bool = False) -> P:
        """The operation's typed parameters, checked once, here at the edge: names as `parse` reads them
        (unknown ones refused), the values checked by the typed parameters, and a bad field named the way
        this caller spells it (`--limit`, `--search[0].type`)."""
        given = self._named(values, caller)
        try:
            return self.typed_class().parse(given, from_text=from_text)
        except QueryError as exc:
            raise self._respelled(exc, caller) from None

    def _named(self, values: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
        """The given values (not `None`) keyed by `Param.name`; an unknown name is an error."""
        by_key = {(p.name if caller == "cli" else p.wire_name): p for p in self.params}
        given: dict[str, Any] = {}
        for key, value in values.items():
            param = by_key.get(self.aliases.get(key, key)) if caller == "wire" else by_key.get(key)
            if param is None:
                raise unknown_parameter(key, (p.wire_name for p in self.params))
            if value is not None:
                given[param.name] = value
        return given

    def _respelled(self, exc: QueryError, caller: Caller) -> QueryError:
        """`exc`, which names a wire name (`searches[0].type`), naming the field as `caller` spells it."""
        head = exc.field.split("[", 1)[0].split(".", 1)[0]
        param = next((p for p in self.params if p.wire_name == head), None)
        if param is None or (not self.respell_free_text and param.kind == "text"
                             and not (param.required or param.choices or param.max_chars)):
            return exc
        spelled = param.spelled(caller)
        if spelled == head:
            return exc
        field_name = spelled + exc.field[len(head):]
        return QueryError(field_name, exc.rule, message=exc.message.replace(exc.field, field_name, 1))

    def parse(self, values: Mapping[str, Any], caller: Caller, *, from_text: bool = False) -> dict[str, Any]:
        """Validated keyword arguments for `Memory`, defaults filled in.

        `values` are keyed by wire name (HTTP, MCP) or by `Param.name` (CLI, where click already
        rejected unknown flags); `None` means not given. `from_text`: values are query-string text.
        """
        given = self._named(values, caller)
        out: dict[str, Any] = {}
        for param in self.params:
            if param.name in given:
                out[param.name] = check(param, given[param.name], param.spelled(caller), from_text)
            elif param.required:
                raise QueryError(param.spelled(caller), "is required")
            else:
                out[param.name] = param.default
        return out


def check(param: Param, value: Any, name: str, from_text: bool = False) -> Any:
    """One value against its parameter's type and bounds; `QueryError` naming `name` and the rule."""
    if param.kind == "text":
        return _text(param, value, name)
    if param.kind == "texts":
        if not isinstance(value, list | tuple):
            raise QueryError(name, f"must be an array of strings, got {describe(value)}")
        return [_text(param, item, f"{name}[{i}]") for i, item in enumerate(value)] or None
    if param.kind == "objects":
        if not isinstance(value, list | tuple) or not all(isinstance(item, Mapping) for item in value):
            raise QueryError(name, f"must be an array of objects, got {describe(value)}")
        return list(value)
    if param.kind == "bool":
        return _bool(value, name, from_text)
    number = _number(param, value, name, from_text)
    if param.choices and str(number) not in param.choices:
        raise QueryError(name, f"must be one of {', '.join(param.choices)}, got {describe(value)}")
    return number


def _text(param: Param, value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise QueryError(name, f"must be a string, got {describe(value)}")
    if param.required and not param.blank_ok and not value.strip():
        raise QueryError(name, "must not be empty", message=f"{name} must not be empty")
    if param.max_chars is not None and len(value) > param.max_chars:
        raise QueryError(name, f"must be at most {param.max_chars} characters, got {len(value)}")
    if param.choices and value.strip().lower() not in param.choices:
        raise QueryError(name, f"must be one of {', '.join(param.choices)}, got {describe(value)}")
    return value.strip().lower() if param.choices else value


def _bool(value: Any, name: str, from_text: bool) -> bool:
    return check_bool(value, name, from_text=from_text)


def _number(param: Param, value: Any, name: str, from_text: bool) -> int | float:
    return check_number(value, name, whole=param.kind == "int", low=param.minimum, high=param.maximum,
                        above=param.above, from_text=from_text)
