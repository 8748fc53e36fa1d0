"""The MCP tools inside the real daemon: streamable HTTP at /mcp behind its token and Host check, and
`urchin mcp` (stdio) routing through the daemon when one runs.

Skipped until the daemon (urchin/daemon/, tests/daemon_fixture.py) is on the branch; it then
checks that `/mcp` is mounted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.mcp_harness import http_session, stdio_session
from tests.mcp_scenarios import call, check_errors, check_large_output, check_read_tools, check_write_tools
from urchin.facade import Memory

pytest.importorskip("urchin.daemon.server", reason="the daemon is not on this branch yet")
daemon_fixture = pytest.importorskip("tests.daemon_fixture", reason="the daemon's test fixture is not here yet")
pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def daemon(urchin_home: Path) -> Iterator[Any]:
    yield from daemon_fixture.running(urchin_home, "--with-mcp")


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One daemon for the tests that write nothing (a daemon with the MCP SDK is ~3 s of a core to start)."""
    yield from daemon_fixture.running(tmp_path_factory.mktemp("mcp-daemon") / "home", "--with-mcp")


async def test_every_tool_over_the_daemons_mcp_endpoint(daemon: Any, memory: Memory) -> None:
    async with http_session(daemon.url + "/mcp", daemon.token) as session:
        await check_read_tools(session, memory)
        await check_errors(session, memory)
        await check_write_tools(session, memory)
        await check_large_output(session, memory)


def test_the_daemons_mcp_endpoint_wants_the_token_and_a_local_host(asked: Any) -> None:
    daemon = asked
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "raw", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    url = daemon.url + "/mcp"
    # 30 s, not httpx's 5: the first /mcp request waits for the SDK's build, seconds on a loaded machine
    assert httpx2.post(url, json=initialize, headers=accept, timeout=30).status_code == 401
    good = {**accept, "Authorization": f"Bearer {daemon.token}"}
    assert httpx2.post(url, json=initialize, headers=good, timeout=30).status_code == 200
    assert httpx2.post(url, json=initialize, headers={**good, "Host": "evil.example"},
                       timeout=30).status_code in (400, 403, 421)


async def test_stdio_server_routes_through_the_running_daemon(asked: Any) -> None:
    async with stdio_session({"URCHIN_HOME": str(asked.home)}) as session:
        text, data = await call(session, "urchin_status")
    assert "daemon" in data, "urchin mcp did not reach the daemon"


async def test_the_daemon_logs_as_urchin_and_quietly_after_mcp_calls(urchin_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    process = daemon_fixture.DaemonProcess(urchin_home, "--with-mcp", env=env)
    process.env.pop("XDG_RUNTIME_DIR", None)
    process.start()
    try:
        async with http_session(process.url + "/mcp", process.token) as session:
            await call(session, "urchin_status", {})
        process.client().get("/status")
    finally:
        process.stop()
    log = process.log()
    assert "Terminating session" not in log
    assert "uvicorn" not in log and "RuntimeDirWarning" not in log, log
    assert " INFO urchin" in log, log


def test_a_daemon_served_with_no_mcp_has_no_mcp_route_and_serves_the_rest(urchin_home: Path) -> None:
    """`urchin serve --no-mcp` (what tests/daemon_fixture passes unless a test asks `--with-mcp`): no
    /mcp route at all, the same JSON 404 as any unknown path, and every other route as usual."""
    process = daemon_fixture.DaemonProcess(urchin_home).start()
    try:
        assert "--no-mcp" in process.proc.args
        with process.client() as http:
            answer = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert answer.status_code == 404 and answer.json()["field"] == "path", answer.text
            assert http.get("/status").status_code == 200
    finally:
        process.stop()
    assert "MCP endpoint" not in process.log()
