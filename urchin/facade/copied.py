"""A home copied to other files (`cp -a`, rsync, a new disk or laptop): derived files that name the
journal by its file identity (device, inode) follow the copy when its bytes are proven the same.

The id index's sidecar records the CRC-32 of the journal bytes it covers and the inode of the file
they were in (`IdIndex.catch_up` keeps it for another file with the same bytes). The saved marks that
named that file and cover no more than those bytes (the token-cosine view's manifest, the journal
stats) are then re-stamped with the copy's identity, after `Journal.replaced` checks their own ends
in the copy; any other mark is left as it is, and its view rebuilds as before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

from urchin.config import Settings
from urchin.fileio import write_private
from urchin.idindex import IdIndex
from urchin.journal import Journal, JournalMark

__all__ = ["follow_copy"]

log = logging.getLogger("urchin.facade")


def follow_copy(settings: Settings) -> list[str]:
    """When the journal is another file than the id index last described (one read of its header and
    one stat: the usual answer is no), check the copy and re-stamp what still holds; the names of
    the files re-stamped."""
    journal = Journal(settings.journal_path, settings.durability)
    ids = IdIndex(journal)
    stamp = ids.stamp()
    try:
        info = os.stat(journal.path)
    except FileNotFoundError:
        return []
    if stamp is None or stamp[1] == info.st_ino:
        return []
    with journal.locked():
        restamped = ids.restamp()      # other bytes: rebuilt by the next catch-up (a daemon's: in the background)
        if restamped is None:
            return []
        covered, inode = restamped
        moved = [str(path) for path, key in _marks(settings) if _restamp(journal, path, key, inode, covered, info)]
    log.info("%s is a copy of the journal the home's views were made for: the id index kept, %s re-stamped",
             journal.path, ", ".join(moved) or "nothing else")
    return moved


def _marks(settings: Settings) -> list[tuple[Path, str]]:
    """Each saved file holding a `JournalMark`, and the key it is under."""
    journal = settings.journal_path
    return [(settings.index_dir / "cosine" / "manifest.json", "journal"),
            (journal.with_name(journal.name + ".stats"), "mark")]


def _restamp(journal: Journal, path: Path, key: str, inode: int, covered: int, info: os.stat_result) -> bool:
    try:
        saved = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    mark = JournalMark.from_dict(saved.get(key)) if isinstance(saved, dict) else None
    if mark is None or mark.inode != inode or not 0 < mark.offset <= covered:
        return False
    moved = JournalMark(info.st_dev, info.st_ino, mark.head, mark.offset, mark.tail)
    if journal.replaced(moved) is not None:
        return False
    saved[key] = {**saved[key], **moved.to_dict()}
    write_private(path, orjson.dumps(saved))
    return True
