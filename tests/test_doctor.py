"""`urchin doctor` on real homes: healthy, loose permissions, torn lines, dead services, live daemon."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess
from urchin.config import Settings
from urchin.doctor import run_checks


def _levels(settings: Settings) -> dict[str, str]:
    return {check.name: check.level for check in run_checks(settings)}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_fresh_home_is_healthy(settings: Settings) -> None:
    result = run_urchin("doctor", env={"URCHIN_HOME": str(settings.home)})
    assert result.returncode == 0, result.stdout
    assert "FAIL" not in result.stdout and "journal" in result.stdout


def test_loose_token_file_fails_with_a_fix(settings: Settings) -> None:
    run_urchin("ingest", "something", env={"URCHIN_HOME": str(settings.home)})
    settings.token_path.write_text("abc\n")
    settings.token_path.chmod(0o644)
    result = run_urchin("doctor", env={"URCHIN_HOME": str(settings.home)})
    assert result.returncode == 1
    assert "FAIL  token" in result.stdout and f"chmod 600 {settings.token_path}" in result.stdout


def test_readable_journal_warns(settings: Settings) -> None:
    run_urchin("ingest", "something", env={"URCHIN_HOME": str(settings.home)})
    settings.journal_path.chmod(0o644)
    assert _levels(settings)["journal"] == "warn"


def test_torn_tail_and_invalid_lines_warn(settings: Settings) -> None:
    run_urchin("ingest", "something", env={"URCHIN_HOME": str(settings.home)})
    with settings.journal_path.open("ab") as handle:
        handle.write(b"not json at all\n{\"content\": \"cut sh")
    check = next(c for c in run_checks(settings) if c.name == "lines")
    assert check.level == "warn"
    assert "incomplete" in check.detail and "1 line(s) are not events" in check.detail


def test_unreachable_embedder_and_database_fail(urchin_home: Path) -> None:
    settings = Settings.resolve(urchin_home, env={"URCHIN_EMBEDDER_URL": f"http://127.0.0.1:{_closed_port()}/v1",
                                                   "URCHIN_DATABASE_URL":
                                                   f"postgresql://me:hunter2@127.0.0.1:{_closed_port()}/urchin"})
    checks = {c.name: c for c in run_checks(settings)}
    assert checks["embedder"].level == "fail" and checks["database"].level == "fail"
    assert "hunter2" not in checks["database"].detail


def test_stale_daemon_file_warns(settings: Settings) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.daemon_file.write_text('{"pid": 1, "address": "http://127.0.0.1:9"}')
    assert _levels(settings)["daemon"] == "warn"


def test_live_daemon_ok_and_wrong_token_fails(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home).start()
    try:
        assert _levels(Settings.resolve(home))["daemon"] == "ok"
        wrong = Settings.resolve(home, env={"URCHIN_INTAKE_TOKEN": "not-the-token"})
        assert _levels(wrong)["daemon"] == "fail"
    finally:
        daemon.stop()
