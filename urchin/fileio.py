"""File primitives, written once: atomic replacement, synced append, folder fsync, private folders,
dropping a written file's cached pages, and the reader of complete lines from an offset.

Every module that writes a file it must not tear (settings, tokens, keys, cursors, the forget log,
the journal's compaction, backups, agent configs, the token-cosine store, the vector cache) goes
through here; `tests/test_fileio.py` fails when a module elsewhere renames, links, appends to or
fsyncs a file of its own. A leaf: it imports nothing of Urchin, so every layer can use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["fsync_dir", "ensure_private_dir", "write_private", "Replacement", "replacing", "open_append",
           "append_synced", "write_all", "write_synced", "drop_cached", "rename_into_place", "link_if_possible",
           "line_chunks", "split_lines", "complete_lines", "line_at"]

_READ_CHUNK = 1 << 20


def fsync_dir(path: Path, *, strict: bool = True) -> None:
    """fsync the folder `path`, so a name created or renamed in it survives a crash.

    `strict=False` ignores a folder that cannot be opened or synced (some network and FUSE file
    systems refuse): the rename itself happened, only its durability is best effort there.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        if strict:
            raise
        return
    try:
        os.fsync(fd)
    except OSError:
        if strict:
            raise
    finally:
        os.close(fd)


def ensure_private_dir(path: Path) -> Path:
    """Create `path` and any missing parents as 0700; tighten the last folder if we own it.

    `Path.mkdir(parents=True, mode=...)` gives only the last folder that mode, so a new
    `$URCHIN_HOME/journal` would leave `$URCHIN_HOME` itself world-readable: create each one.
    """
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
    try:
        if path.stat().st_mode & 0o077 and path.stat().st_uid == os.getuid():
            path.chmod(0o700)
    except (PermissionError, FileNotFoundError):
        pass
    return path


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Every byte of `data` to `fd` (`os.write` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def pread_into(fd: int, buffer: memoryview, offset: int) -> int:
    """Fill `buffer` (a writable byte view) with `fd`'s bytes from `offset` (`os.preadv`, which may read
    fewer); returns how many it read: fewer than asked only at the end of the file. A read that copies,
    never maps: the page cache keeps the file's pages and no reader holds them (see `drop_cached`)."""
    done = 0
    while done < len(buffer):
        got = os.preadv(fd, [buffer[done:]], offset + done)
        if got == 0:
            break
        done += got
    return done


class Replacement:
    """A new version of `path`, written under a temporary name in the same folder and renamed over
    `path` by `commit` (or dropped by `discard`): a reader, or a crash, sees the old file or the new
    one, never a mix. The temporary file is `mode` before its first byte is written."""

    def __init__(self, path: Path, tmp: Path, fd: int, *, sync: bool, sync_dir: bool) -> None:
        self.path, self.tmp, self.fd = path, tmp, fd
        self._sync, self._sync_dir = sync, sync_dir
        self._synced = False
        self._file: BinaryIO | None = None
        self.done = False

    def write(self, data: bytes | memoryview) -> None:
        write_all(self.fd, data)

    def fileobj(self) -> BinaryIO:
        """A buffered file on the temporary file (for writers that want one, e.g. tarfile); it does
        not own the descriptor: `commit` flushes it when it was made."""
        if self._file is None:
            self._file = os.fdopen(self.fd, "wb", closefd=False)
        return self._file

    def sync(self) -> None:
        """fsync what was written (`commit` does it too, when asked to sync, if not done yet)."""
        self._flush()
        os.fsync(self.fd)
        self._synced = True

    def commit(self) -> None:
        """Put the new file in place: fsync it, rename it over `path`, then fsync the folder (as asked)."""
        self._flush()
        if self._sync and not self._synced:
            os.fsync(self.fd)
        self._close()
        os.replace(self.tmp, self.path)
        self.done = True
        if self._sync_dir:
            fsync_dir(self.path.parent)

    def link(self) -> bool:
        """Put the new file in place only if `path` does not exist yet (a hard link: no rename can
        overwrite a concurrent creator's file); True when ours is the one there."""
        self._flush()
        if self._sync and not self._synced:
            os.fsync(self.fd)
        self._close()
        try:
            os.link(self.tmp, self.path)
            created = True
        except FileExistsError:
            created = False
        self.discard()
        if created and self._sync_dir:
            fsync_dir(self.path.parent)
        return created

    def discard(self) -> None:
        self._close()
        self.tmp.unlink(missing_ok=True)
        self.done = True

    def _flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def _close(self) -> None:
        if self.fd >= 0:
            if self._file is not None:
                self._file.close()
                self._file = None
            os.close(self.fd)
            self.fd = -1


@contextmanager
def replacing(path: Path, *, mode: int = 0o600, tmp: Path | None = None, sync: bool = True,
              sync_dir: bool = False, private_parent: bool = True) -> Iterator[Replacement]:
    """A `Replacement` of `path`, committed when the block ends normally (unless it committed,
    linked or discarded it itself) and discarded when it raises.

    `tmp`: a fixed temporary name (a caller holding a lock that clears its own leftovers); by
    default a new unique name `.<name>.<random>.urchin-tmp` (created exclusively; in a folder of
    another program, the name says whose it is). `sync`: fsync the file
    before the rename; `sync_dir`: fsync the folder after it (the new name survives a crash);
    `private_parent`: create the folder (and missing parents) 0700 first, else leave its mode alone
    (a folder another program owns, or one a system user must traverse).
    """
    if private_parent:
        ensure_private_dir(path.parent)
    fd, tmp = _open_temporary(path, mode, tmp)
    new = Replacement(path, tmp, fd, sync=sync, sync_dir=sync_dir)
    try:
        yield new
    except BaseException:
        if not new.done:
            new.discard()
        raise
    if not new.done:
        try:
            new.commit()
        except BaseException:
            new.discard()
            raise


def _open_temporary(path: Path, mode: int, tmp: Path | None) -> tuple[int, Path]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    if tmp is not None:
        fd = os.open(tmp, flags | os.O_TRUNC, mode)
    else:
        while True:
            tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.urchin-tmp")
            try:
                fd = os.open(tmp, flags | os.O_EXCL, mode)
                break
            except FileExistsError:
                continue
    try:
        os.fchmod(fd, mode)   # a leftover at a fixed name keeps its old mode through O_TRUNC; the umask
    except BaseException:     # may have narrowed `mode`: the new file gets exactly `mode`
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return fd, tmp


def write_private(path: Path, data: bytes, *, mode: int = 0o600, sync: bool = True, sync_dir: bool = False,
                  private_parent: bool = True, overwrite: bool = True) -> bool:
    """Replace `path` atomically with `data`: a new `mode` (0600) file renamed over it, in a folder
    made 0700 (see `replacing` for `sync`, `sync_dir` and `private_parent`). `overwrite=False`
    creates `path` only if it does not exist (returns False, writing nothing, when it does)."""
    with replacing(path, mode=mode, sync=sync, sync_dir=sync_dir, private_parent=private_parent) as new:
        new.write(data)
        if not overwrite:
            return new.link()
    return True


def write_synced(path: Path, data: bytes | Callable[[BinaryIO], object], *, mode: int = 0o600,
                 uncached: bool = False) -> int:
    """Write the file `path` where it is (created `mode`, or truncated) and fsync it; returns its size.

    For a file no reader trusts until a commit made elsewhere: one in a new folder that is renamed
    into place whole (a view's generation), or one a marker file then commits (a roll-forward swap).
    Anything else replaces its file with `replacing`. `data`: the bytes, or a function writing them
    to the (buffered) file. `uncached`: a file readers map, dropped from the page cache once synced
    (`drop_cached`).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)   # a leftover keeps its old mode through O_TRUNC (see `_open_temporary`)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "wb") as handle:
        if callable(data):
            data(handle)
        else:
            handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
        if uncached:
            drop_cached(handle.fileno())
        return handle.tell()


def drop_cached(file: int | Path) -> None:
    """Drop the page cache's copy of a file this process wrote and synced (dirty pages stay), one that
    readers map. Just written, its pages sit in large folios (2 MB: ext4 on Linux 6.18) and a read of a
    few bytes through a map makes the whole folio the reader's (a daemon after its first build held ~4x
    the pages a restart did for the same queries); read back from disk, they come in readahead's small
    pieces. Not for a file read with `pread` only (the folios never become a reader's: dropping them
    only makes the next read go to the disk). Best effort: nothing without `posix_fadvise` (not Linux)
    or when the file cannot be opened."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    fd = file if isinstance(file, int) else _open_quietly(file)
    if fd < 0:
        return
    try:
        advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    finally:
        if not isinstance(file, int):
            os.close(fd)


