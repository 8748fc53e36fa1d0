"""Open paths below a folder so that nothing outside it is ever opened, whatever runs concurrently.

A `Tree` holds one directory fd; every path under it is opened relative to that fd. Where the
kernel has `openat2` the kernel resolves with `RESOLVE_BENEATH` (symlinks followed only while they
stay below); otherwise, and for whatever `openat2` will not do (an absolute symlink that points back
inside, a precise error), a walk opens one component at a time with `O_NOFOLLOW`, resolving each
symlink it meets against the folders it already holds open and refusing any that climbs out. A
path is never turned back into a string and re-resolved: a folder swapped for a symlink between two
steps cannot redirect a read. A leaf: it imports nothing of Urchin.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["Tree", "Outside", "Dangling", "openat2_available", "use_openat2", "read_regular"]

_SYS_OPENAT2 = 437           # the same number on x86_64, aarch64 and the others of the unified table
_GENERIC_TABLE = frozenset({"x86_64", "aarch64", "arm64", "i686", "i386", "armv7l", "armv8l", "riscv64",
                            "ppc64le", "ppc64", "s390x", "loongarch64"})    # not alpha, ia64 or mips
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_MAX_LINKS = 40              # as the kernel's own limit (ELOOP past it)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_PATH = getattr(os, "O_PATH", 0)
# A folder met on the way down: O_PATH needs no read permission, O_NOFOLLOW refuses a symlink here.
_STEP = (_PATH or os.O_RDONLY) | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC


class Outside(OSError):
    """The path leads outside the tree (a symlink out, `..` above it)."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.EXDEV, "leads outside the folder", path)


class Dangling(FileNotFoundError):
    """A symlink on the way leads to nothing (broken)."""


class _How(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_state: dict[str, object] = {"openat2": None}   # None: not probed yet; False: forced off or missing
_call: list[Any] = []                # libc's `syscall`, once loaded


def use_openat2(enabled: bool) -> None:
    """False forces the walk everywhere in this process; True lets the next call probe the kernel
    again. Tests use it to run both strategies."""
    _state["openat2"] = None if enabled else False


def openat2_available() -> bool:
    """Does the kernel (and seccomp) let us call `openat2`? Probed once per process."""
    if _state["openat2"] is None:
        ok = False
        if os.uname().sysname == "Linux" and os.uname().machine in _GENERIC_TABLE:
            try:
                _call.append(ctypes.CDLL(None, use_errno=True).syscall)
                root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
                try:
                    fd = _openat2(root, ".", os.O_RDONLY | _CLOEXEC, RESOLVE_BENEATH)
                finally:
                    os.close(root)
                if fd >= 0:
                    os.close(fd)
                ok = fd >= 0
            except (OSError, AttributeError):
                ok = False
        _state["openat2"] = ok
    return bool(_state["openat2"])


def _openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    """The new fd, or -1 when `openat2` is not there; raises OSError for the kernel's refusals."""
    how = _How(flags, 0, resolve)
    long = ctypes.c_long          # `syscall` is variadic: every argument a full register
    fd = int(_call[-1](long(_SYS_OPENAT2), long(dir_fd), ctypes.c_char_p(os.fsencode(path)), ctypes.byref(how),
                       long(ctypes.sizeof(how))))
    if fd >= 0:
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG, errno.EINVAL, errno.EOPNOTSUPP):
        return -1                    # no openat2 here (old kernel, seccomp, an unknown flag)
    raise OSError(err, os.strerror(err), path)


def _parts(rel: str) -> list[str]:
    return [p for p in rel.split("/") if p not in ("", ".")]


