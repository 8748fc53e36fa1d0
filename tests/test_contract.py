"""The contract (`urchin/contract/`): one validator, errors spelled for the caller, bounds equal to the
layers' own, schemas generated from the same declarations."""

from __future__ import annotations

from typing import Any

import pytest

from urchin.contract import OPERATIONS, input_schema
from urchin.errors import QueryError


def test_limits_are_declared_once() -> None:
    """Every bound, default and choice of `urchin/params/limits.py` is assigned there only: the contract and
    the layers below import it, so no second copy can drift (a module may alias it on import)."""
    import ast
    from pathlib import Path

    import urchin
    from urchin.params import limits

    package = Path(urchin.__file__).parent
    declared = set(limits.__all__)
    again = []
    for path in package.rglob("*.py"):
        if path == Path(limits.__file__):
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            again += [f"{path.relative_to(package)}: {t.id}" for t in targets
                      if isinstance(t, ast.Name) and t.id in declared]
    assert again == []


@pytest.mark.parametrize("op, values, caller, message", [
    ("search", {"query": "  "}, "wire", "query must not be empty"),
    ("search", {"query": "  "}, "cli", "query must not be empty"),
    ("search", {"query": "x", "limit": 0}, "cli", "--limit: must be from 1 to 1000, got 0"),
    ("search", {"query": "x", "limit": "0"}, "wire", "limit: must be from 1 to 1000, got 0"),
    ("search", {"query": "x", "hours": "nan"}, "wire", 'hours: must be a number, got "nan"'),
    ("search", {"query": "x", "hours": 1e308}, "wire", "hours: must be at most 10000000, got 1e+308"),
    ("get_file", {"path": "a", "from_line": 0}, "cli", "--from-line: must be from 1 to 2147483648, got 0"),
    ("get_file", {"path": "a", "fromLine": 0}, "wire", "fromLine: must be from 1 to 2147483648, got 0"),
    ("get_memory", {"slug": "m", "token_budget": 0}, "cli", "--token-budget: must be from 1 to 200000, got 0"),
    ("recent", {"query": "x"}, "wire", "query: unknown parameter (allowed: hours, limit, source, workspace,"),
    ("ingest", {"content": "x", "tags": ["a", 7]}, "wire", "tags[1]: must be a string, got 7"),
    ("ephemeral", {"action": "Pause"}, "wire", 'action: must be one of start, end, status, got "Pause"'),
    ("context", {"query": "x", "color": 1}, "wire", "color: unknown parameter (allowed: query, strategy, searches, "),
    ("context", {"query": "x", "full_text_weight": 1}, "wire", "full_text_weight: unknown parameter (allowed: "),
    ("document_search", {"query": "x", "sourceIds": ["a"]}, "wire",
     "sourceIds: unknown parameter (allowed: query, limit, fullTextWeight, "),
    ("search", {"query": "x", "scope": "Everyone"}, "cli", '--scope: must be one of local, team, got "Everyone"'),
    ("search", {"query": "x", "source": "Bad Source!"}, "cli", "source: must be lowercase [a-z0-9._-]"),
    ("context", {"query": "x", "searches": [{"type": "sql", "query": "q"}]}, "cli", "--search[0].type: must be "),
    ("context", {"query": "x", "fullTextWeight": float("nan")}, "wire", "fullTextWeight: must be a number, got nan"),
    ("context", {"query": "x", "full_text_weight": float("inf")}, "cli",
     "--full-text-weight: must be a number, got inf"),
])
def test_errors_name_the_field_as_the_caller_spelled_it(op: str, values: dict[str, Any], caller: Any,
                                                        message: str) -> None:
    operation = OPERATIONS[op]
    with pytest.raises(QueryError) as caught:
        if operation.typed:
            operation.build(values, caller, from_text=caller == "wire")
        else:
            operation.parse(values, caller, from_text=caller == "wire" and op != "ingest")
    assert caught.value.message.startswith(message)
    assert "None" not in caught.value.message


