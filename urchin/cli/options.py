"""Click options generated from the contract (`urchin/contract/`), and the output helpers.

`operation_options("search")` adds the operation's arguments and flags; the command body passes
what click parsed to `parse("search", params)`, which checks it with the operation's one validator
and names a bad value by its flag (`--limit: must be from 1 to 1000, got 0`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import orjson

from urchin.contract import OPERATIONS, Param
from urchin.errors import ValidationError

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["operation_options", "parse", "as_flag", "json_option", "print_json", "print_text"]

_TYPES: dict[str, Any] = {"text": str, "int": int, "number": float, "bool": bool, "texts": str}


def _decorator(param: Param) -> Callable[[F], F]:
    if param.positional:
        return click.argument(param.name, required=param.required)
    help_text = f"{param.help.rstrip('.')} ({param.default_text()})."
    return click.option(param.flag_name, param.name, type=_TYPES[param.kind], default=None,
                        multiple=param.kind == "texts", help=help_text)


def operation_options(operation: str, skip: tuple[str, ...] = ()) -> Callable[[F], F]:
    """The operation's parameters as click arguments and options (all defaulting to `None`)."""
    def decorate(func: F) -> F:
        for param in reversed(OPERATIONS[operation].params):
            if param.name not in skip:
                func = _decorator(param)(func)
        return func
    return decorate


def parse(operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """What click parsed, validated: Memory keywords with the contract's defaults."""
    given = {k: (list(v) or None) if isinstance(v, tuple) else v for k, v in params.items()}
    return OPERATIONS[operation].parse(given, "cli")


def as_flag(exc: ValidationError, operation: str) -> ValidationError:
    """An error from below (event validation), naming the flag the user typed: `--source: ...`."""
    head = exc.field.split("[", 1)[0].split(".", 1)[0] if exc.field else ""
    param = next((p for p in OPERATIONS[operation].params if p.wire_name == head), None)
    if param is None or param.positional:
        return exc
    field = param.flag_name + exc.field[len(head):]
    return type(exc)(field, exc.rule, message=exc.message.replace(exc.field, field, 1))


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the result as one JSON object (the same as HTTP and MCP return).")(func)


def print_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj).decode())


def print_text(text: str) -> None:
    if text:
        click.echo(text)
