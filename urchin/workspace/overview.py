"""A workspace at a glance: files and folders, what changed lately, where an agent should start."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from urchin.errors import UrchinError
from urchin.timestamps import format_timestamp
from urchin.workspace.roots import DEFAULT_SIZE_CAP, Root, walk_files

if TYPE_CHECKING:
    from urchin.workspace.access import FileAccess

__all__ = ["root_overview"]


def root_overview(root: Root, access: FileAccess, recent: int = 10, largest: int = 5,
                  size_cap: int = DEFAULT_SIZE_CAP) -> dict[str, Any]:
    """Counts by folder and extension, the largest folders, and the most recently changed files."""
    files = list(walk_files(root))
    folders: Counter[str] = Counter()
    folder_bytes: Counter[str] = Counter()
    extensions: Counter[str] = Counter()
    oversize = binary = 0
    for item in files:
        top = item.rel.split("/", 1)[0] if "/" in item.rel else "."
        folders[top] += 1
        folder_bytes[top] += item.size
        suffix = item.rel.rsplit(".", 1)[-1].lower() if "." in item.rel.rsplit("/", 1)[-1] else "(none)"
        extensions[suffix] += 1
        if item.size > size_cap:
            oversize += 1
        elif binary_file(access, item.root, item.rel):
            binary += 1
    newest = sorted(files, key=lambda f: f.mtime, reverse=True)[:recent]
    return {
        "name": root.name,
        "path": str(root.path),
        "files": len(files),
        "folders": len({f.rel.rsplit("/", 1)[0] for f in files if "/" in f.rel}),
        "bytes": sum(f.size for f in files),
        "binaryFiles": binary,
        "overSizeCap": oversize,
        "largestFolders": [{"folder": name, "files": folders[name], "bytes": size}
                           for name, size in folder_bytes.most_common(largest)],
        "extensions": dict(extensions.most_common(10)),
        "recentChanges": [{"path": f.display, "bytes": f.size,
                           "updatedAt": format_timestamp(datetime.fromtimestamp(f.mtime, UTC), ms=False)}
                          for f in newest],
    }


def binary_file(files: FileAccess, root: Root, rel: str) -> bool:
    """Is the walked file binary? Read through the one resolver; a file that cannot be read counts as binary."""
    try:
        return files.is_binary(files.locate_in(root, rel, serve=False))
    except (OSError, UrchinError):
        return True
