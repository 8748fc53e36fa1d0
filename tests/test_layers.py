"""The layering in DESIGN.md holds: imports point down the stack, leaves import nothing of ours."""

from __future__ import annotations

import ast
from pathlib import Path

import urchin

PACKAGE = Path(urchin.__file__).parent

# Lower number = lower layer. A module may import only from its own layer or below.
LAYERS = [
    ("urchin.errors", 0), ("urchin.event", 1), ("urchin.config", 2), ("urchin.journal", 3),
    ("urchin.idindex", 4), ("urchin.forget", 4), ("urchin.ephemeral", 4), ("urchin.redact", 4), ("urchin.ingest", 4),
    ("urchin.tokens", 4),
    ("urchin.search", 5), ("urchin.index", 5), ("urchin.workspace", 5), ("urchin.collectors", 5),
    ("urchin.hooks", 5), ("urchin.memory", 6),
    ("urchin.cli", 7), ("urchin.mcp_server", 7), ("urchin.daemon", 7), ("urchin.doctor", 7),
    ("urchin.__main__", 8), ("urchin", 9),
]


def _layer(module: str) -> int:
    best = ("", 99)
    for prefix, level in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best[0]):
            best = (prefix, level)
    return best[1]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        out.append((name[: -len(".__init__")] if name.endswith(".__init__") else name, path))
    return out


def test_imports_point_down_the_stack() -> None:
    upward = []
    for name, path in _modules():
        if name == "urchin":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from urchin import collectors` imports the submodule `urchin.collectors`
                targets = ([f"urchin.{alias.name}" for alias in node.names] if node.module == "urchin"
                           else [node.module])
            for target in targets:
                if target.startswith("urchin") and _layer(target) > _layer(name):
                    upward.append(f"{name} imports {target}")
    assert not upward, "upward imports: " + "; ".join(upward)


def test_every_module_has_a_layer() -> None:
    assert [name for name, _ in _modules() if _layer(name) == 99] == []


def test_public_api_is_exported() -> None:
    for name in urchin.__all__:
        assert getattr(urchin, name) is not None
    from urchin.memory import Memory

    assert urchin.Memory is Memory
