"""The daemon's event stream (`GET /mcp`, server-sent events) ends once idle, so an abandoned client
cannot hold a connection forever; the limit is `[daemon] sse_idle_timeout_s` in config.toml."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess

IDLE_S = 1.5
SSE = {"accept": "text/event-stream"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    home = tmp_path_factory.mktemp("sse") / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"[daemon]\nsse_idle_timeout_s = {IDLE_S}\n")
    proc = DaemonProcess(home, "--with-mcp").start()
    try:
        with proc.client() as client:   # the first /mcp request waits for the SDK's build: not the idle time measured
            assert client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                               headers={"accept": "application/json, text/event-stream"}).status_code == 200
        yield proc
    finally:
        proc.stop()


def test_an_idle_event_stream_is_closed_after_the_timeout(daemon: DaemonProcess) -> None:
    with daemon.client(timeout=httpx.Timeout(10.0)) as client:
        started = time.monotonic()
        with client.stream("GET", "/mcp", headers=SSE) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            body = b"".join(response.iter_bytes())  # returns only when the daemon ends the stream
        elapsed = time.monotonic() - started
        assert IDLE_S - 0.2 <= elapsed < IDLE_S + 3, elapsed
        assert all(line.startswith(b":") for line in body.splitlines() if line)  # pings at most, no event
        # The daemon (and this very connection) still serve.
        assert client.get("/recent").status_code == 200
        assert client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                           headers={"accept": "application/json, text/event-stream"}).status_code == 200


def test_two_idle_streams_end_independently(daemon: DaemonProcess) -> None:
    with daemon.client(timeout=httpx.Timeout(10.0)) as first, daemon.client(timeout=httpx.Timeout(10.0)) as second:
        started = time.monotonic()
        with first.stream("GET", "/mcp", headers=SSE) as one:
            time.sleep(0.7)
            with second.stream("GET", "/mcp", headers=SSE) as two:
                b"".join(one.iter_bytes())
                first_done = time.monotonic() - started
                b"".join(two.iter_bytes())
                second_done = time.monotonic() - started
    assert IDLE_S - 0.2 <= first_done < second_done < IDLE_S + 3.7


@pytest.mark.parametrize("value", ['"soon"', "0", "-5", "true", "1e9"])
def test_a_bad_idle_timeout_is_a_config_error(tmp_path: Path, value: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"[daemon]\nsse_idle_timeout_s = {value}\n")
    result = run_urchin("serve", "--port", "0", "--no-index", env={"URCHIN_HOME": str(home)}, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "daemon.sse_idle_timeout_s" in result.stderr and "Traceback" not in result.stderr