def _open_quietly(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def rename_into_place(source: Path, target: Path, *, sync_dir: bool = False) -> None:
    """Rename `source`, a file or folder already written and fsync'd, over `target` in the same folder
    (a commit point: a generation folder, a roll-forward's new files, a file another process built);
    `sync_dir`: fsync the folder after it, so the rename survives a crash."""
    os.replace(source, target)
    if sync_dir:
        fsync_dir(target.parent)


def link_if_possible(source: Path, target: Path) -> bool:
    """Hard-link the finished, never rewritten file `source` as `target` (a new generation reusing a
    saved one's file); False when it cannot (`source` gone, another file system): write it instead."""
    try:
        os.link(source, target)
    except OSError:
        return False
    return True


def open_append(path: Path, *, sync_new: bool = True) -> int:
    """A descriptor appending to `path` (created 0600), read-write for `pread`; when this call
    created the file, its folder is fsync'd (`sync_new`) so the new name survives a crash."""
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if created and sync_new:
        try:
            fsync_dir(path.parent, strict=False)
        except BaseException:
            os.close(fd)
            raise
    return fd


def append_synced(path: Path, data: bytes, *, sync: bool = True, fresh_line: bool = False) -> None:
    """Append `data` to `path` with one `write` and, when `sync`, an fsync before returning (a new
    file's folder too). `fresh_line`: when the file does not end with a newline (a record a crash
    tore), write one first, so the torn record does not swallow this one. Raises OSError."""
    fd = open_append(path, sync_new=sync)
    try:
        if fresh_line:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def line_chunks(handle: BinaryIO, offset: int = 0, chunk: int = _READ_CHUNK) -> Iterator[tuple[int, bytes]]:
    """The file from `offset` in pieces of whole lines: (offset of the piece, its lines joined by
    newlines, without the last newline). A last line without its newline is never returned (its
    writer may still be at it): the piece after the last one yielded starts at `offset + len + 1`."""
    handle.seek(offset)
    pending = b""
    base = offset
    while True:
        data = handle.read(chunk)
        if not data:
            return
        buf = pending + data if pending else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            pending = buf
            continue
        pending = buf[cut + 1:]
        yield base, buf[:cut]
        base += cut + 1


def split_lines(base: int, piece: bytes) -> list[tuple[int, bytes]]:
    """The (offset, line) pairs of a `line_chunks` piece that starts at `base` (empty lines too)."""
    lines: list[tuple[int, bytes]] = []
    pos = 0
    end = len(piece)
    while True:
        nl = piece.find(b"\n", pos)
        if nl < 0:
            lines.append((base + pos, piece[pos:end]))
            return lines
        lines.append((base + pos, piece[pos:nl]))
        pos = nl + 1


def complete_lines(path: Path, offset: int, chunk: int = _READ_CHUNK) -> Iterator[tuple[list[tuple[int, bytes]], int]]:
    """Batches of (offset, line) for complete lines from `offset`, each with the offset after it.

    A last line without its newline is not returned: the agent may still be writing it.
    """
    with path.open("rb") as handle:
        for base, piece in line_chunks(handle, offset, chunk):
            yield split_lines(base, piece), base + len(piece) + 1


_LINE_FIRST = 8 << 10    # a first read as large as a buffered readline's: most lines fit


def line_at(fd: int, offset: int, limit: int) -> bytes | None:
    """The complete line that starts at `offset` of the file open at `fd`, without its newline, read
    with `pread` (the descriptor's position is left alone: threads may share it); None when no newline
    ends it within `limit` bytes, newline included (`readline(limit)` then returns no whole line)."""
    size = min(_LINE_FIRST, limit)
    while True:
        data = os.pread(fd, size, offset)
        end = data.find(b"\n")
        if end >= 0:
            return data[:end]
        if len(data) < size or size >= limit:
            return None
        size = min(size * 8, limit)


_SEEK_MOST = 1 << 20    # the largest piece `next_newline` reads at once


def next_newline(fd: int, offset: int, end: int, first: int = 4096) -> int:
    """The offset of the first newline at or after `offset` and before `end` in the file open at `fd`,
    or -1 when there is none, read with `pread` in pieces (the first `first` bytes, then growing to at
    most 1 MiB), so that finding it costs memory bounded by that piece, not by the file: a map's read
    makes the file's pages the reader's (its RSS), in 2 MB folios for a file just written."""
    size = first
    while offset < end:
        data = os.pread(fd, min(size, end - offset), offset)
        if not data:
            return -1
        found = data.find(b"\n")
        if found >= 0:
            return offset + found
        offset += len(data)
        size = min(size * 8, _SEEK_MOST)
    return -1
