"""A hook beside a daemon (issue 33's latency): the hook process sends the whole call to `POST /hook/<agent>`
and prints the answer. It stores and prints exactly what the full path does, holds a scoped token to its
workspace, refuses bad input without storing, and falls back on the full path whenever the daemon is down
or answers wrongly; the process itself imports nothing but the standard library."""

from __future__ import annotations

import http.server
import io
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import REPO, create_token, run_urchin
from tests.daemon_fixture import DaemonProcess, running
from tests.test_hook_recall import FIXTURES, _seed
from urchin import hook_fast
from urchin.api_tokens import ensure_hook_token
from urchin.hooks import run_hook

SECRET = "ghp_1234567890abcdefghijABCDEFGHIJ123456"
BIG = "y" * 70_000 + " " + SECRET + "\n" + "z" * 100     # over the soft cap, a secret past the cut


def _fixture(name: str, **change: Any) -> bytes:
    return orjson.dumps({**orjson.loads((FIXTURES / name).read_bytes()), **change})


# (agent, argv after the agent, payload): the context events first, in a workspace only seeds hold
CALLS: list[tuple[str, list[str], bytes]] = [
    ("claude", [], _fixture("claude/hooks/SessionStart.json", session_id="fast-1")),
    ("claude", [], _fixture("claude/hooks/UserPromptSubmit.json", session_id="fast-2",
                            prompt="Why does the checkout total ignore the coupon?")),
    ("gemini", [], _fixture("gemini/hooks/BeforeAgent.json", session_id="fast-3", cwd="/home/dev/tools",
                            prompt="how are TODOs tracked in src?")),
    ("claude", [], _fixture("claude/hooks/PostToolUse.json", session_id="fast-4", cwd="/home/dev/bg",
                            tool_response={"stdout": BIG, "stderr": ""})),
    ("copilot", ["--event", "postToolUse"], _fixture("copilot/hooks/postToolUse.json", cwd="/home/dev/bg")),
    ("shell", ["--shell", "bash", "--exit-code", "2", "--cwd", "/home/dev/bg", "--session", "tty 1"],
     'echo "a\\b" \x01 ünï \'q\'\n export T=' .encode() + SECRET.encode()),
]


