"""The one way to read a workspace file: resolve beneath the root, check once, open exactly what was
checked, bounded, redacted.

`FileAccess.locate` turns `<root>/<path>` (or `<path>`) into a `Located` file: its path inside the
root once symlinks are resolved (`real_rel`) and its identity (device, inode). Every lookup and every
open goes through the root's directory fd (`beneath.Tree`: `openat2` with `RESOLVE_BENEATH`, or a
walk one component at a time), so no swap of a folder for a symlink, at any moment, leads a read
outside the root. `FileAccess.open` opens `real_rel` again following no symlink at all and refuses
unless it is the same file. `..` is refused outright: with symlinks it means two different places,
and Urchin does not guess. Every read is bounded in bytes; every text read passes the redactor,
keeping line breaks so line anchors stay true.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from urchin.config import Settings
from urchin.errors import NotFoundError, ValidationError
from urchin.redact import MARKER, Redactor
from urchin.workspace.beneath import Dangling, Outside, Tree
from urchin.workspace.policy import is_ignored, secret_in_path, secret_rule
from urchin.workspace.roots import Root

__all__ = ["FileAccess", "Located", "file_access", "redact_file_text", "redact_lines", "check_relative",
           "MAX_TEXT_BYTES"]

# Every character some reader counts as a line break (str.splitlines, universal newlines).
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_BLOCK_LINES = 2048
# O_NONBLOCK: a FIFO swapped in does not hang the open (it is then refused: not a regular file).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
MAX_TEXT_BYTES = 4 * 1024 * 1024     # `read_text` without a smaller bound


@dataclass(frozen=True, slots=True)
class Located:
    """A workspace file that passed every check; read it only through `FileAccess`."""

    root: Root
    rel: str          # the path inside the root as asked (no `..`, no `.`)
    real_rel: str     # inside the root once symlinks are resolved: what is opened
    identity: tuple[int, int]
    size: int
    mtime: float

    @property
    def display(self) -> str:
        return f"{self.root.name}/{self.rel}"


def check_relative(path: object, field: str = "path") -> list[str]:
    """The components of a relative path, or a `ValidationError` naming `field`."""
    if not isinstance(path, str) or not path.strip():
        raise ValidationError(field, "must not be empty")
    if "\x00" in path:
        raise ValidationError(field, "must not contain NUL characters")
    found = secret_in_path(path)
    if found is not None:  # refused before any lookup, and never quoted back
        raise ValidationError(field, f"holds a secret ({found}): paths naming a secret are neither indexed "
                                     "nor served")
    text = path.strip().replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":" and text[0].isalpha()):
        raise ValidationError(field, f"{path!r} must be relative to a workspace root "
                                     "(paths outside the workspace roots are refused)")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValidationError(field, f"{path!r} contains '..': give the path inside its workspace root "
                                     "(paths outside the workspace roots are refused)")
    return parts


class FileAccess:
    """Reads of workspace files for every front end, the indexer and live mode, all through one check."""

    def __init__(self, roots: Sequence[Root], redactor: Redactor) -> None:
        self.roots = list(roots)
        self.redactor = redactor

    # ---- resolving ------------------------------------------------------------------------------
    def locate(self, path: str, field: str = "path", serve: bool = True) -> Located:
        """`<root>/<rel>` or `<rel>` (when exactly one root holds it) -> a checked file.

        `serve` also applies the serving policy (no secret stores unless the root opts in, nothing
        the ignore rules skip)."""
        parts = check_relative(path, field)
        if not self.roots:
            raise NotFoundError("no workspace roots: add one with `urchin workspace add PATH`")
        if not parts:
            raise ValidationError(field, f"{path!r} names no file")
        named = [r for r in self.roots if r.name == parts[0]]
        if named and len(parts) > 1:
            found = self._find(named[0], "/".join(parts[1:]), path, field)
            if found is not None:
                return self._policy(found, field) if serve else found
        rel = "/".join(parts)
        hits = [hit for root in self.roots if (hit := self._find(root, rel, path, field)) is not None]
        if not hits:
            raise NotFoundError(f"no file {path!r} in the workspace roots")
        if len(hits) > 1:
            names = ", ".join(h.root.name for h in hits)
            raise ValidationError(field, f"{path!r} is in several roots ({names}): prefix it with the root name")
        return self._policy(hits[0], field) if serve else hits[0]

    def locate_in(self, root: Root, rel: str, serve: bool = True) -> Located:
        """A path inside a known root (the walker's, the catalog's), with the same checks."""
        check_relative(rel)
        found = self._find(root, "/".join(p for p in rel.split("/") if p not in ("", ".")), rel, "path")
        if found is None:
            raise NotFoundError(f"no file {root.name}/{rel}")
        return self._policy(found, "path") if serve else found

    def check_member(self, path: str, field: str) -> None:
        """A curated memory's file or folder: relative, and inside a root when it exists already."""
        parts = check_relative(path, field)
        if not self.roots:
            raise ValidationError(field, "no workspace roots: add one with `urchin workspace add PATH`")
        for root in self.roots:
            rels = [parts[1:]] if parts and parts[0] == root.name and len(parts) > 1 else []
            for rel in [*rels, parts]:
                tree = root.tree()
                if tree is None:
                    continue
                with tree:
                    try:
                        tree.stat("/".join(rel))
                    except Outside:
                        raise ValidationError(field, f"{path!r} is outside the workspace roots") from None
                    except OSError:
                        continue     # not there yet (read when shown), or unreadable: checked when read

    def locate_folder(self, path: str, field: str = "path") -> tuple[Root, str]:
        """`<root>/<folder>` or `<folder>` -> (root, folder inside it), checked like a file; "" is the root."""
        parts = check_relative(path, field)
        if not self.roots:
            raise NotFoundError("no workspace roots: add one with `urchin workspace add PATH`")
        named = [r for r in self.roots if parts and r.name == parts[0]]
        tries = [(named[0], parts[1:])] if named else []
        tries += [(root, parts) for root in self.roots]
        for root, rel in tries:
            found = _resolve(root, "/".join(rel), path, field)
            if found is not None:
                if not stat.S_ISDIR(found[0].st_mode):
                    raise ValidationError(field, f"{path!r} is a file, not a folder")
                return root, "/".join(rel)
        raise NotFoundError(f"no folder {path!r} in the workspace roots")

    @staticmethod
    def _find(root: Root, rel: str, asked: str, field: str) -> Located | None:
        found = _resolve(root, rel, asked, field)
        if found is None:
            return None
        info, real_rel = found
        if stat.S_ISDIR(info.st_mode):
            raise ValidationError(field, f"{asked!r} is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise ValidationError(field, f"{asked!r} is not a regular file")
        return Located(root, rel, real_rel, (info.st_dev, info.st_ino), info.st_size, info.st_mtime)

    @staticmethod
    def _policy(loc: Located, field: str) -> Located:
        if secret_in_path(loc.real_rel) is not None:
            raise ValidationError(field, f"{loc.display!r} leads to a file whose path holds a secret: "
                                         "such files are neither indexed nor served")
        for rel in dict.fromkeys((loc.rel, loc.real_rel)):
            rule = secret_rule(rel)
            if rule is not None and not loc.root.allow_secret_files:
                raise ValidationError(field, (
                    f"{loc.display!r} looks like a secret store ({rule}): Urchin neither indexes nor serves "
                    f"such files unless the root opts in: `urchin workspace add {loc.root.path} --name "
                    f"{loc.root.name} --allow-secret-files`"))
        with _tree(loc.root, field) as tree:
            for rel in dict.fromkeys((loc.rel, loc.real_rel)):
                if is_ignored(tree, rel):
                    raise ValidationError(field, f"{loc.display!r} is ignored (.gitignore, .git/info/exclude, "
                                                 ".urchinignore or an always-ignored folder): Urchin does not "
                                                 "index or serve ignored files")
        return loc

    # ---- reading --------------------------------------------------------------------------------
    def open(self, loc: Located) -> BinaryIO:
        """The file `loc` names, opened beneath its root by its real path following no symlink, and
        verified to be that same file."""
        try:
            with _tree(loc.root, "path") as tree:
                fd, _ = tree.open(loc.real_rel, _READ_FLAGS, follow=False)   # a symlink swapped in: ELOOP
        except OSError as exc:
            raise ValidationError("path", f"{loc.display!r} cannot be opened: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != loc.identity:
                raise ValidationError("path", f"{loc.display!r} changed while it was opened: refused")
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, loc: Located, limit: int) -> bytes:
        """At most `limit` raw bytes (for hashing and decoding); callers redact the text before it goes
        anywhere, and check the length: a file may have grown since it was located."""
        with self.open(loc) as handle:
            return handle.read(limit)

    def is_binary(self, loc: Located) -> bool:
        with self.open(loc) as handle:
            head = handle.read(8192)
        if b"\0" in head:
            return True
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            return exc.start < len(head) - 4  # a cut multi-byte character at the end is fine
        return False

    def redact(self, text: str) -> str:
        return redact_file_text(self.redactor, text)

    def read_text(self, loc: Located, max_bytes: int = MAX_TEXT_BYTES) -> str:
        """The whole file, decoded (bad bytes replaced, newlines normalised) and redacted; a file of
        more than `max_bytes` is refused (a cut could halve a secret)."""
        data = self.read_bytes(loc, max_bytes + 1)
        if len(data) > max_bytes:
            raise ValidationError("path", f"{loc.display!r} has more than {max_bytes} bytes: read ranges instead")
        return self.text_of(data)

    def text_of(self, data: bytes) -> str:
        """Bytes already read, decoded and redacted as `read_text` serves them."""
        with io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace") as handle:
            return "".join(redact_lines(self.redactor, handle))


def redact_file_text(redactor: Redactor, text: str) -> str:
    """`text` with every secret replaced by its marker, keeping every line break inside a secret
    (a private key block becomes a marker and empty lines): line numbers stay true."""
    spans = redactor.spans(text)
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for start, end, typ in spans:
        parts.append(text[pos:start])
        parts.append(MARKER.format(typ) + "".join(c for c in text[start:end] if c in _BREAKS))
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def redact_lines(redactor: Redactor, lines: Iterable[str]) -> Iterator[str]:
    """Redact lines (ending in `\\n`) in blocks that never end inside a private key block."""
    block: list[str] = []
    for line in lines:
        block.append(line)
        if len(block) >= _BLOCK_LINES and (len(block) >= 64 * _BLOCK_LINES or not _inside_key(block)):
            yield from _redact_block(redactor, block)
            block = []
    if block:
        yield from _redact_block(redactor, block)


def _redact_block(redactor: Redactor, block: list[str]) -> Iterator[str]:
    text = "".join(block)
    redacted = redact_file_text(redactor, text)
    if redacted is text:
        yield from block
        return
    pieces = redacted.split("\n")   # the same `\n`s as the block: one piece per line
    for piece in pieces[:-1]:
        yield piece + "\n"
    if pieces[-1]:
        yield pieces[-1]


def _inside_key(block: list[str]) -> bool:
    for line in reversed(block):
        if "-----END" in line:
            return False
        if "-----BEGIN" in line and "PRIVATE KEY" in line:
            return True
    return False


class _tree:  # noqa: N801 (a context manager used like a function)
    """The root's folder held open, or a `ValidationError` naming `field` when it is gone."""

    def __init__(self, root: Root, field: str) -> None:
        self.root = root
        self.field = field
        self.tree: Tree | None = None

    def __enter__(self) -> Tree:
        self.tree = self.root.tree()
        if self.tree is None:
            raise ValidationError(self.field, f"workspace root {self.root.name!r} is gone or is no longer the folder "
                                              f"it was added as ({self.root.path}): add it again with "
                                              "`urchin workspace add`")
        return self.tree

    def __exit__(self, *exc: object) -> None:
        if self.tree is not None:
            self.tree.close()


def _resolve(root: Root, rel: str, asked: str, field: str) -> tuple[os.stat_result, str] | None:
    """(stat, the path inside the root) of `rel` resolved beneath the root's fd; None when nothing
    is there; refused when it leads outside or cannot be resolved."""
    try:
        with _tree(root, field) as tree:
            return tree.stat(rel)
    except ValidationError:
        if not os.path.lexists(root.path):    # the root is gone: another root may hold the file
            return None
        raise
    except Outside:
        raise ValidationError(field, f"{asked!r} is outside the workspace roots") from None
    except Dangling:
        raise ValidationError(field, f"{asked!r} cannot be resolved (a broken or looping symlink)") from None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        if exc.errno == errno.ELOOP:
            raise ValidationError(field, f"{asked!r} cannot be resolved (a broken or looping symlink)") from None
        raise ValidationError(field, f"{asked!r} cannot be resolved: {exc.strerror or exc}") from None


def file_access(settings: Settings, roots: Sequence[Root]) -> FileAccess:
    """A `FileAccess` over `roots` with the configured redactor (`[redact]` extra and allow rules)."""
    return FileAccess(roots, Redactor.from_config(settings.section("redact")))
