"""Embedding vectors in PostgreSQL: one HNSW index per model (partial, on a halfvec cast), the rows
still without a vector for a model, and vectors stored by chunk key. The dense leg that reads them is
`pg_legs.PgLegs.dense`.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from datetime import datetime

from urchin.hybrid.base import split_key
from urchin.hybrid.pg_link import PgLink
from urchin.hybrid.pg_sql import KEY_SQL, vector_literal
from urchin.hybrid.pgdriver import sql

__all__ = ["PgEmbeddings", "hash_text"]


def hash_text(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


class PgEmbeddings:
    """The embedding feed's reads and writes, over `link`."""

    def __init__(self, link: PgLink) -> None:
        self._link = link

    def ensure_model(self, model: str, dim: int) -> None:
        name = "urchin_emb_hnsw_" + format(abs(hash_text(model)), "x")
        conn = self._link.conn
        with conn.transaction():
            conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON urchin_embeddings USING hnsw "
                                 "((embedding::halfvec({})) halfvec_cosine_ops) WHERE model = {}").format(
                sql.Identifier(name), sql.Literal(int(dim)), sql.Literal(model)))

    def pending_embeddings(self, model: str, limit: int, device: str) -> list[tuple[str, str, bool, datetime]]:
        """This device's rows without a vector for `model`, newest first: (chunk key, the text to embed,
        whether it is an event, when it occurred). `device` feeds the events; the files are `own_device`'s.
        The text is what the vector cache embeds an event as (the cache holds this journal's events)."""
        rows = self._link.read(
            f"SELECT {KEY_SQL.format(t='c.')}, coalesce(c.title || E'\\n', '') || c.content, "
            "c.doc_type = 'event', c.occurred_at FROM urchin_chunks c "
            "WHERE ((c.device = %s AND c.doc_type = 'event') OR (c.device = %s AND c.doc_type = 'file')) "
            "AND NOT EXISTS (SELECT 1 FROM urchin_embeddings e WHERE e.device = c.device "
            "AND e.chunk_id = c.chunk_id AND e.model = %s) ORDER BY c.occurred_at DESC LIMIT %s",
            (device, self._link.own_device, model, limit))
        return [(r[0], r[1], bool(r[2]), r[3]) for r in rows]

    def write_embeddings(self, model: str, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        """Store vectors by chunk key (`pending_embeddings`)."""
        conn = self._link.conn
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany("INSERT INTO urchin_embeddings (device, chunk_id, model, embedding) "
                            "VALUES (%s, %s, %s, %s::halfvec) ON CONFLICT (device, chunk_id, model) "
                            "DO UPDATE SET embedding = excluded.embedding",
                            [(*split_key(key), model, vector_literal(vec)) for key, vec in items])
