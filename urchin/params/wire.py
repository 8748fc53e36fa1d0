"""Typed parameters as the daemon's routes read them: `to_wire(params)`, the one serialiser the daemon
client uses for every operation it sends (`GET /search`, `POST /context`, ...).

Every field is sent by its wire name, `camel(field)` (`min_score` -> `minScore`, `source_ids` ->
`sourceIds`): the same name the contract declares and `parse` reads, so what the daemon builds from the
request equals what the client held (tests/test_params_wire.py round-trips every typed parameters
class). Fields at their default are left out; values go as JSON holds them (tuples as lists, times as
RFC 3339 to the millisecond, sub-queries as objects). A class whose fields are not all its wire
parameters says how it is sent with its own `wire_values` (`ContextParams`: `sourceIds` apart from
`sources`, `hours` rather than the `since` it became).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import MISSING, fields
from datetime import datetime
from typing import Any

from urchin.timestamps import format_timestamp
from urchin.value_checks import camel

__all__ = ["to_wire", "field_values", "jsonable"]


def to_wire(params: Any) -> dict[str, Any]:
    """`params` (any typed parameters object, `urchin/params/`) by wire name, for the daemon's route."""
    own = getattr(params, "wire_values", None)
    return own() if own is not None else field_values(params)


def field_values(params: Any, skip: Collection[str] = ()) -> dict[str, Any]:
    """Each field not at its default (nor `None`, nor empty), by wire name, as JSON holds it."""
    out: dict[str, Any] = {}
    for f in fields(params):
        value = getattr(params, f.name)
        if f.name in skip or value is None or value == () or (f.default is not MISSING and value == f.default):
            continue
        out[camel(f.name)] = jsonable(value)
    return out


def jsonable(value: Any) -> Any:
    """A value as JSON holds it: times as RFC 3339 (as Urchin writes every time: to the millisecond, UTC),
    objects with `to_dict` as objects, tuples as lists."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value
