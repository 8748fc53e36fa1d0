"""docs/architecture.md says what tests/test_layers.py enforces: its layer table and the front ends'
allow-list are generated from the test's own data (`python -m tests.test_architecture` rewrites them),
and every module, name and source file the document mentions exists."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.test_layers import ALLOWED_BELOW, ALLOWED_NAMES, LAYERS, PACKAGE

REPO = PACKAGE.parent
DOC = REPO / "docs" / "architecture.md"
BLOCKS = {"layers": "<!-- layers: generated from tests/test_layers.py LAYERS (python -m tests.test_architecture) -->",
          "front-ends": "<!-- front-ends: generated from tests/test_layers.py ALLOWED_BELOW and ALLOWED_NAMES -->"}


def _layers() -> str:
    by_layer: dict[int, list[str]] = {}
    for module, layer in LAYERS:
        by_layer.setdefault(layer, []).append(module)
    rows = [f"| {layer} | {', '.join(f'`{m}`' for m in modules)} |" for layer, modules in sorted(by_layer.items())]
    return "\n".join(["| layer | modules |", "|---:|---|", *rows])


def _front_ends() -> str:
    modules = ", ".join(f"`{m}`" for m in sorted(ALLOWED_BELOW))
    names = ", ".join(f"`{m}.{n}`" for m, n in sorted(ALLOWED_NAMES))
    return f"- modules: {modules}\n- names: {names}"


RENDER = {"layers": _layers, "front-ends": _front_ends}


def _span(text: str, block: str) -> tuple[int, int]:
    start = text.index(BLOCKS[block]) + len(BLOCKS[block]) + 1
    return start, text.index(f"<!-- /{block} -->", start)


def regenerate(text: str) -> str:
    for block, render in RENDER.items():
        start, end = _span(text, block)
        text = text[:start] + render() + "\n" + text[end:]
    return text


def test_the_layer_tables_are_the_layering_tests_own() -> None:
    text = DOC.read_text()
    assert regenerate(text) == text, "docs/architecture.md differs from tests/test_layers.py: run " \
        "`python -m tests.test_architecture` and review the prose around the tables"


def _defines(path: Path, name: str) -> bool:
    source = path.read_text()
    return re.search(rf"^\s*(?:async def |def |class ){re.escape(name)}\b|^{re.escape(name)}\s*[:=]", source,
                     re.M) is not None or re.search(rf"\bimport\b[^\n]*\b{re.escape(name)}\b", source) is not None


def _module_file(parts: list[str]) -> Path | None:
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_every_module_name_and_file_the_document_names_exists() -> None:
    text = DOC.read_text()
    missing = []
    for ref in sorted(set(re.findall(r"`(urchin(?:\.\w+)*)`", text))):
        parts = ref.split(".")
        for cut in range(len(parts), 0, -1):     # the longest prefix that is a module, then a name in it
            found = _module_file(parts[:cut])
            if found is not None:
                if cut < len(parts) and not _defines(found, parts[cut]):
                    missing.append(ref)
                break
        else:
            missing.append(ref)
    for ref in sorted(set(re.findall(r"`((?:urchin|tests|bench|docs)/[\w./*-]+)`", text))):
        if not list(REPO.glob(ref.rstrip("/"))):
            missing.append(ref)
    classes = {m.group(1): path for path in PACKAGE.rglob("*.py")
               for m in re.finditer(r"^class (\w+)\b", path.read_text(), re.M)}
    for owner, attr in sorted(set(re.findall(r"`([A-Z]\w+)\.(\w+)(?:\(\))?`", text))):   # `Memory.context`
        if owner not in classes or not re.search(rf"def {attr}\b", classes[owner].read_text()):
            missing.append(f"{owner}.{attr}")
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


if __name__ == "__main__":
    DOC.write_text(regenerate(DOC.read_text()))
    sys.exit(0)
