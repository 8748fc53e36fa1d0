"""`.gitignore` / `.urchinignore` matching: the subset of gitignore semantics real repos use.

Supported: blank lines and `#` comments, `!` negation, trailing `/` (directories only), a leading or
inner `/` anchoring the pattern to its file's folder, `*`, `?`, `[...]` and `**`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["IgnoreRules", "ALWAYS_IGNORED"]

ALWAYS_IGNORED = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache",
                            ".pytest_cache", ".ruff_cache", ".tox", ".DS_Store"})
IGNORE_FILES = (".gitignore", ".urchinignore")


@dataclass(frozen=True, slots=True)
class _Rule:
    base: str  # folder of the ignore file, relative to the root ("" for the root)
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


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


class IgnoreRules:
    """Rules gathered from every ignore file met while walking down from the root."""

    def __init__(self, rules: list[_Rule] | None = None) -> None:
        self.rules = rules or []

    def with_folder(self, root: Path, rel_dir: str) -> IgnoreRules:
        """These rules plus the ignore files found in `rel_dir` (relative to `root`)."""
        added: list[_Rule] = []
        for name in IGNORE_FILES:
            path = root / rel_dir / name if rel_dir else root / name
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for raw in text.splitlines():
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
                added.append(_Rule(rel_dir, regex, negate, dir_only))
        return IgnoreRules(self.rules + added) if added else self

    def ignored(self, rel_path: str, is_dir: bool) -> bool:
        name = rel_path.rsplit("/", 1)[-1]
        if name in ALWAYS_IGNORED:
            return True
        verdict = False
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.base:
                if not rel_path.startswith(rule.base + "/"):
                    continue
                local = rel_path[len(rule.base) + 1 :]
            else:
                local = rel_path
            if rule.regex.match(local):
                verdict = not rule.negate
        return verdict
