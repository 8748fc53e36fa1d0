"""Rename modules and classes whose names do not say what they hold (issue 35, item 6; docs/glossary.md).

An explicit map old -> new, applied to the tree as it is, whatever else changed in it: `git mv` of each
module (a package first, then its modules at their new place; a package whose old folder came back
beside the new one, a merge's doing, has its files moved in one by one), then every reference rewritten
in the text of urchin/, tests/, bench/, docs/, scripts/, README.md, Makefile and pyproject.toml:

- dotted names (`urchin.index.hybrid`, in imports, strings, `python -m`, mypy overrides): the longest
  renamed prefix is replaced, the rest kept (`urchin.index.sparse` -> `urchin.hybrid.sparse`);
- `from urchin.search import extract`: the imported module's new name, and its uses in that file
  (`extract.x` -> `cosine_extract.x`);
- paths (`urchin/index/hybrid.py`, `urchin/index/`, and `search/tokens.py` relative to the package);
- classes, by whole word: everywhere for a name used once in the tree, else only in the files that
  name the class's module;
- test modules that mirror a renamed module (`tests/test_wire.py` -> `tests/test_daemon_http.py`),
  moved too, and named anew wherever they are named.

Then imports are sorted again (ruff's isort fix) and the blocks generated from module names are
rewritten (docs/architecture.md's tables, the light clients' table). Nothing depends on line numbers,
and a second run changes nothing (the map's new names never start with an old one: checked). Left
alone: CHANGELOG.md and bench/RESULTS.md (history), docs/glossary.md (it names the old names on
purpose), recorded fixtures, and this script.

    python scripts/rename_modules.py            # rename, print what changed
    python scripts/rename_modules.py --check    # exit 1 if anything would change
"""

from __future__ import annotations

import argparse
import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# old dotted module -> new dotted module (a package's entry renames its folder)
MODULES = {
    # "memory" is a curated memory (`includeMemories`, `list_memories`); the facade's package says facade
    "urchin.memory": "urchin.facade",
    "urchin.memory.facade": "urchin.facade.api",            # the facade's API as a Protocol
    "urchin.memory.index": "urchin.facade.hybrid",          # the facade's part for urchin.hybrid
    "urchin.memory.forget": "urchin.facade.forgetting",     # beside urchin.forget; its class is `Forgetting`
    # "index" alone said nothing: this package is the PostgreSQL hybrid index
    "urchin.index": "urchin.hybrid",
    "urchin.index.hybrid": "urchin.hybrid.search_context",  # `search_context`: legs run, fused, scored
    "urchin.forget": "urchin.tombstones",                   # the tombstone log and the one compaction
    # "token" is an LLM token (budgets) or an API token; the tokeniser's output is a term
    "urchin.tokens": "urchin.api_tokens",
    "urchin.search.tokens": "urchin.search.terms",
    # names that did not say what the module holds
    "urchin.checks": "urchin.value_checks",
    "urchin.children": "urchin.processes",                  # child processes and the one worker pool
    "urchin.wire": "urchin.daemon_http",                    # one HTTP request to the daemon, stdlib only
    "urchin.search.extract": "urchin.search.cosine_extract",
    "urchin.search.learn": "urchin.search.assoc_child",     # the learned associations' build, a child
    "urchin.daemon.deferred": "urchin.daemon.deferred_route",
    "urchin.daemon.protocol": "urchin.daemon.uvicorn_protocol",
    # "context" is the hybrid search operation; what a hook hands an agent is recall's
    "urchin.hook_context": "urchin.hook_recall",
    "urchin.workspace.memories": "urchin.workspace.curated",
    # "view" is a derived structure that follows the journal; the redactor's are decoded layers
    "urchin.redact._views": "urchin.redact._decoded",
}

