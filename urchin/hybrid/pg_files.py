"""The workspace files' catalogue in PostgreSQL (issue 9): each device's own (`PgLink.own_device`),
a file's chunks replaced with its catalogue row in one transaction, and a file read back as indexed.
`files.index_roots` walks the roots over it (its `FileBackend`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from urchin.hybrid.base import ChunkRow
from urchin.hybrid.pg_link import PgLink
from urchin.hybrid.pg_writer import COLUMNS, copy_feed

if TYPE_CHECKING:
    from urchin.hybrid.files import FileEntry

__all__ = ["PgFiles"]


class PgFiles:
    """This device's file catalogue and file chunks, over `link`."""

    def __init__(self, link: PgLink) -> None:
        self._link = link

    def file_catalog(self, root: str) -> dict[str, tuple[str, int, float]]:
        conn = self._link.conn
        with conn.transaction():
            # a failed file reports size -1, so the next walk tries it again
            rows = conn.execute("SELECT path, hash, CASE WHEN state = 'failed' THEN -1 ELSE size END, "
                                "extract(epoch FROM mtime)::float8 FROM urchin_files WHERE device = %s "
                                "AND root = %s", (self._link.own_device, root)).fetchall()
        return {r[0]: (r[1], int(r[2]), float(r[3])) for r in rows}

    def file_roots(self) -> list[str]:
        conn = self._link.conn
        with conn.transaction():
            return [r[0] for r in conn.execute("SELECT DISTINCT root FROM urchin_files WHERE device = %s",
                                               (self._link.own_device,)).fetchall()]

    def files(self, state: str | None = None, roots: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """This device's catalog rows (optionally one state, some roots), largest last so a byte budget
        reads many."""
        rows = self._link.read(
            "SELECT root, path, size, mtime, hash, state, error FROM urchin_files WHERE device = %(device)s "
            "AND (%(state)s::text IS NULL OR state = %(state)s) "
            "AND (%(roots)s::text[] IS NULL OR root = ANY(%(roots)s)) ORDER BY size, root, path",
            {"state": state, "roots": list(roots) if roots is not None else None,
             "device": self._link.own_device})
        return [dict(zip(("root", "path", "size", "mtime", "hash", "state", "error"), r, strict=True)) for r in rows]

    def replace_file(self, entry: FileEntry, rows: Sequence[ChunkRow]) -> None:
        """One transaction: the file's old chunks out (term statistics decremented), new ones in, catalog row."""

        doc_id = f"{entry.root}/{entry.path}"
        conn = self._link.conn
        device = self._link.own_device     # a file chunk is the feeding role's device's ('' for the owner)
        self._link.ensure_partitions(rows)
        with conn.transaction():
            self._delete_docs([doc_id])
            if rows:
                with conn.cursor() as cur:
                    copy_feed(cur, rows, device, self._link.bound)
                    cur.execute(f"INSERT INTO urchin_chunks ({', '.join(COLUMNS)}) "
                                f"SELECT {', '.join(COLUMNS)} FROM urchin_feed")
                    cur.execute("TRUNCATE urchin_feed")
            conn.execute(
                "INSERT INTO urchin_files (device, root, path, size, mtime, hash, state, error) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (device, root, path) DO UPDATE SET "
                "size = excluded.size, mtime = excluded.mtime, hash = excluded.hash, state = excluded.state, "
                "error = excluded.error",
                (device, entry.root, entry.path, entry.size, datetime.fromtimestamp(entry.mtime, UTC), entry.hash,
                 entry.state, entry.error))

    def delete_files(self, root: str, paths: Sequence[str] | None = None) -> int:
        """Remove files (all of `root` when `paths` is None) from the catalog and the chunk table."""
        conn = self._link.conn
        device = self._link.own_device
        with conn.transaction():
            if paths is None:
                gone = [r[0] for r in conn.execute("DELETE FROM urchin_files WHERE device = %s AND root = %s "
                                                   "RETURNING path", (device, root)).fetchall()]
            else:
                gone = [r[0] for r in conn.execute(
                    "DELETE FROM urchin_files WHERE device = %s AND root = %s AND path = ANY(%s) RETURNING path",
                    (device, root, list(paths))).fetchall()]
            self._delete_docs([f"{root}/{p}" for p in gone])
        return len(gone)

    def _delete_docs(self, doc_ids: Sequence[str]) -> None:
        """Delete this device's chunks of the files `doc_ids` (another device may hold the same paths)."""
        if not doc_ids:
            return
        conn = self._link.conn
        device = self._link.own_device
        conn.execute("DELETE FROM urchin_embeddings e USING urchin_chunks c WHERE e.device = %s AND "
                     "c.device = e.device AND e.chunk_id = c.chunk_id AND c.doc_id = ANY(%s) "
                     "AND c.doc_type = 'file'", (device, list(doc_ids)))
        conn.execute("DELETE FROM urchin_chunks WHERE device = %s AND doc_id = ANY(%s) AND doc_type = 'file'",
                     (device, list(doc_ids)))

    def document_chunks(self, doc_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """A workspace file as this device indexed it: its catalog row (size, hash) and its chunks in line
        order, read by one statement so both are of one version (no chunks: not retained, e.g. cataloged
        over the size cap)."""
        root, _, path = doc_id.partition("/")
        rows = self._link.read(
            "SELECT c.chunk_id, c.content, c.start_line, c.end_line, c.heading_path, c.content_hash, "
            "c.occurred_at, f.size, f.hash FROM urchin_chunks c LEFT JOIN urchin_files f ON f.device = c.device "
            "AND f.root = %s AND f.path = %s WHERE c.device = %s AND c.doc_id = %s AND c.doc_type = 'file' "
            "ORDER BY c.start_line, c.chunk_id", (root, path, self._link.own_device, doc_id))
        names = ("chunk_id", "content", "start_line", "end_line", "heading_path", "content_hash", "occurred_at")
        catalog = {"size": rows[0][7], "hash": rows[0][8]} if rows and rows[0][8] is not None else None
        return catalog, [dict(zip(names, r[:7], strict=True)) for r in rows]
