"""Hooks hold an ingest-only token, never the admin one (issue 18): `install-hooks` makes it, the hook
hands its event to the daemon with it, and without a daemon (or with the token refused) the hook
still records the event itself, once."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess, running

PROMPT = Path(__file__).parent / "fixtures" / "claude" / "hooks" / "UserPromptSubmit.json"


@pytest.fixture
def daemon(urchin_home: Path) -> Iterator[DaemonProcess]:
    yield from running(urchin_home)


def _install(home: Path, config: Path) -> Any:
    """`urchin install-hooks claude` in the test's process (call_urchin: the same entry point)."""
    done = call_urchin("install-hooks", "claude", "--config", str(config), env={"URCHIN_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return done


def _tokens(home: Path) -> list[dict[str, Any]]:
    done = call_urchin("token", "list", "--json", env={"URCHIN_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]     # one JSON object a line


def _events(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def test_install_hooks_makes_one_private_ingest_only_token_and_keeps_it(urchin_home: Path, tmp_path: Path) -> None:
    done = _install(urchin_home, tmp_path / "settings.json")
    file = urchin_home / "hooks.token"
    assert f"recall with the hook token in {file}" in done.stdout
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    token = file.read_text().strip()
    listed = _tokens(urchin_home)
    assert [(t["scope"], t["name"], t["workspaces"]) for t in listed] == [("hook", "hooks", [])]
    assert token.startswith(f"urchin_{listed[0]['id']}_")
    again = _install(urchin_home, tmp_path / "gemini.json")           # another agent: the same token
    assert "hook token" not in again.stdout and file.read_text().strip() == token
    assert len(_tokens(urchin_home)) == 1
    revoked = run_urchin("token", "revoke", listed[0]["id"], env={"URCHIN_HOME": str(urchin_home)})
    assert revoked.returncode == 0, revoked.stderr
    _install(urchin_home, tmp_path / "settings.json")                 # refused now: a new one replaces it
    assert file.read_text().strip() != token and [t["name"] for t in _tokens(urchin_home)] == ["hooks"]
    dry = run_urchin("install-hooks", "claude", "--config", str(tmp_path / "new.json"), "--dry-run",
                     env={"URCHIN_HOME": str(tmp_path / "dry-home")})
    assert dry.returncode == 0 and not (tmp_path / "dry-home" / "hooks.token").exists()


def test_a_hook_in_a_sandbox_reaches_the_daemon_with_only_the_ingest_token(daemon: DaemonProcess,
                                                                          tmp_path: Path) -> None:
    """A hook whose own home cannot hold the journal (a container, an agent's sandbox) is given the
    daemon's address and the ingest token, nothing else: the event lands in the daemon's journal."""
    _install(daemon.home, tmp_path / "settings.json")
    token = (daemon.home / "hooks.token").read_text().strip()
    sandbox = tmp_path / "sandbox-home"
    done = run_urchin("hook", "claude", input=PROMPT.read_bytes(),
                      env={"URCHIN_HOME": str(sandbox), "URCHIN_HOOK_URL": daemon.url, "URCHIN_HOOK_TOKEN": token})
    assert (done.returncode, done.stdout) == (0, b"")
    stored = _events(daemon.journal)
    assert [e["kind"] for e in stored] == ["conversation"] and "checkout bug" in stored[0]["content"]
    assert not (sandbox / "journal" / "events.jsonl").exists() and not (sandbox / "hooks.log").exists()
    with daemon.client(token) as http:                                # and that token reads nothing
        assert http.get("/search", params={"q": "checkout"}).status_code == 403
        assert http.get("/recent").status_code == 403


def test_a_hook_beside_the_daemon_sends_its_event_once_and_falls_back_when_refused(daemon: DaemonProcess,
                                                                                  tmp_path: Path) -> None:
    _install(daemon.home, tmp_path / "settings.json")
    env = {"URCHIN_HOME": str(daemon.home)}
    payload = orjson.loads(PROMPT.read_bytes())
    assert run_urchin("hook", "claude", input=orjson.dumps(payload), env=env).returncode == 0
    assert len(_events(daemon.journal)) == 1 and not (daemon.home / "hooks.log").exists()
    # the token revoked: the daemon refuses it, the hook writes the journal itself, and says why
    token_id = _tokens(daemon.home)[0]["id"]
    assert run_urchin("token", "revoke", token_id, env=env).returncode == 0
    payload["prompt"] = "the second prompt, after the revocation"
    assert run_urchin("hook", "claude", input=orjson.dumps(payload), env=env).returncode == 0
    stored = _events(daemon.journal)
    assert [e["content"] for e in stored][-1] == "the second prompt, after the revocation" and len(stored) == 2
    assert "refused the hooks' token (HTTP 401" in (daemon.home / "hooks.log").read_text()


def test_without_a_daemon_the_hook_writes_the_journal_and_needs_no_token(urchin_home: Path) -> None:
    done = run_urchin("hook", "claude", input=PROMPT.read_bytes(), env={"URCHIN_HOME": str(urchin_home)})
    assert done.returncode == 0 and len(_events(urchin_home / "journal" / "events.jsonl")) == 1
    assert not (urchin_home / "hooks.log").exists() and not os.path.exists(urchin_home / "hooks.token")


def test_a_hook_never_sends_an_event_off_the_machine(urchin_home: Path, tmp_path: Path) -> None:
    _install(urchin_home, tmp_path / "settings.json")
    env = {"URCHIN_HOME": str(urchin_home), "URCHIN_HOOK_URL": "http://192.0.2.1:18799"}
    assert run_urchin("hook", "claude", input=PROMPT.read_bytes(), env=env).returncode == 0
    assert len(_events(urchin_home / "journal" / "events.jsonl")) == 1            # kept here instead
    assert "URCHIN_HOOK_URL must be unix:/path or http://127.0.0.1" in (urchin_home / "hooks.log").read_text()


@pytest.mark.parametrize(("address", "local"), [
    ("unix:/run/urchin.sock", True), ("http://127.0.0.1:18799", True), ("http://127.8.9.10:1", True),
    ("http://[::1]:18799", True), ("http://localhost:18799", True),
    ("http://127.0.0.1.evil.example:80", False), ("http://127.evil.example:8080", False),
    ("http://127.0.0.1:80@evil.example:80", False), ("http://[::1]@evil:1", False),
    ("http://localhost.evil.example:80", False), ("HTTP://127.0.0.1:1", False), ("http://0.0.0.0:1", False),
    ("http://127.0.0.1:80/ingest", False), ("http://127.0.0.1", False), ("unix:", False),
])
def test_only_a_socket_or_a_loopback_literal_is_local(address: str, local: bool) -> None:
    from urchin.daemon_http import is_local

    assert is_local(address) is local


def test_two_installs_at_once_leave_one_working_token(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO
    from urchin.api_tokens import TokenStore

    code = "import sys; from pathlib import Path; from urchin.api_tokens import ensure_hook_token; " \
           "ensure_hook_token(Path(sys.argv[1]))"
    for n in range(4):
        home = tmp_path / f"home-{n}"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(home)], env={**os.environ, "PYTHONPATH": str(REPO)})
                 for _ in range(3)]
        assert [p.wait(60) for p in procs] == [0, 0, 0]
        token = (home / "hooks.token").read_text().strip()
        assert TokenStore(home).verify(token) is not None and len(TokenStore(home).entries()) == 1


def test_an_answer_that_is_not_the_daemons_is_not_taken_as_stored(urchin_home: Path, tmp_path: Path) -> None:
    """Something else listening where the hook looks (a 200 with another body): the hook keeps the
    event itself rather than believing it was stored."""
    import http.server
    import threading

    class Other(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = b"<html>ok</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {"URCHIN_HOME": str(urchin_home), "URCHIN_HOOK_URL": f"http://127.0.0.1:{server.server_port}",
               "URCHIN_HOOK_TOKEN": "urchin_000000000000_" + "x" * 43}
        assert run_urchin("hook", "claude", input=PROMPT.read_bytes(), env=env).returncode == 0
    finally:
        server.shutdown()
    assert len(_events(urchin_home / "journal" / "events.jsonl")) == 1
    assert "not as the daemon does" in (urchin_home / "hooks.log").read_text()


def test_the_hooks_token_cannot_tell_a_held_or_forgotten_id_from_a_new_one(daemon: DaemonProcess,
                                                                            tmp_path: Path) -> None:
    """Issue 34 H: an ingest-only token was an existence oracle (`duplicate` for a recorded prompt's
    id, `suppressed: forgotten` for a forgotten one). It gets one answer now; a reader still sees which."""
    import hashlib

    _install(daemon.home, tmp_path / "settings.json")
    hooks = (daemon.home / "hooks.token").read_text().strip()
    payload = orjson.loads(PROMPT.read_bytes())
    hooked = run_urchin("hook", "claude", input=PROMPT.read_bytes(), env={"URCHIN_HOME": str(daemon.home)})
    assert hooked.returncode == 0
    [prompt] = _events(daemon.journal)
    plain = hashlib.sha256(payload["prompt"].strip().encode()).hexdigest()[:16]
    assert prompt["id"].startswith(f"claude:{payload['session_id']}:prompt:")
    assert not prompt["id"].endswith(plain)          # keyed: a guessed prompt's id is not computable
    with daemon.client() as admin:
        assert admin.post("/ingest", json={"id": "held", "content": "held"}).json()["status"] == "appended"
        assert admin.post("/ingest", json={"id": "gone", "content": "gone"}).json()["status"] == "appended"
        assert admin.post("/forget", json={"ids": ["gone"], "confirm": True}).status_code == 200
    probes = [prompt["id"], "held", "gone", f"claude:{payload['session_id']}:prompt:{plain}", "never-seen"]
    with daemon.client(hooks) as writer:
        answers = []
        for probe in probes:
            reply = writer.post("/ingest", json={"id": probe, "content": "probe"})
            body = reply.content.replace(probe.encode(), b"ID")
            answers.append((reply.status_code, reply.headers["content-type"], body))
        batch = writer.post("/ingest/batch", json=[{"id": p, "content": "probe"} for p in probes])
    assert answers == [(200, "application/json", b'{"id":"ID","status":"appended"}')] * len(probes)
    assert batch.status_code == 200 and batch.json()["results"] == [{"id": p, "status": "appended"} for p in probes]
    assert (batch.json()["appended"], batch.json()["duplicate"], batch.json()["suppressed"]) == (len(probes), 0, 0)
    stored = [e["id"] for e in _events(daemon.journal)]
    assert stored.count(prompt["id"]) == stored.count("held") == 1 and "gone" not in stored   # nothing stored twice
    with daemon.client() as admin:                                    # a token that reads learns what it may
        assert admin.post("/ingest", json={"id": "held", "content": "x"}).json()["status"] == "duplicate"
        assert admin.post("/ingest", json={"id": "gone", "content": "x"}).json()["status"] == "suppressed: forgotten"