# (old class, new class, its module (new name)): renamed by whole word
CLASSES = [
    ("AppContext", "CliState", "urchin.cli.group"),                   # click's `ctx.obj`, not a context
    ("MemoryDef", "CuratedMemory", "urchin.workspace.curated"),
    ("MemoryStore", "CuratedMemories", "urchin.workspace.curated"),
    ("MemoryParams", "CuratedMemoryParams", "urchin.params.workspace"),
    ("ContextAsk", "RecallAsk", "urchin.hook_recall"),
    ("View", "BlockSnapshot", "urchin.search.blockview"),            # a snapshot of the block index
    ("View", "DecodedLayer", "urchin.redact._decoded"),              # one decoded layer of a text
    ("WireError", "DaemonHttpError", "urchin.daemon_http"),          # "wire" is a parameter's spelling
]

# tests mirror modules (tests/test_<module>.py): old -> new, named as the module they test now is
TESTS = {
    "tests/test_wire.py": "tests/test_daemon_http.py",
    "tests/test_extract.py": "tests/test_cosine_extract.py",
    "tests/test_tokens.py": "tests/test_terms.py",                       # the tokeniser's terms
    "tests/test_memory_hot.py": "tests/test_facade_hot.py",
    "tests/test_daemon_deferred.py": "tests/test_daemon_deferred_route.py",
    "tests/test_daemon_protocol.py": "tests/test_daemon_uvicorn_protocol.py",
    "tests/test_redact_views.py": "tests/test_redact_decoded.py",
    "tests/test_redact_views_gates.py": "tests/test_redact_decoded_gates.py",
    "tests/test_index_context.py": "tests/test_hybrid_context.py",
    "tests/test_index_feed.py": "tests/test_hybrid_feed.py",
    "tests/test_index_files.py": "tests/test_hybrid_files.py",
    "tests/test_index_gather.py": "tests/test_hybrid_gather.py",
    "tests/test_index_params.py": "tests/test_context_params.py",       # `ContextParams.parse`
}

ROOTS = ("urchin", "tests", "bench", "docs", "scripts")
FILES = ("README.md", "Makefile", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".sh", ".txt", ".yml", ".yaml", ".json", ".pyi"}
LEFT_ALONE = {"CHANGELOG.md", "bench/RESULTS.md", "docs/glossary.md", "scripts/rename_modules.py"}
FIXTURES = "tests/fixtures/"

# each pattern starts with its literal, so a search skips ahead to it (a look-behind first would not)
DOTTED = re.compile(r"urchin(?<![\w.]urchin)((?:\.\w+)+)")
# `urchin/index/hybrid.py`, `urchin/index/`: not `~/.local/share/urchin/tokens.json`
PATH = re.compile(r"urchin(?<![\w/.\-]urchin)((?:/\w+)+)(\.py\b|/)?(?![\w/]|\.\w)")
SUBPACKAGES = r"(?:memory|index|search|daemon|redact|workspace|cli|params|contract|recall|hybrid|facade)"
RELATIVE = re.compile(rf"(?<![\w/.\-])({SUBPACKAGES}(?:/\w+)*)/(\w+)\.py\b")
FROM_IMPORT = re.compile(r"(from(?<![\w.]from)\s+)(urchin(?:\.\w+)*)(\s+import\s+)(\([^)]*\)|[^\n#]+)", re.M)


def check_map() -> None:
    """A second run must find nothing to do: no new name may be (or start with) an old one."""
    for new in MODULES.values():
        parts = new.split(".")
        clash = [".".join(parts[:i]) for i in range(2, len(parts) + 1) if ".".join(parts[:i]) in MODULES]
        if clash:
            sys.exit(f"rename_modules: new name {new} starts with old name {clash[0]}")
    olds = {old for old, _, _ in CLASSES}
    for _, new, _ in CLASSES:
        if new in olds:
            sys.exit(f"rename_modules: new class {new} is an old one")
    stems = {Path(old).stem for old in TESTS}
    for new in TESTS.values():
        if Path(new).stem in stems:
            sys.exit(f"rename_modules: new test {new} is an old one")


def renamed(name: str) -> str:
    """The new dotted name of `name` (a module, or a name inside one): its longest renamed prefix replaced."""
    parts = name.split(".")
    for i in range(len(parts), 1, -1):
        new = MODULES.get(".".join(parts[:i]))
        if new:
            return ".".join([new, *parts[i:]])
    return name


