"""Forgetting: the tombstone log of forgotten ids, and the one rewrite of the journal (compaction).

`<journal>.forgotten` (0600, JSONL, append-only, fsync'd) holds two kinds of record, never content:
`forget` (the 16-byte hashes of forgotten ids and their count: every reader hides those events at
once, and the write path refuses them forever) and `compact` (one rewrite of the journal: the
replacement file's identity and, per changed line, its old offset, old and new length, so a
view's byte offset maps onto the new file). A `compact` record is written before the rename and
counts once the journal is that file; one a crash left behind is voided by the next writer.
Compaction writes a temporary file beside the journal under the journal lock, fsyncs it, renames
it over the journal and fsyncs the folder: a SIGKILL at any moment leaves the old or the new file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from urchin.errors import JournalError
from urchin.fileio import (
    Replacement,
    append_synced,
    ensure_private_dir,
    fsync_dir,
    line_chunks,
    replacing,
    split_lines,
    write_private,
)
from urchin.journal import Journal
from urchin.timestamps import format_timestamp

__all__ = ["ForgetLog", "Compaction", "Rewrite", "forget_hash", "line_id", "compact"]

_READ = 4 << 20
_TAIL = 64 << 10     # how much of the forget log's end `unfinished` reads

# What a rewrite does to one journal line: None keeps it byte-identical, b"" drops it, other bytes replace it.
Rewrite = Callable[[bytes], bytes | None]


def forget_hash(event_id: str) -> bytes:
    """The 16-byte hash kept for a forgotten id (PostgreSQL computes the same: sha256, first 16 bytes)."""
    return hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).digest()[:16]


def line_id(line: bytes) -> str | None:
    """The `id` of a journal line, or None when it is not a JSON object with a string id."""
    if line.startswith(b'{"id":"'):  # how Urchin writes every line: read the id without parsing the rest
        end = line.find(b'"', 7)
        if end > 0 and b"\\" not in line[7:end]:
            try:
                return line[7:end].decode("utf-8")
            except UnicodeDecodeError:
                pass
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    event_id = record.get("id") if isinstance(record, dict) else None
    return event_id if isinstance(event_id, str) else None


@dataclass(frozen=True, slots=True)
class Compaction:
    """One committed rewrite: generation number, changed lines `(old offset, old length, new length)`
    (new length 0: dropped), and the hashes of ids whose line was replaced (views drop and re-read them)."""

    generation: int
    edits: tuple[tuple[int, int, int], ...]
    replaced: frozenset[bytes] = frozenset()
    token: str = ""

    def map_offset(self, offset: int) -> int:
        """Where a line boundary `offset` of the old file lies in the new one."""
        shift = 0
        for old, old_len, new_len in self.edits:
            if old >= offset:
                break
            shift += new_len - old_len if old + old_len <= offset else 0
        return offset + shift

    @property
    def first_change(self) -> int | None:
        return self.edits[0][0] if self.edits else None


@dataclass(slots=True)
class _State:
    key: tuple[int, int, int, int] | None = None
    hashes: frozenset[bytes] = frozenset()
    forget_records: int = 0
    compactions: list[Compaction] = field(default_factory=list)
    pending: bool = False            # forget records after the last committed compaction
    void: str | None = None          # token of a trailing compact record that never committed
    uncleaned: Compaction | None = None  # the last rewrite, if a crash stopped its views' clean-up
    files: frozenset[tuple[int, int]] = frozenset()   # (device, inode) of every journal a compaction wrote


class ForgetLog:
    """The `<journal>.forgotten` log of one journal. Construction does no I/O; reads are cached by stat."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.path = journal.path.with_name(journal.path.name + ".forgotten")
        self._state = _State()

    # ---- reading (no lock needed) ---------------------------------------------------------
    def state(self) -> _State:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._state = _State()
            return self._state
        try:
            journal = os.stat(self.journal.path).st_ino
        except FileNotFoundError:
            journal = 0
        # the journal's inode too: a compact record counts once the journal is the file it names
        key = (info.st_ino, info.st_size, info.st_mtime_ns, journal)
        if key != self._state.key:
            self._state = self._read(key)
        return self._state

    def hashes(self) -> frozenset[bytes]:
        return self.state().hashes

    def hides(self, event_id: str) -> bool:
        """Whether `event_id` was forgotten (every view asks before it answers)."""
        hashes = self.state().hashes
        return bool(hashes) and forget_hash(event_id) in hashes

    def generation(self) -> int:
        return len(self.state().compactions)

    def compacted_into(self, identity: tuple[int, int] | None) -> bool:
        """Whether the journal file `identity` (device, inode) was written by a committed compaction:
        a view that finds the journal replaced or shorter then knows a forget did it (no surprise)."""
        return identity is not None and identity in self.state().files

    def keep_current(self, generation: int) -> Callable[[list[Any]], list[Any]]:
        """A filter for things with an `id` read from the journal of `generation`: none once a
        compaction rewrote it since (their text may be a redacted line's old one), never a forgotten
        one. For vectors: a writer asks it under the cache's writers' lock, which a compaction's drop
        takes after the rename (see `embed_events`)."""
        def keep(batch: list[Any]) -> list[Any]:
            if self.generation() != generation:
                return []
            return [item for item in batch if not self.hides(item.id)]
        return keep

    def compactions_since(self, generation: int) -> list[Compaction]:
        return self.state().compactions[generation:]

    def forget_count(self) -> int:
        """How many `forget` records the log holds (a feeder compares it with what it applied)."""
        return self.state().forget_records

    def hashes_after(self, records: int) -> frozenset[bytes]:
        """Hashes of the `forget` records after the first `records` ones."""
        out: set[bytes] = set()
        for number, record in enumerate(r for r in self._records() if r.get("op") == "forget"):
            if number >= records:
                out.update(_unhex(record.get("hashes")))
        return frozenset(out)

    def pending(self) -> bool:
        """True when events were forgotten since the last compaction (the journal still holds them),
        or a crash stopped a compaction before its rename or before its views followed."""
        state = self.state()
        return state.pending or state.void is not None or state.uncleaned is not None

    def unfinished(self) -> bool:
        """`pending()` read from the log's tail alone (its last records, up to `_TAIL` bytes), for a
        command's start: no forget log, one `stat`; else one small read. Walking back from the end, a
        `forget` before any committed `compact` is pending, and so is that `compact` itself when it
        never committed (the last record, naming another file) or was never `cleaned`."""
        try:
            size = os.stat(self.path).st_size
            with self.path.open("rb") as handle:
                handle.seek(max(0, size - _TAIL))
                data = handle.read(_TAIL)
        except FileNotFoundError:
            return False
        lines = data.split(b"\n")[0 if size <= _TAIL else 1:]   # past the tail's first, cut line
        records = [r for r in map(_record, lines) if r is not None]
        voided: set[object] = set()
        cleaned: set[object] = set()
        for index in range(len(records) - 1, -1, -1):
            record = records[index]
            op, token = record.get("op"), record.get("token")
            if op == "forget":
                return True
            if op in ("void", "cleaned"):
                (voided if op == "void" else cleaned).add(token)
            elif op == "compact" and token not in voided:
                if index == len(records) - 1 and (record.get("dev"), record.get("ino")) != self._journal_identity():
                    return True      # a rewrite a crash stopped before its rename
                return bool(record.get("edits")) and token not in cleaned
        return self.pending() if size > _TAIL else False   # the tail did not decide: read it all

    def _journal_identity(self) -> tuple[int, int]:
        try:
            info = os.stat(self.journal.path)
        except FileNotFoundError:
            return (-1, -1)
        return info.st_dev, info.st_ino

    def _records(self) -> Iterator[dict[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        for line in data.split(b"\n"):
            record = _record(line)
            if record is not None:
                yield record

    def _read(self, key: tuple[int, int, int, int]) -> _State:
        state = _State(key)
        hashes: set[bytes] = set()
        records = list(self._records())
        voided = {r.get("token") for r in records if r.get("op") == "void"}
        cleaned = {r.get("token") for r in records if r.get("op") == "cleaned"}
        current = self._journal_identity()
        files: set[tuple[int, int]] = set()
        for index, record in enumerate(records):
            op = record.get("op")
            if op == "forget":
                hashes.update(_unhex(record.get("hashes")))
                state.forget_records += 1
                state.pending = True
            elif op == "compact" and record.get("token") not in voided:
                last = index == len(records) - 1
                if last and (record.get("dev"), record.get("ino")) != current:
                    state.void = str(record.get("token"))
                    continue
                edits = tuple((int(e[0]), int(e[1]), int(e[2])) for e in record.get("edits", ()))
                done = Compaction(len(state.compactions) + 1, edits, frozenset(_unhex(record.get("replaced"))),
                                  str(record.get("token")))
                state.compactions.append(done)
                files.add((record.get("dev"), record.get("ino")))  # type: ignore[arg-type]
                state.pending = False
                state.uncleaned = done if edits and done.token not in cleaned else None
        state.hashes = frozenset(hashes)
        state.files = frozenset(files)
        return state

    def forget_records(self) -> list[dict[str, Any]]:
        """The log's `forget` records (a backup keeps them: the ids the write path refuses forever;
        its `compact` records describe rewrites of a journal file the backup does not hold)."""
        return [r for r in self._records() if r.get("op") == "forget"]

    # ---- writing (call with the journal lock held) -----------------------------------------
    def adopt(self, records: Iterable[dict[str, Any]]) -> None:
        """Start the log anew with `records` (`forget` records), closed by a rewrite with no edits that
        names the journal as it is now: it holds none of their lines (a restore wrote it without them),
        so no compaction is pending. The rewrite is recorded cleaned too: as the log's last record, a
        copy of the home (another journal file) would take it for one a crash stopped before its rename."""
        dev, ino = _identity(self.journal.path)
        token = os.urandom(8).hex()
        lines = [orjson.dumps(r) for r in records if r.get("op") == "forget"]
        lines.append(orjson.dumps({"op": "compact", "at": _now(), "token": token, "dev": dev, "ino": ino,
                                   "edits": []}))
        lines.append(orjson.dumps({"op": "cleaned", "at": _now(), "token": token}))
        write_private(self.path, b"\n".join(lines) + b"\n")
        self._state = _State()

    def settle(self) -> None:
        """Void a compact record a crash left uncommitted (the journal is still the old file)."""
        self._state = _State()
        state = self.state()
        if state.void is not None:
            self._append({"op": "void", "token": state.void})

    def record_forget(self, hashes: Iterable[bytes]) -> int:
        """Append a tombstone for `hashes` (fsync'd before it returns); returns how many were new."""
        self.settle()
        known = self.state().hashes
        new = sorted({h for h in hashes if h not in known})
        if new:
            self._append({"op": "forget", "at": _now(), "count": len(new), "hashes": [h.hex() for h in new]})
        return len(new)

    def _append(self, record: dict[str, object]) -> None:
        ensure_private_dir(self.path.parent)
        try:
            # fresh_line: a torn last record (a crash mid-write) must not swallow this one
            append_synced(self.path, orjson.dumps(record) + b"\n", fresh_line=True)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot write: {exc.strerror}") from None
        self._state = _State()


def compact(journal: Journal, log: ForgetLog, rewrite: Rewrite | None = None,
            hold: Callable[[int], AbstractContextManager[object]] | None = None,
            after: Callable[[Compaction], None] | None = None,
            settle: Callable[[Compaction], None] | None = None) -> Compaction | None:
    """Rewrite the journal without its forgotten events (and through `rewrite`, when given).

    Runs under the journal lock; returns None when no line changes. `hold(first_changed_offset)` is
    entered just before the rename and left after it (a view truncates itself there, under its own
    lock); `after` runs once the new file is in place, still under the journal lock. `settle` runs
    then, with the lock released (clean-up that may wait for others, such as the vector cache's
    writers, without holding up appends); the rewrite is recorded as cleaned only after it. A crash
    before that record: the next compaction runs `after` and `settle` again, under the lock.
    """
    with journal.locked():
        log.settle()
        hashes = log.hashes()
        # a journal reached through a symlink is rewritten where it lives: renaming over the link
        # would leave the real file, forgotten lines and all, behind it
        target = journal.path.resolve()
        tmp = target.with_name(target.name + ".compact.tmp")
        tmp.unlink(missing_ok=True)  # left by a compaction a crash stopped before its rename
        if rewrite is None and not log.pending():
            return None
        leftover = log.state().uncleaned
        if leftover is not None:  # the journal was rewritten, then a crash: the views follow now
            _follow(leftover, after, settle)
            _cleaned(log, leftover)
            if rewrite is None and not log.pending():
                return None
        with replacing(target, tmp=tmp, private_parent=False) as new:
            edits, replaced = _write_rewritten(target, new, hashes, rewrite)
            if not edits:
                new.discard()
                if log.pending():   # none of the forgotten lines is here: recorded as a rewrite with no edits
                    dev, ino = _identity(target)
                    done = Compaction(log.generation() + 1, (), frozenset(), os.urandom(8).hex())
                    log._append({"op": "compact", "at": _now(), "token": done.token, "dev": dev, "ino": ino,
                                 "edits": []})
                    _cleaned(log, done)   # nothing to clean; not the log's last record (see `adopt`)
                return None
            dev, ino = _identity(tmp)
            gen, token = log.generation() + 1, os.urandom(8).hex()
            log._append({"op": "compact", "at": _now(), "token": token, "dev": dev, "ino": ino,
                         "edits": [list(e) for e in edits], "replaced": sorted(h.hex() for h in replaced)})
            with hold(edits[0][0]) if hold is not None else nullcontext():
                new.commit()
                fsync_dir(target.parent, strict=False)
        log._state = _State()
        done = Compaction(gen, tuple(edits), frozenset(replaced), token)
        _follow(done, after)
        if settle is None:
            _cleaned(log, done)
            return done
    settle(done)
    with journal.locked():
        log.settle()     # another process's compact record its crash left uncommitted meanwhile is voided
        _cleaned(log, done)   # first: a record after it would no longer be the log's last, and count
    return done


def _follow(done: Compaction, *steps: Callable[[Compaction], None] | None) -> None:
    """Let the views follow a rewrite; `_cleaned` records that they did (a crash before: the next
    compaction runs the steps again)."""
    for step in steps:
        if step is not None:
            step(done)


def _cleaned(log: ForgetLog, done: Compaction) -> None:
    log._append({"op": "cleaned", "at": _now(), "token": done.token})


def _write_rewritten(source: Path, new: Replacement, hashes: frozenset[bytes],
                     rewrite: Rewrite | None) -> tuple[list[tuple[int, int, int]], set[bytes]]:
    """Copy `source` to `new` (fsync'd) without forgotten lines and with rewritten ones; returns the edits."""
    edits: list[tuple[int, int, int]] = []
    replaced: set[bytes] = set()
    with source.open("rb") as handle:
        out: list[bytes] = []
        for offset, line in _lines(handle):
            changed = _decide(line, hashes, rewrite)
            if changed is None:
                out.append(line)
            else:
                edits.append((offset, len(line) + 1, len(changed) + 1 if changed else 0))
                if changed:
                    out.append(changed)
                    event_id = line_id(line)
                    if event_id is not None:
                        replaced.add(forget_hash(event_id))
            if len(out) >= 4096:
                new.write(b"\n".join(out) + b"\n")
                out = []
        if out:
            new.write(b"\n".join(out) + b"\n")
    new.sync()
    return edits, replaced


def _decide(line: bytes, hashes: frozenset[bytes], rewrite: Rewrite | None) -> bytes | None:
    if hashes:
        event_id = line_id(line)
        if event_id is not None and forget_hash(event_id) in hashes:
            return b""
    if rewrite is not None:
        new = rewrite(line)
        if new is not None and new != line:
            return new
    return None


def _lines(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Every complete line of the journal with its offset (the lock is held: no partial tail)."""
    end = 0
    for base, piece in line_chunks(handle, 0, _READ):
        yield from split_lines(base, piece)
        end = base + len(piece) + 1
    if handle.tell() != end:  # `locked()` repairs a torn tail before we run: there is none
        raise JournalError("the journal changed during compaction (a partial last line)")


def _identity(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_dev, info.st_ino


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None   # a torn last record: it was never acknowledged
    return record if isinstance(record, dict) else None


def _unhex(values: object) -> Iterator[bytes]:
    if not isinstance(values, list):
        return
    for value in values:
        try:
            yield bytes.fromhex(value)
        except (TypeError, ValueError):
            continue


def _now() -> str:
    return format_timestamp(ms=False)