def _stdlib_hook(home: Path, agent: str, argv: list[str], payload: bytes,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The hook as installed, but with no site-packages at all (`-S`): the fast path needs none, so any
    fallback or heavy import fails loudly; `-X importtime` lists every module it imported."""
    code = f"import sys; sys.argv = ['urchin', 'hook', *{[agent, *argv]!r}]; from urchin.__main__ import entry; entry()"
    full = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), **(env or {})}
    return subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", code], input=payload, env=full,
                          capture_output=True, timeout=60)


def _events(home: Path) -> list[dict[str, Any]]:
    path = home / "journal" / "events.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def _same(event: dict[str, Any]) -> dict[str, Any]:
    """What must match between the two paths: all but the id (keyed by each home's install key), the
    time of writing and the line's proof."""
    return {k: v for k, v in event.items() if k not in ("id", "timestamp", "proof")}


@pytest.fixture
def daemon(urchin_home: Path) -> Iterator[DaemonProcess]:
    """A daemon of the test's own, on the test's home: for a test that compares whole journals or stops it."""
    _seed(urchin_home)
    ensure_hook_token(urchin_home)
    yield from running(urchin_home)


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """One seeded daemon for the tests that add events of their own sessions and check only those, or
    that nothing was stored (a start, its seed import and the hook token are ~1 s of a core)."""
    home = tmp_path_factory.mktemp("hook-fast") / "home"
    home.mkdir()
    _seed(home)
    ensure_hook_token(home)
    yield from running(home)


@pytest.fixture
def shared(shared_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch) -> DaemonProcess:
    """The shared daemon, its home the test's URCHIN_HOME (what `hook_fast` and `run_hook` find)."""
    monkeypatch.setenv("URCHIN_HOME", str(shared_daemon.home))
    return shared_daemon


def test_the_fast_route_stores_and_prints_what_the_full_path_does(daemon: DaemonProcess, tmp_path: Path) -> None:
    other = tmp_path / "other-home"          # the full path (run_hook: /ingest, /recall) against its own daemon
    _seed(other)
    ensure_hook_token(other)
    (daemon.home / "token").unlink()         # the admin token's absence does not matter to a hook
    with _Running(other):
        for agent, argv, payload in CALLS:
            fast = _stdlib_hook(daemon.home, agent, argv, payload)
            assert fast.returncode == 0, fast.stderr.decode()[-2000:]
            assert "urchin.hook_fast" in fast.stderr.decode()
            full = io.BytesIO()
            call = hook_fast.parse([agent, *argv], io.BytesIO(payload))
            assert run_hook(agent, payload, home=str(other), event=call.event, fields=call.fields, out=full) == 0
            assert fast.stdout == full.getvalue(), agent
    assert not (daemon.home / "hooks.log").exists() and not (other / "hooks.log").exists()
    mine, theirs = _events(daemon.home), _events(other)
    assert [_same(e) for e in mine] == [_same(e) for e in theirs]
    sessions = {e.get("session") for e in mine}
    assert {"fast-1", "fast-2", "fast-3", "fast-4", "tty 1"} <= sessions
    assert sum(e["source"] == "urchin" for e in mine) >= 2                   # the recalls given, audited
    assert SECRET not in (daemon.home / "journal" / "events.jsonl").read_text()
    big = next(e for e in mine if e.get("session") == "fast-4")
    assert big["meta"]["truncated"] is True and len(big["content"]) < 70_000


class _Running:
    """A second daemon for one `with` block."""

    def __init__(self, home: Path) -> None:
        self.gen = running(home)

    def __enter__(self) -> DaemonProcess:
        return next(self.gen)

    def __exit__(self, *exc: object) -> None:
        self.gen.close()


def test_the_hook_process_imports_only_the_standard_library_beside_a_daemon(shared: DaemonProcess) -> None:
    daemon = shared
    done = _stdlib_hook(daemon.home, "claude", [], _fixture("claude/hooks/SessionStart.json", session_id="imp"))
    assert done.returncode == 0 and b"session=old-shop" in done.stdout, done.stderr.decode()[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
    heavy = {m for m in imported if m.split(".")[0] in ("pathlib", "json", "socket", "re", "typing", "dataclasses",
                                                       "signal", "enum", "orjson", "platformdirs", "ipaddress")
             or m.startswith(("urchin.config", "urchin.redact", "urchin.collectors", "urchin.hooks", "urchin.event",
                              "urchin.ingest", "urchin.recall", "urchin.hook_recall"))}
    assert "urchin.hook_fast" in imported and not heavy, sorted(heavy)


def test_a_retry_with_the_same_id_is_stored_once(shared: DaemonProcess) -> None:
    daemon = shared
    payload = _fixture("claude/hooks/SessionStart.json", session_id="retry")   # no id of its own: the hook's
    call = hook_fast.parse(["claude"], io.BytesIO(payload))
    first, second = hook_fast.forward(call), hook_fast.forward(call)      # an answer lost, the call sent again
    assert isinstance(first, bytes) and isinstance(second, bytes)
    assert run_hook("claude", payload, event_id=call.event_id, out=io.BytesIO()) == 0   # then the full path
    stored = [e for e in _events(daemon.home) if e.get("session") == "retry" and e["source"] == "claude"]
    assert [e["id"] for e in stored] == [call.event_id]


def _post(daemon: DaemonProcess, token: str, agent: str, body: bytes, query: str = "") -> Any:
    with daemon.client(token) as http:
        return http.post(f"/hook/{agent}{query}", content=body, headers={"content-type": "application/json"})


def test_a_scoped_token_is_held_to_its_workspace_on_the_hook_route(shared: DaemonProcess) -> None:
    daemon = shared
    shop = create_token(daemon.home, "--scope", "hook", "--workspace", "shop")
    ingest = create_token(daemon.home, "--scope", "ingest")
    read = create_token(daemon.home, "--scope", "read")
    before = _events(daemon.home)
    other_ws = _fixture("claude/hooks/PostToolUse.json", cwd="/home/dev/tools")
    prompt = _fixture("claude/hooks/UserPromptSubmit.json", cwd="/home/dev/tools")
    for token, body, field in ((shop, other_ws, "workspace"), (shop, prompt, "workspace"),
                               (ingest, _fixture("claude/hooks/UserPromptSubmit.json"), "authorization"),
                               (read, _fixture("claude/hooks/PostToolUse.json"), "authorization")):
        answer = _post(daemon, token, "claude", body)
        assert answer.status_code == 403 and answer.json()["field"] == field, answer.text
        assert "x-urchin-hook" not in answer.headers
    assert _events(daemon.home) == before                            # nothing stored, nothing recalled
    mine = _post(daemon, shop, "claude", _fixture("claude/hooks/UserPromptSubmit.json",
                                                  prompt="Why does the checkout total ignore the coupon?"))
    assert mine.status_code == 200 and b"id=shop-1" in mine.content and mine.headers["x-urchin-hook"] == "1"
    assert _post(daemon, ingest, "claude", _fixture("claude/hooks/PostToolUse.json")).status_code == 200


BAD = [("claude", b"{not json", "", 422, "payload"), ("claude", b"[1, 2]", "", 422, "payload"),
       ("nobody", b'{"hook_event_name": "Stop"}', "", 422, "agent"), ("claude", b"{}", "?colour=red", 400, "colour"),
       ("claude", b"{}", "?cwd=a&cwd=b", 400, "cwd"), ("claude", b"{}", "?cwd=%ff", 400, "query"),
       ("claude", b"{}", "?id=x&id=y", 400, "id")]


def test_bad_input_is_refused_with_json_naming_the_field_and_nothing_is_stored(shared: DaemonProcess) -> None:
    daemon = shared
    token = (daemon.home / "hooks.token").read_text().strip()
    before = _events(daemon.home)
    for agent, body, query, status, field in BAD:
        answer = _post(daemon, token, agent, body, query)
        assert answer.status_code == status and answer.json()["field"] == field, (agent, body, query, answer.text)
        assert "x-urchin-hook" not in answer.headers
    assert _events(daemon.home) == before


class _Wrong(http.server.BaseHTTPRequestHandler):
    """Something else on the daemon's port: an older daemon's 404, a 200 that is not the daemon's, garbage."""

    answer: Callable[[_Wrong], None]
    paths: list[str]

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).paths.append(self.path)
        type(self).answer(self)

    def log_message(self, *args: object) -> None:
        pass


def _json(status: int, body: bytes) -> Callable[[_Wrong], None]:
    def send(handler: _Wrong) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    return send


def _garbage(handler: _Wrong) -> None:
    handler.wfile.write(b"nonsense\r\n\r\n")


@pytest.mark.parametrize("answer", [_json(404, b'{"error": "path: no such route"}'), _json(200, b'{"status": "ok"}'),
                                    _json(500, b"{}"), _garbage], ids=["404", "200-not-ours", "500", "garbage"])
def test_the_hook_falls_back_on_the_full_path_when_the_daemon_answers_wrongly(
        urchin_home: Path, answer: Callable[[_Wrong], None]) -> None:
    handler: Any = type("Handler", (_Wrong,), {"answer": staticmethod(answer), "paths": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {"URCHIN_HOOK_URL": f"http://127.0.0.1:{server.server_address[1]}", "URCHIN_HOOK_TOKEN": "t"}
        payload = _fixture("claude/hooks/PostToolUse.json", session_id="wrong")
        del_id = orjson.loads(payload)
        del_id.pop("tool_use_id")                       # no id of its own: it takes the one the hook sent
        done = run_urchin("hook", "claude", input=orjson.dumps(del_id), env=env)
    finally:
        server.shutdown()
    assert done.returncode == 0 and done.stdout == b""
    first = handler.paths[0]
    assert first.startswith("/hook/claude?id=")       # the fast route was asked first, then /ingest
    stored = _events(urchin_home)                      # written by the full path, once, with the id it sent
    assert [(e["session"], e["id"]) for e in stored] == [("wrong", first.split("id=")[1].split("&")[0])]


def test_the_hook_falls_back_when_the_daemon_is_gone(daemon: DaemonProcess) -> None:
    info = (daemon.home / "daemon.json").read_bytes()
    daemon.stop()
    (daemon.home / "daemon.json").write_bytes(info)      # a stale file: its daemon holds no lock
    payload = _fixture("claude/hooks/PostToolUse.json", session_id="gone")
    done = run_urchin("hook", "claude", input=payload, env={"URCHIN_HOME": str(daemon.home)})
    assert done.returncode == 0 and done.stdout == b""
    assert [e["session"] for e in _events(daemon.home) if e.get("session") == "gone"] == ["gone"]


def test_an_unreachable_daemon_is_not_waited_on_twice_and_the_log_says_so(urchin_home: Path) -> None:
    import socket

    with socket.socket() as probe:                  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"URCHIN_HOOK_URL": f"http://127.0.0.1:{port}", "URCHIN_HOOK_TOKEN": "t"}
    done = run_urchin("hook", "claude", input=_fixture("claude/hooks/PostToolUse.json", session_id="closed"), env=env)
    assert done.returncode == 0 and done.stdout == b""
    assert [e["session"] for e in _events(urchin_home)] == ["closed"]
    log = (urchin_home / "hooks.log").read_text()
    assert log.count("did not answer") == 1 and "POST /hook" in log        # the full path did not ask again


def test_the_fast_hook_reads_the_flags_the_hook_command_declares() -> None:
    """`urchin hook` is parsed twice: by `hook_fast.parse` beside a daemon, by click otherwise. Both take
    the same flags into the same fields, or a flag one of them drops is lost on one path only."""
    import click

    from urchin.cli import main

    hook = main.commands["hook"]
    flags = {opt: param.name for param in hook.params if isinstance(param, click.Option) for opt in param.opts}
    flags["--home"] = "home"   # the group's option, which the fast hook reads after the agent too
    assert {"--home"} == {opt for param in main.params for opt in param.opts if opt.startswith("--home")}
    fields = {flag: "shell" if name == "shell_name" else name for flag, name in flags.items()}
    assert hook_fast._OPTIONS == fields
    assert set(hook_fast.FIELDS) == set(fields.values()) - {"event", "home"}