def _module_path(name: str, root: Path) -> Path | None:
    """The file or folder of a module (dotted), or None when it is neither."""
    base = root.joinpath(*name.split("."))
    if base.is_dir() and any(base.rglob("*.py")):   # (a folder a merge emptied holds only caches)
        return base
    file = base.with_suffix(".py")
    return file if file.exists() else None


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def move_modules(dry: bool) -> list[str]:
    """`git mv` each module still at its old place; a package first, then its modules at their new place."""
    done = []
    for old in sorted(MODULES, key=lambda n: n.count(".")):
        new = MODULES[old]
        parent = renamed(old.rpartition(".")[0])
        source = _module_path(f"{parent}.{old.rpartition('.')[2]}", ROOT)
        target = ROOT.joinpath(*new.split("."))
        if source is None:
            continue
        if source.is_file():
            target = target.with_suffix(".py")
        if target.exists() and source.is_file():
            sys.exit(f"rename_modules: both {source.relative_to(ROOT)} and {target.relative_to(ROOT)} exist")
        done.append(f"{source.relative_to(ROOT)} -> {target.relative_to(ROOT)}")
        if dry:
            continue
        if not target.exists():
            _git("mv", str(source.relative_to(ROOT)), str(target.relative_to(ROOT)))
            continue
        # the old folder came back beside the new one (a merge): move its tracked files in, one by one
        for path in sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            dest = target / path.relative_to(source)
            if dest.exists():
                sys.exit(f"rename_modules: both {path.relative_to(ROOT)} and {dest.relative_to(ROOT)} exist")
            dest.parent.mkdir(parents=True, exist_ok=True)
            _git("mv", str(path.relative_to(ROOT)), str(dest.relative_to(ROOT)))
        shutil.rmtree(source)   # what is left is untracked: caches
    return done


def move_tests(dry: bool) -> list[str]:
    """`git mv` each test module still at its old path."""
    done = []
    for old, new in TESTS.items():
        if not (ROOT / old).exists():
            continue
        if (ROOT / new).exists():
            sys.exit(f"rename_modules: both {old} and {new} exist")
        done.append(f"{old} -> {new}")
        if not dry:
            _git("mv", old, new)
    return done


def _rewrite_tests(text: str) -> str:
    """`tests/test_wire.py`, `tests.test_wire`, `test_wire` -> the new test module's name (not a function's)."""
    for old, new in TESTS.items():
        stem = Path(old).stem
        if stem in text:
            text = re.sub(rf"(?<!\w)(tests[./])?{stem}\b(?!\s*\()", rf"\g<1>{Path(new).stem}", text)
    return text


def _rewrite_from_imports(text: str) -> str:
    """`from urchin.search import extract` -> `from urchin.search import cosine_extract`, and `extract.` after."""
    uses: dict[str, str] = {}

    def one(match: re.Match[str]) -> str:
        base, names = match.group(2), match.group(4)

        def name(m: re.Match[str]) -> str:
            old = f"{base}.{m.group(0)}"
            if old not in MODULES:
                return m.group(0)
            new_leaf = MODULES[old].rpartition(".")[2]
            if MODULES[old].rpartition(".")[0] != renamed(base):
                sys.exit(f"rename_modules: `from {base} import {m.group(0)}` moves package; rewrite it by hand")
            uses[m.group(0)] = new_leaf
            return new_leaf

        # an imported name: a word not after `as` (an alias keeps its own name)
        names = re.sub(r"(?<!\bas )(?<![\w.])(?!as\b)\w+", name, names)
        return match.group(1) + base + match.group(3) + names

    text = FROM_IMPORT.sub(one, text)
    for old_leaf, new_leaf in uses.items():   # `extract.x`, and `extract` passed on (`f(extract, ...)`)
        text = re.sub(rf"(?<![\w.'\"`]){re.escape(old_leaf)}(?=\.\w|\s*[,)\]])", new_leaf, text)
    return text


def _rewrite_dotted(text: str) -> str:
    return DOTTED.sub(lambda m: renamed(m.group(0)), text)


