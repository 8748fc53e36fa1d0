"""The front-end contract: every operation's parameters declared once (`OPERATIONS`, typed per operation;
`OPERATIONS_BY_NAME` for a name held in a variable), one validator
(`Operation.parse`, or `Operation.build` for an operation's typed parameters), and the JSON Schema
generated from them (`input_schema`).

Sits just below the front ends (CLI, MCP, HTTP) and above the typed parameters and their limits
(`urchin/params/`), the errors and the event model.
"""

from __future__ import annotations

TYPE_CHECKING = False   # not `typing`'s: `contract.render` alone is on the CLI's fast path (daemon/fastclient.py)
if TYPE_CHECKING:
    from typing import Any

    from urchin.contract.ops import OPERATIONS, OPERATIONS_BY_NAME
    from urchin.contract.spec import MISSING, Caller, Operation, Param, describe

__all__ = ["OPERATIONS", "OPERATIONS_BY_NAME", "Operation", "Param", "Caller", "MISSING", "describe", "input_schema"]

# Loaded on first use: the declarations cost ~0.1 s of imports that a renderer alone does not need.
_WHERE = {"OPERATIONS": "urchin.contract.ops", "OPERATIONS_BY_NAME": "urchin.contract.ops",
          **{name: "urchin.contract.spec" for name in ("MISSING", "Caller", "Operation", "Param", "describe")}}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        value = getattr(import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'urchin.contract' has no attribute {name!r}")


_TYPES = {"text": "string", "int": "integer", "number": "number", "bool": "boolean"}


def _property(param: Param) -> dict[str, Any]:
    if param.kind == "texts":
        out: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    elif param.kind == "objects":   # an array of objects, each of the declared nested schema (searches)
        out = {"type": "array", "items": dict(param.items or {"type": "object"})}
    else:
        out = {"type": _TYPES[param.kind]}
    for key, count in (("minItems", param.min_items), ("maxItems", param.max_items)):
        if count is not None:
            out[key] = count
    if param.required and param.kind == "text":
        out["minLength"] = 1
    if param.max_chars is not None:
        out["maxLength"] = param.max_chars
    if param.choices:
        out["enum"] = list(param.choices)
    for key, value in (("minimum", param.minimum), ("maximum", param.maximum), ("exclusiveMinimum", param.above)):
        if value is not None:
            out[key] = value
    if param.default is not None:
        out["default"] = param.default
    out["description"] = param.help if param.required else f"{param.help.rstrip('.')} ({param.default_text()})."
    return out


def input_schema(op: Operation) -> dict[str, Any]:
    """The JSON Schema of an operation's wire parameters (strict: no other property)."""
    out: dict[str, Any] = {"type": "object", "properties": {p.wire_name: _property(p) for p in op.params},
                           "additionalProperties": False}
    required = [p.wire_name for p in op.params if p.required]
    if required:
        out["required"] = required
    return out
