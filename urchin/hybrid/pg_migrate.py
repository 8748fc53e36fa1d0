"""Schema migrations at connect: pgvector checked, missing migrations applied under an advisory lock.

Part of the PostgreSQL backend (its driver behind `pgdriver`).
The transaction-scoped advisory lock serialises machines upgrading one shared database at once: the
second waits, then finds every migration applied.
"""

from __future__ import annotations

import logging
from typing import Any

from urchin.errors import DatabaseError
from urchin.hybrid.pgdriver import Connection, InsufficientPrivilege
from urchin.hybrid.schema import MIGRATIONS, PGVECTOR_MIN

__all__ = ["migrate"]

log = logging.getLogger(__name__)


def migrate(conn: Connection[Any]) -> None:
    """Check pgvector, then apply the missing migrations under an advisory lock (several feeders may race)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('urchin_migrations'))")
        available = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        if installed is None:
            if available is None:
                raise DatabaseError("pgvector is not installed on this PostgreSQL server: urchin needs the `vector` "
                                  f"extension >= {'.'.join(map(str, PGVECTOR_MIN))} "
                                  "(https://github.com/pgvector/pgvector)")
            try:
                with conn.transaction():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except InsufficientPrivilege:
                raise DatabaseError("pgvector is available but not enabled in this database, and this user may not "
                                  "enable it: run `CREATE EXTENSION vector;` as an owner") from None
            installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        version = tuple(int(p) for p in str(installed[0]).split(".")[:2]) if installed else (0, 0)
        if version < PGVECTOR_MIN:
            raise DatabaseError(f"pgvector {installed[0] if installed else '?'} is installed; urchin needs >= "
                              f"{'.'.join(map(str, PGVECTOR_MIN))} for sparsevec and halfvec "
                              "(ALTER EXTENSION vector UPDATE)")
        # A reader or feeder role may not CREATE in the schema: look before creating.
        if conn.execute("SELECT to_regclass('urchin_migrations')").fetchone() == (None,):
            conn.execute("CREATE TABLE urchin_migrations (version integer PRIMARY KEY, name text NOT NULL, "
                         "applied_at timestamptz NOT NULL DEFAULT now())")
        applied = {r[0] for r in conn.execute("SELECT version FROM urchin_migrations").fetchall()}
        known = MIGRATIONS[-1][0]
        if applied and max(applied) > known:
            # a newer Urchin (another machine of a team, or a downgrade here) changed the schema: its
            # rows may mean what this code would misread, so refuse before touching anything
            raise DatabaseError(f"the index database ({_where(conn)}) has schema migration {max(applied)}, newer than "
                                f"this Urchin knows ({known}): it was written by a newer Urchin. Nothing was "
                                "changed: upgrade Urchin on this machine")
        done = []
        for version_no, name, body in MIGRATIONS:
            if version_no not in applied:
                try:
                    with conn.transaction():
                        conn.execute(body)
                except InsufficientPrivilege:
                    raise DatabaseError(f"the index schema needs migration {version_no} ({name}), which this role may "
                                      "not apply: run `urchin index status` (or `urchin db setup`) with the "
                                      "owner's URCHIN_DATABASE_URL first") from None
                conn.execute("INSERT INTO urchin_migrations (version, name) VALUES (%s, %s)", (version_no, name))
                done.append(f"{version_no} ({name})")
    if applied and done:   # an existing schema brought up to date (a new one is no news): said once, as it runs once
        log.warning("upgraded the index schema of %s from migration %d to %d: applied %s (journal unchanged)",
                    _where(conn), max(applied), known, "; ".join(done))


def _where(conn: Connection[Any]) -> str:
    """The database, named without credentials: its name, and host or socket folder."""
    info = conn.info
    return f"database {info.dbname} on {info.host or 'localhost'}"
