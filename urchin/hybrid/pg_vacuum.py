"""Reclaiming what a forget deleted from PostgreSQL: VACUUM after each forget on Urchin's own server,
and the purge (`urchin forget --purge`) that rewrites the tables so no data file keeps the bytes.

Part of the PostgreSQL backend (`pg_writer.py` passes its connection; one of the modules importing
psycopg). A DELETE only marks rows dead: their bytes stay in the table, index and TOAST pages until
VACUUM makes the space reusable and a later write overwrites it. Only the server's owner may do
this: on a shared database (URCHIN_DATABASE_URL) a feeder never does; contrib/team/TEAM.md says what the
owner runs.
"""

from __future__ import annotations

import logging
from typing import Any

from urchin.hybrid.pgdriver import LockNotAvailable, idle

__all__ = ["FORGET_TABLES", "reclaim"]

log = logging.getLogger("urchin.hybrid.vacuum")

# The tables a forget deletes from or updates (chunks with their partitions and TOAST, vectors, the
# term statistics); pg_statistic holds sampled column values once the server has analysed a table.
FORGET_TABLES = ("urchin_chunks", "urchin_embeddings", "urchin_terms", "urchin_stats")
# How long a VACUUM waits for its lock: an index build (a backfill's GIN indexes, minutes at 1M events)
# holds one that conflicts. The plain one is left to autovacuum then; a purge waits longer, then fails.
LOCK_WAIT = {False: "1s", True: "60s"}


def reclaim(conn: Any, full: bool) -> bool:
    """VACUUM the forget's tables on `conn` (a psycopg connection, idle). `full`: VACUUM FULL (every
    table, index and TOAST file written anew, the old ones truncated), fresh statistics in place of the
    sampled values, pg_statistic rewritten too, then a WAL switch and a CHECKPOINT, so the data files
    hold no byte of a deleted row and the WAL segments that do are no longer needed (recycled, then
    overwritten). Returns False when the connection was inside a transaction (nothing was done)."""
    if not idle(conn):    # VACUUM cannot run in one
        log.warning("VACUUM after a forget skipped: the connection is inside a transaction")
        return False
    conn.autocommit = True
    try:
        conn.execute(f"SET lock_timeout = '{LOCK_WAIT[full]}'")
        present = [row[0] for row in conn.execute(
            "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL", (list(FORGET_TABLES),))]
        if not present:
            return True
        tables = ", ".join(present)     # our own constant names, checked against the catalog above
        if not full:
            try:
                conn.execute(f"VACUUM {tables}")
            except LockNotAvailable:
                log.info("VACUUM after a forget left to autovacuum: an index build holds the tables")
                return False
            return True
        # ANALYZE of a table left empty keeps its old sampled values: drop them first (superuser only,
        # which Urchin is on its own server)
        conn.execute("DELETE FROM pg_statistic WHERE starelid IN (SELECT relid FROM unnest(%s::regclass[]) AS t, "
                     "pg_partition_tree(t) UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT relid "
                     "FROM unnest(%s::regclass[]) AS t, pg_partition_tree(t)))", (present, present))
        conn.execute(f"VACUUM (FULL, ANALYZE) {tables}")
        conn.execute("VACUUM FULL pg_statistic")
        conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")
        return True
    finally:
        if not conn.closed and not conn.broken:
            conn.execute("RESET lock_timeout")
            conn.autocommit = False
