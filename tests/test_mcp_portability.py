"""Tool schemas any MCP client can read: the MCP Inspector's `--strict` rules, checked over real stdio.

`mcp-inspector --cli … --method tools/list --strict` (Inspector 2.x; it needs Node >= 22.19) lints
every tool's inputSchema and outputSchema with its `core/json/schemaLint.ts`. `portability_findings`
ports those rules, with the same names, severities and paths:

- `boolean-schema` (error): a bare `true`/`false` where a schema object is expected (allowed only
  as the value of additionalProperties, unevaluatedProperties, additionalItems, unevaluatedItems);
- `type-union` (warning): `"type": [...]`, e.g. `["string", "null"]`; nullables are written
  `{"anyOf": [{"type": "string"}, {"type": "null"}]}` (the OpenAPI subset of Gemini function
  declarations has a single `type`);
- `remote-ref` (warning): a `$ref` outside the document (not `#...`) when no `$id` is embedded;
- `untyped-schema` (warning): a schema with no validation keyword at all (`{}`, or a description
  alone), i.e. one that accepts any value; allowed directly under `not`.

The Inspector only exits non-zero on errors; this test fails on warnings too. `scripts/inspector-strict.sh`
runs the Inspector itself.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.mcp_harness import stdio_session

pytestmark = pytest.mark.anyio

Finding = tuple[str, str, str]  # (rule, severity, path), the path as the Inspector prints it

_BOOLEAN_VALUED = {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
_SUBSCHEMA = ("items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
              "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions")
_CONSTRAINING = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema",
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
    "required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains",
    "additionalItems", "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
    "unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
    "$recursiveRef",
}
_JSON_TYPES = {"null", "boolean", "object", "array", "number", "string", "integer"}
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_MAX_DEPTH = 64


def _child(parent: str, key: str) -> str:
    if _IDENT.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    return f'{parent}["{key}"]'


def _subschemas(node: dict[str, Any], path: str) -> list[tuple[Any, str, str]]:
    """(subschema, its path, the keyword it sits under), in the Inspector's order."""
    out: list[tuple[Any, str, str]] = []
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            out += [(sub, _child(_child(path, key), name), key) for name, sub in node[key].items()]
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            out += [(sub, f"{_child(path, key)}[{i}]", key) for i, sub in enumerate(node[key])]
    for key in _SUBSCHEMA:
        if key not in node:
            continue
        if key == "items" and isinstance(node[key], list):
            out += [(sub, f"{_child(path, key)}[{i}]", key) for i, sub in enumerate(node[key])]
        else:
            out.append((node[key], _child(path, key), key))
    return out


def _declares_id(node: Any, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH or not isinstance(node, dict):
        return False
    if isinstance(node.get("$id"), str) and node["$id"]:
        return True
    return any(_declares_id(sub, depth + 1) for sub, _, _ in _subschemas(node, ""))


def portability_findings(schema: Any, prefix: str) -> list[Finding]:
    """What `mcp-inspector --strict` reports for one schema; `prefix` is inputSchema or outputSchema."""
    findings: list[Finding] = []
    embedded_ids = _declares_id(schema)

    def where(path: str) -> str:
        return f"{prefix}.{path}" if path else prefix

    def walk(node: Any, path: str, keyword: str | None, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, bool):
            if keyword not in _BOOLEAN_VALUED:
                findings.append(("boolean-schema", "error", where(path)))
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if isinstance(kind, list) and kind and all(isinstance(t, str) and t in _JSON_TYPES for t in kind) \
                and len(set(kind)) == len(kind):
            findings.append(("type-union", "warning", where(path)))
        ref = node.get("$ref")
        if isinstance(ref, str) and ref and not ref.startswith("#") and not embedded_ids:
            findings.append(("remote-ref", "warning", where(path)))
        constrains = any(key in _CONSTRAINING for key in node) or ("if" in node and ("then" in node or "else" in node))
        if not constrains and keyword != "not":
            findings.append(("untyped-schema", "warning", where(path)))
        for sub, sub_path, sub_keyword in _subschemas(node, path):
            walk(sub, sub_path, sub_keyword, depth + 1)

    walk(schema, "", None, 0)
    return findings


async def test_every_listed_tool_passes_the_inspector_strict_rules() -> None:
    async with stdio_session() as session:
        tools = (await session.list_tools()).tools
    assert len(tools) >= 17
    findings = []
    for tool in tools:
        assert tool.input_schema.get("type") == "object", tool.name
        assert tool.output_schema is not None and tool.output_schema.get("type") == "object", tool.name
        findings += [(tool.name, *f) for f in portability_findings(tool.input_schema, "inputSchema")]
        findings += [(tool.name, *f) for f in portability_findings(tool.output_schema, "outputSchema")]
    assert findings == [], "\n".join(" ".join(f) for f in findings)


@pytest.mark.parametrize("schema, expected", [
    ({"type": "object", "properties": {"id": {"type": ["string", "null"]}}},
     [("type-union", "warning", "outputSchema.properties.id")]),
    ({"type": "object", "properties": {"x": {"anyOf": [{"type": ["integer", "string"]}, {"type": "null"}]}}},
     [("type-union", "warning", "outputSchema.properties.x.anyOf[0]")]),
    ({"type": "object", "properties": {"meta": {"description": "anything"}, "y": {}}},
     [("untyped-schema", "warning", "outputSchema.properties.meta"),
      ("untyped-schema", "warning", "outputSchema.properties.y")]),
    ({"type": "object", "properties": {"any": True, "never": False}},
     [("boolean-schema", "error", "outputSchema.properties.any"),
      ("boolean-schema", "error", "outputSchema.properties.never")]),
    ({"type": "array", "items": {"$ref": "https://example.com/event.json"}},
     [("remote-ref", "warning", "outputSchema.items")]),
    ({"type": "object", "properties": {"a-b": {"type": "string", "not": {}}}, "if": {}},
     [("untyped-schema", "warning", "outputSchema.if")]),
    ({}, [("untyped-schema", "warning", "outputSchema")]),
])
def test_the_rules_report_what_the_inspector_reports(schema: Any, expected: list[Finding]) -> None:
    assert portability_findings(schema, "outputSchema") == expected


@pytest.mark.parametrize("schema", [
    {"type": "object", "additionalProperties": False, "properties": {"on": {"type": "boolean"}}},
    {"type": "object", "additionalProperties": True},
    {"anyOf": [{"type": "string"}, {"type": "null"}]},
    {"type": "object", "properties": {"e": {"$ref": "#/$defs/event"}}, "$defs": {"event": {"type": "object"}}},
    {"$id": "https://example.com/root", "type": "object", "properties": {"e": {"$ref": "event.json"}}},
    {"not": {}},
    {"if": {"const": 1}, "then": {"minimum": 0}},
    {"type": "string", "format": "date-time", "const": "x"},
])
def test_the_rules_accept_what_the_inspector_accepts(schema: Any) -> None:
    assert portability_findings(schema, "inputSchema") == []
