"""Team scale on a shared PostgreSQL: several homes (devices) feed one TCP server with scram passwords.

Runs against the standalone server of `team_server` (tests/pg_tcp.py), not the embedded socket one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import team_helpers
from tests.cli_inprocess import call_urchin
from tests.conftest import REPO, run_urchin
from tests.team_helpers import _events, _home, _sql, _trigram_indexes
from urchin.config import Settings
from urchin.errors import DatabaseError
from urchin.facade import Memory
from urchin.hybrid.pg_roles import setup_roles
from urchin.hybrid.schema import MIGRATIONS


def test_the_shared_server_wants_a_password_over_tcp(team_server: Any, team_db: str) -> None:
    assert "host=127.0.0.1" in team_db
    assert _sql(team_db, "SELECT inet_server_addr() IS NOT NULL")[0] == (True,)   # TCP, not a socket
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(team_server.url(password="wrong"))
    method = _sql(team_db, "SELECT auth_method FROM pg_hba_file_rules WHERE type = 'host'")
    assert method == [("scram-sha-256",)]


def test_two_homes_find_each_others_events_through_the_shared_index(tmp_path: Path, team_db: str) -> None:
    laptop, desktop = _home(tmp_path, "laptop", team_db), _home(tmp_path, "desktop", team_db)
    laptop.ingest(_events(3, "zanzibar"))
    desktop.ingest(_events(4, "quokka"))
    laptop.index()
    desktop.index()
    try:
        seen_by_laptop = laptop.context(query="quokka payments", limit=10).results
        seen_by_desktop = desktop.context(query="zanzibar payments", limit=10).results
        assert {r["device"] for r in seen_by_laptop if "quokka" in r["content"]} == {"desktop"}
        assert sum("quokka" in r["content"] for r in seen_by_laptop) == 4
        assert sum("zanzibar" in r["content"] for r in seen_by_desktop) == 3
        narrowed = laptop.context(query="payments rollout", limit=20, devices=["desktop"]).results
        assert len(narrowed) == 4 and all(r["device"] == "desktop" for r in narrowed)
        by_account = laptop.context(query="payments rollout", limit=20, accounts=["nobody"]).results
        assert by_account == []
    finally:
        laptop.close()
        desktop.close()


def test_context_cli_narrows_by_device(tmp_path: Path, team_db: str) -> None:
    for name, word in (("laptop", "zanzibar"), ("desktop", "quokka")):
        home = _home(tmp_path, name, team_db)
        home.ingest(_events(2, word))
        home.index()
        home.close()
    env = {"URCHIN_HOME": str(tmp_path / "laptop"), "URCHIN_DATABASE_URL": team_db, "URCHIN_DEVICE_ID": "laptop"}
    everyone = run_urchin("context", "payments rollout", "--json", env=env)
    assert everyone.returncode == 0, everyone.stderr
    assert '"device":"desktop"' in everyone.stdout and '"device":"laptop"' in everyone.stdout
    one = call_urchin("context", "payments rollout", "--device", "desktop", "--json", env=env)
    assert one.returncode == 0, one.stderr
    assert '"device":"desktop"' in one.stdout and '"device":"laptop"' not in one.stdout


# ---- least privilege ----------------------------------------------------------------------------
roles = team_helpers.roles    # the fixture (tests/team_helpers.py)


def test_a_feeder_role_cannot_touch_another_devices_rows(tmp_path: Path, team_db: str,
                                                          roles: dict[str, Any]) -> None:
    for name, word in (("laptop", "zanzibar"), ("desktop", "quokka")):
        home = _home(tmp_path, name, roles[name])
        home.ingest(_events(3, word))
        assert home.index().inserted == 3
        home.close()
    with psycopg.connect(roles["laptop"], autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM urchin_chunks").fetchone() == (6,)   # reads everyone
        assert conn.execute("UPDATE urchin_chunks SET content = 'x' WHERE device = 'desktop'").rowcount == 0
        assert conn.execute("DELETE FROM urchin_chunks WHERE device = 'desktop'").rowcount == 0
        assert conn.execute("UPDATE urchin_cursors SET byte_offset = 0 WHERE device = 'desktop'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("UPDATE urchin_chunks SET device = 'desktop' WHERE device = 'laptop'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO urchin_chunks (chunk_id, doc_id, source, kind, content, occurred_at, device) "
                         "VALUES ('x', 'x', 'claude', 'note', 'forged', now(), 'desktop')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO urchin_feeders VALUES ('urchin_feeder_x', 'x')")
    assert _sql(team_db, "SELECT device, count(*) FROM urchin_chunks WHERE content LIKE '%%quokka%%' "
                         "GROUP BY 1") == [("desktop", 3)]
    # a home that claims another device's name with the laptop's credentials is refused, and told why
    # in plain words (the database's own refusal is the direct SQL above)
    impostor = Memory(Settings.resolve(tmp_path / "impostor", database_url=roles["laptop"], device="desktop"))
    impostor.ingest(_events(1, "forged"))
    with pytest.raises(DatabaseError, match="this role feeds device laptop, not desktop"):
        impostor.index()
    impostor.close()
    assert _sql(team_db, "SELECT count(*) FROM urchin_chunks WHERE content LIKE 'forged%%'") == [(0,)]


def test_the_reader_role_reads_and_writes_nothing(tmp_path: Path, team_db: str, roles: dict[str, Any]) -> None:
    home = _home(tmp_path, "laptop", roles["laptop"])
    home.ingest(_events(2, "zanzibar"))
    home.index()
    home.close()
    reader = _home(tmp_path, "reader-home", roles["reader"])
    assert len(reader.context(query="zanzibar", limit=5).results) == 2
    reader.close()
    with psycopg.connect(roles["reader"], autocommit=True) as conn:
        for statement in ("DELETE FROM urchin_chunks", "UPDATE urchin_stats SET value = 0",
                          "CREATE TABLE urchin_evil (x int)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_db_cli_sets_up_roles_and_a_feeder(tmp_path: Path, team_db: str) -> None:
    env = {"URCHIN_DATABASE_URL": team_db}
    first = run_urchin("db", "setup", "--owner-password", "pw-1", "--json", env=env)   # roles are cluster-wide:
    assert first.returncode == 0, first.stderr                                       # they may exist already
    assert '"role":"urchin_owner"' in first.stdout and '"url":"postgresql://urchin_owner:pw-1@' in first.stdout
    again = run_urchin("db", "setup", "--json", env=env)          # idempotent; existing passwords kept
    assert again.returncode == 0 and '"password":null' in again.stdout
    hostile = "p@ss w/'rd\\%20?&=#"                                 # the URL printed is real and percent-encoded
    feeder = run_urchin("db", "feeder", "ci-runner-1", "--password", hostile, env=env)
    assert feeder.returncode == 0 and "urchin_feeder_ci_runner_1_" in feeder.stdout
    url = feeder.stdout.split("URL (shown once): ", 1)[1].split()[0]
    assert url.startswith("postgresql://urchin_feeder_ci_runner_1_") and hostile not in feeder.stdout
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0].startswith("urchin_feeder_ci_runner_1_")
    bad = run_urchin("db", "feeder", "../x", env=env)
    assert bad.returncode == 1 and bad.stderr.startswith("error: device:")
    embedded = run_urchin("db", "setup")
    assert embedded.returncode == 1 and "URCHIN_DATABASE_URL" in embedded.stderr


def test_two_machines_migrating_at_once_do_not_race(team_db: str) -> None:
    code = ("import sys; from urchin.hybrid.postgres import PostgresIndex; PostgresIndex(sys.argv[1]).status()")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code, team_db], env=env, stderr=subprocess.PIPE)
             for _ in range(4)]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    assert _sql(team_db, "SELECT version FROM urchin_migrations ORDER BY 1") == [(v,) for v, _, _ in MIGRATIONS]


# ---- correct under concurrency ------------------------------------------------------------------
def _index_proc(home: Path, url: str, device: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), "URCHIN_DATABASE_URL": url,
           "URCHIN_DEVICE_ID": device, "URCHIN_NO_DAEMON": "1"}
    return subprocess.Popen([sys.executable, "-m", "urchin", "index", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _exact(url: str, devices: dict[str, Memory]) -> None:
    """Every device's rows exactly once, in journal order, and each cursor at its journal's end."""
    total = _sql(url, "SELECT count(*), count(DISTINCT chunk_id) FROM urchin_chunks")[0]
    expected = sum(len(m.follow(0)[0]) for m in devices.values())
    assert total == (expected, expected)
    for name, memory in devices.items():
        ids = [r[0] for r in _sql(url, "SELECT chunk_id FROM urchin_chunks WHERE device = %s "
                                       "ORDER BY journal_offset", (name,))]
        assert ids == [e.id for e in memory.follow(0)[0]]
        cursor = _sql(url, "SELECT byte_offset FROM urchin_cursors WHERE device = %s AND journal = %s",
                      (name, str(memory.settings.journal_path)))
        assert cursor == [(memory.end_offset(),)]


def test_concurrent_feeders_lose_duplicate_and_reorder_nothing(tmp_path: Path, team_db: str) -> None:
    homes = {f"dev{i}": _home(tmp_path, f"dev{i}", team_db) for i in range(4)}
    for i, memory in enumerate(homes.values()):
        memory.ingest(_events(300 + 50 * i, f"word{i}"))
    # four devices at once, and a second process of dev0 on the same journal and cursor
    procs = [_index_proc(tmp_path / name, team_db, name) for name in homes] + \
        [_index_proc(tmp_path / "dev0", team_db, "dev0")]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 5, [r[1] for r in results]
    _exact(team_db, homes)
    assert _sql(team_db, "SELECT device, value FROM urchin_stats WHERE key = 'chunks' ORDER BY 1") == [
        (f"dev{i}", 300 + 50 * i) for i in range(4)]
    for memory in homes.values():
        memory.close()


_SLOW_FEED = """
import sys, time
from urchin.config import Settings
from urchin.facade import Memory
from urchin.hybrid.feeder import Feeder
from urchin.hybrid.postgres import PostgresIndex