def test_defaults_come_from_one_place() -> None:
    parsed = OPERATIONS["search"].build({"query": "x"}, "wire")
    assert (parsed.hours, parsed.limit) == (168, 20)
    schema = input_schema(OPERATIONS["search"])
    assert schema["properties"]["hours"]["default"] == 168 and schema["properties"]["limit"]["default"] == 20
    assert schema["properties"]["limit"]["maximum"] == 1000 and schema["additionalProperties"] is False


def test_search_context_and_search_declare_the_typed_parameters_names() -> None:
    """The contract spells the typed parameters' fields (their defaults and bounds are the same objects)."""
    from urchin.hybrid import docsearch
    from urchin.params import context

    op = OPERATIONS["context"]
    assert {p.wire_name: p.name for p in op.params} == context.WIRE_NAMES
    assert tuple(p.wire_name for p in OPERATIONS["document_search"].params) == docsearch.NAMES
    assert op.param("hours").above == 0 and op.param("hours").minimum is None


def test_textrawls_search_is_built_once_at_the_edge_naming_the_callers_field() -> None:
    """`document_search` comes out of the contract as `DocumentSearchParams` (the seed's defaults filled in),
    a bad value named as the caller spelled it."""
    from urchin.params.documents import DocumentSearchParams

    op = OPERATIONS["document_search"]
    built = op.build({"query": "x", "full_text_weight": 2, "include_memories": True, "tags": ["A"]}, "cli")
    assert built == DocumentSearchParams("x", full_text_weight=2.0, include_memories=True, tags=("a",))
    assert (built.limit, built.conversation_weight, built.source_type) == (5, 0.5, None)
    assert op.build({"query": "x", "sourceType": "FILE"}, "wire").source_type == "file"
    for values, caller, message in (
            ({"query": "x", "limit": 0}, "wire", "limit: must be from 1 to 50, got 0"),
            ({"query": "x", "sourceType": "url"}, "wire", 'sourceType: must be one of note, file, got "url"'),
            ({"query": "x", "source_type": "url"}, "cli", '--source-type: must be one of note, file, got "url"'),
            ({"query": "x", "full_text_weight": 0, "semantic_weight": 0}, "cli",
             "--semantic-weight: must be over 0 when fullTextWeight is 0 (no leg would run)"),
            ({"query": " "}, "wire", "query must not be empty"),
            ({"query": "x", "include_memories": "yes"}, "cli", '--memories: must be true or false, got "yes"'),
            ({"query": "x", "nope": 1}, "wire", "nope: unknown parameter (allowed: query, limit, fullTextWeight")):
        with pytest.raises(QueryError) as caught:
            op.build(values, caller)
        assert caught.value.message.startswith(message), caught.value.message


def test_typed_operations_are_built_once_at_the_edge() -> None:
    """`search` and `context` come out of the contract as their typed parameters, named from either caller."""
    from urchin.params.context import ContextParams
    from urchin.params.search import SearchParams
    from urchin.params.wire import to_wire

    search = OPERATIONS["search"].build({"q": "Deploy", "limit": "5", "source": "Claude"}, "wire", from_text=True)
    assert search == SearchParams("Deploy", limit=5, source="claude")
    context = OPERATIONS["context"].build({"query": "x", "full_text_weight": 2, "sources": ["A"]}, "cli")
    assert isinstance(context, ContextParams) and (context.full_text_weight, context.sources) == (2.0, ("a",))
    assert to_wire(context) == {"query": "x", "fullTextWeight": 2.0, "sources": ["a"]}   # as checked
    assert ContextParams.parse(to_wire(context)) == context


