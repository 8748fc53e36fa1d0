"""Start the real daemon (`python -m urchin serve`) as a subprocess, and talk to it over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent


# The daemons a test's body started (not a fixture's): conftest stops those still running after the test.
started_by_tests: list[DaemonProcess] = []


class DaemonProcess:
    """One `urchin serve --port 0` on its own home; the address comes from daemon.json."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.args = args
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), **(env or {})}
        self.env.pop("URCHIN_NO_DAEMON", None)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.log_path = home.parent / f"{home.name}-daemon.log"

    def start(self, timeout: float = 30.0) -> DaemonProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        args = self.args if any(a in ("--port", "--uds") for a in self.args) else ("--port", "0", *self.args)
        # Each test home would start (and initdb) an embedded PostgreSQL: only where a test asks.
        args = tuple(a for a in args if a != "--with-index") if "--with-index" in args else (*args, "--no-index")
        # The MCP endpoint's build loads the MCP SDK (~2.5 s of a core, beside every test): only where a
        # test talks to /mcp (`--with-mcp`); test_daemon_deferred_route and test_mcp_daemon cover the build.
        args = tuple(a for a in args if a != "--with-mcp") if "--with-mcp" in args else (*args, "--no-mcp")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", *args], env=self.env,
                                         stdout=log, stderr=log)
        if "(call)" in os.environ.get("PYTEST_CURRENT_TEST", ""):
            started_by_tests.append(self)   # stopped after the test even if it fails (conftest)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.log()}")
            info = self.info()
            if info and info.get("pid") == self.proc.pid:
                self.url = info["address"]
                return self
            time.sleep(0.02)
        # Not ready (a loaded machine): stopped here, or it would outlive the failed test by an hour.
        self.stop()
        raise RuntimeError(f"daemon not ready in {timeout}s: {self.log()}")

    def info(self) -> dict[str, Any] | None:
        try:
            return orjson.loads((self.home / "daemon.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None

    @property
    def token(self) -> str:
        return self.env.get("URCHIN_INTAKE_TOKEN") or (self.home / "token").read_text().strip()

    @property
    def journal(self) -> Path:
        return self.home / "journal" / "events.jsonl"

    def journal_bytes(self) -> bytes:
        try:
            return self.journal.read_bytes()
        except FileNotFoundError:
            return b""

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"authorization": f"Bearer {token or self.token}"}
        headers.update(kwargs.pop("headers", {}))
        kwargs.setdefault("timeout", 30)
        return httpx.Client(base_url=self.url, headers=headers, trust_env=False, **kwargs)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def index_process(self, timeout: float = 30.0) -> int:
        """The pid of the daemon's index process (`python -m urchin.daemon.indexer`, started `--with-index`)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while not (found := _children(self.proc.pid, b"urchin.daemon.indexer")):
            if time.monotonic() > deadline:
                raise AssertionError(f"no index process: {self.log()}")
            time.sleep(0.1)
        return found[0]

    def kill_all(self, watchdogs: bool = True) -> None:
        """SIGKILL the daemon and its index process at once, and (`watchdogs`) the embedded PostgreSQL's
        watchdogs they started (as the OOM killer or `kill -9` of every process might): nobody is left
        to stop the server."""
        index = self.index_process()
        assert self.proc is not None
        dogs = [pid for parent in (self.proc.pid, index) for pid in _children(parent, b"urchin.hybrid.pgwatch")]
        for pid in [index, *dogs] if watchdogs else [index]:
            os.kill(pid, signal.SIGKILL)
        self.signal(signal.SIGKILL)
        self.wait()

    def wait(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _children(parent: int, module: bytes) -> list[int]:
    """The child processes of `parent` running `module` (`python -m module ...`)."""
    found = []
    for task in Path(f"/proc/{parent}/task").glob("*/children"):
        try:
            for pid in task.read_text().split():
                if module in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def running(home: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[DaemonProcess]:
    """A fixture's body (`yield from running(home)`): a daemon on `home` for the test, stopped after."""
    process = DaemonProcess(home, *args, env=env).start()
    try:
        yield process
    finally:
        process.stop()
