"""What the feeder writes to PostgreSQL: batches of chunk rows (COPY + idempotent upsert) with the
cursor moved in the same transaction, forgetting (rows out, marks recorded), and a backfill's GIN
indexes dropped at its start and built once at its end (issue 16).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter
from typing import Any

from urchin.errors import DatabaseError, IndexBusyError
from urchin.hybrid.base import UNIT_ROWS, ChunkRow, GaveWay
from urchin.hybrid.pg_link import PgLink, pause_autovacuum
from urchin.hybrid.pg_vacuum import reclaim
from urchin.hybrid.pgdriver import Connection, Cursor, LockNotAvailable, QueryCanceled, sql
from urchin.hybrid.schema import GIN_INDEXES, TEAM_SQL, TRIGRAM_INDEX

__all__ = ["PgWriter", "COLUMNS", "GENERATION_MARK", "FORGOTTEN_MARK", "copy_feed"]

# Rows of urchin_cursors beside a feeder's cursor (named `<journal> #<mark>`): the journal generation
# its offset refers to, and how many tombstones (`forget` records) it has applied. Not cursors:
# status leaves them out.
GENERATION_MARK = " #generation"
FORGOTTEN_MARK = " #forgotten"

COLUMNS = ("chunk_id", "doc_id", "doc_type", "source", "kind", "workspace", "session", "title", "tags", "content",
           "occurred_at", "account", "device", "journal_offset", "path", "heading_path", "start_line", "end_line",
           "content_hash", "terms", "tvec")
_ROW_VALUES = attrgetter(*COLUMNS)
_DEVICE, _ACCOUNT = COLUMNS.index("device"), COLUMNS.index("account")
# One backfill at a time holds this session-level advisory lock while the GIN indexes are dropped.
_BULK_LOCK = "hashtext('urchin_bulk_feed')"
LOCK_WAIT = "100ms"               # the longest an inline catch-up waits for another feeder's lock
BULK_MAINTENANCE_MEM = "256MB"   # the GIN builds' accumulator: fewer, larger merges (measured at 20k-200k rows)
# A backfill also turns autovacuum off on urchin_chunks' partitions (PgLink.ensure_partitions on those it
# creates) and VACUUMs them once at its end, in its own lowered session: the server's autovacuum workers
# run at its priority (nice 0) and VACUUM ANALYZEd each growing month every minute (autovacuum_naptime),
# a second of CPU at a time no giving way could pause, beside the queries.
PARTITIONS_SQL = ("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = "
                  "'urchin_chunks'::regclass")
PAUSED_SQL = PARTITIONS_SQL + " AND 'autovacuum_enabled=false' = ANY(coalesce(c.reloptions, '{}'))"


def copy_feed(cur: Cursor[Any], rows: Sequence[ChunkRow], device: str, bound: tuple[str, str | None] | None,
              between: Callable[[], object] | None = None) -> None:
    """COPY `rows` into this session's feed table as `device`'s (a batch is its feeding device's rows),
    with a feeder role's (`bound`) account. Through a table: PostgreSQL refuses COPY into a table with
    row-level security; the INSERT from it is checked. (A COPY straight into urchin_chunks for the
    owner fed 1.2x faster but slowed queries during the feed: medians 0.93-0.95x -> 1.23-1.26x of
    idle, worst cells 1.6-1.8x -> 2.3-2.8x at 1M, one quiet sitting; bench/RESULTS.md round eighteen.)
    `between` is called before each UNIT_ROWS rows: the server waits for the rest of the COPY meanwhile."""
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS urchin_feed (LIKE urchin_chunks INCLUDING DEFAULTS)"
                " ON COMMIT DELETE ROWS")
    account = bound[1] if bound else None
    with cur.copy(f"COPY urchin_feed ({', '.join(COLUMNS)}) FROM STDIN") as copy:
        for i, row in enumerate(rows):
            if between is not None and not i % UNIT_ROWS:
                between()
            values = list(_ROW_VALUES(row))     # one C call (a generator over the names: 3x the time)
            values[_DEVICE] = device
            if bound:
                values[_ACCOUNT] = account
            copy.write_row(values)


def _build_indexes(conn: Connection[Any], names: Sequence[str]) -> None:
    """Build the GIN indexes `names` of urchin_chunks in one transaction, one bulk build each."""
    with conn.transaction():
        conn.execute(f"SET LOCAL maintenance_work_mem = '{BULK_MAINTENANCE_MEM}'")
        conn.execute("SET LOCAL max_parallel_maintenance_workers = 0")
        for name in names:
            conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON urchin_chunks " + GIN_INDEXES[name])
                         .format(sql.Identifier(name)))


def _resume_autovacuum(conn: Connection[Any]) -> None:
    """After a backfill: VACUUM (ANALYZE) urchin_chunks here (the caller's lowered session), then
    autovacuum on again for the partitions it was turned off for (see PAUSED_SQL)."""
    conn.autocommit = True      # VACUUM cannot run in a transaction
    try:
        conn.execute("VACUUM (ANALYZE) urchin_chunks")
    finally:
        conn.autocommit = False
    with conn.transaction():
        for (name,) in conn.execute(PAUSED_SQL).fetchall():
            conn.execute(sql.SQL("ALTER TABLE {} RESET (autovacuum_enabled)").format(sql.Identifier(name)))


GIVE_UP_POLL_S = 0.005


def _watched(conn: Connection[Any], give_up: Callable[[], bool] | None, statement: Callable[[], object]) -> None:
    """Run `statement` on `conn`; with `give_up`, cancel it as soon as that says so (looked at every
    GIVE_UP_POLL_S from a thread beside it) and raise GaveWay. The INSERT of a batch of ~4,000 rows begun
    just before the daemon's first query came was a stretch of the server's work of 0.4 s (quiet) to over
    a second beside its answers. A cancel sent as the statement ends finds the session reading its next
    command, and the server ignores it there; the lock keeps it from being sent later."""
    if give_up is None:
        statement()
        return
    done, lock, fired = threading.Event(), threading.Lock(), threading.Event()

    def watch() -> None:
        while not done.wait(GIVE_UP_POLL_S):
            if give_up():
                with lock:
                    if not done.is_set():
                        fired.set()
                        conn.cancel_safe()
                return

    watcher = threading.Thread(target=watch, name="urchin-feed-watch", daemon=True)
    watcher.start()
    try:
        statement()
    except QueryCanceled:
        if fired.is_set():
            raise GaveWay from None
        raise
    finally:
        with lock:
            done.set()
        watcher.join()


class PgWriter:
    """The feeder's writes over `link`. `owned`: Urchin's own server (the embedded one), which it
    vacuums after each forget."""

    def __init__(self, link: PgLink, owned: bool = False) -> None:
        self._link = link
        self.owned = owned

    # ---- feeding ------------------------------------------------------------------------------
    def cursor(self, device: str, journal: str) -> int:
        conn = self._link.conn
        with conn.transaction():
            row = conn.execute("SELECT byte_offset FROM urchin_cursors WHERE device = %s AND journal = %s",
                               (device, journal)).fetchone()
        return int(row[0]) if row else 0

    def write_batch(self, rows: Sequence[ChunkRow], device: str, journal: str, expected: int,
                    new_offset: int, wait: bool = True, between: Callable[[], object] | None = None,
                    generation: int | None = None, give_up: Callable[[], bool] | None = None) -> int:
        """Upsert `rows` and move the cursor from `expected` to `new_offset` in one transaction.

        Returns how many rows were new. Replaying rows already stored changes nothing (ON CONFLICT DO
        NOTHING for events, which never change); term statistics count only new rows. With `wait` False
        (a query's inline catch-up), a lock another feeder holds (the same rows in its open batch, an
        index build) raises IndexBusyError after LOCK_WAIT instead of holding the query behind it.
        `between`: called before each UNIT_ROWS rows copied (the background feed gives way to queries
        there, and before the INSERT; its batches are small, see feeder.GIVE_WAY_PIECE_BYTES).
        `generation`: the forget generation mark the offsets were read under (None: not checked). A forget
        applied meanwhile (its compaction shifts the lines after the one it removed, and it may leave the
        cursor where it was) raises as a moved cursor does: the rows go again after the cursor is mapped.
        `give_up`: looked at every GIVE_UP_POLL_S while the INSERT runs (a large batch begun while no request
        came); once it says so the statement is cancelled and GaveWay raised (the transaction rolled back).
        """
        conn = self._link.conn
        self._link.ensure_partitions(rows)
        try:
            return self._write_batch(conn, rows, device, journal, (expected, new_offset, generation), wait, between,
                                     give_up)
        except LockNotAvailable:
            raise IndexBusyError("the index is being written by another feeder; answering from it as it is") from None

    def _write_batch(self, conn: Connection[Any], rows: Sequence[ChunkRow], device: str, journal: str,
                     move: tuple[int, int, int | None], wait: bool, between: Callable[[], object] | None,
                     give_up: Callable[[], bool] | None = None) -> int:
        expected, new_offset, generation = move
        with conn.transaction():
            if not wait:
                conn.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
            inserted = 0
            if rows:
                with conn.cursor() as cur:
                    copy_feed(cur, rows, device, self._link.bound, between)
                    if between is not None:   # the INSERT is the one stretch nothing pauses: after a request
                        between()
                    # one statement a batch: the owner's trigger counts its terms once (schema 7); per unit
                    # of 64 rows it cost the server 2.5x the CPU per event
                    _watched(conn, give_up, lambda: cur.execute(
                        f"INSERT INTO urchin_chunks ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM "
                        "urchin_feed ON CONFLICT (device, chunk_id, occurred_at) DO NOTHING"))
                    inserted = max(cur.rowcount, 0)   # the new rows; counted by the owner's trigger (schema 7)
            moved = conn.execute(
                "INSERT INTO urchin_cursors (device, journal, byte_offset) VALUES (%s, %s, %s) "
                "ON CONFLICT (device, journal) DO UPDATE SET byte_offset = excluded.byte_offset, updated_at = now() "
                "WHERE urchin_cursors.byte_offset = %s", (device, journal, new_offset, expected)).rowcount
            # after the cursor's row is ours: a forget's move of it (apply_forget) waits for this commit,
            # or committed before this statement's snapshot, its mark with it
            if moved == 1 and generation is not None:
                mark = conn.execute("SELECT byte_offset FROM urchin_cursors WHERE device = %s AND journal = %s",
                                    (device, journal + GENERATION_MARK)).fetchone()
                moved = int((mark[0] if mark else 0) == generation)
            if moved != 1:
                raise DatabaseError(f"index cursor for {device}:{journal} was moved by another feeder; "
                                    "re-reading it")
        return inserted

    # ---- forgetting ----------------------------------------------------------------------------
    def marks(self, device: str, journal: str) -> tuple[int, int, int]:
        """(cursor, journal generation it refers to, tombstones applied) of one feeder."""
        conn = self._link.conn
        with conn.transaction():
            found = dict(conn.execute(
                "SELECT journal, byte_offset FROM urchin_cursors WHERE device = %s AND journal = ANY(%s)",
                (device, [journal, journal + GENERATION_MARK, journal + FORGOTTEN_MARK])).fetchall())
        return (int(found.get(journal, 0)), int(found.get(journal + GENERATION_MARK, 0)),
                int(found.get(journal + FORGOTTEN_MARK, 0)))

    def journal_head(self, device: str, journal: str) -> tuple[int, int] | None:
        """(head, forget generation) recorded for one feeder's journal, or None (see Feeder)."""
        conn = self._link.conn
        with conn.transaction():
            row = conn.execute("SELECT head, generation FROM urchin_journal_heads WHERE device = %s "
                               "AND journal = %s", (device, journal)).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def set_journal_head(self, device: str, journal: str, head: int, generation: int) -> None:
        conn = self._link.conn
        with conn.transaction():
            conn.execute("INSERT INTO urchin_journal_heads (device, journal, head, generation) "
                         "VALUES (%s, %s, %s, %s) ON CONFLICT (device, journal) DO UPDATE SET "
                         "head = excluded.head, generation = excluded.generation",
                         (device, journal, head, generation))

    def apply_forget(self, device: str, journal: str, hashes: Sequence[bytes], moves: tuple[int, int] | None,
                     generation: int, applied: int) -> int:
        """In one transaction: delete the event rows whose id hashes (sha256, first 16 bytes) are in
        `hashes`, move the cursor `moves` = (from, to) onto the rewritten journal, record the marks.
        Returns how many rows were deleted."""
        conn = self._link.conn
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
            if moves is not None:   # an upsert: a feed's first batch inserting the cursor meanwhile conflicts
                moved = conn.execute("INSERT INTO urchin_cursors (device, journal, byte_offset) VALUES (%s, %s, %s) "
                                     "ON CONFLICT (device, journal) DO UPDATE SET byte_offset = excluded.byte_offset, "
                                     "updated_at = now() WHERE urchin_cursors.byte_offset = %s",
                                     (device, journal, moves[1], moves[0])).rowcount
                if moved != 1:
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
        reclaim(self._link.conn, full=True)

    def rebuild(self) -> None:
        """Empty the index and every cursor: each feeder (this device's and others') replays from 0."""
        conn = self._link.conn
        with conn.transaction():
            conn.execute("TRUNCATE urchin_chunks, urchin_embeddings, urchin_terms, urchin_stats, urchin_cursors, "
                         "urchin_files, urchin_journal_heads")

    # ---- backfills: GIN indexes built once at the end (issue 16) --------------------------------
    def begin_bulk(self, expected_rows: int) -> bool:
        """Drop the GIN indexes of urchin_chunks for a backfill of about `expected_rows` rows, when that
        pays and is safe: this role owns the table (a feeder role never does), no other backfill holds
        the bulk lock, the index holds fewer rows than are coming, and no query holds the table for
        long (lock_timeout). The session keeps the bulk lock until `restore_indexes`. Queries meanwhile
        give the same answers, by scanning. Returns whether the indexes were dropped."""
        conn = self._link.conn
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
                for (name,) in conn.execute(PARTITIONS_SQL).fetchall():
                    pause_autovacuum(conn, name)
        except LockNotAvailable:
            self._unlock_bulk()
            return False
        except BaseException:
            self._link.reset()    # the session (and its lock) goes; the indexes stay as they were
            raise
        self._link.bulk_held = True
        return True

    def restore_indexes(self) -> list[str]:
        """Build the GIN indexes that are missing (a backfill's end, or one that died), one bulk build
        each; only the table's owner can, and not while another session's backfill holds the bulk lock.
        The trigram index only on a team database (schema.TEAM_SQL). Returns the names built."""
        conn = self._link.conn
        with conn.transaction():
            missing = [r[0] for r in conn.execute("SELECT n FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NULL "
                                                  f"AND (n <> %s OR {TEAM_SQL})",
                                                  (list(GIN_INDEXES), TRIGRAM_INDEX)).fetchall()]
            paused = [r[0] for r in conn.execute(PAUSED_SQL).fetchall()]
            if not missing and not paused:
                if self._link.bulk_held:
                    self._unlock_bulk()
                return []
            owner = conn.execute("SELECT pg_has_role(relowner, 'USAGE') FROM pg_class "
                                 "WHERE oid = 'urchin_chunks'::regclass").fetchone()
            if not (owner and owner[0]):
                return []
            if not self._link.bulk_held and not conn.execute(
                    f"SELECT pg_try_advisory_lock({_BULK_LOCK})").fetchone()[0]:  # type: ignore[index]
                return []     # another session is backfilling: it builds them at its end
            self._link.bulk_held = True
        # Two sessions, each building its share one index at a time: the trigram index (two thirds of
        # the work) on this one, the others on a second beside it, so both cores build. No parallel
        # workers: they cost half as much CPU again, and run at the server's priority, not the feed's.
        mine = [n for n in missing if n == TRIGRAM_INDEX] or missing[:1]
        theirs = [n for n in missing if n not in mine]
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="urchin-gin") as pool:
                beside = pool.submit(_build_indexes, self._link.twin().conn, theirs) if theirs else None
                try:
                    _build_indexes(conn, mine)
                finally:
                    if beside is not None:
                        beside.result()
            _resume_autovacuum(conn)
        finally:
            self._unlock_bulk()
        return missing

    def _unlock_bulk(self) -> None:
        self._link.bulk_held = False
        conn = self._link.current   # none, or a broken one: the lock went with its session
        if conn is not None:
            with conn.transaction():
                conn.execute(f"SELECT pg_advisory_unlock({_BULK_LOCK})")