def _rewrite_paths(text: str) -> str:
    def absolute(m: re.Match[str]) -> str:
        parts = m.group(1).strip("/").split("/")
        new = renamed(".".join(["urchin", *parts]))
        return new.replace(".", "/") + (m.group(2) or "")

    def relative(m: re.Match[str]) -> str:
        old = ".".join(["urchin", *m.group(1).split("/"), m.group(2)])
        if renamed(old) == old:
            return m.group(0)
        return renamed(old).removeprefix("urchin.").replace(".", "/") + ".py"

    text = PATH.sub(absolute, text)
    return RELATIVE.sub(relative, text) if any(stale in text for stale in _relative_olds()) else text


@functools.cache
def _relative_olds() -> tuple[str, ...]:
    """What a package-relative path to an old module starts with (`memory/`, `search/tokens.py`)."""
    out = []
    for old in MODULES:
        parts = old.split(".")[1:]
        if len(parts) > 1:
            out.append("/".join(parts) + ".py")
        out.append("/".join(parts) + "/")
    return tuple(out)


def _class_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for old, _, _ in CLASSES:
        counts[old] = counts.get(old, 0) + 1
    return counts


def _rewrite_classes(text: str, path: str) -> str:
    counts = _class_counts()
    for old, new, module in CLASSES:
        if old not in text:   # (a plain `in` first: a whole-word regex over every file costs a second)
            continue
        if counts[old] > 1:   # a common name: only where its module is named (old or new spelling)
            leaves = {module.rpartition(".")[2]}
            leaves |= {o.rpartition(".")[2] for o, n in MODULES.items() if n == module}
            own = path == module.replace(".", "/") + ".py" or any(
                path == o.replace(".", "/") + ".py" for o, n in MODULES.items() if n == module)
            if not own and not any(leaf in text and re.search(rf"\b{re.escape(leaf)}\b", text) for leaf in leaves):
                continue
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--", *ROOTS, *FILES], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\n")
    out = []
    for path in listed:
        if not path or path in LEFT_ALONE or path.startswith(FIXTURES):
            continue
        if Path(path).suffix in SUFFIXES or path in FILES:
            if (ROOT / path).is_file():
                out.append(path)
    return out


def rewrite(text: str, path: str) -> str:
    text = _rewrite_from_imports(text)
    text = _rewrite_dotted(text)
    text = _rewrite_paths(text)
    text = _rewrite_tests(text)
    return _rewrite_classes(text, path)


def sort_imports(paths: list[str]) -> None:
    """A renamed module sorts elsewhere among its imports: ruff's isort fix (the project's settings), if found."""
    ruff = next((str(c) for c in (ROOT / ".venv/bin/ruff", Path(sys.executable).parent / "ruff") if c.exists()),
                shutil.which("ruff"))
    if not paths:
        return
    if ruff is None:
        print("rename_modules: ruff not found, imports left unsorted (`ruff check --select I --fix`)")
        return
    subprocess.run([ruff, "check", "--quiet", "--select", "I", "--fix", "--exit-zero", *paths], cwd=ROOT, check=True)


# generated from the code: rewritten after a rename (`python -m MODULE`, as their docstrings say)
GENERATED = ("tests.test_architecture", "urchin.daemon.fasttable_gen")


def regenerate() -> None:
    """The blocks generated from module names (docs/architecture.md's tables, the light clients' table)."""
    for module in GENERATED:
        if _module_path(module, ROOT) is None:
            continue
        done = subprocess.run([sys.executable, "-m", module], cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            print(f"rename_modules: `python -m {module}` failed, run it by hand:\n{done.stderr[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a run would")
    args = parser.parse_args()
    check_map()
    moved = move_modules(dry=args.check) + move_tests(dry=args.check)
    changed = []
    for path in files():
        # under --check a module not yet moved is still at its old path: rewrite as if moved
        text = (ROOT / path).read_text(encoding="utf-8")
        new = rewrite(text, path)
        if new != text:
            changed.append(path)
            if not args.check:
                (ROOT / path).write_text(new, encoding="utf-8")
    if (moved or changed) and not args.check:
        sort_imports([p for p in changed if p.endswith(".py")])
        regenerate()
    for line in moved:
        print(f"moved {line}")
    for path in changed:
        print(f"rewrote {path}")
    if args.check:
        return 1 if moved or changed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
