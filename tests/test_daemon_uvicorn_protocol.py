"""`POST /ingest` answered from the HTTP parser (daemon/uvicorn_protocol.py) against the ASGI path, over real sockets.

One daemon in this process (so the test can see which path answered); every refusal and answer is sent
twice on the wire, once with a Content-Length (the direct path) and once chunked (the ASGI app behind the
Guard), and both must get the same status, headers and body, and leave the journal as the other does.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from urchin.api_tokens import TokenStore
from urchin.config import Settings
from urchin.daemon.server import Daemon

TOKEN = "protocol-test-token"


@dataclass
class Running:
    daemon: Daemon
    port: int
    tokens: dict[str, str]
    journal: Path
    config: Path

    @property
    def direct(self) -> Any:
        assert self.daemon._server is not None
        return self.daemon._server.config.loaded_app.direct

    def journal_bytes(self) -> bytes:
        try:
            return self.journal.read_bytes()
        except FileNotFoundError:
            return b""

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        return sock


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    home = tmp_path_factory.mktemp("protocol") / "home"
    settings = Settings.resolve(home, env={"URCHIN_INTAKE_TOKEN": TOKEN})
    store = TokenStore(home)
    tokens = {scope: store.create(scope)[0] for scope in ("read", "ingest")}
    tokens["team-a"] = store.create("ingest", ["team-a"])[0]
    daemon = Daemon(settings, port=0, collect=False, feed_index=False, log_level="warning")
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        assert daemon.ready.wait(60)
        port = int(daemon.address.rsplit(":", 1)[1])
        yield Running(daemon, port, tokens, settings.journal_path, settings.config_path)
    finally:
        daemon.stop()
        thread.join(20)


def _request(body: bytes, *, chunked: bool = False, token: str | None = TOKEN, host: str = "127.0.0.1",
             extra: tuple[str, ...] = (), ctype: str = "application/json", version: str = "1.1",
             length: int | None = None) -> bytes:
    lines = [f"POST /ingest HTTP/{version}", f"Host: {host}", f"Content-Type: {ctype}", *extra]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        half = len(body) // 2
        payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:]) if part)
        payload += b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body) if length is None else length}")
        payload = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def comparable(self) -> tuple[int, dict[str, str], bytes]:
        return self.status, {k: v for k, v in self.headers.items() if k != "date"}, self.body


def _read(sock: socket.socket, buffer: bytearray) -> Answer:
    """One response from `sock` (bytes past it stay in `buffer` for the next)."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {bytes(buffer)!r}"
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    size = int(headers["content-length"])
    while len(rest) < size:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        rest += chunk
    buffer[:] = rest[size:]
    return Answer(int(status_line.split()[1]), headers, rest[:size])


def _exchange(running: Running, request: bytes) -> Answer:
    with running.connect() as sock:
        sock.sendall(request)
        return _read(sock, bytearray())


def _both(running: Running, body: bytes, **kwargs: Any) -> tuple[Answer, Answer]:
    """The same request by the direct path and by the ASGI path; asserts which path answered each."""
    before = running.direct.admitted
    direct = _exchange(running, _request(body, **kwargs))
    assert running.direct.admitted == before + 1, "the direct path did not take the request"
    asgi = _exchange(running, _request(body, chunked=True, **{k: v for k, v in kwargs.items() if k != "length"}))
    assert running.direct.admitted == before + 1, "the chunked request did not go to the ASGI app"
    return direct, asgi


EVENT = orjson.dumps({"content": "a tool ran", "source": "test"})

