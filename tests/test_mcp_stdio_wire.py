"""`urchin mcp` on the wire: raw bytes through real pipes, every line answered, nothing lost at EOF.

These drive `python -m urchin mcp` with hand-written lines (not the SDK client, which never sends
a malformed one). Every read has a deadline, so a server that stays silent fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_fixture import DaemonProcess
from tests.mcp_harness import child_env
from urchin.facade import Memory

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "wire", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class Wire:
    """One `urchin mcp` process; `send` writes raw bytes, `answer` reads one stdout line or fails."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "urchin", "mcp"], env={**os.environ, **child_env()},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # EOF

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send_json(self, *messages: dict[str, Any]) -> None:
        self.send(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def answer(self, timeout: float = 15) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout}s (the server stays silent)") from None
        assert line is not None, f"stdout closed; stderr: {self.stderr()}"
        message: dict[str, Any] = json.loads(line)
        assert message["jsonrpc"] == "2.0", message
        return message

    def close_and_drain(self, timeout: float = 60) -> list[dict[str, Any]]:
        """Close stdin, then read every remaining line until stdout closes."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        out: list[dict[str, Any]] = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"stdout still open {timeout}s after EOF; got {len(out)}") from None
            if line is None:
                break
            out.append(json.loads(line))
        self.proc.wait(15)
        return out

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def wire(memory: Memory) -> Iterator[Wire]:
    server = Wire()
    yield server
    server.stop()


def _initialize(wire: Wire) -> None:
    wire.send_json(INITIALIZE, INITIALIZED)
    assert wire.answer()["result"]["serverInfo"]["name"] == "urchin"


LONE_SURROGATE = (b'{"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "urchin_ingest",'
                  b' "arguments": {"content": "half a pair \\ud800 here"}}}')
MALFORMED: list[tuple[str, bytes, int, Any]] = [
    ("not json", b"{not json", PARSE_ERROR, None),
    ("truncated", b'{"jsonrpc": "2.0", "id": 3, "method": "pi', PARSE_ERROR, None),
    ("blank line", b"", PARSE_ERROR, None),
    ("invalid utf-8", b'{"jsonrpc": "2.0", "id": 4, "method": "\xff\xfe"}', PARSE_ERROR, None),
    ("NaN literal", b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": NaN}}', PARSE_ERROR, None),
    ("nested 100k deep", b"[" * 100_000, PARSE_ERROR, None),
    ("batch array", b'[{"jsonrpc": "2.0", "id": 6, "method": "ping"}]', INVALID_REQUEST, None),
    ("empty batch", b"[]", INVALID_REQUEST, None),
    ("a bare string", b'"ping"', INVALID_REQUEST, None),
    ("jsonrpc 1.0", b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}', INVALID_REQUEST, 7),
    ("no jsonrpc", b'{"id": "eight", "method": "ping"}', INVALID_REQUEST, "eight"),
    ("method not a string", b'{"jsonrpc": "2.0", "id": 9, "method": 5}', INVALID_REQUEST, 9),
    ("params a list", b'{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": [1]}', INVALID_REQUEST, 10),
    ("id an object", b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', INVALID_REQUEST, None),
    ("id a boolean", b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', INVALID_REQUEST, None),
    ("neither request nor response", b'{"jsonrpc": "2.0", "id": 11}', INVALID_REQUEST, 11),
    ("lone surrogate", LONE_SURROGATE, INVALID_REQUEST, 41),
    ("lone surrogate in a key", b'{"jsonrpc": "2.0", "id": 42, "method": "ping", "params": {"\\udfff": 1}}',
     INVALID_REQUEST, 42),
    ("number out of range", b'{"jsonrpc": "2.0", "id": 43, "method": "ping", "params": {"x": 1e400}}',
     INVALID_REQUEST, 43),
]


def test_every_malformed_line_gets_one_json_rpc_error(wire: Wire, memory: Memory) -> None:
    """One process takes every malformed line in turn (one bad line never costs another): each gets
    exactly one error, and the server still serves - the next reply is a ping's, not a second error."""
    _initialize(wire)
    for name, line, code, echo in MALFORMED:
        wire.send(line + b"\n")
        error = wire.answer()
        assert error["id"] == echo and error["error"]["code"] == code, (name, error)
        assert error["error"]["message"], (name, error)
        wire.send_json({"jsonrpc": "2.0", "id": f"after {name}", "method": "ping"})
        assert wire.answer() == {"jsonrpc": "2.0", "id": f"after {name}", "result": {}}, name
    assert memory.recent().events == []  # nothing malformed was stored
    assert wire.close_and_drain() == []
    assert wire.proc.returncode == 0 and "Traceback" not in wire.stderr()


def test_malformed_lines_before_initialize_are_answered_too(wire: Wire) -> None:
    wire.send(b"{oops\n[]\n")
    assert [wire.answer()["error"]["code"] for _ in range(2)] == [PARSE_ERROR, INVALID_REQUEST]
    _initialize(wire)


