"""Session fixture `embedder_url`: a real infinity server (all-MiniLM-L6-v2, OpenAI API) for tests.

First use on a machine installs the server's own venv through scripts/test-embedder.sh (~80 s,
then reused); each session starts it on a free port (~20 s of a core to healthy) and stops it at the
end. Under xdist the controller starts one for all workers (`start_shared`, from conftest's
pytest_configure), in the background while the first tests run: each worker starting its own cost
a second start, on the other worker's core.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

__all__ = ["embedder_url", "free_port", "MODEL", "start_shared", "stop_shared"]

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


def start_shared(config: pytest.Config) -> None:
    """In an xdist controller: start one server for every worker, and tell them its URL (environment)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get("URCHIN_TEST_EMBEDDER_URL"):
        return
    if not getattr(config.option, "numprocesses", None):
        return
    logs = Path(tempfile.mkdtemp(prefix="urchin-test-embedder-"))
    port = free_port()
    log = logs / f"embedder-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(SCRIPT), "start", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "URCHIN_TEST_EMBEDDER_TIMEOUT": str(HEALTH_TIMEOUT)})
    config.stash[_SHARED] = proc
    os.environ["URCHIN_TEST_EMBEDDER_URL"] = f"http://127.0.0.1:{port}"
    os.environ["URCHIN_TEST_EMBEDDER_LOG"] = str(log)
    os.environ["URCHIN_TEST_EMBEDDER_PID"] = str(proc.pid)


def stop_shared(config: pytest.Config) -> None:
    proc = config.stash.get(_SHARED, None)
    if proc is not None:
        _stop(proc)


_SHARED = pytest.StashKey[subprocess.Popen[bytes]]()


@pytest.fixture(scope="session")
def embedder_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a running infinity server; `URCHIN_TEST_EMBEDDER_URL` uses one started elsewhere
    (the xdist controller's, or yours), once it answers /health."""
    given = os.environ.get("URCHIN_TEST_EMBEDDER_URL")
    if given:
        _wait_healthy(given.rstrip("/"), None, Path(os.environ.get("URCHIN_TEST_EMBEDDER_LOG", os.devnull)),
                      INSTALL_TIMEOUT, os.environ.get("URCHIN_TEST_EMBEDDER_PID"))
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


def _wait_healthy(url: str, proc: subprocess.Popen[bytes] | None, log: Path, timeout: float = HEALTH_TIMEOUT,
                  pid: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"test embedder exited ({proc.returncode}) before /health:\n{_tail(log)}")
        if pid and not _running(pid):
            pytest.fail(f"the shared test embedder (pid {pid}) exited before /health:\n{_tail(log)}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail(f"test embedder at {url} not healthy after {timeout:.0f} s:\n{_tail(log)}")


def _running(pid: str) -> bool:
    """Whether `pid` runs (a zombie, exited but not yet reaped by the controller, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
