"""docs/glossary.md holds: the modules, classes and mirroring tests renamed for one meaning per word
(scripts/rename_modules.py keeps the map) do not come back, under their old name or at their new
place, nothing in the tree still names them (a run of the script would change nothing), and every
module the glossary names exists or is one it retires. In process: the script's own functions over
the tracked files, no git mv."""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import cache
from types import ModuleType

from tests.test_layers import PACKAGE, _modules

REPO = PACKAGE.parent
GLOSSARY = REPO / "docs" / "glossary.md"


@cache
def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rename_modules", REPO / "scripts" / "rename_modules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("rename_modules", module)
    spec.loader.exec_module(module)
    return module


def test_no_retired_module_comes_back() -> None:
    script, modules = _script(), set(_modules())
    back = sorted(old for old in script.MODULES if old in modules)
    assert back == [], f"retired module names are back (docs/glossary.md): {back}"
    # nor an old leaf under its package's new name (the facade's part for the hybrid index named `index` again)
    again = sorted(f"{script.renamed(old.rpartition('.')[0])}.{old.rpartition('.')[2]}" for old in script.MODULES)
    assert sorted(set(again) & modules) == [], "a retired name under its package's new name"
    missing = sorted(new for new in script.MODULES.values() if new not in modules)
    assert missing == [], f"the glossary's modules are gone: {missing} (update scripts/rename_modules.py)"


def test_tests_mirror_the_new_names() -> None:
    tests = _script().TESTS
    assert sorted(old for old in tests if (REPO / old).exists()) == [], "a test module named for a retired module"
    assert sorted(new for new in tests.values() if not (REPO / new).exists()) == []


def test_no_class_takes_a_retired_name() -> None:
    retired = {old for old, _, _ in _script().CLASSES}
    found = sorted(f"{name}.{cls}" for name, path in _modules().items()
                   for cls in re.findall(r"^\s*class (\w+)", path.read_text("utf-8"), re.M) if cls in retired)
    assert found == [], f"classes named what the glossary retired: {found}"


def test_nothing_in_the_tree_names_a_retired_module() -> None:
    script = _script()
    assert script.move_modules(dry=True) == []
    stale = [path for path in script.files() if script.rewrite((REPO / path).read_text("utf-8"), path)
             != (REPO / path).read_text("utf-8")]
    assert stale == [], f"these name retired modules or classes: run `python scripts/rename_modules.py`: {stale}"


def test_every_module_the_glossary_names_exists_or_is_retired() -> None:
    script, modules = _script(), set(_modules())
    named = {m.group(0).removesuffix(".py").removesuffix("/").replace("/", ".")
             for m in re.finditer(r"(?<![\w/.])urchin(?:/\w+)+(?:\.py|/)?", GLOSSARY.read_text("utf-8"))}
    unknown = sorted(n for n in named if n not in modules and n not in script.MODULES)
    assert unknown == [], f"docs/glossary.md names modules that neither exist nor are retired: {unknown}"


def test_the_script_finds_an_old_name_and_its_uses() -> None:
    script = _script()
    old = next(iter(script.MODULES))
    new = script.MODULES[old]
    parent, leaf = old.rpartition(".")[0], old.rpartition(".")[2]
    text = f"import {old}.x as y\nfrom {parent} import {leaf}\n{leaf}.run()\nsee `{old.replace('.', '/')}/`\n"
    out = script.rewrite(text, "tests/example.py")
    assert out == (f"import {new}.x as y\nfrom {parent} import {new.rpartition('.')[2]}\n"
                   f"{new.rpartition('.')[2]}.run()\nsee `{new.replace('.', '/')}/`\n")
    assert script.rewrite(out, "tests/example.py") == out
