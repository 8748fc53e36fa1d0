"""What the PostgreSQL index reports of itself: chunk count, schema and pgvector versions, each
feeder's cursor, the file catalogue by root and state, and the chunks still without a vector.
"""

from __future__ import annotations

from urchin.hybrid.base import IndexState
from urchin.hybrid.pg_link import PgLink
from urchin.timestamps import format_timestamp

__all__ = ["PgStatus"]


class PgStatus:
    """`urchin index status`'s numbers, over `link`."""

    def __init__(self, link: PgLink) -> None:
        self._link = link

    def status(self, model: str | None = None) -> IndexState:
        conn = self._link.conn
        with conn.transaction():
            chunks = conn.execute("SELECT count(*) FROM urchin_chunks").fetchone()
            cursors = conn.execute("SELECT device, journal, byte_offset, updated_at FROM urchin_cursors "
                                   "WHERE journal !~ ' #[a-z]+$' ORDER BY device, journal").fetchall()
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            schema = conn.execute("SELECT max(version) FROM urchin_migrations").fetchone()
            files = conn.execute("SELECT root, state, count(*) FROM urchin_files GROUP BY root, state").fetchall()
            pending = None
            if model:
                pending = conn.execute(
                    "SELECT count(*) FROM urchin_chunks c WHERE NOT EXISTS (SELECT 1 FROM urchin_embeddings e "
                    "WHERE e.device = c.device AND e.chunk_id = c.chunk_id AND e.model = %s)", (model,)).fetchone()
        out: IndexState = {
            "chunks": int(chunks[0]) if chunks else 0,
            "schemaVersion": schema[0] if schema else None,
            "pgvector": version[0] if version else None,
            "cursors": [{"device": d, "journal": j, "offset": int(o), "updatedAt": format_timestamp(u)}
                        for d, j, o, u in cursors],
            "files": {},
        }
        for root, state, count in files:
            out["files"].setdefault(root, {})[state] = int(count)
        if pending is not None:
            out["pendingEmbeddings"] = int(pending[0])
        return out
