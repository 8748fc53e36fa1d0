"""The HTTP edge's bounds (daemon/edge.py, daemon/uvicorn_protocol.py), attacked over real sockets.

One daemon in this process with short limits (a few tenths of a second, a few connections): slow heads,
slow and endless bodies, oversized heads, more body than declared, idle and half-closed sockets, a flood
of connections and of pipelined requests. Each is answered as JSON where an answer is still possible and
closed; `/health` and `POST /ingest` are answered all along.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pytest

from tests.test_daemon_uvicorn_protocol import TOKEN, Answer, _read, _request
from urchin.config import Settings
from urchin.daemon.edge import Edge, EdgeLimits
from urchin.daemon.server import Daemon
from urchin.errors import ConfigError

LIMITS = EdgeLimits(idle_s=0.6, head_s=0.6, body_s=0.6, send_s=1.0, head_bytes=8 << 10, connections=40, pipelined=4)
HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
EVENT = orjson.dumps({"content": "past the edge", "source": "test"})


@dataclass
class Running:
    daemon: Daemon
    port: int

    @property
    def edge(self) -> Edge:
        assert self.daemon.edge is not None
        return self.daemon.edge

    def connect(self, timeout: float = 5.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def exchange(self, request: bytes) -> Answer:
        with self.connect() as sock:
            sock.sendall(request)
            return _read(sock, bytearray())


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    home = tmp_path_factory.mktemp("edge") / "home"
    settings = Settings.resolve(home, env={"URCHIN_INTAKE_TOKEN": TOKEN})
    daemon = Daemon(settings, port=0, collect=False, feed_index=False, log_level="error", limits=LIMITS)
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        assert daemon.ready.wait(60)
        yield Running(daemon, int(daemon.address.rsplit(":", 1)[1]))
    finally:
        daemon.stop()
        thread.join(20)


def _answer_then_closed(sock: socket.socket) -> tuple[Answer, float]:
    """The one response on `sock`, then its end; and how long both took."""
    started = time.monotonic()
    buffer = bytearray()
    answer = _read(sock, buffer)
    assert not buffer and sock.recv(100) == b""
    return answer, time.monotonic() - started


def _refusal(answer: Answer, status: int, field: str) -> None:
    assert answer.status == status and answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close"
    assert orjson.loads(answer.body)["field"] == field


def _closed_within(sock: socket.socket, seconds: float) -> float:
    started = time.monotonic()
    sock.settimeout(seconds)
    assert sock.recv(100) == b""
    return time.monotonic() - started


def test_a_head_sent_a_header_at_a_time_gets_408_at_its_deadline(running: Running) -> None:
    with running.connect() as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for i in range(30):     # a header every 0.05 s: 1.5 s of trickle, past the 0.6 s deadline
            try:
                sock.sendall(b"X-Slow-%d: a\r\n" % i)
            except OSError:
                break
            time.sleep(0.05)
        answer, _ = _answer_then_closed(sock)
    _refusal(answer, 408, "request")


def test_a_body_trickled_or_never_ending_gets_408_and_stores_nothing(running: Running) -> None:
    body = orjson.dumps({"content": "trickled body", "source": "test"})
    for request in (_request(body), _request(body, chunked=True)):     # the direct path, then the ASGI app
        with running.connect() as sock:
            sock.sendall(request[:request.index(b"\r\n\r\n") + 6])
            started = time.monotonic()
            answer, _ = _answer_then_closed(sock)
        _refusal(answer, 408, "body")
        assert time.monotonic() - started < 3
    with running.connect() as sock:     # chunked without end: chunks keep coming, the last never does
        sock.sendall(_request(b"", chunked=True).removesuffix(b"0\r\n\r\n"))
        with pytest.raises(OSError):
            for _ in range(100):
                sock.sendall(b"1\r\nx\r\n")
                time.sleep(0.05)
    assert running.exchange(_request(EVENT)).status == 200


def test_a_connection_that_sends_nothing_is_closed_after_idle_s(running: Running) -> None:
    with running.connect() as sock:
        assert _closed_within(sock, 3) < 2
    with running.connect() as sock:     # and after an answer, as keep-alive
        sock.sendall(HEALTH)
        assert _read(sock, bytearray()).status == 200
        assert _closed_within(sock, 3) < 2


def test_a_head_over_head_bytes_gets_431_which_the_client_can_read(running: Running) -> None:
    with running.connect() as sock:
        started = time.monotonic()
        # 1 MiB more than the limit, sent whole: the daemon drops it after its answer instead of resetting
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (1 << 20))
        answer, _ = _answer_then_closed(sock)
    _refusal(answer, 431, "request")
    assert time.monotonic() - started < 0.5     # refused as the bytes pass the limit, not at a deadline


def test_more_body_than_declared_gets_a_json_400_after_the_answer(running: Running) -> None:
    with running.connect() as sock:
        sock.sendall(_request(EVENT) + b"this is not a request\r\n\r\n")
        buffer = bytearray()
        first = _read(sock, buffer)
        second = _read(sock, buffer)
        assert sock.recv(100) == b""
    assert first.status == 200
    _refusal(second, 400, "request")


def test_pipelined_requests_past_the_limit_are_not_read(running: Running) -> None:
    with running.connect() as sock:
        sock.sendall(HEALTH * 50)
        buffer = bytearray()
        answers = []
        while True:
            try:
                answers.append(_read(sock, buffer))
            except AssertionError:  # the connection ended
                break
    # the first in flight and `pipelined` queued behind it are answered, then the connection ends
    assert [a.status for a in answers] == [200] * (1 + LIMITS.pipelined)


def test_a_half_closed_socket_does_not_linger(running: Running) -> None:
    with running.connect() as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 1")
        sock.shutdown(socket.SHUT_WR)
        assert _closed_within(sock, 3) < 2


def test_a_flood_of_hostile_connections_leaves_health_and_ingest_answered(running: Running) -> None:
    evicted = running.edge.evictions
    hostile: list[socket.socket] = []
    try:
        for i in range(3 * LIMITS.connections):     # each holds a place: nothing, a partial head, a partial body
            sock = running.connect()
            sock.sendall((b"", b"GET /health HTTP/1.1\r\n", _request(EVENT)[:-5])[i % 3])
            hostile.append(sock)
            if i % 10 == 9:
                started = time.monotonic()
                assert running.exchange(HEALTH).status == 200
                assert running.exchange(_request(EVENT)).status == 200
                assert time.monotonic() - started < 2
        assert len(running.edge.open) <= LIMITS.connections
        assert running.edge.evictions - evicted >= 2 * LIMITS.connections
        answers = []
        for sock in hostile[:30]:       # the longest waiting made room: 503 where a request had begun
            sock.settimeout(3)
            data = sock.recv(4096)
            if data:
                answers.append(int(data.split()[1]))
        assert 503 in answers and set(answers) <= {503}
    finally:
        for sock in hostile:
            sock.close()


@pytest.mark.parametrize(("request_", "whole"), [(HEALTH, 1), (_request(EVENT), 1), (HEALTH * 3, 3),
                                               (HEALTH + b"GET /health HTTP/1.1\r\nHo", 1), (_request(EVENT)[:-5], 0)],
                         ids=["asgi", "direct-ingest", "pipelined", "then-a-partial-head", "a-partial-body"])
def test_requests_sent_whole_before_a_half_close_are_answered_then_closed(running: Running, request_: bytes,
                                                                          whole: int) -> None:
    """A client that ends its side after its requests (`shutdown(SHUT_WR)`) still reads the answers to
    those it sent whole, then the end of the stream (uvicorn closed the connection, answering nothing)."""
    with running.connect() as sock:
        sock.sendall(request_)
        sock.shutdown(socket.SHUT_WR)
        buffer = bytearray()
        answers = [_read(sock, buffer).status for _ in range(whole)]
        assert not buffer and _closed_within(sock, 3) < 2
    assert answers == [200] * whole


def test_without_httptools_the_daemon_refuses_to_start_and_says_why(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's h11 fallback has none of the edge's bounds: the daemon does not serve with it, and
    says so before it touches the home."""
    import sys

    monkeypatch.setitem(sys.modules, "httptools", None)     # as where it does not install
    for name in ("urchin.daemon.uvicorn_protocol", "uvicorn.protocols.http.httptools_impl"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    home = tmp_path / "home"
    daemon = Daemon(Settings.resolve(home, env={"URCHIN_INTAKE_TOKEN": TOKEN}), port=0, collect=False,
                    feed_index=False, log_level="error")
    refused: list[ConfigError] = []

    def run() -> None:
        try:
            daemon.run()
        except ConfigError as exc:
            refused.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if thread.is_alive():       # it serves (with h11): stopped, and the assertion below fails
        daemon.ready.wait(30)
        daemon.stop()
        thread.join(20)
    assert refused and refused[0].message.startswith("httptools: ")
    assert "pip install 'httptools>=0.6'" in refused[0].message
    assert not home.exists()
