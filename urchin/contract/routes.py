"""Each operation's HTTP request as its route reads it, from the table: what the daemon client sends.

`ACCESS` declares an operation's routes (a method and a path, as a regular expression); an operation's
first route takes all its parameters, and `where` names another (ingest's `batch`). A `[^/]+` or `.+` in
the path is a path parameter, filled by the operation's positional parameters in order (`GET /events/.+`:
`id`), quoted whole. The other values go by wire name, defaults left out (`urchin.params.wire.to_wire`,
the one serialiser): as the query string of a GET, as a JSON object otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from urchin.contract.access import ACCESS, Route, Where
from urchin.params.wire import to_wire

__all__ = ["Request", "request", "route", "template"]

# (method, path, a GET's query string or None, any other method's JSON body or None): a plain tuple, as the
# full CLI's start-up pays for each class it builds
Request = tuple[str, str, "dict[str, Any] | None", Any]
_SLOTS = ("[^/]+", ".+")        # a path parameter: one segment, or the rest of the path
_PATTERN = ".+*?[](){}^$|\\"
_TEMPLATES: dict[tuple[str, Where], tuple[str, tuple[str, ...], tuple[str, ...]]] = {}


def route(operation: str, where: Where = None) -> Route:
    """The operation's route the client sends: its first, or the one `where` names."""
    routes = ACCESS[operation].routes
    found = [r for r in routes if r.where == where] if where is not None else list(routes[:1])
    if not found:
        raise ValueError(f"{operation}: no route{f' where {where}' if where else ''} in ACCESS")
    return found[0]


def template(operation: str, where: Where = None) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(method, the path's literal pieces, the wire names of the path parameters between them)."""
    known = _TEMPLATES.get((operation, where))
    if known is not None:
        return known
    chosen = route(operation, where)
    marked = chosen.path
    for slot in _SLOTS:
        marked = marked.replace(slot, "\0")
    pieces = tuple(marked.split("\0"))
    if any(c in piece for piece in pieces for c in _PATTERN):
        raise ValueError(f"{operation}: route {chosen.path!r} is not a path with parameters the client can fill")
    slots: tuple[str, ...] = ()
    if len(pieces) > 1:
        from urchin.contract.ops import OPERATIONS_BY_NAME

        slots = tuple(p.wire_name for p in OPERATIONS_BY_NAME[operation].params if p.positional)[:len(pieces) - 1]
        if len(slots) != len(pieces) - 1:
            raise ValueError(f"{operation}: route {chosen.path!r} has more path parameters than positional ones")
    _TEMPLATES[operation, where] = chosen.method, pieces, slots
    return chosen.method, pieces, slots


def request(operation: str, params: object = None, where: Where = None) -> Request:
    """`params` (typed parameters, `urchin/params/`, or a JSON object already by wire name; None: none) as
    the operation's route reads them: (method, path, query string, body)."""
    method, pieces, slots = template(operation, where)
    values: dict[str, Any] = {} if params is None else dict(params) if isinstance(params, Mapping) \
        else to_wire(params)
    path = pieces[0] + "".join(quote(str(values.pop(name)), safe="") + piece for name, piece in
                              zip(slots, pieces[1:], strict=True))
    if method == "GET":
        return method, path, values, None
    return method, path, None, values
