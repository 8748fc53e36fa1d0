"""Workspace files into the chunk table: walk the roots, chunk, hash; catalog what is over the size cap.

Pure logic over the `FileBackend` protocol below (postgres.PostgresIndex implements it). A file whose
content hash is unchanged is skipped, so it is neither re-chunked nor re-embedded. Files are opened
only through `FileAccess` (resolved, checked, the very file checked) and their text passes the
redactor before any chunk is built: no secret reaches the chunk table, its terms or its vectors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from urchin.errors import UrchinError
from urchin.hybrid.base import ChunkRow
from urchin.hybrid.sparse import doc_vector, int_array, to_sparsevec
from urchin.workspace.chunking import Chunk, chunk_text
from urchin.workspace.roots import DEFAULT_SIZE_CAP, WorkspaceFile, walk_files

if TYPE_CHECKING:
    from urchin.workspace.access import FileAccess, Located

__all__ = ["FILES_SOURCE", "FILE_KIND", "FileBackend", "FileIndexReport", "FileEntry", "index_roots", "file_rows",
           "hash_file", "PREFIX_RETRIEVAL_TEXT"]

FILES_SOURCE = "files"
FILE_KIND = "file"
HEADING_JOIN = " › "
# Stored hashes carry the redaction epoch: rows written before file text was redacted (or under
# older rules) never match, so every such file is re-chunked from redacted text on the next walk.
HASH_EPOCH = "r1:"
# The token vector is built from `Chunk.retrieval_text` (path + heading path + text); False builds it
# from the bare chunk text. Only the retrieval-gain measurement flips it.
PREFIX_RETRIEVAL_TEXT = True


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One row of the `urchin_files` catalog."""

    root: str
    path: str
    size: int
    mtime: float
    hash: str
    state: str              # indexed | cataloged | failed
    error: str | None = None


class FileBackend(Protocol):
    def file_catalog(self, root: str) -> dict[str, tuple[str, int, float]]: ...  # path -> (hash, size, mtime)

    def file_roots(self) -> list[str]: ...

    def replace_file(self, entry: FileEntry, rows: Sequence[ChunkRow]) -> None: ...

    def delete_files(self, root: str, paths: Sequence[str] | None = None) -> int: ...


@dataclass(slots=True)
class FileIndexReport:
    files: int = 0          # files seen (after ignore rules and binaries)
    indexed: int = 0        # (re)chunked this run
    unchanged: int = 0      # same hash: skipped
    cataloged: int = 0      # over the size cap: path, size, mtime, hash only
    failed: int = 0
    removed: int = 0        # vanished files (and files of removed roots) deleted from the index
    chunks: int = 0         # chunks written this run
    binaries: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "indexed": self.indexed, "unchanged": self.unchanged,
                "cataloged": self.cataloged, "failed": self.failed, "removed": self.removed,
                "chunks": self.chunks, "binaries": self.binaries}


def hash_file(data: bytes, epoch: str = HASH_EPOCH) -> str:
    return epoch + hashlib.sha256(data).hexdigest()


def file_epoch(files: FileAccess) -> str:
    """The prefix of stored file hashes: chunks are redacted text, so a change of the redaction rules
    (a `[redact]` pattern added) makes every stored hash stale and every file is re-chunked."""
    fingerprint = files.redactor.fingerprint
    return f"{HASH_EPOCH[:-1]}.{fingerprint}:" if fingerprint else HASH_EPOCH


def _hash_stream(files: FileAccess, loc: Located) -> str:
    digest = hashlib.sha256()
    with files.open(loc) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return file_epoch(files) + digest.hexdigest()


