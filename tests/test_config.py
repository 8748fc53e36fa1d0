"""Settings as a new user meets them: where runtime files go when the environment says nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import run_urchin
from urchin.config import runtime_dir


def _no_runtime_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}


def test_runtime_dir_is_private_and_ours_when_xdg_runtime_dir_is_unset(tmp_path: Path) -> None:
    chosen = runtime_dir({"TMPDIR": str(tmp_path)})
    info = os.lstat(chosen)
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()


def test_a_runtime_dir_others_may_write_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert runtime_dir({"XDG_RUNTIME_DIR": str(shared), "TMPDIR": str(tmp_path)}) != shared
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert runtime_dir({"XDG_RUNTIME_DIR": str(private)}) == private


@pytest.mark.slow
def test_no_runtime_dir_warning_without_xdg_runtime_dir() -> None:
    """`index`, `context` and `query-source` start the embedded PostgreSQL: no platformdirs warning."""
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**_no_runtime_env(), "PYTHONPATH": str(REPO)}
    assert run_urchin("ingest", "hello runtime world", env=env).returncode == 0
    for args in (["index"], ["context", "hello"], ["query-source", "manual", "hello"]):
        done = subprocess.run([sys.executable, "-m", "urchin", *args], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert "Warning" not in done.stderr and "warn" not in done.stderr.lower(), (args, done.stderr)


@pytest.mark.slow
def test_no_runtime_dir_warning_in_the_daemon_log(urchin_home: Path) -> None:
    from tests.daemon_fixture import DaemonProcess

    daemon = DaemonProcess(urchin_home, "--with-index")
    daemon.env.pop("XDG_RUNTIME_DIR", None)
    daemon.start()
    try:
        with daemon.client(timeout=120) as client:
            client.post("/ingest", json={"content": "hello runtime daemon"})
            answer = client.post("/context", json={"query": "hello"})   # starts the embedded PostgreSQL
            assert answer.status_code == 200, answer.text
    finally:
        daemon.stop()
    assert "Warning" not in daemon.log(), daemon.log()
