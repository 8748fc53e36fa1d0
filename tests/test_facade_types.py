"""The facade every front end calls is typed: its Protocol (`urchin/facade/api.py`) names no `Any`, so
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
    tree = ast.parse((PACKAGE / "facade" / "api.py").read_text())
    loose = [ast.unparse(a) for a in _annotations(tree) if _names_any(a)]
    assert not loose, f"urchin/facade/api.py still types with Any: {loose}"
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


def _closures_back(cls: ast.ClassDef, builders: list[ast.FunctionDef]) -> list[str]:
    """Where a builder of `cls`'s parts hands a part a lambda, a nested function or one of `cls`'s own
    methods (`self.method`): a call that would come back up into the facade."""
    # methods and declared delegations; a property or cached_property is a part (an object), not a call
    methods = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and not any("property" in ast.unparse(d) for d in n.decorator_list)} | {
        t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    found = []
    for builder in builders:
        for node in ast.walk(builder):
            if node is not builder and isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append(f"{builder.name}:{node.lineno} {type(node).__name__.lower()}")
            if isinstance(node, ast.Call):
                for arg in (*node.args, *(k.value for k in node.keywords)):
                    if (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self"
                            and arg.attr in methods):
                        found.append(f"{builder.name}:{arg.lineno} self.{arg.attr}")
    return sorted(found)


def _memory_builders(source: str) -> tuple[ast.ClassDef, list[ast.FunctionDef]]:
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Memory")
    builders = [n for n in cls.body if isinstance(n, ast.FunctionDef) and (
        n.name == "__init__" or any(ast.unparse(d) == "cached_property" for d in n.decorator_list))]
    return cls, builders


def test_memory_wires_its_parts_in_one_place_without_closures_back_into_it() -> None:
    """`Memory.__init__` (and the parts built on first use) give each part the parts it calls, never a
    lambda or a bound method of `Memory`; no part imports the composer."""
    cls, builders = _memory_builders((PACKAGE / "facade" / "__init__.py").read_text())
    assert [b.name for b in builders][:1] == ["__init__"]
    assert _closures_back(cls, builders) == []
    from tests.test_layers import _graph

    graph = _graph()
    parts = {name for name in graph if name.startswith("urchin.facade.")}
    assert {part for part in parts if "urchin.facade" in graph[part]} == set()


def test_the_closure_finder_finds_closures() -> None:
    source = '''
class Memory:
    def __init__(self):
        self._a = A(lambda: self.status(), on=self.status)
    def status(self):
        return 1
'''
    cls, builders = _memory_builders(source)
    assert _closures_back(cls, builders) == ["__init__:4 lambda", "__init__:4 self.status"]
