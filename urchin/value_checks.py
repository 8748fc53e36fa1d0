"""The one number check every edge uses (contract parameters, context parameters, file ranges, settings,
the viewer's query strings) and the one way an error shows a value, so a bound reads the same wherever
it is broken: `limit: must be from 1 to 1000, got 0`; and the one rule from a keyword to its wire name."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from urchin.errors import QueryError

__all__ = ["unknown_parameter", "check_bool", "check_number", "describe", "camel"]


def describe(value: Any) -> str:
    """A value as a person reads it in an error: `-1`, `0.5`, `"abc"`, `true`, `[1, 2]` (cut at 60)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = '"' + value + '"'
    elif value is None:
        text = "null"
    else:
        import orjson

        try:
            text = orjson.dumps(value).decode()
        except TypeError:
            text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def check_number(value: Any, name: str, *, whole: bool, low: float | None = None, high: float | None = None,
                 above: float | None = None, from_text: bool = False) -> Any:
    """`value` as an int (`whole`) or a float within [`low`, `high`] and over `above`, else a QueryError
    naming `name`. `from_text`: a string is parsed first (query strings, flags, environment)."""
    wanted = "a whole number" if whole else "a number"
    number: Any = value
    if from_text and isinstance(value, str):
        try:
            number = int(value.strip()) if whole else float(value.strip())
        except ValueError:
            raise QueryError(name, f"must be {wanted}, got {describe(value)}") from None
    if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
        raise QueryError(name, f"must be {wanted}, got {describe(value)}")
    if whole:
        if isinstance(number, float) and not number.is_integer():
            raise QueryError(name, f"must be {wanted}, got {describe(value)}")
        number = int(number)
    if above is not None and number <= above:
        raise QueryError(name, f"must be greater than {describe(above)}, got {describe(number)}")
    if low is not None and high is not None and not low <= number <= high:
        raise QueryError(name, f"must be from {describe(low)} to {describe(high)}, got {describe(number)}")
    if low is not None and number < low:
        raise QueryError(name, f"must be at least {describe(low)}, got {describe(number)}")
    if high is not None and number > high:
        raise QueryError(name, f"must be at most {describe(high)}, got {describe(number)}")
    return number


def unknown_parameter(key: Any, allowed: Iterable[str]) -> QueryError:
    """The one error for a parameter an operation does not take, listing the ones it does."""
    return QueryError(str(key), f"unknown parameter (allowed: {', '.join(allowed) or 'none'})")


def check_bool(value: Any, name: str, *, from_text: bool = False) -> bool:
    if from_text and isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if not isinstance(value, bool):
        raise QueryError(name, f"must be true or false, got {describe(value)}")
    return value


def camel(name: str) -> str:
    """A snake_case keyword's camelCase wire name: `full_text_weight` -> `fullTextWeight`."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)
