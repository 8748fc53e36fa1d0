"""A running daemon reads config.toml again when it changes (and on SIGHUP): `[redact]` rules apply from
the next write, a key that needs a restart is named as such in its log and in `doctor`, and a rule
that does not compile keeps the rules in force."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess, running
from urchin.config import changed_keys


@pytest.fixture
def daemon(urchin_home: Path) -> Iterator[DaemonProcess]:
    yield from running(urchin_home)


def _wait_log(daemon: DaemonProcess, words: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while words not in (log := daemon.log()):
        assert time.monotonic() < deadline, f"{words!r} not in the daemon's log: {log}"
        time.sleep(0.05)
    return log


def test_a_new_redact_rule_applies_to_the_next_write_of_a_running_daemon(daemon: DaemonProcess) -> None:
    api = daemon.client()
    assert api.post("/ingest", json={"content": "warm up"}).status_code == 200   # the daemon has built its rules
    (daemon.home / "config.toml").write_text('[redact.extra]\nbadge = "BADGE-[0-9]{6}"\n')
    # the very next write of every kind: one event, a batch, an MCP-style remember through /ingest/batch
    assert api.post("/ingest", json={"content": "door code BADGE-123456"}).status_code == 200
    batch = {"events": [{"content": "second BADGE-654321"}, {"content": "third BADGE-111111"}]}
    assert api.post("/ingest/batch", json=batch).status_code == 200
    journal = daemon.journal_bytes()
    assert b"BADGE-" not in journal and journal.count(b"[REDACTED:badge]") == 3
    _wait_log(daemon, "config.toml reloaded: redact.extra in force")
    # a rule that does not compile: the rules in force stay, and the log and doctor say why
    (daemon.home / "config.toml").write_text('[redact.extra]\nbadge = "BADGE-[0-9]{6}"\nbroken = "(("\n')
    assert api.post("/ingest", json={"content": "fourth BADGE-222222"}).status_code == 200
    assert b"BADGE-222222" not in daemon.journal_bytes()
    _wait_log(daemon, "config.toml not reloaded, the settings in force stay: redact.extra.broken")
    doctor = call_urchin("doctor", env={"URCHIN_HOME": str(daemon.home)})
    assert "redact.extra.broken" in doctor.stdout


def test_a_key_that_needs_a_restart_is_named_in_the_log_and_by_doctor(daemon: DaemonProcess) -> None:
    config = daemon.home / "config.toml"
    config.write_text('[redact.extra]\nbadge = "BADGE-[0-9]{6}"\n[urchin]\ndurability = "batch"\n')
    daemon.signal(signal.SIGHUP)
    log = _wait_log(daemon, "needs a restart")
    assert "urchin.durability" in log and "redact.extra in force" in log
    doctor = call_urchin("doctor", env={"URCHIN_HOME": str(daemon.home)})
    line = next(line for line in doctor.stdout.splitlines() if " config " in line)
    assert line.startswith("warn") and "urchin.durability" in line and "extra: badge" in line, doctor.stdout
    assert "restart" in doctor.stdout
    # SIGHUP with nothing changed reads it again and says so; the rules stay
    daemon.signal(signal.SIGHUP)
    _wait_log(daemon, "config.toml read again (SIGHUP): nothing new to apply")
    api = daemon.client()
    assert api.post("/ingest", json={"content": "BADGE-999999"}).status_code == 200
    assert b"BADGE-999999" not in daemon.journal_bytes()
    # `urchin status` through the daemon: the rules in words, no empty `key:` line
    status = run_urchin("status", env={"URCHIN_HOME": str(daemon.home)}).stdout.splitlines()
    assert "  redaction: built-in rules; extra: badge" in status
    assert "  configRestartNeeded: urchin.durability" in status
    assert not [line for line in status if line.rstrip().endswith(":") and line.startswith("  ")], status
    config.write_text('[redact.extra]\nbadge = "BADGE-[0-9]{6}"\n')   # put back: no restart owed any more
    time.sleep(1.2)
    doctor = call_urchin("doctor", env={"URCHIN_HOME": str(daemon.home)})
    assert any(line.startswith("ok    config") and "extra: badge" in line for line in doctor.stdout.splitlines())


def test_changed_keys_names_each_setting_that_differs() -> None:
    assert changed_keys({}, {"redact": {"extra": {"a": "x"}}}) == ["redact.extra"]
    assert changed_keys({"urchin": {"port": 1, "host": "h"}}, {"urchin": {"port": 2, "host": "h"}}) == ["urchin.port"]
    assert changed_keys({"recall": {"budget": 1}}, {}) == ["recall.budget"]
    assert changed_keys({"x": 1}, {"x": 1}) == []


def _count(url: str, pattern: str) -> int:
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM urchin_chunks WHERE content LIKE %s", (pattern,)).fetchone()
    except psycopg.errors.UndefinedTable:     # the index process has not made its schema yet
        return 0
    return int(row[0]) if row else 0


def test_a_new_redact_rule_reaches_the_files_the_index_process_chunks(urchin_home: Path, pg_url: str,
                                                                       tmp_path: Path) -> None:
    """The daemon's index process (a child chunking workspace files into PostgreSQL) takes a reloaded
    `[redact]` rule too: the files it chunked before are chunked again under it, without a restart."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "door.md").write_text("# Lab door\n\nThe lab door code is BADGE-123456, changed monthly.\n")
    env = {"URCHIN_HOME": str(urchin_home), "URCHIN_DATABASE_URL": pg_url}
    assert run_urchin("workspace", "add", str(root), env=env).returncode == 0
    daemon = DaemonProcess(urchin_home, "--with-index", env={"URCHIN_DATABASE_URL": pg_url}).start()
    try:
        deadline = time.monotonic() + 60
        while _count(pg_url, "%BADGE-123456%") == 0:
            assert time.monotonic() < deadline, f"the file was never chunked: {daemon.log()}"
            time.sleep(0.2)
        (urchin_home / "config.toml").write_text('[redact.extra]\nbadge = "BADGE-[0-9]{6}"\n')
        deadline = time.monotonic() + 30
        while _count(pg_url, "%BADGE-123456%") or not _count(pg_url, "%[REDACTED:badge]%"):
            assert time.monotonic() < deadline, f"the index process kept the old rules: {daemon.log()}"
            time.sleep(0.2)
    finally:
        daemon.stop()