def file_rows(root: str, rel: str, text: str, mtime: float, content_hash: str | None = None,
              chunks: Sequence[Chunk] | None = None) -> list[ChunkRow]:
    """The index rows of one file: chunk_id `<root>/<rel>#<n>`, doc_id `<root>/<rel>`."""
    doc_id = f"{root}/{rel}"
    at = datetime.fromtimestamp(mtime, UTC)
    rows = []
    for n, chunk in enumerate(chunks if chunks is not None else chunk_text(rel, text)):
        body = chunk.text.replace("\x00", "\ufffd")
        weights = doc_vector(chunk.retrieval_text(doc_id) if PREFIX_RETRIEVAL_TEXT else body)
        rows.append(ChunkRow(
            chunk_id=f"{doc_id}#{n}", doc_id=doc_id, doc_type="file", source=FILES_SOURCE, kind=FILE_KIND,
            content=body, occurred_at=at, workspace=root,
            title=HEADING_JOIN.join(chunk.heading_path) or None, path=rel,
            heading_path=list(chunk.heading_path), start_line=chunk.start_line, end_line=chunk.end_line,
            content_hash=content_hash, terms=int_array(sorted(weights)), tvec=to_sparsevec(weights)))
    return rows


def index_roots(backend: FileBackend, files: FileAccess, size_cap: int = DEFAULT_SIZE_CAP) -> FileIndexReport:
    """Bring the index in line with the roots' files now: changed files re-chunked, vanished ones removed.

    The walker leaves out ignored files and secret stores (unless a root opts in); a file that
    became one since it was indexed counts as vanished and its chunks go."""
    report = FileIndexReport()
    names = {r.name for r in files.roots}
    for gone in backend.file_roots():
        if gone not in names:
            report.removed += backend.delete_files(gone)
    epoch = file_epoch(files)
    for root in files.roots:
        known = backend.file_catalog(root.name)
        seen: set[str] = set()
        for wf in walk_files(root):
            stored = known.get(wf.rel)
            if (stored is not None and stored[0].startswith(epoch) and stored[1] == wf.size
                    and abs(stored[2] - wf.mtime) < 1e-3):
                report.files += 1
                report.unchanged += 1          # same size and mtime: not even opened (the daemon walks often)
                seen.add(wf.rel)
                continue
            try:
                loc = files.locate_in(root, wf.rel, serve=False)   # the walker applied the serving policy
                if files.is_binary(loc):
                    report.binaries += 1
                    continue
            except (OSError, UrchinError):
                continue          # vanished, swapped or unreadable since the walk: not indexed
            report.files += 1
            seen.add(wf.rel)
            index_file(backend, files, loc, wf, stored[0] if stored else None, size_cap, report)
        vanished = [p for p in known if p not in seen]
        if vanished:
            report.removed += backend.delete_files(root.name, vanished)
    return report


def index_file(backend: FileBackend, files: FileAccess, loc: Located, wf: WorkspaceFile, known_hash: str | None,
               size_cap: int, report: FileIndexReport) -> None:
    """Index, catalog or mark failed one file; skip it when its hash is the one stored."""
    try:
        data = None if wf.size > size_cap else files.read_bytes(loc, size_cap + 1)
        if data is None or len(data) > size_cap:        # (it may have grown since the walk)
            digest = _hash_stream(files, loc)
            if digest == known_hash:
                report.unchanged += 1
                return
            backend.replace_file(FileEntry(wf.root.name, wf.rel, wf.size, wf.mtime, digest, "cataloged"), [])
            report.cataloged += 1
            return
    except (OSError, UrchinError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        backend.replace_file(FileEntry(wf.root.name, wf.rel, wf.size, wf.mtime, "", "failed",
                                       f"unreadable: {reason}"), [])
        report.failed += 1
        return
    digest = hash_file(data, file_epoch(files))
    if digest == known_hash:
        report.unchanged += 1
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        backend.replace_file(FileEntry(wf.root.name, wf.rel, len(data), wf.mtime, digest, "failed",
                                       f"not UTF-8 at byte {exc.start}"), [])
        report.failed += 1
        return
    rows = file_rows(wf.root.name, wf.rel, files.redact(text), wf.mtime, digest)
    backend.replace_file(FileEntry(wf.root.name, wf.rel, len(data), wf.mtime, digest, "indexed"), rows)
    report.indexed += 1
    report.chunks += len(rows)
