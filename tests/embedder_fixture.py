"""Session fixture `embedder_url`: a real infinity server (all-MiniLM-L6-v2, OpenAI API) for tests.

First use on a machine installs the server's own venv through scripts/test-embedder.sh (~80 s,
then reused); each session starts it on a free port (~20 s to healthy) and stops it at the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

__all__ = ["embedder_url", "free_port", "MODEL"]

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "test-embedder.sh"
MODEL = "all-MiniLM-L6-v2"
INSTALL_TIMEOUT = 1800
HEALTH_TIMEOUT = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@pytest.fixture(scope="session")
def embedder_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a running infinity server; `URCHIN_TEST_EMBEDDER_URL` reuses one already up."""
    given = os.environ.get("URCHIN_TEST_EMBEDDER_URL")
    if given:
        yield given.rstrip("/")
        return
    logs = tmp_path_factory.mktemp("embedder")
    install_log = logs / "install.log"
    with install_log.open("w") as out:
        done = subprocess.run([str(SCRIPT), "install"], stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=INSTALL_TIMEOUT, check=False)
    if done.returncode != 0:
        pytest.fail(f"test embedder install failed ({done.returncode}):\n{_tail(install_log)}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_log = logs / "server.log"
    with server_log.open("w") as out:
        # Its own session, so the stop reaches the script and the server it started.
        proc = subprocess.Popen([str(SCRIPT), "start", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                env={**os.environ, "URCHIN_TEST_EMBEDDER_TIMEOUT": str(HEALTH_TIMEOUT)})
    try:
        _wait_healthy(url, proc, server_log)
        yield url
    finally:
        _stop(proc)


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"test embedder exited ({proc.returncode}) before /health:\n{_tail(log)}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail(f"test embedder not healthy after {HEALTH_TIMEOUT} s:\n{_tail(log)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
