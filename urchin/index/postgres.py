"""The PostgreSQL backend: migrations at connect, COPY + idempotent upsert, and the legs' SQL.

psycopg, the driver, is reached through `pgdriver`. Vectors travel as pgvector text literals with
explicit casts, so no type registration is needed. Query-time settings (stated, see `QUERY_SETTINGS`) are set per
transaction.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any

from urchin.errors import DatabaseError, IndexBusyError
from urchin.event import format_timestamp
from urchin.index.base import MEMORY_KINDS, ChunkRow, ContextRow, Filter, LegHit, Tier, split_key
from urchin.index.files import FILES_SOURCE
from urchin.index.gather import gather
from urchin.index.pg_migrate import migrate as _migrate
from urchin.index.pg_vacuum import reclaim
from urchin.index.pgdriver import OUTAGE_ERRORS, REFUSED_ERRORS, Connection, Cursor, LockNotAvailable, connect, sql
from urchin.index.schema import GIN_INDEXES, TEAM_SQL, TRIGRAM_INDEX, TS_CONFIG
from urchin.search.cosine import NAMED_SOURCE_PRIOR
from urchin.search.query import AUDIT, hides_audit

__all__ = ["PostgresIndex", "OUTAGE_ERRORS", "REFUSED_ERRORS", "QUERY_SETTINGS", "GENERATION_MARK", "FORGOTTEN_MARK"]

# Rows of urchin_cursors beside a feeder's cursor (named `<journal> #<mark>`): the journal generation
# its offset refers to, and how many tombstones (`forget` records) it has applied. Not cursors:
# status leaves them out.
GENERATION_MARK = " #generation"
FORGOTTEN_MARK = " #forgotten"


# HNSW: ef_search 100 (recall ~0.95+ at 1M for 384-d), iterative scans so filtered queries still
# fill `limit` (relaxed order, re-sorted in SQL), bounded by max_scan_tuples.
QUERY_SETTINGS = {"hnsw.ef_search": "100", "hnsw.iterative_scan": "relaxed_order",
                  "hnsw.max_scan_tuples": "20000"}

_COLUMNS = ("chunk_id", "doc_id", "doc_type", "source", "kind", "workspace", "session", "title", "tags", "content",
            "occurred_at", "account", "device", "journal_offset", "path", "heading_path", "start_line", "end_line",
            "content_hash", "terms", "tvec")
_ROW_VALUES = attrgetter(*_COLUMNS)
_DEVICE, _ACCOUNT = _COLUMNS.index("device"), _COLUMNS.index("account")
# A leg that gathers its candidates in tiers reads each tier's last RECENT_DAYS first: when more chunks
# qualify than it may rank, the newer ones are the ones ranked (memory is asked about recent work).
RECENT_DAYS = 30
# A chunk from a source the question names ("what did Caroline say", "what did codex decide") counts
# 1 + NAMED_SOURCE_PRIOR, token-cosine's constant (chosen by leave-one-conversation-out CV on LoCoMo).
NORM_SAMPLE = 2000    # the newest chunks whose mean token-vector length pivots the length normalisation
NORM_DRIFT = 0.01     # ...read again once the index's chunk count has moved by this share (any move when small)
# One backfill at a time holds this session-level advisory lock while the GIN indexes are dropped.
_BULK_LOCK = "hashtext('urchin_bulk_feed')"
LOCK_WAIT = "100ms"               # the longest an inline catch-up waits for another feeder's lock
BULK_MAINTENANCE_MEM = "256MB"   # the GIN builds' accumulator: fewer, larger merges (measured at 20k-200k rows)

_FETCH = ("chunk_id", "doc_id", "doc_type", "source", "kind", "workspace", "session", "title", "tags", "content",
          "occurred_at", "journal_offset", "path", "heading_path", "start_line", "end_line", "device", "account",
          "content_hash")
# '' is the device of the rows a role with no feeder mapping (the owner, single user) writes with none
_FETCH_SQL = ", ".join("NULLIF({t}device, '')" if name == "device" else "{t}" + name for name in _FETCH)
# A chunk's key (base.chunk_key) from its row; `{t}` is the table's alias and a dot, or ''.
KEY_SQL = "(length({t}device) || ':' || {t}device || {t}chunk_id)"


def _build_indexes(conn: Connection[Any], names: Sequence[str]) -> None:
    """Build the GIN indexes `names` of urchin_chunks in one transaction, one bulk build each."""
    with conn.transaction():
        conn.execute(f"SET LOCAL maintenance_work_mem = '{BULK_MAINTENANCE_MEM}'")
        conn.execute("SET LOCAL max_parallel_maintenance_workers = 0")
        for name in names:
            conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON urchin_chunks " + GIN_INDEXES[name])
                         .format(sql.Identifier(name)))


def _lower_backend(conn: Connection[Any], niceness: int) -> None:
    """Run the server process behind `conn` at `niceness` (never raising its priority), one core only."""
    with conn.transaction():
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        conn.execute("SET max_parallel_maintenance_workers = 0")
        conn.execute("SET max_parallel_workers_per_gather = 0")
    pid = int(row[0]) if row else 0
    if pid <= 0:
        return
    try:
        if os.getpriority(os.PRIO_PROCESS, pid) < niceness:
            os.setpriority(os.PRIO_PROCESS, pid, niceness)
    except (AttributeError, OSError):   # not Linux, or another user's server: it runs as it is
        return
    # Each backend is its own session (setsid), so with the kernel's autogroup scheduling its nice value
    # only ranks it within its own group, which shares a core 50/50 with a query's: lower the group too.
    try:
        with open(f"/proc/{pid}/autogroup", "w") as group:
            group.write(str(niceness))
    except OSError:                     # no autogroup (off, or not Linux)
        pass


class PostgresIndex:
    """One connection (reopened after an outage); `url` is called on each (re)connect."""

    outage_errors = OUTAGE_ERRORS
    refused_errors = REFUSED_ERRORS

    def __init__(self, url: Callable[[], str] | str, connect_timeout: float = 5.0, niceness: int | None = None,
                 owned: bool = False) -> None:
        """`niceness`: the server process behind each connection is reniced to it (only for a server on
        this machine: the embedded one) and builds indexes without parallel workers, which would run at
        the server's own priority. For background work that must not slow the queries served beside it.
        `owned`: Urchin's own server (the embedded one), which it vacuums after each forget."""
        self._url = url if callable(url) else (lambda: url)
        self.owned = owned
        self._timeout = connect_timeout
        self._niceness = niceness
        self._conn: Connection[Any] | None = None
        self._months: set[tuple[int, int]] = set()   # monthly partitions of urchin_chunks known to exist
        self._bulk = False                            # this session holds the bulk lock (begin_bulk)
        self._twin: PostgresIndex | None = None
        self._norm_mean: tuple[float, int] | None = None   # (value, the chunk count it was read at)
        self._bound: tuple[str, str | None] | None = None   # a feeder role's (device, account), see `bound`

    # ---- connection ---------------------------------------------------------------------------
    @property
    def conn(self) -> Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = None
            conn = connect(self._url(), connect_timeout=max(1, int(self._timeout)), autocommit=False)
            try:
                _migrate(conn)
                with conn.transaction():
                    row = conn.execute("SELECT device, account FROM urchin_feeders WHERE role = current_user"
                                       ).fetchone()
                self._bound = (row[0], row[1]) if row else None
                if self._niceness:
                    _lower_backend(conn, self._niceness)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    @property
    def bound(self) -> tuple[str, str | None] | None:
        """(device, account) the connected role is a feeder of (`urchin db feeder`), or None (the owner,
        a superuser, a reader). A feeder's rows carry that account whatever the events say; row-level
        security refuses any other device or account."""
        _ = self.conn
        return self._bound

    @property
    def own_device(self) -> str:
        """The device of the rows this connection writes with no device of their own (workspace files):
        its feeder's device, else '' (the owner's)."""
        bound = self.bound
        return bound[0] if bound else ""

    def twin(self) -> PostgresIndex:
        """A second connection to the same database, kept: `search_context` runs its semantic leg on it
        while the keyword leg runs on this one (two server processes, two cores). Only one thread uses
        it at a time (the caller's, serialised like this connection)."""
        if self._twin is None:
            self._twin = PostgresIndex(self._url, self._timeout, self._niceness)
        return self._twin

    def reset(self) -> None:
        """Drop the connection (after an outage); the next call reconnects (the bulk lock goes with it)."""
        if self._twin is not None:
            self._twin.reset()
        self._months.clear()
        self._bulk = False
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a broken socket may raise anything on close
                pass
        self._conn = None

    def close(self) -> None:
        self.reset()

    # ---- feeding ------------------------------------------------------------------------------
    def cursor(self, device: str, journal: str) -> int:
        with self.conn.transaction():
            row = self.conn.execute("SELECT byte_offset FROM urchin_cursors WHERE device = %s AND journal = %s",
                                    (device, journal)).fetchone()
        return int(row[0]) if row else 0

    def write_batch(self, rows: Sequence[ChunkRow], device: str, journal: str, expected: int,
                    new_offset: int, wait: bool = True) -> int:
        """Upsert `rows` and move the cursor from `expected` to `new_offset` in one transaction.

        Returns how many rows were new. Replaying rows already stored changes nothing (ON CONFLICT DO
        NOTHING for events, which never change); term statistics count only new rows. With `wait` False
        (a query's inline catch-up), a lock another feeder holds (the same rows in its open batch, an
        index build) raises IndexBusyError after LOCK_WAIT instead of holding the query behind it.
        """
        conn = self.conn
        self._ensure_partitions(rows)
        try:
            return self._write_batch(conn, rows, device, journal, expected, new_offset, wait)
        except LockNotAvailable:
            raise IndexBusyError("the index is being written by another feeder; answering from it as it is") from None

    def _write_batch(self, conn: Connection[Any], rows: Sequence[ChunkRow], device: str, journal: str,
                     expected: int, new_offset: int, wait: bool) -> int:
        with conn.transaction():
            if not wait:
                conn.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
            inserted = 0
            if rows:
                with conn.cursor() as cur:
                    self._copy_feed(cur, rows, device)
                    cur.execute(f"INSERT INTO urchin_chunks ({', '.join(_COLUMNS)}) "
                                f"SELECT {', '.join(_COLUMNS)} FROM urchin_feed "
                                "ON CONFLICT (device, chunk_id, occurred_at) DO NOTHING")
                    inserted = max(cur.rowcount, 0)   # the new rows; counted by the owner's trigger (schema 7)
            moved = conn.execute(
                "INSERT INTO urchin_cursors (device, journal, byte_offset) VALUES (%s, %s, %s) "
                "ON CONFLICT (device, journal) DO UPDATE SET byte_offset = excluded.byte_offset, updated_at = now() "
                "WHERE urchin_cursors.byte_offset = %s", (device, journal, new_offset, expected)).rowcount
            if moved != 1:
                raise DatabaseError(f"index cursor for {device}:{journal} was moved by another feeder; "
                                    "re-reading it")
        return inserted

    def _copy_feed(self, cur: Cursor[Any], rows: Sequence[ChunkRow], device: str) -> None:
        """COPY `rows` into this session's feed table as `device`'s (a batch is its feeding device's rows),
        with a feeder role's bound account. Through a table: PostgreSQL refuses COPY into a table with
        row-level security; the INSERT from it is checked. (A COPY straight into urchin_chunks for the
        owner fed 1.2x faster but slowed queries during the feed: medians 0.93-0.95x -> 1.23-1.26x of
        idle, worst cells 1.6-1.8x -> 2.3-2.8x at 1M, one quiet sitting; bench/RESULTS.md round eighteen.)"""
        cur.execute("CREATE TEMP TABLE IF NOT EXISTS urchin_feed (LIKE urchin_chunks INCLUDING DEFAULTS)"
                    " ON COMMIT DELETE ROWS")
        account = self._bound[1] if self._bound else None
        with cur.copy(f"COPY urchin_feed ({', '.join(_COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                values = list(_ROW_VALUES(row))     # one C call (a generator over the names: 3x the time)
                values[_DEVICE] = device
                if self._bound:
                    values[_ACCOUNT] = account
                copy.write_row(values)

    def _ensure_partitions(self, rows: Sequence[ChunkRow]) -> None:
        """Create the monthly partitions `rows` need (each in its own short transaction, before the
        batch's: creating a partition locks the parent). Months known to exist are remembered."""
        months: dict[tuple[int, int], Any] = {}
        for row in rows:
            moment = row.occurred_at.astimezone(UTC)
            months.setdefault((moment.year, moment.month), moment)
        for month, moment in sorted(months.items()):
            if month not in self._months:
                with self.conn.transaction():
                    self.conn.execute("SELECT urchin_ensure_partition(%s)", (moment,))
                self._months.add(month)

    # ---- forgetting ----------------------------------------------------------------------------
    def marks(self, device: str, journal: str) -> tuple[int, int, int]:
        """(cursor, journal generation it refers to, tombstones applied) of one feeder."""
        with self.conn.transaction():
            found = dict(self.conn.execute(
                "SELECT journal, byte_offset FROM urchin_cursors WHERE device = %s AND journal = ANY(%s)",
                (device, [journal, journal + GENERATION_MARK, journal + FORGOTTEN_MARK])).fetchall())
        return (int(found.get(journal, 0)), int(found.get(journal + GENERATION_MARK, 0)),
                int(found.get(journal + FORGOTTEN_MARK, 0)))

    def journal_head(self, device: str, journal: str) -> tuple[int, int] | None:
        """(head, forget generation) recorded for one feeder's journal, or None (see Feeder)."""
        with self.conn.transaction():
            row = self.conn.execute("SELECT head, generation FROM urchin_journal_heads WHERE device = %s "
                                    "AND journal = %s", (device, journal)).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def set_journal_head(self, device: str, journal: str, head: int, generation: int) -> None:
        with self.conn.transaction():
            self.conn.execute("INSERT INTO urchin_journal_heads (device, journal, head, generation) "
                              "VALUES (%s, %s, %s, %s) ON CONFLICT (device, journal) DO UPDATE SET "
                              "head = excluded.head, generation = excluded.generation",
                              (device, journal, head, generation))

    def apply_forget(self, device: str, journal: str, hashes: Sequence[bytes], moves: tuple[int, int] | None,
                     generation: int, applied: int) -> int:
        """In one transaction: delete the event rows whose id hashes (sha256, first 16 bytes) are in
        `hashes`, move the cursor `moves` = (from, to) onto the rewritten journal, record the marks.
        Returns how many rows were deleted."""
        conn = self.conn
        with conn.transaction():
            rows = []
            if hashes:
                # vectors first: row-level security lets a feeder delete them while their chunk is there
                # this device's rows only: another device's event may carry the same id
                conn.execute("DELETE FROM urchin_embeddings e USING urchin_chunks c WHERE e.device = %s "
                             "AND c.device = e.device AND e.chunk_id = c.chunk_id AND c.doc_type = 'event' AND "
                             "substring(sha256(convert_to(c.chunk_id, 'UTF8')) from 1 for 16) = ANY(%s)",
                             (device, list(hashes)))
                rows = conn.execute(
                    "DELETE FROM urchin_chunks WHERE device = %s AND doc_type = 'event' AND "
                    "substring(sha256(convert_to(chunk_id, 'UTF8')) from 1 for 16) = ANY(%s) RETURNING 1",
                    (device, list(hashes))).fetchall()
            if moves is not None:
                moved = conn.execute("UPDATE urchin_cursors SET byte_offset = %s, updated_at = now() "
                                     "WHERE device = %s AND journal = %s AND byte_offset = %s",
                                     (moves[1], device, journal, moves[0])).rowcount
                if moved != 1 and moves[0] != 0:
                    raise DatabaseError(f"index cursor for {device}:{journal} was moved by another feeder; "
                                        "re-reading it")
            for mark, value in ((GENERATION_MARK, generation), (FORGOTTEN_MARK, applied)):
                conn.execute("INSERT INTO urchin_cursors (device, journal, byte_offset) VALUES (%s, %s, %s) "
                             "ON CONFLICT (device, journal) DO UPDATE SET byte_offset = "
                             "greatest(urchin_cursors.byte_offset, excluded.byte_offset), updated_at = now()",
                             (device, journal + mark, value))
        if rows and self.owned:     # the rows' bytes stay in the pages until VACUUM (see pg_vacuum)
            reclaim(conn, full=False)
        return len(rows)

    def purge(self) -> None:
        """Rewrite the forget's tables so no data file keeps a deleted row (see `pg_vacuum.reclaim`)."""
        reclaim(self.conn, full=True)

    def rebuild(self) -> None:
        """Empty the index and every cursor: each feeder (this device's and others') replays from 0."""
        with self.conn.transaction():
            self.conn.execute("TRUNCATE urchin_chunks, urchin_embeddings, urchin_terms, urchin_stats, urchin_cursors, "
                              "urchin_files, urchin_journal_heads")

    # ---- backfills: GIN indexes built once at the end (issue 16) --------------------------------
    def begin_bulk(self, expected_rows: int) -> bool:
        """Drop the GIN indexes of urchin_chunks for a backfill of about `expected_rows` rows, when that
        pays and is safe: this role owns the table (a feeder role never does), no other backfill holds
        the bulk lock, the index holds fewer rows than are coming, and no query holds the table for
        long (lock_timeout). The session keeps the bulk lock until `restore_indexes`. Queries meanwhile
        give the same answers, by scanning. Returns whether the indexes were dropped."""
        conn = self.conn
        with conn.transaction():
            row = conn.execute("SELECT pg_has_role(c.relowner, 'USAGE'), (SELECT sum(value) FROM urchin_stats "
                               "WHERE key = 'chunks') FROM pg_class c WHERE c.oid = 'urchin_chunks'::regclass"
                               ).fetchone()
            if row is None or not row[0] or int(row[1] or 0) >= expected_rows:
                return False
            if not conn.execute(f"SELECT pg_try_advisory_lock({_BULK_LOCK})").fetchone()[0]:  # type: ignore[index]
                return False
        try:
            with conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '2s'")
                for name in GIN_INDEXES:
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
        except LockNotAvailable:
            self._unlock_bulk()
            return False
        except BaseException:
            self.reset()          # the session (and its lock) goes; the indexes stay as they were
            raise
        self._bulk = True
        return True

    def restore_indexes(self) -> list[str]:
        """Build the GIN indexes that are missing (a backfill's end, or one that died), one bulk build
        each; only the table's owner can, and not while another session's backfill holds the bulk lock.
        The trigram index only on a team database (schema.TEAM_SQL). Returns the names built."""
        conn = self.conn
        with conn.transaction():
            missing = [r[0] for r in conn.execute("SELECT n FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NULL "
                                                  f"AND (n <> %s OR {TEAM_SQL})",
                                                  (list(GIN_INDEXES), TRIGRAM_INDEX)).fetchall()]
            if not missing:
                if self._bulk:
                    self._unlock_bulk()
                return []
            owner = conn.execute("SELECT pg_has_role(relowner, 'USAGE') FROM pg_class "
                                 "WHERE oid = 'urchin_chunks'::regclass").fetchone()
            if not (owner and owner[0]):
                return []
            if not self._bulk and not conn.execute(f"SELECT pg_try_advisory_lock({_BULK_LOCK})").fetchone()[0]:  # type: ignore[index]
                return []     # another session is backfilling: it builds them at its end
            self._bulk = True
        # Two sessions, each building its share one index at a time: the trigram index (two thirds of
        # the work) on this one, the others on a second beside it, so both cores build. No parallel
        # workers: they cost half as much CPU again, and run at the server's priority, not the feed's.
        mine = [n for n in missing if n == TRIGRAM_INDEX] or missing[:1]
        theirs = [n for n in missing if n not in mine]
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="urchin-gin") as pool:
                beside = pool.submit(_build_indexes, self.twin().conn, theirs) if theirs else None
                try:
                    _build_indexes(conn, mine)
                finally:
                    if beside is not None:
                        beside.result()
        finally:
            self._unlock_bulk()
        return missing

    def _unlock_bulk(self) -> None:
        self._bulk = False
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            with self._conn.transaction():
                self._conn.execute(f"SELECT pg_advisory_unlock({_BULK_LOCK})")

    # ---- workspace files (issue 9): each device's own catalogue (`own_device`) ---------------------
    def file_catalog(self, root: str) -> dict[str, tuple[str, int, float]]:
        with self.conn.transaction():
            # a failed file reports size -1, so the next walk tries it again
            rows = self.conn.execute("SELECT path, hash, CASE WHEN state = 'failed' THEN -1 ELSE size END, "
                                     "extract(epoch FROM mtime)::float8 FROM urchin_files WHERE device = %s "
                                     "AND root = %s", (self.own_device, root)).fetchall()
        return {r[0]: (r[1], int(r[2]), float(r[3])) for r in rows}

    def file_roots(self) -> list[str]:
        with self.conn.transaction():
            return [r[0] for r in self.conn.execute("SELECT DISTINCT root FROM urchin_files WHERE device = %s",
                                                    (self.own_device,)).fetchall()]

    def files(self, state: str | None = None, roots: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """This device's catalog rows (optionally one state, some roots), largest last so a byte budget
        reads many."""
        with self.conn.transaction():
            rows = self.conn.execute(
                "SELECT root, path, size, mtime, hash, state, error FROM urchin_files WHERE device = %(device)s "
                "AND (%(state)s::text IS NULL OR state = %(state)s) "
                "AND (%(roots)s::text[] IS NULL OR root = ANY(%(roots)s)) ORDER BY size, root, path",
                {"state": state, "roots": list(roots) if roots is not None else None,
                 "device": self.own_device}).fetchall()
        return [dict(zip(("root", "path", "size", "mtime", "hash", "state", "error"), r, strict=True)) for r in rows]

    def replace_file(self, entry: Any, rows: Sequence[ChunkRow]) -> None:
        """One transaction: the file's old chunks out (term statistics decremented), new ones in, catalog row."""

        doc_id = f"{entry.root}/{entry.path}"
        conn = self.conn
        device = self.own_device     # a file chunk is the feeding role's device's ('' for the owner)
        self._ensure_partitions(rows)
        with conn.transaction():
            self._delete_docs([doc_id])
            if rows:
                with conn.cursor() as cur:
                    self._copy_feed(cur, rows, device)
                    cur.execute(f"INSERT INTO urchin_chunks ({', '.join(_COLUMNS)}) "
                                f"SELECT {', '.join(_COLUMNS)} FROM urchin_feed")
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
        device = self.own_device
        with self.conn.transaction():
            if paths is None:
                gone = [r[0] for r in self.conn.execute("DELETE FROM urchin_files WHERE device = %s AND root = %s "
                                                        "RETURNING path", (device, root)).fetchall()]
            else:
                gone = [r[0] for r in self.conn.execute(
                    "DELETE FROM urchin_files WHERE device = %s AND root = %s AND path = ANY(%s) RETURNING path",
                    (device, root, list(paths))).fetchall()]
            self._delete_docs([f"{root}/{p}" for p in gone])
        return len(gone)

    def _delete_docs(self, doc_ids: Sequence[str]) -> None:
        """Delete this device's chunks of the files `doc_ids` (another device may hold the same paths)."""
        if not doc_ids:
            return
        device = self.own_device
        self.conn.execute("DELETE FROM urchin_embeddings e USING urchin_chunks c WHERE e.device = %s AND "
                          "c.device = e.device AND e.chunk_id = c.chunk_id AND c.doc_id = ANY(%s) "
                          "AND c.doc_type = 'file'", (device, list(doc_ids)))
        self.conn.execute("DELETE FROM urchin_chunks WHERE device = %s AND doc_id = ANY(%s) AND doc_type = 'file'",
                          (device, list(doc_ids)))

    # ---- embeddings ---------------------------------------------------------------------------
    def ensure_model(self, model: str, dim: int) -> None:
        name = "urchin_emb_hnsw_" + format(abs(hash_text(model)), "x")
        with self.conn.transaction():
            self.conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON urchin_embeddings USING hnsw "
                                      "((embedding::halfvec({})) halfvec_cosine_ops) WHERE model = {}").format(
                sql.Identifier(name), sql.Literal(int(dim)), sql.Literal(model)))

    def pending_embeddings(self, model: str, limit: int, device: str) -> list[tuple[str, str, bool, datetime]]:
        """This device's rows without a vector for `model`, newest first: (chunk key, the text to embed,
        whether it is an event, when it occurred). `device` feeds the events; the files are `own_device`'s.
        The text is what the vector cache embeds an event as (the cache holds this journal's events)."""
        with self.conn.transaction():
            rows = self.conn.execute(
                f"SELECT {KEY_SQL.format(t='c.')}, coalesce(c.title || E'\\n', '') || c.content, "
                "c.doc_type = 'event', c.occurred_at FROM urchin_chunks c "
                "WHERE ((c.device = %s AND c.doc_type = 'event') OR (c.device = %s AND c.doc_type = 'file')) "
                "AND NOT EXISTS (SELECT 1 FROM urchin_embeddings e WHERE e.device = c.device "
                "AND e.chunk_id = c.chunk_id AND e.model = %s) ORDER BY c.occurred_at DESC LIMIT %s",
                (device, self.own_device, model, limit)).fetchall()
        return [(r[0], r[1], bool(r[2]), r[3]) for r in rows]

    def write_embeddings(self, model: str, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        """Store vectors by chunk key (`pending_embeddings`)."""
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany("INSERT INTO urchin_embeddings (device, chunk_id, model, embedding) "
                            "VALUES (%s, %s, %s, %s::halfvec) ON CONFLICT (device, chunk_id, model) "
                            "DO UPDATE SET embedding = excluded.embedding",
                            [(*split_key(key), model, _dense(vec)) for key, vec in items])

    # ---- querying -----------------------------------------------------------------------------
    def term_stats(self, terms: Sequence[int]) -> tuple[dict[int, int], int]:
        with self.conn.transaction():
            # kept per device by the owner's trigger from the chunk rows (schema 7) and summed here, each
            # device's df clamped to [0, its chunk count]: whatever a row says, one device's numbers can
            # only lower another's terms' weight as much as that many real chunks of its own would
            rows = self.conn.execute("SELECT t.term, sum(least(greatest(t.df, 0), greatest(s.value, 0))) "
                                     "FROM urchin_terms t JOIN urchin_stats s ON s.device = t.device AND "
                                     "s.key = 'chunks' WHERE t.term = ANY(%s) GROUP BY t.term",
                                     (list(terms),)).fetchall()
            n = self.conn.execute("SELECT sum(greatest(value, 0)) FROM urchin_stats WHERE key = 'chunks'").fetchone()
        return {int(t): int(d) for t, d in rows}, int(n[0]) if n and n[0] is not None else 0

    def keyword(self, words: Sequence[str], constraints: str | None, flt: Filter, limit: int,
                context_turns: int = 0, every: str | None = None, tiers: Sequence[Tier] = (),
                budget: int = 0, prior: float = 0.0, named: Sequence[str] = ()) -> list[ContextRow]:
        """Full-text leg: any of `words` (OR, ranked) AND the websearch `constraints` (phrases, -exclusions);
        a chunk holding `every` word (to_tsquery syntax) ranks above any that holds only some. With
        `tiers`, only the first `budget` chunks they gather are ranked (see `_leg`)."""
        parts = []
        args: dict[str, Any] = {"cfg": TS_CONFIG}
        if words:
            parts.append("to_tsquery(%(cfg)s::regconfig, %(words)s)")
            args["words"] = " | ".join(words)
        if constraints:
            parts.append("websearch_to_tsquery(%(cfg)s::regconfig, %(constraints)s)")
            args["constraints"] = constraints
        if not parts:
            return []
        score = "ts_rank({t}tsv, q)"
        every_q = "NULL::tsquery"
        if every and words:
            every_q = "to_tsquery(%(cfg)s::regconfig, %(every)s)"
            args["every"] = every
            score = "ts_rank({t}tsv, q) + CASE WHEN {t}tsv @@ qa THEN 1 ELSE 0 END"
        query = f"(SELECT {' && '.join(parts)} AS q, {every_q} AS qa) AS qq"
        # With phrases or -exclusions, a neighbour must satisfy them too: context never smuggles in a
        # turn the query excluded. Without, any neighbour may carry context.
        near = " AND y.tsv @@ q" if constraints else ""
        steps = []
        for i, tier in enumerate(tiers):
            args[f"tier{i}"] = (" & " if tier.every else " | ").join(tier.items)
            steps.append(f"tsv @@ to_tsquery(%(cfg)s::regconfig, %(tier{i})s)")
        return self._leg(query, "tsv @@ q", score, flt, limit, context_turns, args, near, steps, budget, prior,
                         named, reads="tsv")

    def known_sources(self) -> list[str]:
        """Every source the index holds (a loose index scan: one probe per distinct source)."""
        with self.conn.transaction():
            rows = self.conn.execute(
                "WITH RECURSIVE s(v) AS (SELECT min(source) FROM urchin_chunks UNION ALL "
                "SELECT (SELECT min(source) FROM urchin_chunks WHERE source > s.v) FROM s WHERE s.v IS NOT NULL) "
                "SELECT v FROM s WHERE v IS NOT NULL").fetchall()
        return [r[0] for r in rows]

    def session_heads(self, sessions: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each session's title (its first event's that has one), first prompt (its first conversation
        event, cut) and last event time: textrawl's conversation results name their session by these."""
        with self.conn.transaction():
            rows = self.conn.execute(
                "SELECT s, (SELECT title FROM urchin_chunks WHERE session = s AND doc_type = 'event' AND title "
                "IS NOT NULL ORDER BY occurred_at, chunk_id LIMIT 1), (SELECT left(content, 400) FROM urchin_chunks "
                "WHERE session = s AND doc_type = 'event' AND kind = 'conversation' ORDER BY occurred_at, chunk_id "
                "LIMIT 1), (SELECT max(occurred_at) FROM urchin_chunks WHERE session = s AND doc_type = 'event') "
                "FROM unnest(%s::text[]) AS s", (list(sessions),)).fetchall()
        return {r[0]: {"title": r[1], "firstPrompt": r[2], "updatedAt": format_timestamp(r[3]) if r[3] else None}
                for r in rows}

    def document_chunks(self, doc_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """A workspace file as this device indexed it: its catalog row (size, hash) and its chunks in line
        order, read by one statement so both are of one version (no chunks: not retained, e.g. cataloged
        over the size cap)."""
        root, _, path = doc_id.partition("/")
        with self.conn.transaction():
            rows = self.conn.execute(
                "SELECT c.chunk_id, c.content, c.start_line, c.end_line, c.heading_path, c.content_hash, "
                "c.occurred_at, f.size, f.hash FROM urchin_chunks c LEFT JOIN urchin_files f ON f.device = c.device "
                "AND f.root = %s AND f.path = %s WHERE c.device = %s AND c.doc_id = %s AND c.doc_type = 'file' "
                "ORDER BY c.start_line, c.chunk_id", (root, path, self.own_device, doc_id)).fetchall()
        names = ("chunk_id", "content", "start_line", "end_line", "heading_path", "content_hash", "occurred_at")
        catalog = {"size": rows[0][7], "hash": rows[0][8]} if rows and rows[0][8] is not None else None
        return catalog, [dict(zip(names, r[:7], strict=True)) for r in rows]

    def unmatched(self, flt: Filter) -> list[str]:
        """Warnings for each source, kind or workspace filter that no indexed chunk carries."""
        probes = ([("source", "sources", v) for v in flt.sources] + [("kind", "kinds", v) for v in flt.kinds]
                  + ([("workspace", "workspace", flt.workspace)] if flt.workspace else []))
        out = []
        with self.conn.transaction():
            for column, name, value in probes:
                row = self.conn.execute(f"SELECT EXISTS (SELECT 1 FROM urchin_chunks WHERE {column} = %s)",
                                        (value,)).fetchone()
                if row is not None and not row[0]:
                    out.append(f"{name}: nothing indexed has {column} {value!r}")
        return out

    def held(self, chunk_ids: Sequence[str], terms: Sequence[int]) -> dict[str, set[int]]:
        """Which of `terms` each chunk holds, by key (the evidence a score is made of)."""
        if not chunk_ids or not terms:
            return {}
        devices, ids = _split_keys(chunk_ids)
        with self.conn.transaction():
            rows = self.conn.execute(
                f"SELECT {KEY_SQL.format(t='c.')}, ARRAY(SELECT x.t FROM unnest(%(t)s::integer[]) AS x(t) "
                "WHERE x.t = ANY(c.terms)) FROM urchin_chunks c "
                "JOIN unnest(%(d)s::text[], %(ids)s::text[]) AS k(device, chunk_id) "
                "ON c.device = k.device AND c.chunk_id = k.chunk_id",
                {"t": list(terms), "d": devices, "ids": ids}).fetchall()
        return {r[0]: set(r[1]) for r in rows}

    def sparse(self, vector: str, terms: Sequence[int], flt: Filter, limit: int,
               context_turns: int = 0, tiers: Sequence[Tier] = (), budget: int = 0,
               pivot: tuple[float, float] = (0.0, 1.0), prior: float = 0.0,
               named: Sequence[str] = ()) -> list[ContextRow]:
        """Token-cosine leg over the chunks sharing a term (GIN on `terms`); with `tiers`, over the first
        `budget` chunks they gather (see `_leg`). A chunk's score is its inner product with the query
        over the query's length times `a + b x its own length`, `pivot` = (a, b): (0, 1) is the cosine."""
        if not terms and not tiers:
            return []
        args: dict[str, Any] = {"v": vector, "terms": list(terms), "pa": float(pivot[0]), "pb": float(pivot[1])}
        steps = []
        for i, tier in enumerate(tiers):
            args[f"tier{i}"] = list(tier.items)
            steps.append(f"terms {'@>' if tier.every else '&&'} %(tier{i})s::integer[]")
        score = "(-({t}tvec <#> q) / greatest(qn * (%(pa)s + %(pb)s * l2_norm({t}tvec)), 1e-9))"
        return self._leg("(SELECT %(v)s::sparsevec AS q, l2_norm(%(v)s::sparsevec) AS qn) AS qq",
                         "terms && %(terms)s::integer[]", score, flt, limit, context_turns, args, "", steps, budget,
                         prior, named, reads="tvec")

    def norm_mean(self, chunks: int) -> float:
        """The mean l2 norm of the newest NORM_SAMPLE chunks' token vectors (1.0 when there are none): the
        pivot of the token-cosine leg's length normalisation. `chunks` is the index's chunk count as the
        question read it (`term_stats`): the mean is read again when that has moved (by NORM_DRIFT, or at
        all below NORM_SAMPLE / NORM_DRIFT chunks), so every connection ranks alike and a feed in
        between is seen at once."""
        cached = self._norm_mean
        small = chunks < NORM_SAMPLE / NORM_DRIFT
        if cached is None or (cached[1] != chunks and (small or abs(chunks - cached[1]) > NORM_DRIFT * cached[1])):
            with self.conn.transaction():
                row = self.conn.execute("SELECT avg(l2_norm(tvec)) FROM (SELECT tvec FROM urchin_chunks "
                                        "ORDER BY occurred_at DESC, chunk_id LIMIT %s) AS s", (NORM_SAMPLE,)).fetchone()
            value = float(row[0]) if row and row[0] else 1.0
            self._norm_mean = cached = (value, chunks)
        return cached[0]

    def _leg(self, source: str, match: str, score: str, flt: Filter, limit: int, turns: int,
             args: dict[str, Any], near: str = "", steps: Sequence[str] = (), budget: int = 0,
             prior: float = 0.0, named: Sequence[str] = (), reads: str = "tsv") -> list[ContextRow]:
        """Top `limit` by `score`, plus each one's `turns` session neighbours on either side (with their
        own score, filters applied) as rows (anchor, chunk, distance, score, kind, occurred_at).

        With `steps` (conditions, best first, each holding the one before), the candidates are not every
        chunk `match`ing but the first `budget` that the steps gather in order, each step's last
        RECENT_DAYS first: a UNION ALL under one LIMIT, so PostgreSQL stops reading (and scoring) once the
        budget is full (see `gather`, which reads two steps with one scan). The parts are disjoint (a
        step leaves out what the step before it held, and the older half what the recent half held), so
        the budget counts distinct chunks. `reads`: the column `score` reads (tsv, tvec).

        Priors multiply a chunk's total after its neighbours' scores are added (as token-cosine
        multiplies its smoothed scores): each row carries its factor, 1 + `prior` for a memory times
        1 + NAMED_SOURCE_PRIOR when its source is one of `named` (the sources the question names); the
        top `limit` are chosen by score times factor. A neighbour of a named speaker's turn gets the
        context of that turn's plain score, not of its boosted one."""
        where, fargs = _where(flt)
        args = {**args, **fargs, "limit": limit, "turns": turns}
        factor = "1.0"
        if prior > 0:
            args.update({"memory_kinds": list(MEMORY_KINDS), "prior": 1.0 + prior})
            factor = "CASE WHEN {t}kind = ANY(%(memory_kinds)s) THEN %(prior)s ELSE 1 END"
        if named and NAMED_SOURCE_PRIOR > 0:
            args.update({"named_sources": list(named), "source_prior": 1.0 + NAMED_SOURCE_PRIOR})
            factor += " * CASE WHEN {t}source = ANY(%(named_sources)s) THEN %(source_prior)s ELSE 1 END"
        ctes: list[str] = []
        if steps:
            args["budget"] = budget
            ctes, ranked = gather(steps, score, factor, source, where, reads)
        else:
            ranked = (f"SELECT device, chunk_id, session, occurred_at, kind, {score.format(t='')} AS s, "
                      f"{factor.format(t='')} AS f FROM urchin_chunks, {source} WHERE {match} {where}")
        base = (f"WITH {''.join(cte + ', ' for cte in ctes)}c AS MATERIALIZED (SELECT * FROM ({ranked}) AS r "
                f"ORDER BY s * f DESC, occurred_at DESC, chunk_id LIMIT %(limit)s) "
                f"SELECT {KEY_SQL.format(t='')} AS k, {KEY_SQL.format(t='')}, 0, s, kind, occurred_at, f FROM c")
        if turns > 0:
            ywhere, _ = _where(flt, alias="y.")
            # a session's turns are its device's: another device's rows never join them as context
            side = (f"(SELECT {KEY_SQL.format(t='y.')} AS k, {{sign}} row_number() OVER (ORDER BY y.occurred_at "
                    f"{{dir}}) AS dist, {score.format(t='y.')} AS s, y.kind, y.occurred_at, "
                    f"{factor.format(t='y.')} AS f FROM urchin_chunks y WHERE y.session = c.session "
                    "AND y.device = c.device AND y.occurred_at {op} c.occurred_at "
                    + ywhere + near + " ORDER BY y.occurred_at {dir} LIMIT %(turns)s)")
            base += (f" UNION ALL SELECT {KEY_SQL.format(t='c.')}, x.k, x.dist, x.s, x.kind, x.occurred_at, x.f "
                     f"FROM c, {source}, LATERAL ({side.format(sign='-', dir='DESC', op='<')} UNION ALL "
                     f"{side.format(sign='', dir='ASC', op='>')}) AS x WHERE c.session IS NOT NULL")
        with self.conn.transaction():
            if steps:
                # The window's edge as a value of this transaction's now(): the planner then plans only
                # the months each window reaches (with `now() - interval` it planned every month). And no
                # parallel workers: the budget takes the first rows of each part in the order read, which
                # must be the heap's, not whichever worker answers first (and the two legs already run at once).
                # Nor a prepared statement: after five runs PostgreSQL may keep one generic plan for every
                # question, which reads the months in another order (and took three times as long).
                row = self.conn.execute("SELECT now() - %s, set_config('max_parallel_workers_per_gather', '0', true)",
                                        (timedelta(days=RECENT_DAYS),)).fetchone()
                args["cutoff"] = row[0] if row else None
            rows = self.conn.execute(base, args, prepare=False if steps else None).fetchall()
        return [ContextRow(r[0], r[1], int(r[2]), float(r[3]), r[4], r[5], float(r[6])) for r in rows]

    def dense(self, model: str, vector: Sequence[float], flt: Filter, limit: int,
              dim: int | None = None) -> list[LegHit]:
        """Embedding leg: HNSW over this model's vectors only; relaxed iterative scan, re-sorted exactly."""
        dim = dim or len(vector)
        where, args = _where(flt, alias="c.")
        args.update({"v": _dense(vector), "model": model, "limit": limit})
        query = (f"WITH hits AS MATERIALIZED (SELECT {KEY_SQL.format(t='c.')} AS k, c.kind, c.occurred_at, "
                 f"e.embedding::halfvec({dim}) <=> %(v)s::halfvec({dim}) AS distance "
                 f"FROM urchin_embeddings e JOIN urchin_chunks c ON c.device = e.device AND c.chunk_id = e.chunk_id "
                 f"WHERE e.model = %(model)s {where} "
                 f"ORDER BY e.embedding::halfvec({dim}) <=> %(v)s::halfvec({dim}) LIMIT %(limit)s) "
                 "SELECT k, 1 - distance, kind, occurred_at FROM hits "
                 "ORDER BY distance, occurred_at DESC, k")
        with self.conn.transaction():
            for name, value in QUERY_SETTINGS.items():
                self.conn.execute("SELECT set_config(%s, %s, true)", (name, value))
            rows = self.conn.execute(query, args).fetchall()
        return [LegHit(r[0], float(r[1]), r[2], r[3]) for r in rows]

    def literal(self, query: str, since: datetime | None, limit: int, filters: dict[str, str | None]
                ) -> list[dict[str, Any]]:
        """Events whose content holds `query` (ILIKE, the pg_trgm GIN index), newest first: the team's
        `urchin search` over every device's rows. `filters` are exact matches (source, workspace, ...)."""
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where = ["doc_type = 'event'", "content ILIKE %(p)s"]
        args: dict[str, Any] = {"p": pattern, "since": since, "limit": limit}
        if since is not None:
            where.append("occurred_at >= %(since)s")
        for name, value in filters.items():
            if value is not None:
                where.append(f"{name} = %(f_{name})s")
                args[f"f_{name}"] = value
        with self.conn.transaction():
            rows = self.conn.execute(f"SELECT {_FETCH_SQL.format(t='')} FROM urchin_chunks WHERE {' AND '.join(where)} "
                                     "ORDER BY occurred_at DESC, chunk_id DESC LIMIT %(limit)s", args).fetchall()
        return [dict(zip(_FETCH, r, strict=True)) for r in rows]

    def fetch(self, chunk_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The rows of chunk keys (`chunk_key`), by key."""
        devices, ids = _split_keys(chunk_ids)
        with self.conn.transaction():
            rows = self.conn.execute(f"SELECT {KEY_SQL.format(t='c.')}, {_FETCH_SQL.format(t='c.')} "
                                     "FROM urchin_chunks c JOIN unnest(%s::text[], %s::text[]) AS k(device, chunk_id) "
                                     "ON c.device = k.device AND c.chunk_id = k.chunk_id", (devices, ids)).fetchall()
        return {r[0]: dict(zip(_FETCH, r[1:], strict=True)) for r in rows}

    def status(self, model: str | None = None) -> dict[str, Any]:
        with self.conn.transaction():
            chunks = self.conn.execute("SELECT count(*) FROM urchin_chunks").fetchone()
            cursors = self.conn.execute("SELECT device, journal, byte_offset, updated_at FROM urchin_cursors "
                                        "WHERE journal !~ ' #[a-z]+$' ORDER BY device, journal").fetchall()
            version = self.conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            schema = self.conn.execute("SELECT max(version) FROM urchin_migrations").fetchone()
            files = self.conn.execute("SELECT root, state, count(*) FROM urchin_files GROUP BY root, state").fetchall()
            pending = None
            if model:
                pending = self.conn.execute(
                    "SELECT count(*) FROM urchin_chunks c WHERE NOT EXISTS (SELECT 1 FROM urchin_embeddings e "
                    "WHERE e.device = c.device AND e.chunk_id = c.chunk_id AND e.model = %s)", (model,)).fetchone()
        out: dict[str, Any] = {
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


def hash_text(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode("utf-8"))


def _split_keys(keys: Sequence[str]) -> tuple[list[str], list[str]]:
    """Chunk keys as two parallel arrays (devices, chunk ids), for a join on both."""
    pairs = [split_key(key) for key in keys]
    return [d for d, _ in pairs], [c for _, c in pairs]


def _dense(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.6g}" for x in vector) + "]"


def _where(flt: Filter, alias: str = "") -> tuple[str, dict[str, Any]]:
    """` AND ...` for every filter in play; the same clause goes inside every leg."""
    clauses: list[str] = []
    args: dict[str, Any] = {}
    if flt.sources or flt.roots:
        # a root named as a source is its files: source files, workspace the root
        either = [f"{alias}source = ANY(%(f_sources)s)"] if flt.sources else []
        either += [f"({alias}source = %(f_files)s AND {alias}workspace = ANY(%(f_roots)s))"] if flt.roots else []
        clauses.append("(" + " OR ".join(either) + ")")
        args.update(f_sources=list(flt.sources), f_files=FILES_SOURCE, f_roots=list(flt.roots))
    if flt.kinds:
        clauses.append(f"{alias}kind = ANY(%(f_kinds)s)")
        args["f_kinds"] = list(flt.kinds)
    if flt.workspace is not None:
        clauses.append(f"{alias}workspace = %(f_workspace)s")
        args["f_workspace"] = flt.workspace
    if flt.session is not None:
        clauses.append(f"{alias}session = %(f_session)s")
        args["f_session"] = flt.session
    if flt.tags:
        clauses.append(f"{alias}tags @> %(f_tags)s::text[]")
        args["f_tags"] = list(flt.tags)
    if flt.since is not None:
        clauses.append(f"{alias}occurred_at >= %(f_since)s")
        args["f_since"] = flt.since
    if flt.until is not None:
        clauses.append(f"{alias}occurred_at < %(f_until)s")
        args["f_until"] = flt.until
    for name in ("devices", "accounts"):
        if getattr(flt, name):
            clauses.append(f"{alias}{name[:-1]} = ANY(%(f_{name})s)")
            args[f"f_{name}"] = list(getattr(flt, name))
    if hides_audit(flt.sources, flt.kinds, flt.session):
        clauses.append(f"NOT ({alias}source = %(f_audit_source)s AND {alias}kind = %(f_audit_kind)s)")
        args.update(f_audit_source=AUDIT[0], f_audit_kind=AUDIT[1])
    if not flt.memories:
        clauses.append(f"{alias}kind <> ALL(%(f_memory_kinds)s)")
        args["f_memory_kinds"] = list(MEMORY_KINDS)
    elif not flt.conversations:
        clauses.append(f"{alias}kind = ANY(%(f_memory_kinds)s)")
        args["f_memory_kinds"] = list(MEMORY_KINDS)
    if flt.constraint:
        # phrases and -exclusions filter the candidates of every leg (and their context neighbours)
        clauses.append(f"{alias}tsv @@ websearch_to_tsquery('{TS_CONFIG}'::regconfig, %(f_constraint)s)")
        args["f_constraint"] = flt.constraint
    return "".join(f" AND {c}" for c in clauses), args
