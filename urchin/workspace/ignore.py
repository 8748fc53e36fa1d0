"""`.gitignore` / `.urchinignore` / `.git/info/exclude` matching: the subset of gitignore semantics
real repos use.

Supported: blank lines and `#` comments, `!` negation, trailing `/` (directories only), a leading or
inner `/` anchoring the pattern to its file's folder, `*`, `?`, `[...]` and `**`. As git does, a
repository's `info/exclude` holds patterns relative to its top (the folder holding `.git`, which may
be above the root), overridden by the `.gitignore` files below; a `.git` file (worktrees,
submodules) names the git folder, and a worktree's `commondir` the one holding `info/exclude`.
Ignore files are read through the folder's fd, not followed when they are symlinks (git does not
follow them either), and at most `MAX_IGNORE_BYTES` of each.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from urchin.workspace.beneath import Tree, read_regular

__all__ = ["IgnoreRules", "ALWAYS_IGNORED", "MAX_IGNORE_BYTES"]

ALWAYS_IGNORED = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache",
                            ".pytest_cache", ".ruff_cache", ".tox", ".DS_Store"})
IGNORE_FILES = (".gitignore", ".urchinignore")
MAX_IGNORE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class _Rule:
    base: str  # folder of the ignore file, relative to the root ("" for the root)
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    above: str = ""  # the root's path inside a repository whose top is above it ("" otherwise)


def _translate(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _parse(data: bytes | None, base: str, above: str = "") -> tuple[_Rule, ...]:
    """The rules of one ignore file (cached: the walker reads the same files again and again)."""
    if not data:
        return ()
    rules: list[_Rule] = []
    for raw in (data or b"").decode("utf-8", "replace").splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line)
        regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$")
        rules.append(_Rule(base, regex, negate, dir_only, above))
    return tuple(rules)


def _git_folder(dot_git: bytes | None, folder: Path) -> Path | None:
    """The git folder a `.git` file names (`gitdir: PATH`, relative to the folder holding it)."""
    text = (dot_git or b"").decode("utf-8", "replace").strip()
    if not text.startswith("gitdir:"):
        return None
    named = Path(text[len("gitdir:"):].strip())
    return named if named.is_absolute() else folder / named


def _exclude_of(git: Path) -> bytes | None:
    """`info/exclude` of a git folder named by path, or of its common folder (a worktree's)."""
    common = read_regular(git / "commondir", 4096)
    if common is not None and common.strip():
        named = Path(common.decode("utf-8", "replace").strip())
        git = named if named.is_absolute() else git / named
    return read_regular(git / "info" / "exclude", MAX_IGNORE_BYTES)


def _exclude_in(folder: Tree) -> bytes | None:
    """The `info/exclude` of the repository whose top is `folder`, if `.git` is there."""
    try:
        info = os.stat(".git", dir_fd=folder.fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return folder.read(".git/info/exclude", MAX_IGNORE_BYTES)
    if stat.S_ISREG(info.st_mode):
        git = _git_folder(folder.read(".git", 4096), folder.path)
        return _exclude_of(git) if git is not None else None
    return None


class IgnoreRules:
    """Rules gathered from every ignore file met while walking down from the root."""

    def __init__(self, rules: list[_Rule] | None = None) -> None:
        self.rules = rules or []

    @classmethod
    def for_root(cls, root: Path) -> IgnoreRules:
        """The start of a walk: the `info/exclude` of a repository whose top is above the root
        (git's metadata, read only to hide more; never served)."""
        for top in root.parents:
            dot_git = top / ".git"
            try:
                info = os.stat(dot_git, follow_symlinks=False)
            except OSError:
                continue
            git = dot_git if stat.S_ISDIR(info.st_mode) else _git_folder(read_regular(dot_git, 4096), top)
            data = _exclude_of(git) if git is not None else None
            return cls(list(_parse(data, "", root.relative_to(top).as_posix())))
        return cls()

    def with_folder(self, folder: Tree, rel_dir: str) -> IgnoreRules:
        """These rules plus those of `folder` (the tree at `rel_dir` inside the root): its
        repository's `info/exclude` when it is a repository's top, then its ignore files."""
        added = list(_parse(_exclude_in(folder), rel_dir))
        for name in IGNORE_FILES:
            added += _parse(folder.read(name, MAX_IGNORE_BYTES), rel_dir)
        return IgnoreRules(self.rules + added) if added else self

    def ignored(self, rel_path: str, is_dir: bool) -> bool:
        name = rel_path.rsplit("/", 1)[-1]
        if name in ALWAYS_IGNORED:
            return True
        verdict = False
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.above:
                local = f"{rule.above}/{rel_path}"
            elif rule.base:
                if not rel_path.startswith(rule.base + "/"):
                    continue
                local = rel_path[len(rule.base) + 1 :]
            else:
                local = rel_path
            if rule.regex.match(local):
                verdict = not rule.negate
        return verdict