class Tree:
    """A folder held open by its fd (`path` is where it was opened, used only to read absolute
    symlinks that point back inside). Close it, or use it as a context manager."""

    def __init__(self, fd: int, path: Path, owned: bool = True) -> None:
        self.fd = fd
        self.path = path
        self._owned = owned
        self._proc: str | None = None

    @classmethod
    def at(cls, path: Path) -> Tree:
        """The folder at `path` (absolute), refused (ELOOP, ENOTDIR) when any component of it is a
        symlink: a root is the real folder it was added as, not wherever a symlink now points."""
        if not path.is_absolute():
            raise OSError(errno.EINVAL, "must be an absolute path", str(path))
        flags = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
        if openat2_available():
            fd = _openat2(-100, str(path), flags, RESOLVE_NO_SYMLINKS)      # AT_FDCWD: the path is absolute
            if fd >= 0:
                return cls(fd, path)
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        try:
            for part in _parts(str(path)):
                if part == "..":
                    raise OSError(errno.EINVAL, "must be a normalised path", str(path))
                step = os.open(part, flags | _NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = step
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path)

    def close(self) -> None:
        if self._owned and self.fd >= 0:
            os.close(self.fd)
        self.fd = -1

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # ---- opening --------------------------------------------------------------------------------
    def open(self, rel: str, flags: int = os.O_RDONLY, follow: bool = True) -> tuple[int, str]:
        """(fd, the real path inside the tree) of `rel`; symlinks are followed only while they stay
        inside (`follow=False`: none at all). Raises `Outside`, `Dangling`, or the OSError met."""
        flags |= _CLOEXEC
        if openat2_available():
            found = self._fast(rel, flags, follow)
            if found is not None:
                return found
        return self._walk(rel, flags, follow)

    def sub(self, rel: str, follow: bool = True) -> Tree:
        """The folder `rel` as a tree of its own (readable: it can be listed with `os.scandir(fd)`)."""
        fd, real = self.open(rel, os.O_RDONLY | os.O_DIRECTORY, follow)
        return Tree(fd, self.path / real if real else self.path)

    def stat(self, rel: str, follow: bool = True) -> tuple[os.stat_result, str]:
        """(stat, real path inside the tree) of `rel`, opened like `open` (O_PATH: no read, no FIFO wait)."""
        fd, real = self.open(rel, _PATH or (os.O_RDONLY | os.O_NONBLOCK), follow)
        try:
            return os.fstat(fd), real
        finally:
            os.close(fd)

    def read(self, rel: str, limit: int, follow: bool = False) -> bytes | None:
        """A small regular file's first `limit` bytes, or None when it is missing, not a regular file
        or not readable (ignore files, git's metadata)."""
        try:
            fd, _ = self.open(rel, os.O_RDONLY | os.O_NONBLOCK, follow)
        except OSError:
            return None
        return _read_fd(fd, limit)

    def _fast(self, rel: str, flags: int, follow: bool) -> tuple[int, str] | None:
        """The kernel resolves beneath the fd; None when it would not (the walk then decides)."""
        resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (0 if follow else RESOLVE_NO_SYMLINKS)
        try:
            fd = _openat2(self.fd, rel or ".", flags, resolve)
        except OSError as exc:
            if not follow and exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise                # no symlink was followed: the walk would say just the same
            return None              # EXDEV, ELOOP, ENOENT, EAGAIN (a rename raced): the walk says why
        if fd < 0:
            _state["openat2"] = False
            return None
        if not follow:
            parts = _parts(rel)
            if ".." not in parts:
                return fd, "/".join(parts)
            os.close(fd)             # the walk names the folder `..` led to
            return None
        real = self._inside(fd)
        if real is None:
            os.close(fd)
        return None if real is None else (fd, real)

    def _inside(self, fd: int) -> str | None:
        """Where the kernel says `fd` is, inside the tree (from /proc; None when it cannot say)."""
        try:
            if self._proc is None:
                self._proc = os.readlink(f"/proc/self/fd/{self.fd}")
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        if where == self._proc:
            return ""
        base = self._proc.rstrip("/") + "/"
        return where[len(base):] if where.startswith(base) and not where.endswith(" (deleted)") else None

    def _walk(self, rel: str, flags: int, follow: bool) -> tuple[int, str]:
        todo = deque(_parts(rel))
        if not todo:
            return os.open(".", flags, dir_fd=self.fd), ""
        stack: list[tuple[int, str]] = []     # folders below the tree's own fd, held open
        links = 0
        own = len(todo)          # components of `rel` itself still to walk (a link's target goes in front)
        try:
            while todo:
                from_link = len(todo) > own
                own -= 0 if from_link else 1
                name = todo.popleft()
                if name in ("", "."):
                    continue
                if name == "..":
                    if not stack:
                        raise Outside(rel)
                    os.close(stack.pop()[0])
                    continue
                here = stack[-1][0] if stack else self.fd
                last = not todo
                try:
                    fd = os.open(name, (flags | _NOFOLLOW) if last else _STEP, dir_fd=here)
                except OSError as exc:
                    target = _link(name, here) if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) else None
                    if target is None:
                        if from_link and exc.errno == errno.ENOENT:
                            raise Dangling(errno.ENOENT, "a symlink leads to nothing", rel) from None
                        raise
                    fd = -1
                if fd >= 0 and last and stat.S_ISLNK(os.fstat(fd).st_mode):   # O_PATH opens the link itself
                    target = _link(name, here)
                    os.close(fd)
                    fd = -1
                if fd < 0:
                    if not follow:
                        raise OSError(errno.ELOOP, "a symlink is on the way", rel)
                    links += 1
                    if links > _MAX_LINKS:
                        raise OSError(errno.ELOOP, "too many levels of symlinks", rel)
                    todo.extendleft(reversed(self._target_parts(str(target), stack, rel)))
                    continue
                if last:
                    return fd, "/".join([*(n for _, n in stack), name])
                stack.append((fd, name))
            # the path ended on `..` or `.`: the folder reached so far
            here = stack[-1][0] if stack else self.fd
            return os.open(".", flags, dir_fd=here), "/".join(n for _, n in stack)
        finally:
            for fd, _ in stack:
                os.close(fd)

    def _target_parts(self, target: str, stack: list[tuple[int, str]], rel: str) -> list[str]:
        """The components to walk next for a symlink's target: relative ones from where it sits;
        an absolute one only when it names a place under the tree's own path, walked from the top."""
        if not target.startswith("/"):
            return target.split("/")
        inner = Path(target).parts[1:]
        top = self.path.parts[1:]
        if tuple(inner[: len(top)]) != top:
            raise Outside(rel)
        while stack:
            os.close(stack.pop()[0])
        return list(inner[len(top):])


def _link(name: str, dir_fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None


def _read_fd(fd: int, limit: int) -> bytes | None:
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_regular(path: Path, limit: int) -> bytes | None:
    """The first `limit` bytes of a regular file named by an absolute path, its last component not
    a symlink (git's own metadata: a worktree's `commondir`, a linked `info/exclude`); None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None
    return _read_fd(fd, limit)
