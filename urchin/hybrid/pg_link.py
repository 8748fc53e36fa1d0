"""The PostgreSQL session the index's parts share: one connection, reopened after an outage (migrated
and bound to its feeder role on each open), a twin beside it, the monthly partitions known to exist and
whether the session holds the backfill lock.

`postgres.PostgresIndex` builds one link and hands it to each of its parts; nothing else connects.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC
from typing import Any

from urchin.hybrid.base import ChunkRow
from urchin.hybrid.pg_migrate import migrate
from urchin.hybrid.pgdriver import Connection, connect, sql

__all__ = ["PgLink", "pause_autovacuum"]


def _lower_backend(conn: Connection[Any], niceness: int) -> None:
    """Run the server process behind `conn` at `niceness` (never raising its priority), one core only.

    Its commits do not wait for the WAL to reach the disk (synchronous_commit off): what background work
    writes is derived (the journal's rows with their cursor in one transaction, the workspace's files),
    so a machine crash loses at most its last commits whole, done again by the next run; a commit's
    fdatasync, and the journal commit of the filesystem's own threads at normal priority, would otherwise
    come with each batch (a batch a 256 KiB of journal while queries come)."""
    with conn.transaction():
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        conn.execute("SET max_parallel_maintenance_workers = 0")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute("SET synchronous_commit = off")
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


def pause_autovacuum(conn: Connection[Any], table: str) -> None:
    """No autovacuum on `table` (a partition of urchin_chunks) until a backfill's end (see pg_writer)."""
    conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(sql.Identifier(table)))


class PgLink:
    """One connection (reopened after an outage); `url` is called on each (re)connect."""

    def __init__(self, url: Callable[[], str] | str, connect_timeout: float = 5.0, niceness: int | None = None
                 ) -> None:
        """`niceness`: the server process behind each connection is reniced to it (only for a server on
        this machine: the embedded one) and builds indexes without parallel workers, which would run at
        the server's own priority. For background work that must not slow the queries served beside it."""
        self._url = url if callable(url) else (lambda: url)
        self._timeout = connect_timeout
        self._niceness = niceness
        self._conn: Connection[Any] | None = None
        self._months: set[tuple[int, int]] = set()   # monthly partitions of urchin_chunks known to exist
        self.bulk_held = False                        # this session holds the bulk lock (PgWriter.begin_bulk)
        self._twin: PgLink | None = None
        self._bound: tuple[str, str | None] | None = None   # a feeder role's (device, account), see `bound`

    @property
    def conn(self) -> Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = None
            conn = connect(self._url(), connect_timeout=max(1, int(self._timeout)), autocommit=False)
            try:
                migrate(conn)
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
    def current(self) -> Connection[Any] | None:
        """The connection if one is open and sound now (this opens none)."""
        conn = self._conn
        return conn if conn is not None and not conn.closed and not conn.broken else None

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

    def twin(self) -> PgLink:
        """A second connection to the same database, kept: `search_context` runs its semantic leg on it
        while the keyword leg runs on this one (two server processes, two cores); the backfill's index
        builds share the work across both. Only one thread uses it at a time (the caller's, serialised
        like this connection)."""
        if self._twin is None:
            self._twin = PgLink(self._url, self._timeout, self._niceness)
        return self._twin

    def read(self, query: str, args: Sequence[Any] | Mapping[str, Any] | None = None) -> list[Any]:
        """The rows of one statement, run in a transaction of its own."""
        conn = self.conn
        with conn.transaction():
            return conn.execute(query, args).fetchall()

    def ensure_partitions(self, rows: Sequence[ChunkRow]) -> None:
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
                    if self.bulk_held:      # a backfill's: no autovacuum until its end (PgWriter.begin_bulk)
                        pause_autovacuum(self.conn, f"urchin_chunks_{month[0]:04d}m{month[1]:02d}")
                self._months.add(month)

    def reset(self) -> None:
        """Drop the connection (after an outage); the next call reconnects (the bulk lock goes with it)."""
        if self._twin is not None:
            self._twin.reset()
        self._months.clear()
        self.bulk_held = False
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a broken socket may raise anything on close
                pass
        self._conn = None