class Slow(PostgresIndex):
    def write_batch(self, *args, **kwargs):
        n = super().write_batch(*args, **kwargs)
        print("batch", flush=True)
        time.sleep(0.3)
        return n

memory = Memory(Settings.resolve(sys.argv[1], database_url=sys.argv[2], device=sys.argv[3]))
Feeder(Slow(sys.argv[2]), memory.journal, sys.argv[3], batch_bytes=4096).run_once()
"""


def test_a_feeder_killed_mid_batch_resumes_exactly(tmp_path: Path, team_db: str) -> None:
    memory = _home(tmp_path, "laptop", team_db)
    memory.ingest(_events(400, "kill"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(2):   # killed twice, each time after a couple of batches
        proc = subprocess.Popen([sys.executable, "-c", _SLOW_FEED, str(tmp_path / "laptop"), team_db, "laptop"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.readline()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    done = _sql(team_db, "SELECT byte_offset FROM urchin_cursors WHERE device = 'laptop'")[0][0]
    assert 0 < done < memory.end_offset()
    assert _sql(team_db, "SELECT count(*) FROM urchin_chunks")[0][0] > 0
    memory.index()
    _exact(team_db, {"laptop": memory})
    memory.close()


def test_forgetting_on_one_machine_deletes_its_rows_in_the_shared_database(tmp_path: Path, team_db: str) -> None:
    laptop, desktop = _home(tmp_path, "laptop", team_db), _home(tmp_path, "desktop", team_db)
    laptop.ingest(_events(5, "zanzibar"))
    desktop.ingest(_events(5, "quokka"))
    laptop.index()
    desktop.index()
    gone = laptop.tail(5)[2].id
    assert laptop.forget([gone], confirm=True).matched
    laptop.ingest(_events(2, "after"))
    laptop.index()
    ids = {r[0] for r in _sql(team_db, "SELECT chunk_id FROM urchin_chunks")}
    assert gone not in ids and len(ids) == 11
    assert all(r["id"] != gone for r in desktop.context(query="zanzibar", limit=20).results)
    _exact(team_db, {"laptop": laptop, "desktop": desktop})
    laptop.close()
    desktop.close()


def test_a_replaced_journal_is_fed_again_without_duplicates(tmp_path: Path, team_db: str) -> None:
    memory = _home(tmp_path, "laptop", team_db)
    memory.ingest(_events(20, "first"))
    memory.index()
    kept = memory.journal.path.read_bytes()
    memory.journal.path.write_bytes(kept.split(b"\n", 1)[1])    # replaced: head changed, shorter
    memory.close()
    memory = _home(tmp_path, "laptop", team_db)
    memory.ingest(_events(3, "second"))
    report = memory.index()
    assert any("replaced" in note for note in report.notes)
    assert _sql(team_db, "SELECT count(*), count(DISTINCT chunk_id) FROM urchin_chunks") == [(23, 23)]
    again = memory.index()
    assert again.events == 0
    memory.close()


def test_feeding_stays_exact_while_queries_run(tmp_path: Path, team_db: str) -> None:
    memory = _home(tmp_path, "laptop", team_db)
    memory.ingest(_events(500, "busy"))
    proc = _index_proc(tmp_path / "laptop", team_db, "laptop")
    reader = _home(tmp_path, "desktop", team_db)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        reader.context(query="busy payments", limit=5)
    assert proc.wait(timeout=60) == 0
    _exact(team_db, {"laptop": memory})
    memory.close()
    reader.close()


# ---- growth path: monthly partitions ------------------------------------------------------------
def test_chunks_are_partitioned_by_month_and_every_unique_key_holds_the_partition_key(
        tmp_path: Path, team_db: str) -> None:
    memory = _home(tmp_path, "laptop", team_db)
    memory.ingest([{"content": f"partitioned event {i}", "timestamp": f"2026-{m:02d}-15T12:00:00Z"}
                   for i, m in enumerate((1, 1, 2, 11))])
    memory.index()
    assert memory.index().events == 0
    memory.close()
    assert _sql(team_db, "SELECT partstrat FROM pg_partitioned_table WHERE partrelid = 'urchin_chunks'::regclass") \
        == [("r",)]
    parts = _sql(team_db, "SELECT c.relname, count(x.*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                          "LEFT JOIN urchin_chunks x ON x.tableoid = c.oid "
                          "WHERE i.inhparent = 'urchin_chunks'::regclass GROUP BY 1 ORDER BY 1")
    assert parts == [("urchin_chunks_2026m01", 2), ("urchin_chunks_2026m02", 1), ("urchin_chunks_2026m11", 1),
                     ("urchin_chunks_default", 0)]        # every month outside the window (schema 7)
    uniques = _sql(team_db, "SELECT indexdef FROM pg_indexes WHERE tablename = 'urchin_chunks' "
                            "AND indexdef LIKE 'CREATE UNIQUE%%'")
    assert uniques and all("occurred_at" in u[0] for u in uniques)
    found = _home(tmp_path, "desktop", team_db).context(query="partitioned event", limit=10).results
    assert len(found) == 4


def test_an_existing_database_is_migrated_to_partitions_with_its_rows(tmp_path: Path, team_db: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import urchin.hybrid.pg_migrate as pg

    monkeypatch.setattr(pg, "MIGRATIONS", MIGRATIONS[:3])        # a database of the release before
    with psycopg.connect(team_db) as conn:
        pg.migrate(conn)
    memory = _home(tmp_path, "laptop", team_db)
    memory.ingest(_events(5, "legacy"))
    with psycopg.connect(team_db) as conn:
        for event in memory.tail(5):
            conn.execute("INSERT INTO urchin_chunks (chunk_id, doc_id, source, kind, content, occurred_at, device, "
                         "journal_offset) VALUES (%s, %s, 'claude', 'note', %s, %s, 'laptop', 0)",
                         (event.id, event.id, event.content, event.timestamp))
    assert _sql(team_db, "SELECT count(*) FROM pg_partitioned_table") == [(0,)]
    monkeypatch.setattr(pg, "MIGRATIONS", MIGRATIONS)
    memory.index()                                                # migrates, then feeds idempotently
    assert _sql(team_db, "SELECT count(*), count(DISTINCT chunk_id) FROM urchin_chunks") == [(5, 5)]
    assert _sql(team_db, "SELECT count(*) FROM pg_partitioned_table") == [(1,)]
    assert _sql(team_db, "SELECT to_regclass('urchin_chunks_unpartitioned')") == [(None,)]
    memory.close()


def test_two_processes_of_one_device_both_see_a_replaced_journal(tmp_path: Path, team_db: str) -> None:
    memory = _home(tmp_path, "laptop", team_db)
    memory.ingest(_events(30, "first"))
    memory.index()
    memory.journal.path.write_bytes(memory.journal.path.read_bytes().split(b"\n", 1)[1])
    memory.close()
    homes = {"laptop": _home(tmp_path, "laptop", team_db)}
    homes["laptop"].ingest(_events(5, "second"))
    procs = [_index_proc(tmp_path / "laptop", team_db, "laptop") for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [r[1] for r in results]
    assert _sql(team_db, "SELECT count(*), count(DISTINCT chunk_id) FROM urchin_chunks") == [(35, 35)]
    cursor = _sql(team_db, "SELECT byte_offset FROM urchin_cursors WHERE device = 'laptop' AND journal = %s",
                  (str(homes["laptop"].settings.journal_path),))
    assert cursor == [(homes["laptop"].end_offset(),)]
    homes["laptop"].close()


def test_a_feeder_role_indexes_its_workspace_files_as_its_device(tmp_path: Path, team_db: str,
                                                                 roles: dict[str, Any]) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "NOTES.md").write_text("# Rollout\n\nThe quokka rollout plan lives here.\n")
    laptop = _home(tmp_path, "laptop", roles["laptop"])
    laptop.workspace_add(str(root))
    report = laptop.index_files()
    assert report.indexed == 1
    laptop.close()
    assert _sql(team_db, "SELECT DISTINCT device FROM urchin_chunks WHERE doc_type = 'file'") == [("laptop",)]


def test_upgrading_keeps_the_trigram_index_on_a_team_database_and_drops_it_from_a_single_users(
        tmp_path: Path, team_db: str, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import urchin.hybrid.pg_migrate as pg
    from urchin.hybrid.postgres import PostgresIndex

    monkeypatch.setattr(pg, "MIGRATIONS", MIGRATIONS[:7])        # databases of the release before issue 37
    owner = setup_roles(team_db, owner_password="owner-pw")["owner"]["url"]
    PostgresIndex(pg_url).status()                                # a single user's index
    for n, url in enumerate((team_db, pg_url)):
        home = _home(tmp_path, f"home-{n}", url)
        home.ingest(_events(4, "quokka"))
        home.index()
        home.close()
        assert _trigram_indexes(url) == 3                         # the table's, its month's and the default's
    monkeypatch.setattr(pg, "MIGRATIONS", MIGRATIONS)
    for url in (owner, pg_url):
        PostgresIndex(url).status()                               # the upgrade, at the next connection
    assert _trigram_indexes(team_db) == 3                         # team search keeps its index
    assert _trigram_indexes(pg_url) == 0                          # a single user's loses it, by itself
    for n, url in enumerate((team_db, pg_url)):
        assert _sql(url, "SELECT max(version) FROM urchin_migrations") == [(MIGRATIONS[-1][0],)]
        reader = _home(tmp_path, f"reader-{n}", url)
        found = reader.search("QUOKKA EVENT 3", scope="team", hours=24 * 365 * 30)
        assert [h.event.content for h in found.hits] == ["quokka event 3 about the payments rollout"]
        reader.close()
