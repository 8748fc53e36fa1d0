"""Least privilege on a shared PostgreSQL (`urchin db`): an owner that migrates, a reader, a feeder per device.

Run with an administrator's URL (a superuser, or a role with CREATEROLE that owns the database). Row-level
security on `device` (migrations 3 and 6) is what confines a feeder: every table it may write has it,
so the database refuses another device's rows (and, in chunks, another account than the one its
mapping names), whatever the client sends. The term statistics are the owner's alone, kept from the
chunk rows by its trigger, and the partitions a feeder may have made are bounded (migration 7). Roles
are cluster-wide; the grants are per database.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any, TypedDict

from urchin.dsn import scrub, to_url
from urchin.errors import DatabaseError, ValidationError
from urchin.hybrid.pg_migrate import migrate as _migrate
from urchin.hybrid.pgdriver import Connection, InsufficientPrivilege, connect, conninfo_to_dict, make_conninfo, sql
from urchin.hybrid.schema import TRIGRAM_DEF, TRIGRAM_INDEX

__all__ = ["RoleSetup", "FeederRole", "NewRole",
           "setup_roles", "add_feeder", "feeder_role", "role_device", "wrong_device", "OWNER", "READER", "FEEDERS"]

OWNER, READER, FEEDERS = "urchin_owner", "urchin_reader", "urchin_feeder"
# what a feeder writes: its own device's rows of each (row-level security on device in every one)
_FEEDER_WRITES = ("urchin_chunks", "urchin_cursors", "urchin_embeddings", "urchin_journal_heads", "urchin_files")
# what only the owner writes: the term statistics, kept from the chunk rows by its trigger (migration 7)
_OWNER_WRITES = ("urchin_terms", "urchin_stats")
# the owner's functions (the SECURITY DEFINER ones run as it), by signature
_FUNCTIONS = ("urchin_device()", "urchin_account()", "urchin_ensure_partition(timestamptz)", "urchin_count_chunks()")
_DEVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


class NewRole(TypedDict):
    """A role `urchin db setup` made or found: its password and URL only when one was set now (shown once)."""

    role: str
    password: str | None
    url: str | None


class RoleSetup(TypedDict):
    """`urchin db setup`: the owner and reader roles, and the feeders' group role."""

    owner: NewRole
    reader: NewRole
    feeders: str


class FeederRole(TypedDict):
    """`urchin db feeder DEVICE`: the login role that may write only `device`'s rows."""

    device: str
    role: str
    account: str | None
    password: str | None
    url: str | None


def feeder_role(device: str) -> str:
    """`urchin_feeder_<slug>_<8 hex>`: readable, and distinct for devices whose slugs collide."""
    slug = re.sub(r"[^a-z0-9_]", "_", device.lower())[:30]
    return f"{FEEDERS}_{slug}_{hashlib.sha256(device.encode()).hexdigest()[:8]}"


def role_device(conn: Connection[Any]) -> str | None:
    """The device the connected role feeds (`urchin db feeder`), or None: not a feeder (the owner, a
    superuser, a reader), or a database Urchin has not set up."""
    if conn.execute("SELECT to_regclass('urchin_feeders')").fetchone() == (None,):
        return None
    row = conn.execute("SELECT device FROM urchin_feeders WHERE role = current_user").fetchone()
    return str(row[0]) if row else None


def wrong_device(fed: str | None, device: str) -> str | None:
    """What to say when a feeder role is used on another machine than its own (None: it is not). The
    database would refuse the first row with its row-level-security text; this names both devices."""
    if fed is None or fed == device:
        return None
    return (f"this role feeds device {fed}, not {device}: on this machine use the URL of the role made with "
            f"`urchin db feeder {device}`, or set URCHIN_DEVICE_ID={fed} if this machine is {fed}")


