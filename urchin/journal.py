"""The append-only JSONL journal: durable append, crash repair, forward and reverse reads.

Every writer, in every process, appends under an exclusive `flock` on `<journal>.lock`, with one
`write` per batch on an `O_APPEND` descriptor and an `fsync` before it returns (durability
`always`). A torn tail left by a crash is moved to `<journal>.torn` before the next append.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import orjson

from urchin.config import Durability
from urchin.errors import JournalError
from urchin.event import Event
from urchin.fileio import append_synced, complete_lines, ensure_private_dir, line_at, open_append, write_private
from urchin.timestamps import format_timestamp

__all__ = ["Journal", "JournalMark", "JournalStats", "ReadResult", "BATCH_SYNC_INTERVAL_S", "LineCheck"]

BATCH_SYNC_INTERVAL_S = 1.0
_READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Complete lines read forward from `start`, and the offset to resume from."""

    lines: list[tuple[int, bytes]]
    next_offset: int


@dataclass(frozen=True, slots=True)
class JournalMark:
    """Which journal file, and which prefix of it, a view covers: (device, inode, head and tail digests,
    offset).

    The one test every view uses for "the journal was replaced" (a compaction renames a new file
    over it, a user restores a backup), "cut" (truncated below what the view covers) or "rewritten"
    in place (same file, other bytes at either end of the covered prefix): then the view starts
    over. A journal that only grew still matches.
    """

    device: int
    inode: int
    head: str     # blake2b of the first (up to) 4 KiB of the covered prefix
    offset: int
    tail: str = ""   # blake2b of its last (up to) 4 KiB ("": a mark saved before tails were kept)

    def to_dict(self) -> dict[str, int | str]:
        return {"device": self.device, "inode": self.inode, "head": self.head, "offset": self.offset,
                "tail": self.tail}

    @classmethod
    def from_dict(cls, data: object) -> JournalMark | None:
        """A mark read back from a cache file; None when it is not one."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["device"]), int(data["inode"]), str(data["head"]), int(data["offset"]),
                       str(data.get("tail", "")))
        except (KeyError, TypeError, ValueError):
            return None


_MARK_HEAD = 4096


def _ends(fd: int, offset: int) -> tuple[str, str]:
    """Digests of the first and the last (up to) 4 KiB of the journal's first `offset` bytes."""
    head = os.pread(fd, min(_MARK_HEAD, offset), 0)
    start = max(0, offset - _MARK_HEAD)
    tail = os.pread(fd, offset - start, start)
    return hashlib.blake2b(head, digest_size=8).hexdigest(), hashlib.blake2b(tail, digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class JournalStats:
    path: str
    size_bytes: int
    events: int
    invalid_lines: int
    torn_records: int
    first_timestamp: str | None
    last_timestamp: str | None


class LineCheck(Protocol):
    """How the write path marks the lines it makes, and how a reader serves a line (urchin/proof.py)."""

    def sign(self, body: bytes) -> bytes: ...

    def proven(self, line: bytes) -> bool: ...

    def served(self, line: bytes, event: Event) -> Event: ...


class _Unchecked:
    """A journal with no proof installed (only bare `Journal` users: `Memory` and `Ingestor` install one)."""

    def sign(self, body: bytes) -> bytes:
        return body

    def proven(self, line: bytes) -> bool:
        return True

    def served(self, line: bytes, event: Event) -> Event:
        return event


class Journal:
    """One journal file. Construction does no I/O; the first append creates the file (0600).

    `proof` signs the lines the write path makes and decides how a line read back may be served:
    `event(line)` is what every reader that serves or indexes an event calls."""

    def __init__(self, path: Path, durability: Durability = "always", proof: LineCheck | None = None) -> None:
        self.path = Path(path)
        self.durability = durability
        self.proof: LineCheck = proof or _Unchecked()
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.torn_path = self.path.with_name(self.path.name + ".torn")
        self._last_sync = 0.0
        self._unsynced = False

    # ---- writing ----------------------------------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[_Writer]:
        """Hold the journal's exclusive lock; the torn tail, if any, is repaired first."""
        ensure_private_dir(self.path.parent)
        try:
            lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise JournalError(f"{self.lock_path}: cannot open lock file: {exc.strerror}") from None
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                fd = open_append(self.path)    # a new journal's folder is fsync'd: its name survives a crash
            except OSError as exc:
                raise JournalError(f"{self.path}: cannot open for append: {exc.strerror}") from None
            try:
                writer = _Writer(self, fd)
                writer.repair_tail()
                yield writer
                writer.finish()
            finally:
                os.close(fd)
        finally:
            os.close(lock_fd)

    def append(self, lines: Sequence[bytes]) -> int:
        """Append complete lines (no trailing newline) durably; returns the first line's offset."""
        with self.locked() as writer:
            return writer.write(lines)

    def _should_sync(self) -> bool:
        if self.durability == "always":
            return True
        if self.durability == "never":
            return False
        return time.monotonic() - self._last_sync >= BATCH_SYNC_INTERVAL_S

    # ---- reading ----------------------------------------------------------------------------
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read: {exc.strerror}") from None

    def mark(self, offset: int) -> JournalMark:
        """The mark of the journal as it is now, covering its first `offset` bytes (0 0 "" 0: no file)."""
        try:
            with self.path.open("rb") as handle:
                info = os.fstat(handle.fileno())
                head, tail = _ends(handle.fileno(), offset)
        except FileNotFoundError:
            return JournalMark(0, 0, "", 0)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read: {exc.strerror}") from None
        return JournalMark(info.st_dev, info.st_ino, head, offset, tail)

    def replaced(self, mark: JournalMark) -> str | None:
        """Why the journal no longer holds what `mark` covers (another file, or shorter), else None."""
        if mark.offset == 0 and mark.inode == 0:
            return None   # nothing covered yet: anything matches
        try:
            with self.path.open("rb") as handle:
                info = os.fstat(handle.fileno())
                if (info.st_dev, info.st_ino) != (mark.device, mark.inode):
                    return "journal replaced (another file at the same path)"
                if info.st_size < mark.offset:
                    return f"journal is shorter ({info.st_size} bytes) than what was covered ({mark.offset})"
                head, tail = _ends(handle.fileno(), mark.offset)
        except FileNotFoundError:
            return "journal removed"
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read: {exc.strerror}") from None
        if head != mark.head:
            return "journal rewritten (its first bytes differ)"
        if mark.tail and tail != mark.tail:
            return "journal rewritten (the last bytes covered differ)"
        return None

    def chunks(self, offset: int, end: int, max_bytes: int) -> Iterator[tuple[list[tuple[int, bytes]], int]]:
        """Complete lines from `offset` up to `end`, about `max_bytes` a read: each read's (offset,
        line) pairs and the offset after them."""
        while offset < end:
            result = self.read_from(offset, max_bytes)
            if result.next_offset == offset:
                return
            yield result.lines, result.next_offset
            offset = result.next_offset

    def read_from(self, offset: int, max_bytes: int | None = None) -> ReadResult:
        """Complete lines from `offset` on (at most about `max_bytes`); a partial tail is left."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read(-1 if max_bytes is None else max_bytes)
        except FileNotFoundError:
            return ReadResult([], offset)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read: {exc.strerror}") from None
        end = data.rfind(b"\n")
        if end < 0:
            if max_bytes is not None and len(data) >= max_bytes:
                return self.read_from(offset, max_bytes * 2)
            return ReadResult([], offset)
        lines: list[tuple[int, bytes]] = []
        pos = 0
        while pos <= end:
            nl = data.index(b"\n", pos)
            if nl > pos:
                lines.append((offset + pos, data[pos:nl]))
            pos = nl + 1
        return ReadResult(lines, offset + end + 1)

    def iter_lines(self, offset: int = 0) -> Iterator[tuple[int, bytes]]:
        """Every complete, non-empty line from `offset`, in file order, read in large chunks."""
        try:
            for lines, _ in complete_lines(self.path, offset):
                yield from (item for item in lines if item[1])
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read: {exc.strerror}") from None

    def event(self, line: bytes | None) -> Event | None:
        """The event of a stored line as it may be served or indexed (None: the line is no event)."""
        event = Event.from_json(line) if line is not None else None
        return self.proof.served(line, event) if event is not None and line is not None else event

    def iter_events(self, offset: int = 0, invalid: list[int] | None = None) -> Iterator[tuple[int, Event]]:
        """Events in file order; lines that are not events are skipped (their offsets go to `invalid`)."""
        for line_offset, line in self.iter_lines(offset):
            event = self.event(line)
            if event is None:
                if invalid is not None:
                    invalid.append(line_offset)
                continue
            yield line_offset, event

    def reverse_lines(self, end: int | None = None) -> Iterator[tuple[int, bytes]]:
        """Complete lines newest-first in file order, reading backwards in chunks."""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read: {exc.strerror}") from None
        with handle:
            pos = handle.seek(0, os.SEEK_END) if end is None else end
            buf = b""
            while pos > 0:
                start = max(0, pos - _READ_CHUNK)
                handle.seek(start)
                buf = handle.read(pos - start) + buf
                pos = start
                stop = buf.rfind(b"\n") if not buf.endswith(b"\n") else len(buf) - 1
                if stop < 0:
                    continue  # no complete line yet (a partial tail): read further back
                buf = buf[: stop + 1]
                while True:
                    nl = buf.rfind(b"\n", 0, stop)
                    if nl < 0:
                        break
                    if stop > nl + 1:
                        yield pos + nl + 1, buf[nl + 1 : stop]
                    stop = nl
                buf = buf[: stop + 1]
            if buf.endswith(b"\n") and len(buf) > 1:
                yield 0, buf[:-1]

    def read_line_at(self, offset: int) -> bytes | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return line_at(fd, offset, HARD_LINE_LIMIT)
        except OSError:
            return None
        finally:
            os.close(fd)

    def stats(self) -> JournalStats:
        """Counts and time span, caught up incrementally from `<journal>.stats` (a derived cache)."""
        cache_path = self.path.with_name(self.path.name + ".stats")
        size = self.size()
        try:
            cached = orjson.loads(cache_path.read_bytes())
            covered, events, invalid = int(cached["covered"]), int(cached["events"]), int(cached["invalid"])
            first, last = cached["first"], cached["last"]
            mark = JournalMark.from_dict(cached.get("mark"))
            if covered and (mark is None or mark.offset != covered or self.replaced(mark) is not None):
                raise ValueError("journal replaced or shortened")
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            covered, events, invalid, first, last = 0, 0, 0, None, None
        start = covered
        for offset, line in self.iter_lines(covered):
            covered = offset + len(line) + 1
            event = Event.from_json(line)
            if event is None:
                invalid += 1
                continue
            events += 1
            if first is None or event.timestamp < first:
                first = event.timestamp
            if last is None or event.timestamp > last:
                last = event.timestamp
        if covered != start and self.path.exists():
            record = {"covered": covered, "events": events, "invalid": invalid, "first": first, "last": last,
                      "mark": self.mark(covered).to_dict()}
            try:
                write_private(cache_path, orjson.dumps(record), sync=False)
            except OSError:
                pass  # a read-only folder: stats are still right, just not cached
        return JournalStats(str(self.path), size, events, invalid, self.torn_records(), first, last)

    def torn_records(self) -> int:
        try:
            with self.torn_path.open("rb") as handle:
                return sum(1 for line in handle if line.strip())
        except FileNotFoundError:
            return 0


HARD_LINE_LIMIT = 8 * 1024 * 1024


class _Writer:
    """Appends under the held lock. `write` is one `write(2)` per batch."""

    def __init__(self, journal: Journal, fd: int) -> None:
        self.journal = journal
        self.fd = fd
        self.end = os.fstat(fd).st_size

    def repair_tail(self) -> None:
        if self.end == 0:
            return
        if os.pread(self.fd, 1, self.end - 1) == b"\n":
            return
        scan = min(self.end, HARD_LINE_LIMIT)
        tail = os.pread(self.fd, scan, self.end - scan)
        cut = tail.rfind(b"\n")
        keep = self.end - scan + cut + 1 if cut >= 0 else 0
        torn = os.pread(self.fd, self.end - keep, keep)
        record = {
            "offset": keep,
            "length": len(torn),
            "detected_at": format_timestamp(ms=False),
            "data_b64": base64.b64encode(torn).decode("ascii"),
        }
        append_synced(self.journal.torn_path, orjson.dumps(record) + b"\n")   # kept before it is cut
        os.ftruncate(self.fd, keep)
        os.fsync(self.fd)
        self.end = keep

    def write(self, lines: Sequence[bytes]) -> int:
        """Write `lines` at the end with one syscall; returns the offset of the first."""
        return self.write_joined(b"\n".join(lines) + b"\n" if lines else b"")

    def write_joined(self, payload: bytes) -> int:
        """`write` of lines already joined, each ending in a newline; returns the offset of the first."""
        start = self.end
        if not payload:
            return start
        view = memoryview(payload)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError as exc:
            raise JournalError(f"{self.journal.path}: write failed: {exc.strerror}") from None
        self.end += len(payload)
        self.journal._unsynced = True
        return start

    def sync(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as exc:
            raise JournalError(f"{self.journal.path}: fsync failed: {exc.strerror}") from None
        self.journal._last_sync = time.monotonic()
        self.journal._unsynced = False

    def finish(self) -> None:
        if self.journal._unsynced and self.journal._should_sync():
            self.sync()

