"""Workspace roots: named folders whose files Urchin indexes and reads, and safe path resolution.

Roots are kept in `$URCHIN_HOME/workspaces.json` (0600), each with its opt-in to secret-store files.
Paths given by users are resolved and read only through `urchin.workspace.access.FileAccess`.
"""

from __future__ import annotations

import builtins
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from urchin.errors import NotFoundError, ValidationError
from urchin.fileio import write_private
from urchin.workspace.beneath import Tree
from urchin.workspace.ignore import IgnoreRules
from urchin.workspace.policy import is_ignored, secret_in_path, secret_rule

__all__ = ["Root", "Roots", "WorkspaceFile", "DEFAULT_SIZE_CAP", "walk_files"]

DEFAULT_SIZE_CAP = 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class Root:
    name: str
    path: Path
    allow_secret_files: bool = False   # opt-in: index and serve secret stores (`.env`, keys, credentials)

    def tree(self) -> Tree | None:
        """The root's folder held open (every read below it goes through this fd), or None when it
        is gone or is no longer the folder it was added as (it, or a folder above it, became a
        symlink: a checkout can turn `sub/` into `sub -> /`)."""
        try:
            return Tree.at(self.path)
        except OSError:
            return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "path": str(self.path)}
        if self.allow_secret_files:
            out["allowSecretFiles"] = True
        return out


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
        return [Root(item["name"], Path(item["path"]), item.get("allowSecretFiles") is True)
                for item in data.get("roots", []) if isinstance(item, dict) and "name" in item and "path" in item]

    def add(self, path: str | Path, name: str | None = None, allow_secret_files: bool = False) -> Root:
        """Add a root, or change one: adding the same folder under the same name again updates it."""
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ValidationError("path", f"must be an existing folder, got {str(path)!r}")
        folder = folder.resolve()
        name = name or folder.name
        for field, value in (("path", str(folder)), ("name", name)):
            found = secret_in_path(value)
            if found is not None:  # written to workspaces.json and quoted in every citation: refused, never quoted
                raise ValidationError(field, f"holds a secret ({found}): a workspace root's name and path are "
                                             "stored and shown; rename the folder or give another --name")
        if not _NAME.fullmatch(name):
            raise ValidationError("name", f"must be letters, digits, '.', '_' or '-', got {name!r}")
        roots = [r for r in self.list() if r.name != name]
        if any(r.path == folder for r in roots):
            raise ValidationError("path", f"{folder} is already a workspace root")
        root = Root(name, folder, allow_secret_files)
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

    def _save(self, roots: builtins.list[Root]) -> None:
        write_private(self.file, orjson.dumps({"roots": [r.to_dict() for r in roots]}, option=orjson.OPT_INDENT_2))


def walk_files(root: Root) -> Iterator[WorkspaceFile]:
    """Every file under the root that the ignore rules keep, not following symlinks out of it, and no
    secret store (`policy.secret_rule`) unless the root opts in. Each folder is listed through its
    fd, opened from its parent's without following a symlink: a folder swapped for a symlink while
    the walk runs is skipped, never listed."""
    tree = root.tree()
    if tree is None:
        return

    def walk(folder: Tree, rel_dir: str, rules: IgnoreRules) -> Iterator[WorkspaceFile]:
        rules = rules.with_folder(folder, rel_dir)
        try:
            with os.scandir(folder.fd) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if rules.ignored(rel, is_dir) or _skipped(root, rel, is_dir):
                    continue
                if entry.is_symlink():
                    found = _linked(root, tree, rel)
                    if found is not None:
                        yield found
                elif is_dir:
                    with folder.sub(entry.name, follow=False) as sub:
                        yield from walk(sub, rel, rules)
                elif entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    yield WorkspaceFile(root, rel, info.st_size, info.st_mtime)
            except OSError:
                continue

    with tree:
        yield from walk(tree, "", IgnoreRules.for_root(root.path))


def _skipped(root: Root, rel: str, is_dir: bool = False) -> bool:
    # a folder is skipped only when every file in it would be (`.ssh/`); `credentials/` may hold code
    if secret_in_path(rel.rsplit("/", 1)[-1]) is not None:
        return True  # a name that is a secret is never listed, whatever the root opts in to
    return not root.allow_secret_files and secret_rule(f"{rel}/-" if is_dir else rel) is not None


def _linked(root: Root, tree: Tree, rel: str) -> WorkspaceFile | None:
    """A symlinked file, when it leads to a regular file inside the root that is served."""
    try:
        info, real_rel = tree.stat(rel)
    except OSError:
        return None
    if (not stat.S_ISREG(info.st_mode) or _skipped(root, real_rel) or secret_in_path(real_rel) is not None
            or is_ignored(tree, real_rel)):
        return None
    return WorkspaceFile(root, rel, info.st_size, info.st_mtime)