def _ensure_role(conn: Connection[Any], role: str, login: bool, password: str | None) -> str | None:
    """Create `role` (a new login role gets `password` or a generated one); returns the password set, if any."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None
    if not login:
        if not exists:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        return None
    if exists and password is None:
        return None
    password = password or secrets.token_urlsafe(24)
    verb = "ALTER" if exists else "CREATE"
    conn.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
    return password


def _url(admin_url: str, role: str, password: str | None) -> str | None:
    """The new role's `postgresql://` URL (the administrator's host, port, database and options)."""
    if not password:
        return None
    return to_url(conninfo_to_dict(make_conninfo(admin_url, user=role, password=password)))


def setup_roles(admin_url: str, owner_password: str | None = None,
                reader_password: str | None = None) -> RoleSetup:
    """Create the owner, reader and feeder group roles, hand the urchin tables to the owner, migrate as
    the owner (under the migration advisory lock) and grant. Idempotent: run it again after an upgrade.

    Passwords are set for roles created now (generated unless given) or when given; the result carries
    them once, with ready URLs.
    """
    with connect(admin_url, autocommit=True) as conn:
        try:
            with conn.transaction():
                owner_pw = _ensure_role(conn, OWNER, True, owner_password)
                reader_pw = _ensure_role(conn, READER, True, reader_password)
                _ensure_role(conn, FEEDERS, False, None)
                conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(OWNER)))
                db = conn.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
                conn.execute(sql.SQL("GRANT CREATE, CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(db), sql.Identifier(OWNER)))
                conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(sql.Identifier(OWNER)))
                conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}, {}").format(
                    sql.Identifier(READER), sql.Identifier(FEEDERS)))
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                             "AND tablename LIKE 'urchin\\_%%'").fetchall():
                    conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(sql.Identifier(table),
                                                                              sql.Identifier(OWNER)))
                for function in _FUNCTIONS:
                    if conn.execute("SELECT to_regprocedure(%s)", (function,)).fetchone() != (None,):
                        conn.execute(sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(sql.SQL(function),
                                                                                    sql.Identifier(OWNER)))
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(OWNER)))
            _migrate(conn)   # as the owner: every object it creates is the owner's
            while _fold_partitions(conn):
                pass
            with conn.transaction():
                conn.execute("RESET ROLE")
                _grant(conn)
            _team_search_index(conn)
        except InsufficientPrivilege as exc:
            raise DatabaseError(f"urchin db setup needs an administrator's URCHIN_DATABASE_URL (a superuser, or a "
                              f"role with CREATEROLE owning the database): "
                              f"{scrub(str(exc).strip(), admin_url)}") from None
    return {"owner": {"role": OWNER, "password": owner_pw, "url": _url(admin_url, OWNER, owner_pw)},
            "reader": {"role": READER, "password": reader_pw, "url": _url(admin_url, READER, reader_pw)},
            "feeders": FEEDERS}


# Monthly partitions outside urchin_ensure_partition's window (migration 7): a feeder could make any
# number before it. Folded into the default partition a batch per transaction (each holds locks on
# its partitions and their indexes until it commits; the server's lock table is what they exhausted).
_FOLD_BATCH = 50
_OUTSIDE = """
SELECT p FROM (SELECT c.oid::regclass::text AS p, substring(pg_get_expr(c.relpartbound, c.oid)
                                                       FROM $$FROM [(]'([^']+)'[)]$$)::timestamptz AS lo
               FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
               WHERE i.inhparent = 'urchin_chunks'::regclass AND c.oid <> 'urchin_chunks_default'::regclass) AS s
WHERE lo AT TIME ZONE 'UTC' < date_trunc('month', now() AT TIME ZONE 'UTC') - interval '30 years'
   OR lo AT TIME ZONE 'UTC' > date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 year'
