"""The one module that imports psycopg, PostgreSQL's driver (house rule: a third-party driver behind
one door). Everything else in the backend takes the connection type, `connect`, SQL composition and
the few server errors it tells apart from here, so a driver upgrade or swap touches this file only.
Imported only where the `postgres` extra is installed: an ImportError here means "not installed".
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection, Cursor, connect, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.errors import (
    DataError,
    Error,
    InsufficientPrivilege,
    IntegrityError,
    InterfaceError,
    LockNotAvailable,
    OperationalError,
    ProgramLimitExceeded,
    QueryCanceled,
)
from psycopg.pq import TransactionStatus

# Errors that mean "the database went away": the feeder retries these with backoff.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)
# Errors that mean "the database cannot hold this value" (NUL in text, an index entry too large, a
# tsvector over 1 MB): the feeder skips that row instead of retrying it forever. ProgramLimitExceeded
# is an OperationalError in psycopg, so it is checked before OUTAGE_ERRORS.
REFUSED_ERRORS: tuple[type[BaseException], ...] = (DataError, IntegrityError, ProgramLimitExceeded)


def idle(conn: Connection[Any]) -> bool:
    """No transaction open on `conn` (VACUUM and other statements that cannot run in one need this)."""
    return conn.info.transaction_status == TransactionStatus.IDLE


__all__ = ["Connection", "Cursor", "connect", "sql", "conninfo_to_dict", "make_conninfo", "Error",
           "InsufficientPrivilege", "LockNotAvailable", "QueryCanceled", "OUTAGE_ERRORS", "REFUSED_ERRORS", "idle"]
