"""`urchin backup` and `urchin restore`: one tar file holding what the journal cannot give back.

A backup holds the journal, `config.toml`, the install key (`redact-id.key`: line proofs and keyed
ids), the scoped tokens' hashes (`tokens.json`), the workspace roots, the collectors' checkpoints,
the curated memories and the forget log's `forget` records; views and indexes rebuild from the
journal (the id index by the restore itself: the first start need not). The bearer tokens themselves
(`token`, `hooks.token`) stay out: a restored home makes new ones. Taken while a daemon writes: the
journal is copied up to the offset it had under the writers' lock (compactions take that lock too,
and rename a new file in, so the descriptor opened under it keeps its bytes), without the lines of
events forgotten by then; checkpoints are read before that point, so none covers an event the copy
lacks (a re-read event is a duplicate, refused by id).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from urchin.config import Settings
from urchin.daemon_http import daemon_alive
from urchin.errors import DaemonError, JournalError, UrchinError, ValidationError
from urchin.facade.upgrade import open_home
from urchin.fileio import ensure_private_dir, replacing, write_private
from urchin.idindex import IdIndex
from urchin.journal import Journal
from urchin.timestamps import format_timestamp
from urchin.tombstones import ForgetLog, forget_hash, line_id

__all__ = ["BackupReport", "backup", "restore"]

FORMAT = 1
MANIFEST = "urchin-backup.json"
JOURNAL = "journal/events.jsonl"
FORGET_LOG = "journal/events.jsonl.forgotten"
# whole files of the home (format.json: the formats the rest was written in, facade/upgrade.py)
_FILES = ("config.toml", "redact-id.key", "tokens.json", "workspaces.json", "format.json")
_FOLDERS = {"collectors": ".json", "memories": ".toml"}                       # folder -> its files' suffix
_CHUNK = 1 << 20
_SMALL_LIMIT = 256 << 20    # bytes of any file but the journal (the forget log holds 16 bytes an event)
# beside a journal: moved with it (".sidx-<format>": the block index of a version beside another's)
_SIDECARS = (".ids", ".sidx", ".stats", ".torn", ".forgotten", ".lock")


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: str
    home: str
    events: int
    journal_bytes: int
    forgotten_left_out: int
    files: tuple[str, ...]
    created: str
    moved_aside: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "home": self.home, "events": self.events, "journalBytes": self.journal_bytes,
                "forgottenLeftOut": self.forgotten_left_out, "files": list(self.files), "created": self.created,
                "movedAside": self.moved_aside}


class BackupError(ValidationError):
    """A backup file or a target that cannot be used (names the path and the rule)."""


# ---- backup ------------------------------------------------------------------------------------------

def backup(settings: Settings, target: Path) -> BackupReport:
    """Write a backup of `settings.home` to `target` (a new file; in a folder: a new file in it)."""
    target = _target(Path(target))
    home = settings.home
    small = _small_files(home)                       # before the journal's point: see the docstring
    journal = Journal(settings.journal_path, settings.durability)
    log = ForgetLog(journal)
    with journal.locked() as writer:                 # no append and no compaction while we take the point
        fd = os.open(journal.path, os.O_RDONLY | os.O_CLOEXEC)
        end = writer.end
        hashes = log.hashes()
        small[FORGET_LOG] = b"".join(orjson.dumps(r) + b"\n" for r in log.forget_records())
    try:
        kept, events, dropped = _measure(fd, end, hashes)
        created = format_timestamp()
        manifest: dict[str, Any] = {"format": FORMAT, "created": created, "home": str(home), "events": events,
                                    "journalBytes": kept, "files": {}}
        # a new file, 0600 from its creation (the backup holds the install key), renamed in once complete
        gz = target.name.endswith((".gz", ".tgz"))
        with replacing(target, sync_dir=True, private_parent=False) as new, \
                tarfile.open(fileobj=new.fileobj(), mode="w:gz" if gz else "w") as tar:
            digest = hashlib.sha256()
            _add(tar, JOURNAL, _Reader(_kept(fd, end, dropped, digest)), kept)
            manifest["files"][JOURNAL] = digest.hexdigest()
            for name, data in sorted(small.items()):
                _add(tar, name, io.BytesIO(data), len(data))
                manifest["files"][name] = hashlib.sha256(data).hexdigest()
            body = orjson.dumps(manifest, option=orjson.OPT_INDENT_2)
            _add(tar, MANIFEST, io.BytesIO(body), len(body))
    finally:
        os.close(fd)
    return BackupReport(str(target), str(home), events, kept, len(dropped), tuple(sorted([JOURNAL, *small])),
                        created)


def _target(target: Path) -> Path:
    target = target.expanduser().absolute()
    if target.is_dir():
        return target / f"urchin-backup-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.tar"
    if target.exists() or target.is_symlink():
        raise BackupError("PATH", f"{target} already exists: give a new file name (or a folder to put it in)")
    if not target.parent.is_dir():
        raise BackupError("PATH", f"{target.parent} is not a folder")
    return target


def _small_files(home: Path) -> dict[str, bytes]:
    """The home's small files a backup holds, by their name in the archive (each read whole: every
    writer replaces them atomically)."""
    out: dict[str, bytes] = {}
    for name in _FILES:
        data = _read(home / name)
        if data is not None:
            out[name] = data
    for folder, suffix in _FOLDERS.items():
        try:
            entries = sorted(os.scandir(home / folder), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.name.endswith(suffix) and not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                data = _read(Path(entry.path))
                if data is not None:
                    out[f"{folder}/{entry.name}"] = data
    return out


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"{path}: cannot read: {exc.strerror}") from None


def _lines(fd: int, end: int) -> Iterator[bytes]:
    """Each line (with its newline) of the journal's first `end` bytes, which end at a line's end."""
    offset, pending = 0, b""
    while offset < end:
        data = os.pread(fd, min(_CHUNK, end - offset), offset)
        if not data:
            raise JournalError("the journal is shorter than when the backup began")
        offset += len(data)
        parts = (pending + data).split(b"\n")
        pending = parts.pop()
        for part in parts:
            yield part + b"\n"
    if pending:
        yield pending + b"\n"   # cannot happen under the lock (it repairs a torn tail); kept whole if it did


def _forgotten(line: bytes, hashes: frozenset[bytes]) -> bool:
    event_id = line_id(line[:-1])
    return event_id is not None and forget_hash(event_id) in hashes


def _measure(fd: int, end: int, hashes: frozenset[bytes]) -> tuple[int, int, list[tuple[int, int]]]:
    """(bytes kept, lines kept, the forgotten lines' (offset, length)) of the journal's first `end` bytes."""
    lines, dropped, offset = 0, [], 0
    for line in _lines(fd, end) if hashes else ():
        if _forgotten(line, hashes):
            dropped.append((offset, len(line)))
        else:
            lines += 1
        offset += len(line)
    if not hashes:
        lines = sum(data.count(b"\n") for data in _chunks(fd, 0, end))
    return end - sum(length for _, length in dropped), lines, dropped


def _chunks(fd: int, offset: int, end: int) -> Iterator[bytes]:
    while offset < end:
        data = os.pread(fd, min(_CHUNK, end - offset), offset)
        if not data:
            raise JournalError("the journal is shorter than when the backup began")
        offset += len(data)
        yield data


def _kept(fd: int, end: int, dropped: list[tuple[int, int]], digest: Any) -> Iterator[bytes]:
    """The journal's first `end` bytes in large reads, but for the forgotten lines (read once, by `_measure`)."""
    offset = 0
    for start, length in [*dropped, (end, 0)]:
        for data in _chunks(fd, offset, start):
            digest.update(data)
            yield data
        offset = start + length


class _Reader(io.RawIOBase):
    """A file object over an iterator of byte strings (what `tarfile.addfile` reads from)."""

    def __init__(self, parts: Iterator[bytes]) -> None:
        self._parts = parts
        self._buf = bytearray()   # taking from its front costs no copy of the rest (tarfile reads 16 KiB at a time)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buf) < size:
            part = next(self._parts, None)
            if part is None:
                break
            self._buf += part
        size = len(self._buf) if size < 0 else size
        out = bytes(self._buf[:size])
        del self._buf[:size]
        return out


def _add(tar: tarfile.TarFile, name: str, data: IO[bytes] | io.RawIOBase, size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o600, int(time.time())
    tar.addfile(info, data)


def restore(settings: Settings, source: Path, force: bool = False) -> BackupReport:
    """Restore the backup `source` into `settings.home`, which must hold nothing a restore would
    replace, unless `force`: then the home (and a journal kept outside it) is first moved aside."""
    source = Path(source).expanduser().absolute()
    home = settings.home
    if daemon_alive(str(home)):
        raise DaemonError(f"a daemon is running on {home}: stop it first (systemctl --user stop urchin, "
                          "or end its `urchin serve`)")
    with _open_backup(source) as tar:
        manifest, members = _check(tar, source)
        held = _held(settings)
        moved = None
        if held:
            if not force:
                raise BackupError("home", f"{home} already holds {', '.join(held[:3])}"
                                  f"{' and more' if len(held) > 3 else ''}: restore into an empty home, or add "
                                  "--force to move the present one aside first")
            moved = _move_aside(settings)
        if "format.json" not in members:   # a backup from before format versions: opened as one, upgraded
            with contextlib.suppress(FileNotFoundError):
                os.unlink(home / "format.json")
        for name, member in members.items():
            if name not in (JOURNAL, FORGET_LOG):
                write_private(home / name, _member_bytes(tar, member, manifest, name))
        journal = Journal(settings.journal_path, settings.durability)
        log = ForgetLog(journal)
        forget_data = _member_bytes(tar, members[FORGET_LOG], manifest, FORGET_LOG) if FORGET_LOG in members else b""
        records = [r for r in map(_record, forget_data.split(b"\n")) if r is not None]
        # the tombstones first: a restore killed before its end leaves every forgotten id refused
        write_private(log.path, b"".join(orjson.dumps(r) + b"\n" for r in records))
        _write_journal(tar, members.get(JOURNAL), manifest, journal.path)
        with journal.locked():
            log.adopt(records)   # the journal holds none of their lines: no compaction is owed
        open_home(settings)      # the backup's formats brought to this code's (an older id index: dropped) ...
        with journal.locked():
            IdIndex(journal).catch_up()   # ... then the id index built, once, here: not at the first start
    return BackupReport(str(source), str(home), int(manifest.get("events") or 0),
                        int(manifest.get("journalBytes") or 0), 0, tuple(sorted(members)),
                        str(manifest.get("created") or ""), moved)


def _open_backup(source: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(source, "r:*")
    except FileNotFoundError:
        raise BackupError("PATH", f"{source}: no such file") from None
    except IsADirectoryError:
        raise BackupError("PATH", f"{source} is a folder: give the backup file") from None
    except (tarfile.TarError, OSError) as exc:
        raise BackupError("PATH", f"{source}: not an Urchin backup (not a tar file: {exc})") from None


def _check(tar: tarfile.TarFile, source: Path) -> tuple[dict[str, Any], dict[str, tarfile.TarInfo]]:
    """The manifest and the members by name; anything but our own regular files is refused (a tar
    file may name `../x`, absolute paths, links or devices)."""
    members: dict[str, tarfile.TarInfo] = {}
    try:
        for member in tar:
            if not member.isfile() or not _allowed(member.name) or member.name in members:
                raise BackupError("PATH", f"{source}: not an Urchin backup (it holds {member.name!r})")
            members[member.name] = member
    except tarfile.TarError as exc:
        raise BackupError("PATH", f"{source}: damaged ({exc})") from None
    if MANIFEST not in members:
        raise BackupError("PATH", f"{source}: not an Urchin backup (no {MANIFEST})")
    try:
        manifest = orjson.loads(_extract(tar, members.pop(MANIFEST)))
    except orjson.JSONDecodeError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT \
            or not isinstance(manifest.get("files"), dict):
        raise BackupError("PATH", f"{source}: not a backup this Urchin reads (format {FORMAT} expected)")
    if set(manifest["files"]) != set(members):
        raise BackupError("PATH", f"{source}: damaged (its files differ from its manifest's list)")
    return manifest, members


def _allowed(name: str) -> bool:
    if name in (MANIFEST, JOURNAL, FORGET_LOG, *_FILES):
        return True
    folder, _, leaf = name.partition("/")
    suffix = _FOLDERS.get(folder)
    return bool(suffix and leaf.endswith(suffix) and "/" not in leaf and not leaf.startswith(".") and leaf != suffix)


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    if member.size > _SMALL_LIMIT:   # only the journal is streamed; a huge "config.toml" is no backup of ours
        raise BackupError("PATH", f"not an Urchin backup ({member.name} holds {member.size:,} bytes)")
    handle = tar.extractfile(member)
    if handle is None:
        raise BackupError("PATH", f"{member.name}: not a file")
    return handle.read()


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, manifest: dict[str, Any], name: str) -> bytes:
    data = _extract(tar, member)
    if hashlib.sha256(data).hexdigest() != manifest["files"].get(name):
        raise BackupError("PATH", f"damaged: {name} does not match its checksum")
    return data


def _write_journal(tar: tarfile.TarFile, member: tarfile.TarInfo | None, manifest: dict[str, Any], path: Path) -> None:
    """The journal, streamed to a temporary file beside its place, checked, fsync'd, then renamed in."""
    digest = hashlib.sha256()
    with replacing(path, tmp=path.with_name(f".{path.name}.restore.tmp"), sync_dir=True) as new:
        handle = tar.extractfile(member) if member is not None else io.BytesIO(b"")
        assert handle is not None
        while data := handle.read(_CHUNK):
            digest.update(data)
            new.write(data)
        if member is not None and digest.hexdigest() != manifest["files"].get(JOURNAL):
            raise BackupError("PATH", f"damaged: {JOURNAL} does not match its checksum")


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and record.get("op") == "forget" else None


def _held(settings: Settings) -> list[str]:
    """What in the home a restore would replace: a journal with events, or any file a backup holds
    (an install key alone, beside an empty journal, signed nothing: it is replaced)."""
    held = [str(settings.journal_path)] if _size(settings.journal_path) else []
    forget = settings.journal_path.with_name(settings.journal_path.name + ".forgotten")
    held += [str(forget)] if forget.exists() else []
    names = _small_files(settings.home)
    # format.json alone says nothing is held: any command opening a new home records it
    held += [str(settings.home / n) for n in sorted(names) if n != "format.json" and (n != "redact-id.key" or held)]
    return held


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _move_aside(settings: Settings) -> str:
    """Rename the home (and a journal outside it, with its sidecars) to `<name>.before-restore-<time>`:
    `--force` destroys nothing, and no view of the former journal survives into the restored home."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    home = settings.home
    aside = home.with_name(f"{home.name}.before-restore-{stamp}")
    journal = settings.journal_path
    try:
        if not journal.is_relative_to(home):
            kept = journal.parent / f"{journal.name}.before-restore-{stamp}"
            ensure_private_dir(kept)
            for path in journal.parent.glob(journal.name + "*"):
                suffix = path.name[len(journal.name):]
                if path.name == journal.name or suffix in _SIDECARS or suffix.startswith(".sidx-"):
                    os.rename(path, kept / path.name)
        os.rename(home, aside)
    except OSError as exc:
        raise UrchinError(f"cannot move {home} aside to {aside}: {exc.strerror}") from None
    ensure_private_dir(home)
    return str(aside)
