"""`urchin mcp` beside a daemon serving `/mcp` relays the stdio session to it (urchin/daemon/mcprelay.py):
the MCP SDK is not imported, the answers are the in-process server's byte for byte, and when the
daemon cannot serve (a refused token) or goes away mid-session, the in-process server answers on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import daemon_fixture
from tests.test_mcp_stdio_wire import MALFORMED
from urchin.config import Settings
from urchin.facade import Memory

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call(request_id: int, name: str, arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


# a session touching every kind of line: requests, notifications, tool errors, protocol errors, bad lines
SESSION: list[Any] = [
    INIT, INITIALIZED,
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    _call(3, "urchin_search", {"query": "lake"}),
    _call(4, "urchin_search", {"query": ""}),
    _call(5, "urchin_no_such_tool", {}),
    _call(6, "urchin_search", ["not", "an", "object"]),
    _call(7, "urchin_recent", {"limit": 5}),
    _call(8, "urchin_semantic", {"query": "walk by the water"}),
    {"jsonrpc": "2.0", "id": "str-9", "method": "ping"},
    {"jsonrpc": "2.0", "id": 10, "method": "resources/list"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
    b"not json", b"[1, 2]", b'{"jsonrpc": "1.0", "id": 11, "method": "ping"}', b"",
    b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', b'{"jsonrpc": "2.0", "id": 12, "method": "ping", "params": 3}',
    *(line for _, line, _, _ in MALFORMED), b'{"jsonrpc": "2.0", "id": 12, "method": "ping"}\r',   # a CRLF line
]


def _wire(lines: list[Any]) -> bytes:
    return b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines)


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), **extra}
    if "URCHIN_NO_DAEMON" not in extra:
        env.pop("URCHIN_NO_DAEMON", None)
    return env


def _mcp(home: Path, lines: list[Any], **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "urchin", "mcp"], input=_wire(lines), env=_env(home, **env),
                          capture_output=True, timeout=120)


def _by_id(out: bytes) -> dict[str, list[bytes]]:
    """Answers keyed by their id (answers come as they are ready, in any order, over stdio too)."""
    answers: dict[str, list[bytes]] = {}
    for line in out.splitlines():
        answers.setdefault(json.dumps(json.loads(line).get("id")), []).append(line)
    return {key: sorted(lines) for key, lines in answers.items()}


def _serving(home: Path) -> Iterator[daemon_fixture.DaemonProcess]:
    memory = Memory(Settings.resolve(home))
    memory.ingest([{"content": "we walked to the lake near the trail", "source": "manual"},
                   {"content": "pytest failed on the fixture", "source": "shell", "kind": "command"}])
    memory.close()
    yield from daemon_fixture.running(home, "--with-mcp")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[daemon_fixture.DaemonProcess]:
    """One daemon for the tests that only ask it (a daemon with the MCP SDK is ~3 s of a core to start);
    each compares the relayed answers with the in-process server's on the same home, asked just after."""
    yield from _serving(tmp_path_factory.mktemp("relay") / "home")


@pytest.fixture
def daemon(urchin_home: Path) -> Iterator[daemon_fixture.DaemonProcess]:
    """A daemon of the test's own (it stops it)."""
    yield from _serving(urchin_home)


def test_the_relay_answers_every_line_as_the_in_process_server_without_the_sdk(
        shared: daemon_fixture.DaemonProcess) -> None:
    daemon = shared
    relayed = _mcp(daemon.home, SESSION, PYTHONPROFILEIMPORTTIME="1")
    direct = _mcp(daemon.home, SESSION, URCHIN_NO_DAEMON="1")
    assert relayed.returncode == direct.returncode == 0, relayed.stderr[-2000:]
    imported = {line.rsplit(b"|", 1)[-1].strip().split(b".")[0] for line in relayed.stderr.splitlines()
                if line.startswith(b"import time:")}
    assert not imported & {b"mcp", b"mcp_types", b"pydantic", b"anyio", b"click", b"httpx"}, sorted(imported)
    assert _by_id(relayed.stdout) == _by_id(direct.stdout)
    assert json.dumps(SESSION[2]["id"]) in _by_id(relayed.stdout)   # tools/list was answered, not dropped


def test_a_refused_initialize_is_answered_by_the_in_process_server(shared: daemon_fixture.DaemonProcess) -> None:
    daemon = shared
    lines = [INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, _call(3, "urchin_search",
                                                                                         {"query": "lake"})]
    refused = _mcp(daemon.home, lines, URCHIN_INTAKE_TOKEN="not-the-daemons-token")
    direct = _mcp(daemon.home, lines, URCHIN_NO_DAEMON="1")
    assert refused.returncode == 0, refused.stderr[-2000:]
    assert _by_id(refused.stdout) == _by_id(direct.stdout)


def test_a_daemon_that_goes_away_mid_session_hands_the_session_to_the_in_process_server(
        daemon: daemon_fixture.DaemonProcess) -> None:
    search = _call(2, "urchin_search", {"query": "lake"})
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=_env(daemon.home))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_wire([INIT, INITIALIZED, search]))
        proc.stdin.flush()
        first = [proc.stdout.readline(), proc.stdout.readline()]
        daemon.stop()                                   # SIGTERM: daemon.json goes, the lock is released
        proc.stdin.write(_wire([dict(search, id=3), {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]))
        proc.stdin.close()
        rest = proc.stdout.read()
        assert proc.wait(60) == 0
    finally:
        proc.kill()
    answers = _by_id(b"".join(first) + rest)
    assert set(answers) == {"1", "2", "3", "4"}, answers
    assert answers["3"][0].replace(b'"id":3', b'"id":2') == answers["2"][0]   # the same answer, from the journal
    assert b'"tools":[' in answers["4"][0]