LIMIT %s"""


def _fold_partitions(conn: Connection[Any]) -> int:
    """Fold up to _FOLD_BATCH partitions outside the window into the default one, as the owner; returns
    how many. Rows go straight into the default partition: the parent's counting trigger does not
    fire, and the term statistics (which already count them) stay exact."""
    with conn.transaction():
        if conn.execute("SELECT to_regclass('urchin_chunks_default')").fetchone() == (None,):
            return 0
        parts = [r[0] for r in conn.execute(_OUTSIDE, (_FOLD_BATCH,)).fetchall()]
        columns = sql.SQL(", ").join(sql.Identifier(r[0]) for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'urchin_chunks'::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum").fetchall())
        for part in parts:
            name = sql.SQL(part)         # a regclass's text: already quoted as an identifier
            conn.execute(sql.SQL("ALTER TABLE urchin_chunks DETACH PARTITION {}").format(name))
            conn.execute(sql.SQL("INSERT INTO urchin_chunks_default ({}) SELECT {} FROM {}").format(
                columns, columns, name))
            conn.execute(sql.SQL("DROP TABLE {}").format(name))
    return len(parts)


def _team_search_index(conn: Connection[Any]) -> None:
    """The trigram index behind `urchin search --team`, built as the owner once the feeder group may
    write (migration 8 keeps it only on such a database; a single user's index has none)."""
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(OWNER)))
        conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON urchin_chunks " + TRIGRAM_DEF).format(
            sql.Identifier(TRIGRAM_INDEX)))


def _grant(conn: Connection[Any]) -> None:
    ident = sql.Identifier
    conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}, {}").format(ident(READER),
                                                                                        ident(FEEDERS)))
    conn.execute(sql.SQL("GRANT INSERT, UPDATE, DELETE ON {} TO {}").format(
        sql.SQL(", ").join(map(ident, _FEEDER_WRITES)), ident(FEEDERS)))
    conn.execute(sql.SQL("REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON {} FROM {}").format(
        sql.SQL(", ").join(map(ident, _OWNER_WRITES)), ident(FEEDERS)))     # granted before migration 7
    conn.execute(sql.SQL("GRANT EXECUTE ON FUNCTION urchin_ensure_partition(timestamptz) TO {}").format(
        ident(FEEDERS)))
    # tables and partitions the owner creates later are readable without another `urchin db setup`
    conn.execute(sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public GRANT SELECT ON TABLES TO {}, {}")
                 .format(ident(OWNER), ident(READER), ident(FEEDERS)))


def add_feeder(admin_url: str, device: str, password: str | None = None,
               account: str | None = None) -> FeederRole:
    """A login role that may write only `device`'s rows (a member of the feeder group), mapped in
    `urchin_feeders`, its rows carrying `account` (given: bound to it, also for an existing role;
    omitted: a new role has none, an existing one keeps its own). Run `setup_roles` first."""
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ValidationError("device", "must be 1-128 characters of letters, digits, '.', '_', '@' or '-', "
                                        "starting with a letter or digit")
    if account is not None and (not isinstance(account, str) or not _DEVICE.match(account)):
        raise ValidationError("account", "must be 1-128 characters of letters, digits, '.', '_', '@' or '-', "
                                         "starting with a letter or digit")
    role = feeder_role(device)
    with connect(admin_url, autocommit=True) as conn, conn.transaction():
        if conn.execute("SELECT to_regclass('urchin_feeders')").fetchone() == (None,) or \
                conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (FEEDERS,)).fetchone() is None:
            raise DatabaseError("run `urchin db setup` first: the feeder group and the urchin_feeders table "
                                "are missing")
        if conn.execute("SELECT 1 FROM pg_attribute WHERE attrelid = 'urchin_feeders'::regclass "
                        "AND attname = 'account' AND NOT attisdropped").fetchone() is None:
            raise DatabaseError("run `urchin db setup` first: the shared database predates this release's "
                                "schema (migration 6, rows keyed by device)")
        password = _ensure_role(conn, role, True, password)
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(FEEDERS), sql.Identifier(role)))
        taken = conn.execute("SELECT role FROM urchin_feeders WHERE device = %s", (device,)).fetchone()
        if taken is not None and taken[0] != role:
            raise DatabaseError(f"device {device!r} is already fed by role {taken[0]!r}")
        conn.execute("INSERT INTO urchin_feeders (role, device, account) VALUES (%s, %s, %s) ON CONFLICT (role) DO "
                     "UPDATE SET account = coalesce(excluded.account, urchin_feeders.account)", (role, device, account))
        bound = conn.execute("SELECT account FROM urchin_feeders WHERE role = %s", (role,)).fetchone()
    return {"device": device, "role": role, "account": bound[0] if bound else None, "password": password,
            "url": _url(admin_url, role, password)}
