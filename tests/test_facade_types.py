"""The facade every front end calls is typed: its Protocol (`urchin/memory/facade.py`) names no `Any`, so
mypy checks the in-process `Memory` and the daemon client `RemoteMemory` against precise types, and the
front ends hold a `Facade`, never `Any`. (mypy itself, run by `make lint`, does the comparing; these
tests keep the ground it stands on.)"""

from __future__ import annotations

import ast
from pathlib import Path

import urchin

PACKAGE = Path(urchin.__file__).parent
FRONT_ENDS = ("cli", "daemon", "mcp_server", "contract")


def _annotations(tree: ast.AST) -> list[ast.expr]:
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if arg is not None and arg.annotation is not None:
                    out.append(arg.annotation)
            if node.returns is not None:
                out.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            out.append(node.annotation)
    return out


def _names_any(annotation: ast.expr) -> bool:
    text = annotation.value if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str) else None
    tree = ast.parse(text, mode="eval") if text is not None else annotation
    return any(isinstance(n, ast.Name) and n.id == "Any" or isinstance(n, ast.Attribute) and n.attr == "Any"
               for n in ast.walk(tree))


def test_the_facade_protocol_names_no_any() -> None:
    tree = ast.parse((PACKAGE / "memory" / "facade.py").read_text())
    loose = [ast.unparse(a) for a in _annotations(tree) if _names_any(a)]
    assert not loose, f"urchin/memory/facade.py still types with Any: {loose}"
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names]
    assert "Any" not in imported


def test_front_ends_hold_a_facade_never_any() -> None:
    """A parameter or attribute that holds the facade (`memory`, `target`, `remote`) is typed, and the
    functions that hand one out return a `Facade`."""
    loose = []
    for package in FRONT_ENDS:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.arg) and node.arg in ("memory", "target", "remote") and (
                        node.annotation is not None and _names_any(node.annotation)):
                    loose.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.arg}")
    assert not loose, f"the facade held as Any: {loose}"
    for path, name in (("daemon/client.py", "open_memory"), ("cli/group.py", "memory")):
        functions = [n for n in ast.walk(ast.parse((PACKAGE / path).read_text()))
                     if isinstance(n, ast.FunctionDef) and n.name == name]
        assert functions and all(f.returns is not None and ast.unparse(f.returns) == "Facade" for f in functions), (
            f"urchin/{path}: {name}() must return a Facade")