# name -> (request arguments, body, status): every refusal of the Guard and of the route
REFUSALS: dict[str, tuple[dict[str, Any], bytes, int]] = {
    "bad host": ({"host": "evil.example"}, EVENT, 403),
    "bad origin": ({"extra": ("Origin: http://evil.example",)}, EVENT, 403),
    "wrong content type": ({"ctype": "text/plain"}, EVENT, 415),
    "no token": ({"token": None}, EVENT, 401),
    "wrong token": ({"token": "not-the-token"}, EVENT, 401),
    "read-only token": ({"token": "read"}, EVENT, 403),
    "oversized body": ({}, b'{"content":"' + b"x" * (1 << 20) + b'"}', 413),
    "bad json": ({}, b'{"content": "unterminated', 400),
    "not an object": ({}, b'["a list"]', 422),
    "blank content": ({}, b'{"content": "   "}', 422),
    "bad source": ({}, b'{"content": "x", "source": "Not A Source!"}', 422),
    "bad timestamp": ({}, b'{"content": "x", "timestamp": "yesterday-ish"}', 422),
    "another workspace": ({"token": "team-a"}, b'{"content": "x", "workspace": "team-b"}', 403),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_every_refusal_is_the_same_on_both_paths_and_stores_nothing(running: Running, case: str) -> None:
    kwargs, body, status = REFUSALS[case]
    if kwargs.get("token") in running.tokens:
        kwargs = {**kwargs, "token": running.tokens[kwargs["token"]]}
    before = running.journal_bytes()
    direct, asgi = _both(running, body, **kwargs)
    assert direct.status == status, direct
    assert direct.comparable() == asgi.comparable()
    assert orjson.loads(direct.body).get("error")
    assert running.journal_bytes() == before


def test_a_declared_length_over_the_limit_is_refused_before_the_body(running: Running) -> None:
    """As the Guard does: the 413 comes as the headers end, the body is never awaited."""
    with running.connect() as sock:
        sock.sendall(_request(b"", length=(1 << 20) + 1))
        answer = _read(sock, bytearray())
    assert answer.status == 413 and orjson.loads(answer.body)["field"] == "body"


def test_an_event_is_stored_once_and_answered_alike_on_both_paths(running: Running) -> None:
    direct, asgi = _both(running, b'{"content": "stored by both paths", "source": "test"}')
    assert direct.status == asgi.status == 200
    assert direct.headers.keys() == asgi.headers.keys()
    one, two = orjson.loads(direct.body), orjson.loads(asgi.body)
    assert one["status"] == two["status"] == "appended" and one.keys() == two.keys() and one["id"] != two["id"]
    assert running.journal_bytes().count(b"stored by both paths") == 2
    # a duplicate: a token that may read hears it; an ingest-only one hears what every writer hears
    again = orjson.dumps({"id": one["id"], "content": "stored by both paths", "source": "test"})
    for token in (TOKEN, running.tokens["ingest"]):
        direct, asgi = _both(running, again, token=token)
        assert direct.comparable() == asgi.comparable()
    assert running.journal_bytes().count(b"stored by both paths") == 2


def test_keep_alive_pipelining_and_http_1_0(running: Running) -> None:
    """Three requests in one send on one connection (the second and third wait behind the first, as
    uvicorn's pipeline does), then a GET on the same connection; HTTP/1.0 closes after its answer."""
    bodies = [orjson.dumps({"content": f"pipelined {i}", "source": "test"}) for i in range(3)]
    with running.connect() as sock:
        buffer = bytearray()
        sock.sendall(b"".join(_request(body) for body in bodies))
        answers = [_read(sock, buffer) for _ in bodies]
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        health = _read(sock, buffer)
    assert [a.status for a in answers] == [200, 200, 200] and health.status == 200
    ids = [orjson.loads(a.body)["id"] for a in answers]
    lines = [orjson.loads(line) for line in running.journal_bytes().splitlines()]
    stored = {line["id"]: line["content"] for line in lines}
    assert [stored[i] for i in ids] == ["pipelined 0", "pipelined 1", "pipelined 2"]
    with running.connect() as sock:
        sock.sendall(_request(orjson.dumps({"content": "old client", "source": "test"}), version="1.0"))
        answer = _read(sock, bytearray())
        assert answer.status == 200 and answer.headers.get("connection") == "close"
        assert sock.recv(100) == b""


def test_a_client_that_goes_away_mid_request_leaves_nothing_and_the_daemon_serves_on(running: Running) -> None:
    body = orjson.dumps({"content": "never finished", "source": "test"})
    request = _request(body)
    with running.connect() as sock:
        sock.sendall(request[:-10])
    assert _exchange(running, _request(orjson.dumps({"content": "after the quitter", "source": "test"}))).status == 200
    assert b"never finished" not in running.journal_bytes()
    # gone after sending it whole: the event is written (as the ASGI path does), once
    with running.connect() as sock:
        sock.sendall(_request(orjson.dumps({"content": "sent then gone", "source": "test"})))
    assert _exchange(running, _request(orjson.dumps({"content": "next", "source": "test"}))).status == 200
    assert running.journal_bytes().count(b"sent then gone") <= 1


def test_expect_100_continue_goes_to_the_asgi_app(running: Running) -> None:
    before = running.direct.admitted
    with running.connect() as sock:
        sock.sendall(_request(EVENT, extra=("Expect: 100-continue",))[:-len(EVENT)])
        buffer = bytearray()
        while b"\r\n\r\n" not in buffer:
            buffer += sock.recv(1024)
        assert buffer.startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(EVENT)
        del buffer[:buffer.index(b"\r\n\r\n") + 4]
        assert _read(sock, buffer).status == 200
    assert running.direct.admitted == before


def test_a_body_cut_short_by_a_disconnect_is_stored_by_neither_path(running: Running) -> None:
    """A body that parses as JSON but never completed (a chunked one without its last chunk, a shorter
    one than its Content-Length, on the direct path, the ASGI one and the batch route): the client is
    gone, nothing is stored, as if it had sent nothing."""
    cut: dict[str, bytes] = {}
    for name, target in (("direct", "/ingest"), ("asgi", "/ingest?via=asgi"), ("batch", "/ingest/batch")):
        event = {"content": f"cut short {name}", "source": "test"}
        body = orjson.dumps([event] if name == "batch" else event)
        line = f"POST {target} ".encode()
        chunked = _request(body, chunked=True).replace(b"POST /ingest ", line)
        cut[f"{name} chunked"] = chunked[:chunked.index(b"0\r\n\r\n")]
        cut[f"{name} length"] = _request(body, length=len(body) + 5).replace(b"POST /ingest ", line)
    for request in cut.values():
        with running.connect() as sock:
            sock.sendall(request)
            time.sleep(0.05)
    time.sleep(0.2)
    assert _exchange(running, _request(orjson.dumps({"content": "after the cut ones", "source": "test"}))).status == 200
    assert b"cut short" not in running.journal_bytes()


def test_a_config_toml_that_is_not_utf8_leaves_no_request_unanswered(running: Running) -> None:
    """config.toml is read again before a request; one that is not UTF-8 (a Latin-1 comment) is a config
    error (logged, the settings in force stay), not an exception that left every direct POST /ingest of
    that loop step without an answer."""
    running.config.write_bytes(b"# caf\xe9\n[recall]\n")
    try:
        for chunked in (False, True):
            body = orjson.dumps({"content": f"config not utf-8, chunked={chunked}", "source": "test"})
            with running.connect() as sock:
                sock.settimeout(5)
                sock.sendall(_request(body, chunked=chunked))
                assert _read(sock, bytearray()).status == 200
            running.config.write_bytes(b"# caf\xe9 \n[recall]\n")    # changed again: read again
    finally:
        running.config.unlink()
    assert running.journal_bytes().count(b"config not utf-8") == 2
