"""Operations are parsed and checked once, at the edge (the contract's `build`): the layers below the
dispatcher take their typed parameters (`urchin/params/`) and never check them again.

The path of each operation below the dispatcher is listed here function by function; none of them may
call a validator (a field check, a wire parser, the contract). They may build the typed parameters from
a Python caller's keywords: the typed parameters check themselves when built.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import urchin
from urchin.errors import QueryError

PACKAGE = Path(urchin.__file__).parent

# (module file, class or None, function): where search and search_context run below the dispatcher
PATHS = {
    "search": [("facade/__init__.py", "Memory", "search"), ("daemon/client.py", "RemoteMemory", "search"),
               ("search/substring.py", "SubstringSearcher", "search"),
               ("search/substring.py", "SubstringSearcher", "older_match"),
               ("hybrid/service.py", "IndexService", "search_team")],
    "context": [("facade/__init__.py", "Memory", "context"), ("daemon/client.py", "RemoteMemory", "context"),
                ("facade/hybrid.py", "HybridIndex", "context"), ("hybrid/service.py", "IndexService", "context"),
                ("hybrid/search_context.py", None, "run_context"), ("hybrid/search_context.py", None, "_run_context")],
    **{op: [("facade/__init__.py", "Memory", method), ("daemon/client.py", "RemoteMemory", method)]
       for op, method in (("semantic", "semantic"), ("recent", "recent"), ("session_context", "session_context"),
                          ("workspace_context", "workspace_context"), ("get", "get"), ("tail", "tail"),
                          ("get_file", "get_file"), ("query_source", "query_source"),
                          ("fetch_document", "fetch_source_document"), ("ephemeral", "ephemeral"),
                          ("recall", "recall"))},
    # (HybridIndex.query_source and fetch_source_document raise QueryErrors of what is stored: a source that
    # does not exist, a file changed since it was cited; get_document only NotFoundError)
    "get_document": [("facade/__init__.py", "Memory", "get_document"),
                     ("daemon/client.py", "RemoteMemory", "get_document"),
                     ("facade/hybrid.py", "HybridIndex", "get_document")],
    "forget": [("facade/__init__.py", "Memory", "forget"), ("daemon/client.py", "RemoteMemory", "forget"),
               ("facade/forgetting.py", "Forgetting", "forget")],
    # Memory.memory_get checks a saved member's window (stored data, see STILL_CHECKED_BELOW), not the call's
    "get_memory": [("facade/workspace.py", "Workspace", "memory_get"),
                   ("daemon/client.py", "RemoteMemory", "memory_get")],
    "document_search": [("facade/__init__.py", "Memory", "document_search"),
                        ("daemon/client.py", "RemoteMemory", "document_search"),
                        ("facade/hybrid.py", "HybridIndex", "document_search"),
                        ("hybrid/docsearch.py", None, "run_search")],
}
# Modules below the dispatcher, and the validators each may still import, with why; any other import of
# a validator there fails (a new operation's check belongs in its typed parameters, `urchin/params/`).
BELOW = ("memory", "search", "index", "recall", "workspace", "daemon/client.py")
STILL_CHECKED_BELOW = {
    ("facade/timeline.py", "check_number"): "the viewer's timeline pages (no contract operation)",
    ("facade/timeline.py", "check_limit"): "the viewer's timeline pages (no contract operation)",
    ("facade/workspace.py", "check_hours"): "a curated memory's member windows (memory_create: no contract op; "
                                            "memory_get: as read from the memory's file, stored data)",
    ("recall/policy.py", "check_bool"): "the [recall] section of config.toml (settings, not an operation)",
    ("recall/policy.py", "check_number"): "the [recall] section of config.toml (settings, not an operation)",
    ("search/query.py", "check_number"): "where check_limit is defined (for the callers listed here)",
    ("search/cosine.py", "check_query"): "the token-cosine view's own guard (search/: another helper's area)",
    ("search/cosine.py", "check_limit"): "the token-cosine view's own guard (search/: another helper's area)",
}
# writes: each front end names its writer (CLI manual/note, MCP mcp, remember a decision) around one run
NO_RUN_YET: set[str] = set()
# the validators: field checks, the wire parsers, the contract's table, a parameter error (the query
# language's own `parse`, what a query means, is not one)
VALIDATORS = {"check_query", "check_hours", "check_limit", "check_number", "check_bool", "check_label",
              "check_name", "unknown_parameter", "OPERATIONS", "Filters.of", "ContextParams.parse",
              "SearchParams.parse", "QueryError"}


def _function(path: str, owner: str | None, name: str) -> ast.FunctionDef | ast.Assign:
    """The function, or a method declared as another's (`name = Delegated(...)`: no code of its own)."""
    tree = ast.parse((PACKAGE / path).read_text())
    scope: list[ast.stmt] = tree.body
    if owner is not None:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body
    return next(n for n in scope if (isinstance(n, ast.FunctionDef) and n.name == name)
                or (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                    and ast.unparse(n.value.func) == "Delegated" and [ast.unparse(t) for t in n.targets] == [name]))


