"""Click options generated from the contract (`urchin/contract/`), and the output helpers.

`operation_options("search")` adds the operation's arguments and flags; the command body passes
what click parsed to `build("search", params)` (an operation with typed parameters: `search`, `context`)
or `parse("recent", params)`, which check it once and name a bad value by its flag (`--limit: must be
from 1 to 1000, got 0`, `--search[0].type: ...`); `as_flag` respells an error raised below (an event's
validation) for the flag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from urchin.contract import OPERATIONS_BY_NAME, Param
from urchin.errors import ValidationError

if TYPE_CHECKING:
    from urchin.facade.api import Facade

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["operation_options", "parse", "build", "as_flag", "json_option", "print_json", "print_text"]

_TYPES: dict[str, Any] = {"text": str, "int": int, "number": float, "texts": str, "objects": str}


def _help(param: Param) -> str:
    """The parameter's help with its bounds and default, all from the declaration."""
    extras = [param.bounds_text(), "repeatable" if param.kind in ("texts", "objects") else "",
              f"up to {param.max_items}" if param.max_items is not None else ""]
    said = ", ".join(extra for extra in extras if extra)
    return f"{param.help.rstrip('.')}{'; ' + said if said else ''} ({param.default_text()})."


def _decorator(param: Param) -> Callable[[F], F]:
    if param.positional:
        return click.argument(param.name, required=param.required)
    if param.kind == "bool":   # a flag: --explain, or --include-memories/--no-include-memories
        if param.negatable:
            return click.option(f"{param.flag_name}/--no-{param.flag_name[2:]}", param.name, default=None,
                                help=_help(param))
        return click.option(param.flag_name, param.name, is_flag=True, default=None, help=_help(param))
    # choices are shown, not enforced by click: the one validator says what is wrong (`--mode: must be ...`)
    metavar = param.metavar or ("[" + "|".join(param.choices) + "]" if param.choices else None)
    convert = param.from_flag   # `--search lex:docs` -> {"type": "lex", "query": "docs"}
    callback = None if convert is None else (lambda _ctx, _param, values: tuple(convert(v) for v in values))
    return click.option(param.flag_name, param.name, type=_TYPES[param.kind], default=None, help=_help(param),
                        multiple=param.kind in ("texts", "objects"), metavar=metavar, callback=callback)


def operation_options(operation: str, skip: tuple[str, ...] = ()) -> Callable[[F], F]:
    """The operation's parameters as click arguments and options (all defaulting to `None`)."""
    def decorate(func: F) -> F:
        for param in reversed(OPERATIONS_BY_NAME[operation].params):
            if param.name not in skip and not param.wire_only:
                func = _decorator(param)(func)
        return func
    return decorate


def parse(operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """What click parsed, validated: Memory keywords with the contract's defaults."""
    given = {k: (list(v) or None) if isinstance(v, tuple) else v for k, v in params.items()}
    return OPERATIONS_BY_NAME[operation].parse(given, "cli")


def build(operation: str, params: dict[str, Any]) -> Any:
    """What click parsed, as the operation's typed parameters (checked once, here; errors name flags)."""
    given = {k: (list(v) or None) if isinstance(v, tuple) else v for k, v in params.items()}
    return OPERATIONS_BY_NAME[operation].build(given, "cli")


def call(operation: str, target: Facade, params: dict[str, Any]) -> Any:
    """What click parsed, parsed once by the operation (errors name flags), then its one run on `target`."""
    given = {k: (list(v) or None) if isinstance(v, tuple) else v for k, v in params.items()}
    return OPERATIONS_BY_NAME[operation].call(target, given, "cli")


def as_flag(exc: ValidationError, operation: str) -> ValidationError:
    """An error from below, which names wire names (event validation, the index's `ContextParams`), naming
    the flag the user typed instead: `--source: ...`, `--search[0].type: ...`."""
    head = exc.field.split("[", 1)[0].split(".", 1)[0] if exc.field else ""
    param = next((p for p in OPERATIONS_BY_NAME[operation].params if p.wire_name == head), None)
    if param is None or param.spelled("cli") == head:
        return exc
    field = param.spelled("cli") + exc.field[len(head):]
    return type(exc)(field, exc.rule, message=exc.message.replace(exc.field, field, 1))


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the result as one JSON object (the same as HTTP and MCP return).")(func)


def print_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj).decode())


def print_text(text: str) -> None:
    if text:
        click.echo(text)
