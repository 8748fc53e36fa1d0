"""The home's format versions (`$URCHIN_HOME/format.json`): checked when a command or the daemon opens it.

Every structure Urchin keeps in a home has a format number here, recorded in `format.json` by the
code that wrote it. Opening a home: a structure recorded older than this code's is brought up to date
by itself (a derived one is dropped and rebuilds from the journal on next use; a source has a
migration) and the user is told once, on stderr or in the daemon's log; one recorded newer than this
code knows refuses the whole home, untouched, naming the file and both versions, rather than be misread.
A home from before format.json (Urchin 0.1.0) is taken as version 1 of each, which it is.
The PostgreSQL index keeps its own numbers (table `urchin_migrations`, `urchin/hybrid/pg_migrate.py`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from urchin.config import Settings
from urchin.errors import FormatError
from urchin.event import PROOF_FIELD
from urchin.facade.copied import follow_copy
from urchin.fileio import write_private
from urchin.idindex import IdIndex
from urchin.journal import Journal

__all__ = ["FORMATS", "FORMAT_FILE", "open_home"]

log = logging.getLogger(__name__)

FORMAT_FILE = "format.json"

# The formats this code reads and writes. A change to what a structure's files mean takes a new number
# here (tests/test_upgrade.py holds these equal to each structure's own marker where it has one) and,
# for a source, an entry in _MIGRATIONS.
FORMATS: dict[str, int] = {
    # sources: only a migration may change them
    "journal": 1,                # events.jsonl: one JSON event a line (a `proof` field since 0.2.0, optional)
    "forget-log": 1,             # events.jsonl.forgotten
    "tokens": 1,                 # tokens.json (hashes)
    "memories": 1,               # memories/*.toml
    "workspaces": 1,             # workspaces.json
    "collector-checkpoints": 1,  # collectors/*.json
    # derived: rebuilt from the journal
    "id-index": 3,               # events.jsonl.ids (magic URCHINI3: the header holds the CRC-32 of what it covers)
    "block-index": 2,            # events.jsonl.sidx/ (magic URSIDX02: bitmaps column-major)
    "journal-stats": 1,          # events.jsonl.stats
    "token-cosine": 3,           # index/cosine/ (manifest "format"; 3: label codes narrow, converted from 2)
    "associations": 1,           # index/cosine.assoc.npz ("format")
    "vectors": 1,                # vectors/<model>/ (meta "format")
}

_FIRST_LINE_MAX = 2 << 20        # an event line is at most about 1 MiB
_PROOF_MARK = b',"' + PROOF_FIELD.encode() + b'":"'
_PROOF_TAIL = len(_PROOF_MARK) + 18   # the proof is the line's last field: ,"proof":"<16 characters>"}
_VERSION_OF_LEGACY = "0.1.0"   # what wrote a home that has no format.json
_ASIDE = (" (the home is then taken as 0.1.0's if its journal's lines carry no proof, else as this "
          "version's)")
# ... and the formats it wrote (frozen: what 0.1.0 wrote does not change when FORMATS does)
_LEGACY_FORMATS = {"journal": 1, "forget-log": 1, "tokens": 1, "memories": 1, "workspaces": 1,
                   "collector-checkpoints": 1, "id-index": 2, "block-index": 1, "journal-stats": 1,
                   "token-cosine": 2, "associations": 1, "vectors": 1}


def _derived(settings: Settings) -> dict[str, list[Path]]:
    """The files of each derived structure: dropping them is its rebuild."""
    journal = settings.journal_path
    return {
        "id-index": [journal.with_name(journal.name + ".ids")],
        # and this format's kept beside another version's (search/blockindex.py `_aside`)
        "block-index": [journal.with_name(journal.name + ".sidx"), *_beside(journal, ".sidx-")],
        "journal-stats": [journal.with_name(journal.name + ".stats")],
        "token-cosine": [settings.index_dir / "cosine"],
        "associations": [settings.index_dir / "cosine.assoc.npz"],
        "vectors": [settings.vectors_dir],
    }


def _beside(journal: Path, prefix: str) -> list[Path]:
    try:
        return [p for p in journal.parent.iterdir() if p.name.startswith(journal.name + prefix)]
    except FileNotFoundError:
        return []


# (structure, recorded version) -> the step bringing it to the next version, and what it did (in words)
_MIGRATIONS: dict[tuple[str, int], Callable[[Settings], str]] = {}


def _id_index_from_2(settings: Settings) -> bool:
    journal = Journal(settings.journal_path)
    with journal.locked():
        return IdIndex(journal).upgrade_from_2()


def _token_cosine_from_2(settings: Settings) -> bool:
    from urchin.search import cosine_store  # numpy: not on every command's start

    return cosine_store.convert(settings.index_dir / "cosine")


# (derived structure, recorded version) -> a conversion that keeps its entries (True: done; False: it
# had nothing to keep, and is dropped and rebuilt as any other derived structure)
_KEPT: dict[tuple[str, int], Callable[[Settings], bool]] = {("id-index", 2): _id_index_from_2,
                                                            ("token-cosine", 2): _token_cosine_from_2}


@dataclass(frozen=True)
class _Recorded:
    formats: dict[str, int]
    written_by: str
    legacy: bool               # no format.json: a home from before format versions


def open_home(settings: Settings) -> str | None:
    """Check the home's formats before anything reads it; upgrade what is older. Returns what was done
    (None: nothing), which has also been logged; raises FormatError for a newer format, touching nothing.
    Then a home copied to other files keeps the derived files its bytes still match (`copied.py`)."""
    said = _open_formats(settings)
    follow_copy(settings)       # after the formats: a sidecar an upgrade dropped is rebuilt, not followed
    return said


def _open_formats(settings: Settings) -> str | None:
    home = settings.home
    if not home.is_dir():
        return None                      # nothing written yet: the first write makes the home
    recorded = _read(home / FORMAT_FILE, settings)
    if recorded is None:
        write_private(home / FORMAT_FILE, _body(_this_version()))   # a new home: recorded silently
        return None
    newer = {name: n for name, n in recorded.formats.items() if n > FORMATS.get(name, 0)}
    if newer:
        raise FormatError(_refusal(home / FORMAT_FILE, recorded, newer, _this_version()))
    # a structure newer than the code that recorded the file did not exist then: nothing to upgrade
    older = sorted(name for name, n in FORMATS.items() if recorded.formats.get(name, n) < n)
    if not older and not recorded.legacy:
        return None
    version = _this_version()
    done = [_upgrade(settings, name, recorded.formats[name]) for name in older]
    write_private(home / FORMAT_FILE, _body(version))
    said = "; ".join(done) or "its formats are this version's, nothing to migrate or rebuild (journal unchanged)"
    report = f"upgraded this home ({home}) from Urchin {recorded.written_by} to {version}: {said}"
    log.warning("%s", report)
    return report


def _read(path: Path, settings: Settings) -> _Recorded | None:
    """What format.json records; without it, 0.1.0's formats if the journal says 0.1.0 wrote it, else
    None (a new home, or one this code wrote before format.json existed: its formats are these)."""
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        if _written_before_formats(settings.journal_path):
            return _Recorded(dict(_LEGACY_FORMATS), _VERSION_OF_LEGACY, True)
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise FormatError(f"{path}: cannot be read ({exc}); it records the formats of this home's files. "
                          f"Restore it from a backup, or move it aside{_ASIDE}") from None
    formats = raw.get("formats") if isinstance(raw, dict) else None
    if not isinstance(formats, dict) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in formats.values()):
        raise FormatError(f"{path}: `formats` must map each structure to a whole number; it records the formats "
                          f"of this home's files. Restore it from a backup, or move it aside{_ASIDE}")
    return _Recorded({str(k): v for k, v in formats.items()}, str(raw.get("written_by") or "?"), False)


def _written_before_formats(journal: Path) -> bool:
    """A journal whose first line carries no proof was written before format.json (0.1.0 signed no
    line); this code signs every line it writes, so a home it made is not taken for an old one."""
    try:
        with open(journal, "rb") as handle:
            first = handle.readline(_FIRST_LINE_MAX).rstrip(b"\n")
    except FileNotFoundError:
        return False
    return bool(first) and _PROOF_MARK not in first[-_PROOF_TAIL:]


def _refusal(path: Path, recorded: _Recorded, newer: dict[str, int], version: str) -> str:
    parts = ", ".join(f"{name} format {n} (this Urchin knows {FORMATS[name]})" if name in FORMATS
                      else f"{name} format {n} (unknown to this Urchin)" for name, n in sorted(newer.items()))
    return (f"{path}: this home was written by Urchin {recorded.written_by}, newer than this one ({version}): "
            f"{parts}. Nothing was changed: upgrade Urchin to {recorded.written_by} or later to open it")


def _upgrade(settings: Settings, name: str, recorded: int) -> str:
    paths = _derived(settings).get(name)
    keep = _KEPT.get((name, recorded))
    if keep is not None and keep(settings):
        return f"{name} {recorded} -> {FORMATS[name]}: converted, its entries kept"
    if paths is not None:
        for path in paths:   # another command upgrading at once may have dropped it first
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        return f"{name} {recorded} -> {FORMATS[name]}: dropped, rebuilt from the journal on next use"
    steps = []
    for n in range(recorded, FORMATS[name]):
        step = _MIGRATIONS.get((name, n))
        if step is None:      # a release that bumps a source's number ships its migration; a test checks it
            raise FormatError(f"{settings.home / FORMAT_FILE}: no migration of {name} from format {n}")
        steps.append(step(settings))
    return f"{name} {recorded} -> {FORMATS[name]}: " + ", ".join(steps)


def _this_version() -> str:
    from importlib import metadata  # only when format.json is written or refused: not on every command

    try:
        return metadata.version("urchin-memory")
    except metadata.PackageNotFoundError:
        return "0+source"


def _body(version: str) -> bytes:
    return orjson.dumps({"written_by": version, "formats": FORMATS}, option=orjson.OPT_INDENT_2) + b"\n"