def _names(node: ast.AST) -> set[str]:
    """Every name a function uses: plain names, attributes (`x.parse`), and `Class.attribute` pairs."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
            if isinstance(sub.value, ast.Name):
                out.add(f"{sub.value.id}.{sub.attr}")
        elif isinstance(sub, ast.ImportFrom):
            out.update(alias.name for alias in sub.names)
    return out


@pytest.mark.parametrize("operation", sorted(PATHS))
def test_no_layer_below_the_dispatcher_checks_the_parameters_again(operation: str) -> None:
    found = []
    for path, owner, name in PATHS[operation]:
        used = _names(_function(path, owner, name)) & VALIDATORS
        found += [f"{path}:{owner or ''}.{name} uses {v}" for v in sorted(used)]
    assert found == [], f"{operation} is checked below the dispatcher: " + "; ".join(found)


def _imported_validators(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names} \
        & (VALIDATORS - {"QueryError"})   # raising one is not checking parameters (a changed file, a hash)


def test_no_module_below_the_dispatcher_imports_a_validator() -> None:
    """For any operation: a module below the dispatcher that imports a field check, the contract's table or
    a wire parser checks parameters again (the few named in STILL_CHECKED_BELOW say why they may)."""
    found = []
    for below in BELOW:
        for path in sorted([PACKAGE / below] if below.endswith(".py") else (PACKAGE / below).rglob("*.py")):
            rel = str(path.relative_to(PACKAGE))
            found += [f"{rel} imports {name}" for name in sorted(_imported_validators(path))
                      if (rel, name) not in STILL_CHECKED_BELOW]
    assert found == [], "checked below the dispatcher: " + "; ".join(found)


def test_every_operation_with_typed_parameters_runs_through_the_contract() -> None:
    """Each operation's one call of the facade is declared with it (`run`); its typed parameters' defaults
    are the ones its declared parameters state (help and schemas), so the two cannot drift."""
    from dataclasses import MISSING, fields

    from urchin.contract import OPERATIONS

    typed = [op for op in OPERATIONS.values() if op.typed is not None]
    assert {op.name for op in typed} >= {"search", "semantic", "recent", "session_context", "workspace_context",
                                         "get", "tail", "context", "get_file", "get_memory", "document_search",
                                         "forget", "query_source", "fetch_document", "get_document", "ephemeral",
                                         "recall", "remember", "ingest"}
    for op in OPERATIONS.values():
        assert (op.runner is not None) == (op.name not in NO_RUN_YET), op.name
    for op in typed:
        defaults = {f.name: f.default for f in fields(op.typed_class())  # type: ignore[arg-type]
                    if f.default is not MISSING}
        for param in op.params:
            if param.name in defaults and param.default is not None and op.name != "context":
                assert defaults[param.name] == param.default, (op.name, param.name)


def test_the_finder_finds_a_validator() -> None:
    tree = ast.parse("def search(self, q):\n    return self.s.search(check_query(q), OPERATIONS['x'].parse(q),\n"
                     "                         ContextParams.parse(q), parse(q))\n")
    assert _names(tree) & VALIDATORS == {"check_query", "OPERATIONS", "ContextParams.parse"}


@pytest.mark.parametrize("values, message", [
    ({"query": " "}, "query must not be empty"),
    ({"query": "x", "hours": 0}, "hours: must be greater than 0, got 0"),
    ({"query": "x", "limit": 1001}, "limit: must be from 1 to 1000, got 1001"),
    ({"query": "x", "source": "Bad Source!"}, "source: must be lowercase"),
    ({"query": "x", "scope": "galaxy"}, 'scope: must be one of local, team, got "galaxy"'),
    ({"query": 7}, "query: must be a string, got 7"),
])
def test_the_typed_parameters_check_themselves_when_built(values: dict[str, object], message: str) -> None:
    """A Python caller cannot skip the checks: building the typed parameters is checking them."""
    from urchin.params.search import SearchParams

    with pytest.raises(QueryError) as caught:
        SearchParams(**values)   # type: ignore[arg-type]
    assert caught.value.message.startswith(message)


def _typed_operations() -> list[str]:
    from urchin.contract import OPERATIONS

    return sorted(name for name, op in OPERATIONS.items() if op.typed is not None)


# an operation with no required field that still needs one of several (a rule across its fields)
_AT_LEAST = {"forget": {"session": "x"}}


@pytest.mark.parametrize("operation", _typed_operations())
def test_every_typed_parameters_object_built_directly_is_checked(operation: str) -> None:
    """For every operation with typed parameters (a new one too): built directly, as a Python caller
    builds them (no contract, no `parse`), a value out of any declared bound is refused by name."""
    from urchin.contract import OPERATIONS

    op = OPERATIONS[operation]
    typed: Any = op.typed_class()
    required = {p.name: p.choices[0] if p.choices else "x" for p in op.params if p.required} or \
        _AT_LEAST.get(operation, {})
    typed(**required)   # the required fields alone are a valid object
    checked = 0
    for param in op.params:
        if param.kind in ("int", "number") and param.maximum is not None:
            with pytest.raises(QueryError) as caught:
                typed(**required, **{param.name: param.maximum * 2 + 1})
            assert caught.value.field == param.wire_name, (param.name, caught.value.message)
            checked += 1
        if param.required:
            with pytest.raises(QueryError):
                typed(**{**required, param.name: " "})
            checked += 1
    if operation in _AT_LEAST:   # nothing given is refused by name too
        with pytest.raises(QueryError):
            typed()
        checked += 1
    assert checked or not op.params


@pytest.mark.parametrize("name", ["context", "document"])
@pytest.mark.parametrize("query, message", [
    ({"a": 1}, "query: must be a string, got {"),
    (7, "query: must be a string, got 7"),
    ("  ", "query must not be empty"),
])
def test_a_ranked_query_that_is_not_text_is_named_as_such(name: str, query: object, message: str) -> None:
    """A query of the wrong type is a type error, not an "empty" one (a dict used to read "must not be empty")."""
    from urchin.params.context import ContextParams
    from urchin.params.documents import DocumentSearchParams

    parse = ContextParams.parse if name == "context" else DocumentSearchParams.parse
    with pytest.raises(QueryError) as caught:
        parse({"query": query})
    assert caught.value.message.startswith(message), caught.value.message
