"""`search` and `search_context` are parsed and checked once, at the edge (the contract's `build`): the
layers below the dispatcher take their typed parameters (`urchin/params/`) and never check them again.

The path of each operation below the dispatcher is listed here function by function; none of them may
call a validator (a field check, a wire parser, the contract). They may build the typed parameters from
a Python caller's keywords: the typed parameters check themselves when built.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import urchin
from urchin.errors import QueryError

PACKAGE = Path(urchin.__file__).parent

# (module file, class or None, function): where search and search_context run below the dispatcher
PATHS = {
    "search": [("memory/__init__.py", "Memory", "search"), ("daemon/client.py", "RemoteMemory", "search"),
               ("search/substring.py", "SubstringSearcher", "search"),
               ("search/substring.py", "SubstringSearcher", "older_match"),
               ("index/service.py", "IndexService", "search_team")],
    "context": [("memory/__init__.py", "Memory", "context"), ("daemon/client.py", "RemoteMemory", "context"),
                ("memory/index.py", "HybridIndex", "context"), ("index/service.py", "IndexService", "context"),
                ("index/hybrid.py", None, "run_context"), ("index/hybrid.py", None, "_run_context")],
}
# the validators: field checks, the wire parsers, the contract's table, a parameter error (the query
# language's own `parse`, what a query means, is not one)
VALIDATORS = {"check_query", "check_hours", "check_limit", "check_number", "check_bool", "check_label",
              "check_name", "unknown_parameter", "OPERATIONS", "Filters.of", "ContextParams.parse",
              "SearchParams.parse", "QueryError"}


def _function(path: str, owner: str | None, name: str) -> ast.FunctionDef:
    tree = ast.parse((PACKAGE / path).read_text())
    scope: list[ast.stmt] = tree.body
    if owner is not None:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body
    return next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)


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