def test_search_context_and_search_schemas_come_from_the_declaration() -> None:
    from urchin.mcp_server.tools import INPUT_SCHEMAS

    context = INPUT_SCHEMAS["search_context"]
    assert context == input_schema(OPERATIONS["context"]) and context["required"] == ["query"]
    searches = context["properties"]["searches"]
    assert (searches["type"], searches["minItems"], searches["maxItems"]) == ("array", 1, 8)
    assert searches["items"]["required"] == ["type", "query"] and searches["items"]["additionalProperties"] is False
    budget = context["properties"]["tokenBudget"]
    assert (budget["minimum"], budget["maximum"], "default" in budget) == (1, 1_000_000, False)
    assert "(default: no budget)" in budget["description"]
    assert context["properties"]["liveByteBudget"]["default"] == 8 * 1024 * 1024
    assert context["properties"]["includeMemories"]["default"] is True
    search = INPUT_SCHEMAS["search"]
    assert search == input_schema(OPERATIONS["document_search"])
    assert search["properties"]["includeMemories"]["default"] is False
    assert search["properties"]["limit"]["maximum"] == 50


def test_cli_flags_of_context_and_find_are_generated_with_every_spelling() -> None:
    import click

    from urchin.cli import main

    def flags(name: str) -> dict[str | None, list[str]]:
        command = main.commands[name]
        return {p.name: [*p.opts, *getattr(p, "secondary_opts", [])] for p in command.params
                if isinstance(p, click.Option)}

    context = flags("context")
    assert context["sources"] == ["--source"] and context["tags"] == ["--tag"] and context["kinds"] == ["--kind"]
    assert context["devices"] == ["--device"] and context["accounts"] == ["--account"]
    assert context["searches"] == ["--search"] and context["k"] == ["--k"] and "source_ids" not in context
    assert context["include_memories"] == ["--include-memories", "--no-include-memories"]
    assert context["include_conversations"] == ["--include-conversations", "--no-include-conversations"]
    assert set(context) == {p.name for p in OPERATIONS["context"].params
                            if not p.positional and not p.wire_only} | {"as_json"}
    found = flags("find")
    assert found["include_memories"] == ["--memories"] and found["include_conversations"] == ["--conversations"]
    assert found["source_type"] == ["--source-type"] and found["tags"] == ["--tag"]


def test_every_operation_declares_one_scope_for_every_front_end() -> None:
    """`ACCESS` is the one declaration the Guard's route and tool tables and the MCP tool map derive
    from: every operation has one; a workspace-scoped one holds the workspace on each of its routes and
    takes a `workspace`; the Guard's tables are exactly what it declares."""
    from urchin.contract.access import ACCESS, NEEDS, tool_operations
    from urchin.daemon.scopes import _ROUTES, TOOL_NEEDS
    from urchin.mcp_server.schemas import TOOL_OPS
    from urchin.mcp_server.tools import TOOL_NAMES

    assert set(OPERATIONS) <= set(ACCESS)
    for name, access in ACCESS.items():
        assert access.need in NEEDS
        assert all((route.where is not None) == access.scoped for route in access.routes), name
        if access.scoped and name in OPERATIONS:
            assert "workspace" in {p.name for p in OPERATIONS[name].params}, name
    assert set(TOOL_NAMES) == set(tool_operations()) == set(TOOL_NEEDS)
    for tool, op in tool_operations().items():
        assert TOOL_NEEDS[tool] == (ACCESS[op].need, ACCESS[op].scoped)
        assert TOOL_OPS.get(tool, op) == op
    declared = {(r.method, r.path, a.need, r.where) for a in ACCESS.values() for r in a.routes}
    assert declared <= {(m, p.pattern, need, where) for m, p, need, where in _ROUTES}


def test_each_operation_is_filed_under_its_own_name_with_its_run() -> None:
    """`OPERATIONS` is keyed by name for the typed look-up (`OPERATIONS["search"]`): each key is its
    operation's name, every operation has its one run, and the by-name view is the same table."""
    from urchin.contract import OPERATIONS_BY_NAME
    from urchin.contract.ops import Operations

    assert set(OPERATIONS) == set(Operations.__annotations__)
    assert all(name == op.name and op.runner is not None for name, op in OPERATIONS_BY_NAME.items())
    assert OPERATIONS_BY_NAME is OPERATIONS