def test_crlf_line_endings_are_fine(wire: Wire) -> None:
    wire.send(json.dumps(INITIALIZE).encode() + b"\r\n")
    assert wire.answer()["id"] == "init"


def test_a_burst_then_eof_answers_every_request(wire: Wire, memory: Memory) -> None:
    """50 ingest calls written at once and stdin closed at once: 50 answers, 50 events."""
    count = 50
    calls = [{"jsonrpc": "2.0", "id": n, "method": "tools/call",
              "params": {"name": "urchin_ingest", "arguments": {"content": f"burst event number {n}"}}}
             for n in range(count)]
    wire.send_json(INITIALIZE, INITIALIZED, *calls)
    answers = wire.close_and_drain()
    assert wire.proc.returncode == 0, wire.stderr()
    by_id = {a["id"]: a for a in answers}
    assert len(answers) == count + 1 and set(by_id) == {"init", *range(count)}
    assert all(by_id[n]["result"]["structuredContent"]["status"] == "appended" for n in range(count))
    contents = {e.content for e in memory.recent(limit=1000).events}
    assert contents == {f"burst event number {n}" for n in range(count)}


def test_a_burst_then_eof_through_the_daemon(urchin_home: Path, memory: Memory) -> None:
    """The same with a daemon running: the tools write through it, and still every answer comes back."""
    daemon = DaemonProcess(urchin_home).start()
    wire = Wire()
    try:
        count = 40
        calls = [{"jsonrpc": "2.0", "id": n, "method": "tools/call",
                  "params": {"name": "urchin_ingest", "arguments": {"content": f"via the daemon {n}"}}}
                 for n in range(count)]
        wire.send_json(INITIALIZE, INITIALIZED, *calls, {"jsonrpc": "2.0", "id": "status", "method": "tools/call",
                                                          "params": {"name": "urchin_status", "arguments": {}}})
        answers = {a["id"]: a for a in wire.close_and_drain()}
        assert set(answers) == {"init", "status", *range(count)}
        assert "daemon" in answers["status"]["result"]["structuredContent"], "urchin mcp did not use the daemon"
        with daemon.client() as client:
            found = client.get("/search", params={"query": "via the daemon", "limit": 100}).json()
        assert found["totalResults"] == count
    finally:
        wire.stop()
        daemon.stop()


def test_a_burst_of_mixed_lines_then_eof_answers_each_once(wire: Wire) -> None:
    """Valid and malformed lines interleaved, then EOF: one answer per line that wants one."""
    lines = [json.dumps(INITIALIZE).encode(), json.dumps(INITIALIZED).encode()]
    expected: list[Any] = ["init"]
    for n in range(20):
        lines.append(json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}).encode())
        lines.append(b'{"jsonrpc": "1.0", "id": "bad-%d", "method": "ping"}' % n)
        lines.append(b"{broken")
        expected += [n, f"bad-{n}", None]
    wire.send(b"\n".join(lines) + b"\n")
    answers = wire.close_and_drain()
    assert sorted(map(repr, (a["id"] for a in answers))) == sorted(map(repr, expected))


def test_a_line_over_the_limit_is_answered_and_skipped(wire: Wire) -> None:
    from urchin.mcp_server.stdio import MAX_LINE_BYTES

    _initialize(wire)
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"y" * MAX_LINE_BYTES + b'"}}\n'
    wire.send(huge + json.dumps({"jsonrpc": "2.0", "id": "next", "method": "ping"}).encode() + b"\n")
    error = wire.answer(timeout=60)
    assert error["id"] is None and error["error"]["code"] == INVALID_REQUEST
    assert "over" in error["error"]["message"]
    assert wire.answer() == {"jsonrpc": "2.0", "id": "next", "result": {}}


def test_duplicate_ids_and_client_responses_then_eof(wire: Wire) -> None:
    """Two requests with one id get two answers; a stray response and a cancel for nothing get none;
    EOF then ends the process at once."""
    wire.send_json(INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                   {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 99, "result": {}},
                   {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}})
    answers = wire.close_and_drain(timeout=20)
    assert [a["id"] for a in answers] == ["init", 1, 1]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_children_cannot_read_the_wire(wire: Wire) -> None:
    """While serving, fd 0 reads /dev/null (a child such as git or PostgreSQL inherits that, not the
    client's pipe) and fd 1 is not the wire; the protocol uses private close-on-exec copies."""
    _initialize(wire)
    fd = f"/proc/{wire.proc.pid}/fd"
    assert os.readlink(f"{fd}/0") == "/dev/null"
    assert os.readlink(f"{fd}/1") != os.readlink(f"/proc/self/fd/{wire.proc.stdout.fileno()}")  # type: ignore[union-attr]
    assert wire.close_and_drain() == []
