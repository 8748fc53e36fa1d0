"""Workspace roots: named folders whose files Urchin indexes and reads, and safe path resolution.

Roots are kept in `$URCHIN_HOME/workspaces.json` (0600). A path is `<root name>/<path>`, or just
`<path>` when exactly one root holds it; anything that resolves outside its root (`..`, absolute
paths, symlinks pointing out) is refused.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from urchin.config import write_private
from urchin.errors import NotFoundError, ValidationError
from urchin.workspace.ignore import IgnoreRules

__all__ = ["Root", "Roots", "WorkspaceFile", "DEFAULT_SIZE_CAP", "walk_files", "is_binary"]

DEFAULT_SIZE_CAP = 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class Root:
    name: str
    path: Path

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "path": str(self.path)}


@dataclass(frozen=True, slots=True)
class WorkspaceFile:
    root: Root
    rel: str
    size: int
    mtime: float

    @property
    def path(self) -> Path:
        return self.root.path / self.rel

    @property
    def display(self) -> str:
        return f"{self.root.name}/{self.rel}"


class Roots:
    def __init__(self, home: Path) -> None:
        self.file = home / "workspaces.json"

    def list(self) -> list[Root]:
        try:
            data = orjson.loads(self.file.read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, orjson.JSONDecodeError):
            return []
        return [Root(item["name"], Path(item["path"])) for item in data.get("roots", [])
                if isinstance(item, dict) and "name" in item and "path" in item]

    def add(self, path: str | Path, name: str | None = None) -> Root:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ValidationError("path", f"must be an existing folder, got {str(path)!r}")
        folder = folder.resolve()
        name = name or folder.name
        if not _NAME.fullmatch(name):
            raise ValidationError("name", f"must be letters, digits, '.', '_' or '-', got {name!r}")
        roots = [r for r in self.list() if r.name != name]
        if any(r.path == folder for r in roots):
            raise ValidationError("path", f"{folder} is already a workspace root")
        root = Root(name, folder)
        self._save([*roots, root])
        return root

    def remove(self, name: str) -> Root:
        roots = self.list()
        match = [r for r in roots if r.name == name]
        if not match:
            raise NotFoundError(f"no workspace root named {name!r}")
        self._save([r for r in roots if r.name != name])
        return match[0]

    def get(self, name: str) -> Root:
        for root in self.list():
            if root.name == name:
                return root
        raise NotFoundError(f"no workspace root named {name!r}")

    def resolve(self, path: str) -> tuple[Root, str]:
        """`<root>/<rel>` or `<rel>` -> (root, normalised rel path), refusing anything outside a root."""
        if not isinstance(path, str) or not path.strip():
            raise ValidationError("path", "must not be empty")
        roots = self.list()
        if not roots:
            raise NotFoundError("no workspace roots: add one with `urchin workspace add PATH`")
        text = path.strip().replace("\\", "/")
        if text.startswith("/") or re.match(r"^[A-Za-z]:", text):
            raise ValidationError("path", "must be relative to a workspace root")
        head, _, rest = text.partition("/")
        named = [r for r in roots if r.name == head]
        if named and rest:
            if not _inside(named[0], rest):
                raise ValidationError("path", f"{path!r} is outside the workspace roots")
            if (named[0].path / rest).exists():
                return named[0], _norm(rest)
        inside = [r for r in roots if _inside(r, text)]
        if not inside:
            raise ValidationError("path", f"{path!r} is outside the workspace roots")
        found = [r for r in inside if (r.path / text).exists()]
        if not found:
            raise NotFoundError(f"no file {path!r} in the workspace roots")
        if len(found) > 1:
            names = ", ".join(r.name for r in found)
            raise ValidationError("path", f"{path!r} is in several roots ({names}): prefix it with the root name")
        return found[0], _norm(text)

    def _save(self, roots: builtins.list[Root]) -> None:
        write_private(self.file, orjson.dumps({"roots": [r.to_dict() for r in roots]}, option=orjson.OPT_INDENT_2))


def _norm(rel: str) -> str:
    return os.path.normpath(rel).replace(os.sep, "/")


def _inside(root: Root, rel: str) -> bool:
    """True when `rel` stays inside the root after `..` and symlinks are resolved."""
    if not rel or rel.startswith("/"):
        return False
    base = root.path.resolve()
    target = (base / rel).resolve()
    return target == base or base in target.parents


def is_binary(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(8192)
    except OSError:
        return True
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a cut multi-byte character at the end is fine
    return False


def walk_files(root: Root) -> Iterator[WorkspaceFile]:
    """Every file under the root that the ignore rules keep, not following symlinks out of it."""
    base = root.path.resolve()

    def walk(rel_dir: str, rules: IgnoreRules) -> Iterator[WorkspaceFile]:
        rules = rules.with_folder(base, rel_dir)
        try:
            entries = sorted(os.scandir(base / rel_dir if rel_dir else base), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if entry.is_symlink() and not _inside(root, rel):
                    continue
                if rules.ignored(rel, is_dir):
                    continue
                if is_dir:
                    yield from walk(rel, rules)
                elif entry.is_file():
                    stat = entry.stat()
                    yield WorkspaceFile(root, rel, stat.st_size, stat.st_mtime)
            except OSError:
                continue

    yield from walk("", IgnoreRules())
