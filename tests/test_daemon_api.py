"""The intake HTTP API against a real daemon: every guard, every route, and the journal untouched
by anything refused."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.daemon_fixture import DaemonProcess


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path_factory.mktemp("api") / "home", "--with-mcp").start()
    yield proc
    proc.stop()


@pytest.fixture
def api(daemon: DaemonProcess) -> Iterator[httpx.Client]:
    with daemon.client() as client:
        yield client


def _unchanged(daemon: DaemonProcess, before: bytes) -> None:
    assert daemon.journal_bytes() == before


def test_health_without_the_token_says_only_that_it_is_alive(daemon: DaemonProcess, api: httpx.Client) -> None:
    api.post("/ingest", json={"content": "something to count"})
    for headers in ({}, {"authorization": "Bearer wrong-token"}, {"authorization": "Basic abc"}):
        response = httpx.get(daemon.url + "/health", headers=headers, trust_env=False, timeout=30)
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}, headers  # no counts, no version, nothing of the journal
    body = api.get("/health").json()  # with the token it may say more
    assert body["status"] == "ok" and body["events"] >= 1 and body["uptime_s"] >= 0 and "version" in body


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", "Basic abc", "Bearer", "bearer  x"])
def test_missing_or_wrong_token_is_401_and_writes_nothing(daemon: DaemonProcess, header: str | None) -> None:
    before = daemon.journal_bytes()
    headers = {"content-type": "application/json"}
    if header is not None:
        headers["authorization"] = header
    for method, path in (("POST", "/ingest"), ("GET", "/search?query=x"), ("GET", "/status"), ("GET", "/recent")):
        response = httpx.request(method, daemon.url + path, headers=headers, content=b'{"content": "sneaky"}'
                                 if method == "POST" else None, trust_env=False, timeout=30)
        assert response.status_code == 401, path
        assert response.json()["field"] == "authorization"
        assert response.headers["www-authenticate"].startswith("Bearer")
    _unchanged(daemon, before)


def test_right_token_appends_once(daemon: DaemonProcess, api: httpx.Client) -> None:
    response = api.post("/ingest", json={"id": "api-right-token", "content": "the token works", "source": "test"})
    assert response.status_code == 200
    assert response.json() == {"id": "api-right-token", "status": "appended"}
    again = api.post("/ingest", json={"id": "api-right-token", "content": "the token works"})
    assert again.json()["status"] == "duplicate"
    assert daemon.journal_bytes().count(b'"api-right-token"') == 1


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:18799", "10.0.0.5", "127.0.0.1.nip.io",
                                  "localhost.evil.com", "localhost:18799@evil.example", "[::1]evil.example",
                                  "127.0.0.1:80x", "[::1"])
def test_non_loopback_host_is_refused(daemon: DaemonProcess, api: httpx.Client, host: str) -> None:
    before = daemon.journal_bytes()
    response = api.post("/ingest", json={"content": "rebinding"}, headers={"host": host})
    assert response.status_code == 403
    assert response.json()["field"] == "host"
    assert api.get("/health", headers={"host": host}).status_code == 403
    _unchanged(daemon, before)


@pytest.mark.parametrize("host", ["localhost", "localhost:18799", "127.0.0.1", "127.1.2.3:80", "[::1]:18799"])
def test_loopback_hosts_pass(api: httpx.Client, host: str) -> None:
    assert api.get("/recent", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_post_needs_json_content_type(daemon: DaemonProcess, api: httpx.Client, ctype: str | None) -> None:
    before = daemon.journal_bytes()
    headers = {"content-type": ctype} if ctype else {}
    response = api.post("/ingest", content=b'{"content": "form post"}', headers=headers)
    assert response.status_code == 415
    assert response.json()["field"] == "content-type"
    _unchanged(daemon, before)


def test_json_content_type_with_charset_is_fine(api: httpx.Client) -> None:
    response = api.post("/ingest", content=b'{"content": "charset ok"}',
                        headers={"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 200


def test_event_over_one_mib_is_413(daemon: DaemonProcess, api: httpx.Client) -> None:
    before = daemon.journal_bytes()
    big = orjson.dumps({"content": "x" * (1 << 20)})
    assert api.post("/ingest", content=big, headers={"content-type": "application/json"}).status_code == 413
    _unchanged(daemon, before)


def test_size_limit_holds_without_content_length(daemon: DaemonProcess, api: httpx.Client) -> None:
    """A chunked body declares no length: the limit is enforced on the bytes as they arrive."""
    before = daemon.journal_bytes()

    def body() -> Iterator[bytes]:
        yield b'{"content": "'
        for _ in range(40):
            yield b"y" * 65536
        yield b'"}'

    response = api.post("/ingest", content=body(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    _unchanged(daemon, before)


def test_chunked_body_on_the_wire_is_cut_at_the_limit(daemon: DaemonProcess) -> None:
    """No Content-Length to check up front, the bytes keep coming: still 413, nothing written."""
    before = daemon.journal_bytes()
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    payload = b'{"content": "' + b"z" * (2 << 20) + b'"}'
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /ingest HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + daemon.token.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            for start in range(0, len(payload), 1 << 16):
                chunk = payload[start:start + (1 << 16)]
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may close on us once it has answered
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413")
    _unchanged(daemon, before)


def test_declared_length_over_limit_is_refused_before_reading(daemon: DaemonProcess) -> None:
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /ingest/batch HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + daemon.token.encode() + b"\r\n"
                     b"Content-Length: " + str(17 << 20).encode() + b"\r\n\r\n[")
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")


def test_batch_over_16_mib_is_413(daemon: DaemonProcess, api: httpx.Client) -> None:
    before = daemon.journal_bytes()
    events = [{"content": "q" * 900_000} for _ in range(19)]
    assert api.post("/ingest/batch", json=events).status_code == 413
    _unchanged(daemon, before)


def test_one_event_over_one_mib_fails_the_whole_batch(daemon: DaemonProcess, api: httpx.Client) -> None:
    before = daemon.journal_bytes()
    events = [{"content": "fine"}, {"content": "w" * (1 << 20)}]
    response = api.post("/ingest/batch", json=events)
    assert response.status_code == 413
    assert response.json()["field"] == "events[1]"
    _unchanged(daemon, before)


def test_batch_of_more_than_1000_events_is_413(daemon: DaemonProcess, api: httpx.Client) -> None:
    before = daemon.journal_bytes()
    response = api.post("/ingest/batch", json=[{"content": f"n{i}"} for i in range(1001)])
    assert response.status_code == 413
    assert response.json()["field"] == "events"
    _unchanged(daemon, before)


@pytest.mark.parametrize("body", [b"{", b'{"content": "x",}', b"", b"\xff\xfe", b"nul\x00"])
def test_malformed_json_is_400_with_the_parse_error(daemon: DaemonProcess, api: httpx.Client, body: bytes) -> None:
    before = daemon.journal_bytes()
    for path in ("/ingest", "/ingest/batch"):
        response = api.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 400
        error = response.json()
        assert error["field"] == "body" and error["error"].startswith("body: not valid JSON: ")
    _unchanged(daemon, before)


@pytest.mark.parametrize(("event", "field"), [
    ({"content": "   "}, "content"),
    ({}, "content"),
    ({"content": "x", "timestamp": "yesterday-ish"}, "timestamp"),
    ({"content": "x", "tags": "not-a-list"}, "tags"),
    ({"content": "x", "meta": [1]}, "meta"),
    ({"content": "x", "id": ""}, "id"),
    ([{"content": "x"}], "event"),
    ("just text", "event"),
])
def test_invalid_event_is_422_naming_the_field(daemon: DaemonProcess, api: httpx.Client, event: object,
                                               field: str) -> None:
    before = daemon.journal_bytes()
    response = api.post("/ingest", json=event)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    assert response.json()["error"].startswith(f"{field}: ")
    _unchanged(daemon, before)


def test_batch_reports_a_status_per_event(daemon: DaemonProcess, api: httpx.Client) -> None:
    api.post("/ingest", json={"id": "batch-dup", "content": "already here"})
    response = api.post("/ingest/batch", json={"events": [
        {"id": "batch-new", "content": "fresh"},
        {"id": "batch-dup", "content": "already here"},
        {"content": ""},
        {"id": "batch-new", "content": "twice in one batch"},
        {"content": "with defaults"},
    ], "defaults": {"source": "ci", "workspace": "batch-ws"}})
    assert response.status_code == 200
    body = response.json()
    assert [r["status"] for r in body["results"]] == [
        "appended", "duplicate", "rejected: content: must not be blank", "duplicate", "appended"]
    assert (body["appended"], body["duplicate"], body["rejected"]) == (2, 2, 1)
    journal = daemon.journal_bytes()
    assert journal.count(b'"batch-new"') == 1 and journal.count(b'"batch-dup"') == 1
    found = api.get("/search", params={"query": "with defaults", "workspace": "batch-ws"}).json()
    assert found["events"][0]["source"] == "ci"


def test_batch_must_be_a_list(daemon: DaemonProcess, api: httpx.Client) -> None:
    before = daemon.journal_bytes()
    for body in ({"events": "nope"}, {"content": "x"}, 5, {"events": [], "defaults": [1]}):
        response = api.post("/ingest/batch", json=body)
        assert response.status_code == 422
    _unchanged(daemon, before)


def test_search_recent_get_roundtrip(api: httpx.Client) -> None:
    api.post("/ingest", json={"id": "rt-1", "content": "Zebra Crossing notes", "workspace": "rt", "kind": "decision"})
    found = api.get("/search", params={"query": "zebra crossing", "workspace": "rt"}).json()
    assert found["mode"] == "substring" and found["query"] == "zebra crossing"
    assert [e["id"] for e in found["events"]] == ["rt-1"] and found["totalResults"] == 1
    assert api.get("/search", params={"q": "ZEBRA", "kind": "note", "workspace": "rt"}).json()["events"] == []
    recent = api.get("/recent", params={"workspace": "rt", "limit": 5}).json()
    assert recent["mode"] == "recent" and recent["events"][0]["id"] == "rt-1"
    event = api.get("/events/rt-1").json()
    assert event["content"] == "Zebra Crossing notes" and event["kind"] == "decision"


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/search", {}, "query"),
    ("/search", {"query": "  "}, "query"),
    ("/search", {"query": "x", "limit": "0"}, "limit"),
    ("/search", {"query": "x", "limit": "many"}, "limit"),
    ("/search", {"query": "x", "hours": "-1"}, "hours"),
    ("/search", {"query": "x", "colour": "red"}, "colour"),
    ("/recent", {"limit": "1001"}, "limit"),
    ("/recent", {"query": "x"}, "query"),
])
def test_bad_query_parameters_are_400_naming_them(api: httpx.Client, path: str, params: dict[str, str],
                                                  field: str) -> None:
    response = api.get(path, params=params)
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_unknown_event_is_404(api: httpx.Client) -> None:
    response = api.get("/events/no-such-event")
    assert response.status_code == 404
    assert "no-such-event" in response.json()["error"]


def test_semantic_ranks_through_the_hot_view(api: httpx.Client) -> None:
    api.post("/ingest", json={"id": "sem-1", "content": "the flaky integration test was caused by a race in teardown"})
    found = api.get("/semantic", params={"query": "why was the integration test flaky", "limit": 3}).json()
    assert found["mode"] == "token-cosine"
    assert found["events"][0]["id"] == "sem-1" and found["events"][0]["score"] > 0
    assert api.get("/semantic", params={"query": " "}).status_code == 400


def test_status_describes_journal_and_daemon(daemon: DaemonProcess, api: httpx.Client) -> None:
    body = api.get("/status").json()
    assert body["journal"] == str(daemon.journal)
    assert body["daemon"]["pid"] == daemon.proc.pid  # type: ignore[union-attr]
    assert body["daemon"]["address"] == daemon.url
    assert body["daemon"]["writer"]["events"] >= 1


@pytest.mark.parametrize(("method", "path", "status", "field"), [
    ("GET", "/nope", 404, "path"),
    ("GET", "/events", 404, "path"),
    ("POST", "/nope/deeper", 404, "path"),
    ("GET", "/ingest", 405, "method"),
    ("PUT", "/search", 405, "method"),
    ("DELETE", "/health", 405, "method"),
])
def test_unknown_route_and_method_answer_the_json_error_shape(api: httpx.Client, method: str, path: str,
                                                             status: int, field: str) -> None:
    response = api.request(method, path, json={} if method in ("POST", "PUT") else None)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "field"} and body["field"] == field
    assert body["error"].startswith(f"{field}: ") and path in body["error"]
    if status == 405:
        assert response.headers["allow"]


def test_token_file_is_private(daemon: DaemonProcess) -> None:
    assert (daemon.home / "token").stat().st_mode & 0o777 == 0o600
    assert (daemon.home / "daemon.json").stat().st_mode & 0o777 == 0o600
    info = (daemon.home / "daemon.json").read_text()
    assert daemon.token not in info  # it names the token file, never the token
    assert orjson.loads(info)["token_path"] == str(daemon.home / "token")


def _port(daemon: DaemonProcess) -> str:
    return daemon.url.rsplit(":", 1)[1]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "1"}}}
MCP_ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example:443", "null",
                                    "http://127.0.0.1:1", "https://127.0.0.1:{port}", "http://localhost.evil.com:{port}",
                                    "http://127.0.0.1.nip.io:{port}", "http://10.0.0.5:{port}", "file://",
                                    "http://127.0.0.1:{port}/path", "http://user@127.0.0.1:{port}"])
def test_a_foreign_origin_is_refused_everywhere(daemon: DaemonProcess, api: httpx.Client, origin: str) -> None:
    """A browser page from another origin (DNS rebinding, a site the user visits) gets 403 on every route,
    /mcp included, whether or not it holds the token; nothing is written."""
    before = daemon.journal_bytes()
    headers = {"origin": origin.format(port=_port(daemon))}
    for method, path, body in (("POST", "/ingest", {"content": "from a web page"}), ("GET", "/recent", None),
                               ("GET", "/health", None), ("POST", "/mcp", INITIALIZE), ("GET", "/mcp", None),
                               ("GET", "/nope", None), ("OPTIONS", "/ingest", None)):
        response = api.request(method, path, json=body, headers={**headers, **MCP_ACCEPT})
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["field"] == "origin"
        tokenless = httpx.request(method, daemon.url + path, json=body, headers={**headers, **MCP_ACCEPT},
                                  trust_env=False, timeout=30)
        assert tokenless.status_code == 403, (method, path)
    _unchanged(daemon, before)


@pytest.mark.parametrize("origin", [None, "http://127.0.0.1:{port}", "http://localhost:{port}",
                                    "HTTP://LOCALHOST:{port}"])
def test_the_daemons_own_origin_or_none_is_accepted(daemon: DaemonProcess, api: httpx.Client,
                                                    origin: str | None) -> None:
    headers = {"origin": origin.format(port=_port(daemon))} if origin else {}
    assert api.post("/ingest", json={"content": f"own origin {origin}"}, headers=headers).status_code == 200
    assert api.get("/recent", headers=headers).status_code == 200
    response = api.post("/mcp", json=INITIALIZE, headers={**headers, **MCP_ACCEPT})
    assert response.status_code == 200 and response.json()["result"]["serverInfo"]["name"] == "urchin"


def test_any_origin_is_refused_on_the_unix_socket(tmp_path: Path) -> None:
    """No browser reaches a Unix socket, so the daemon has no origin of its own there: an Origin is foreign."""
    uds = tmp_path / "urchin.sock"
    daemon = DaemonProcess(tmp_path / "home", "--uds", str(uds)).start()
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(uds)), base_url="http://localhost",
                          headers={"authorization": f"Bearer {daemon.token}"}) as client:
            assert client.get("/recent").status_code == 200
            for origin in ("http://localhost", "http://127.0.0.1:18799", "null"):
                response = client.get("/recent", headers={"origin": origin})
                assert response.status_code == 403 and response.json()["field"] == "origin"
    finally:
        daemon.stop()


def test_a_response_goes_out_in_one_write_and_a_close_sends_what_is_pending() -> None:
    """uvicorn writes a response's head and body separately (two sends, each crossing loopback TCP);
    the daemon's protocol joins the writes of one event-loop step. Over a real socket pair: two writes
    in one step reach the transport as one, in order; a close first sends what is pending."""
    import asyncio

    from urchin.daemon.uvicorn_protocol import FLUSH_AT, _JoinedWrites

    async def scenario() -> tuple[list[bytes], bytes]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        sent: list[bytes] = []
        real_write = transport.write

        def recording(data: bytes) -> None:
            sent.append(bytes(data))
            real_write(data)

        transport.write = recording  # type: ignore[method-assign]
        joined = _JoinedWrites(transport, loop)
        joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        joined.write(b"{}")
        await asyncio.sleep(0)                       # the end of the step: one write
        big = b"x" * FLUSH_AT
        joined.write(b"head")
        joined.write(big)                            # 64 KiB pending: sent now (uvicorn's flow control sees it)
        assert sent[-1:] == [b"head" + big] or sent[-2:] == [b"head", big]
        joined.write(b"last")
        joined.close()                               # pending bytes first, then the close
        theirs.settimeout(5)
        received = b""
        while chunk := await loop.run_in_executor(None, theirs.recv, 4096):
            received += chunk
        theirs.close()
        return sent, received

    sent, received = asyncio.run(scenario())
    assert sent[0] == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}" and sent[-1] == b"last"
    assert received == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}head" + b"x" * FLUSH_AT + b"last"


def test_the_cli_shows_the_daemons_refusal_as_written(daemon: DaemonProcess) -> None:
    # The answer passes the redactor on its way to the terminal; `authorization: missing or wrong
    # bearer token` is prose after a credential label, not a credential.
    from tests.conftest import run_urchin

    for command in (["search", "x"], ["ingest", "a note"]):
        done = run_urchin(*command, env={"URCHIN_HOME": str(daemon.home), "URCHIN_INTAKE_TOKEN": "wrong-token"})
        assert done.returncode != 0
        assert "authorization: missing or wrong bearer token" in done.stderr, done.stderr
        assert "REDACTED" not in done.stderr


def test_the_daemon_log_carries_no_secret(tmp_path: Path) -> None:
    """uvicorn's access log quotes the request line, an error its cause: every line is redacted."""
    from tests.test_redact import GH

    token = GH["o"]
    daemon = DaemonProcess(tmp_path / "logged-home", "--log-level", "debug").start()
    try:
        with daemon.client() as api:
            assert api.get("/search", params={"q": f"deploy {token}"}).status_code == 200
            api.post("/ingest", content=b'{"content": "x", "timestamp": "' + token.encode() + b'"}')
            api.get(f"/events/{token}")
    finally:
        daemon.stop()
    log = daemon.log_path.read_text(errors="replace")
    assert "GET /search?q=deploy" in log and "[REDACTED:github_token]" in log, log[-2000:]
    assert token[4:12] not in log and token[-8:] not in log


def test_a_used_or_expired_login_link_shows_a_page_that_says_how_to_get_a_new_one(daemon: DaemonProcess,
                                                                                  api: httpx.Client) -> None:
    """A person followed the link: an HTML page saying what happened and what to run, not raw JSON."""
    minted = api.post("/auth/code", json={})
    assert minted.status_code == 200, minted.text
    code = minted.json()["code"]
    first = httpx.get(f"{daemon.url}/login?code={code}", timeout=30, trust_env=False, follow_redirects=False)
    assert first.status_code == 303   # the link works once
    for path in (f"/login?code={code}", f"/login?code={'x' * 43}", "/login"):   # used, unknown, none
        response = httpx.get(daemon.url + path, timeout=30, trust_env=False, follow_redirects=False)
        assert response.status_code == 401 and response.headers["content-type"].startswith("text/html")
        text = response.text
        assert "<h1>This login link no longer works</h1>" in text and "<pre>urchin open</pre>" in text
        assert "already used" in text and "expired" in text and not text.lstrip().startswith("{")
        assert "<script" not in text and "style=" not in text   # the page's CSP allows neither inline
