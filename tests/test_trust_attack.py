"""Adversarial checks of issue 12 ("trust by construction"): the next instance of each class."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from urchin.facade import Memory

SECRET = "ghp_1234567890abcdefghijABCDEFGHIJ123456"


def _import(home: Path, tmp_path: Path, rows: list[dict[str, object]]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    done = call_urchin("import", str(src))
    assert done.returncode == 0, done.stderr


def test_forget_finds_events_by_the_secret_they_were_given_with(memory: Memory, urchin_home: Path,
                                                                  tmp_path: Path) -> None:
    """An id, session or query that held a secret is stored redacted: forget selects by what was
    given (as `get` does), and neither a match nor a miss echoes the secret."""
    _import(urchin_home, tmp_path, [
        {"id": SECRET, "content": "alpha", "source": "manual", "session": f"sess-{SECRET}"},
        {"id": "e2", "content": "beta", "source": "manual", "session": f"sess-{SECRET}"},
        {"id": "e3", "content": f"token {SECRET} here", "source": "manual"},
        {"id": "e4", "content": "gamma", "source": "manual"},
    ])
    by_id = run_urchin("forget", SECRET, "--json")
    assert by_id.returncode == 0, by_id.stderr
    assert orjson.loads(by_id.stdout)["forgotten"] == 1
    assert SECRET not in by_id.stdout + by_id.stderr
    by_session = call_urchin("forget", "--session", f"sess-{SECRET}", "--yes", "--json")
    assert orjson.loads(by_session.stdout)["forgotten"] == 1, by_session.stdout
    by_query = call_urchin("forget", "--query", f"token {SECRET}", "--yes", "--json")
    assert orjson.loads(by_query.stdout)["forgotten"] == 1, by_query.stdout
    miss = call_urchin("forget", "ghp_0000000000abcdefghijABCDEFGHIJ999999", "--json")
    assert "ghp_0000000000" not in miss.stdout + miss.stderr
    left = [orjson.loads(line)["id"] for line in memory.journal.path.read_bytes().splitlines()]
    assert left == ["e4"]


def test_a_file_named_after_a_secret_is_neither_listed_nor_served(tmp_path: Path, urchin_home: Path) -> None:
    """A path is served (overview, citations, index rows) like content: a file or folder whose name
    holds a secret stays out of every walk and every read, and errors never quote it."""
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / f"{SECRET}.txt").write_text("pelican notes\n")
    (root / f"dump-{SECRET}").mkdir()
    (root / f"dump-{SECRET}" / "a.py").write_text("print('heron')\n")
    (root / "src" / "ok.py").write_text("print(1)\n")
    (root / "link.txt").symlink_to(root / "src" / f"{SECRET}.txt")
    assert call_urchin("workspace", "add", str(root), "--name", "shop").returncode == 0
    overview = run_urchin("overview", "--json")
    assert overview.returncode == 0, overview.stderr
    assert SECRET not in overview.stdout and "ok.py" in overview.stdout
    for n, path in enumerate((f"shop/src/{SECRET}.txt", f"shop/dump-{SECRET}/a.py", "shop/link.txt",
                              f"src/{SECRET}.md")):
        got = (call_urchin if n else run_urchin)("get-file", path)
        assert got.returncode == 1, (path, got.stdout)
        assert SECRET not in got.stdout + got.stderr, (path, got.stderr)
        assert "pelican" not in got.stdout


def test_a_root_replaced_by_a_symlink_serves_nothing(tmp_path: Path, urchin_home: Path) -> None:
    """A root is the real folder it was added as: once it (or a folder above it) becomes a symlink
    elsewhere (a checkout replacing `sub/` by `sub -> /`), nothing is listed or read through it."""
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "sub" / "notes.txt").write_text("pelican\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:heron\n")
    assert call_urchin("workspace", "add", str(repo / "sub"), "--name", "shop").returncode == 0
    assert "pelican" in call_urchin("get-file", "shop/notes.txt").stdout
    (repo / "sub" / "notes.txt").unlink()
    (repo / "sub").rmdir()
    (repo / "sub").symlink_to(outside)
    got = run_urchin("get-file", "shop/passwd")
    assert got.returncode == 1 and "heron" not in got.stdout, got.stdout
    assert "shop" in got.stderr
    overview = call_urchin("overview", "--json")
    assert "passwd" not in overview.stdout
    fetched = call_urchin("fetch-document", "shop/passwd")
    assert "heron" not in fetched.stdout


def test_no_error_quotes_a_secret_back(urchin_home: Path) -> None:
    """An error may quote what it refused (a field, a path, an id, a timestamp): at every edge (CLI,
    HTTP, MCP) what it quotes passes the redactor first."""
    import anyio
    import httpx

    from tests.daemon_fixture import DaemonProcess
    from tests.mcp_harness import stdio_session

    cli = [run_urchin("get", SECRET), call_urchin("forget", "--since", SECRET),
           call_urchin("get-file", f"shop/{SECRET}"), call_urchin("memory", "show", SECRET)]
    for done in cli:
        assert done.returncode != 0
        assert SECRET not in done.stdout + done.stderr, done.stderr
    mcp_texts: list[str] = []

    async def main() -> None:
        async with stdio_session() as session:
            for tool, args in (("urchin_forget", {"since": SECRET, "confirm": False}),
                               ("urchin_get_event", {"id": f"id-{SECRET}"}),
                               ("urchin_search", {"query": "x", "source": SECRET})):
                result = await session.call_tool(tool, args)
                mcp_texts.append(orjson.dumps(result.model_dump(mode="json")).decode())

    anyio.run(main)
    assert all(SECRET not in text for text in mcp_texts), mcp_texts
    daemon = DaemonProcess(urchin_home).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        replies = [httpx.delete(f"{daemon.url}/events/{SECRET}", headers=headers, timeout=30),
                   httpx.post(daemon.url + "/forget", json={"since": SECRET}, headers=headers, timeout=30),
                   httpx.post(daemon.url + "/forget", json={f"k-{SECRET}": 1}, headers=headers, timeout=30),
                   httpx.get(f"{daemon.url}/search", params={"q": "x", "source": SECRET}, headers=headers, timeout=30),
                   httpx.get(f"{daemon.url}/nowhere/{SECRET}", headers=headers, timeout=30)]
    finally:
        daemon.stop()
    assert [r.status_code >= 400 for r in replies] == [True, True, True, False, True]
    for reply in replies:
        assert SECRET not in reply.text, reply.text


def test_meta_values_read_as_fields_obey_the_name_rules(memory: Memory) -> None:
    """The reader takes `workspace`, `sessionId` (and `summary`) from meta for reference-shaped lines:
    a value validation would refuse as that field stays in meta, so no stored line bypasses the name
    rules (a 200 KB session no PostgreSQL index entry can hold, terminal escapes in `session`)."""
    from urchin.event import Event
    from urchin.search.fields import searchable_fields

    results = memory.ingest([
        {"id": "L1", "content": "long pelican", "meta": {"sessionId": "s" * 200_000, "workspace": "W" * 3000}},
        {"id": "L2", "content": "escape pelican", "meta": {"sessionId": "a\x1b[31mb\u2028", "workspace": "w\x85"}},
        {"id": "L3", "content": "fine pelican", "meta": {"sessionId": "s-1", "workspace": "shop", "summary": "t"}},
    ])
    assert [r.status for r in results] == ["appended"] * 3
    for line in memory.journal.path.read_bytes().splitlines():
        event = Event.from_json(line)
        assert event is not None
        fields = searchable_fields(orjson.loads(line))
        assert fields is not None
        for name in (event.workspace, event.session, fields[5], fields[6]):
            assert name is None or (name.isprintable() and len(name.encode()) <= 1024), name[:40]
        if event.id == "L3":
            assert (event.workspace, event.session, event.title) == ("shop", "s-1", "t")
        else:
            assert (event.workspace, event.session) == (None, None)
            assert event.meta and "sessionId" in event.meta


def test_a_redaction_rule_added_later_reaches_indexed_workspace_files(tmp_path: Path, urchin_home: Path,
                                                                      pg_url: str) -> None:
    """Chunks in PostgreSQL were redacted with the rules of the day: once a rule is added, the next
    index (and `redact --rewrite`) re-chunks every file, so no answer serves the new secret type."""
    root = tmp_path / "shop"
    root.mkdir()
    (root / "deploy.txt").write_text("deploy key ZZSEC-abcdef123 for zanzibar\n")
    env = {"URCHIN_DATABASE_URL": pg_url}
    assert call_urchin("workspace", "add", str(root), "--name", "shop", env=env).returncode == 0
    assert run_urchin("index", env=env).returncode == 0
    assert "ZZSEC-abcdef123" in call_urchin("context", "zanzibar", env=env).stdout  # not a secret yet
    (urchin_home / "config.toml").write_text('[redact.extra]\nzz = "ZZSEC-[a-z0-9]+"\n')
    rewrite = run_urchin("redact", "--rewrite", env=env)
    assert rewrite.returncode == 0, rewrite.stderr
    for args in (("context", "zanzibar"), ("query-source", "shop", "zanzibar")):
        answer = call_urchin(*args, env=env)      # index, redact and the last context stay processes
        assert "zanzibar" in answer.stdout and "ZZSEC-abcdef123" not in answer.stdout, (args, answer.stdout)
    (urchin_home / "config.toml").write_text('[redact.extra]\nzz = "ZZSEC-[a-z0-9]+"\nyy = "zanzibar"\n')
    assert run_urchin("index", env=env).returncode == 0
    assert "for [REDACTED:yy]" in run_urchin("context", "deploy key", env=env).stdout


def test_redact_rewrite_runs_beside_a_daemon_that_took_up_the_new_rules(urchin_home: Path) -> None:
    """The daemon reads config.toml again when it changes, so its next writes redact as the rewrite
    does: the rewrite runs at once, with no restart, and the daemon serves and writes the redacted text.
    (A daemon still on other rules, one of an older Urchin, is refused: see `RemoteMemory.redact_rewrite`.)"""
    import httpx

    from tests.daemon_fixture import DaemonProcess

    daemon = DaemonProcess(urchin_home).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        httpx.post(daemon.url + "/ingest", json={"id": "r1", "content": "key ZZSEC-abcdef1 pelican"}, headers=headers,
                   timeout=30)
        (urchin_home / "config.toml").write_text('[redact.extra]\nzz = "ZZSEC-[a-z0-9]+"\n')
        done = run_urchin("redact", "--rewrite")
        assert done.returncode == 0 and "rewrote 1" in done.stdout, done.stdout + done.stderr
        found = httpx.get(daemon.url + "/search", params={"q": "pelican"}, headers=headers, timeout=30).json()
        assert "[REDACTED:zz]" in found["events"][0]["content"], found
        httpx.post(daemon.url + "/ingest", json={"content": "again ZZSEC-abcdef2"}, headers=headers, timeout=30)
    finally:
        daemon.stop()
    assert b"ZZSEC-abcdef" not in (urchin_home / "journal" / "events.jsonl").read_bytes()


def test_a_root_named_after_a_secret_is_refused(tmp_path: Path, urchin_home: Path) -> None:
    """A root's name and path are written to workspaces.json and quoted in every citation."""
    folder = tmp_path / f"dump-{SECRET}"
    folder.mkdir()
    for run, args in ((run_urchin, ("workspace", "add", str(folder))),
                      (call_urchin, ("workspace", "add", str(tmp_path), "--name", f"n-{SECRET}"))):
        done = run(*args)
        assert done.returncode == 1, done.stdout
        assert SECRET not in done.stdout + done.stderr
    assert not (urchin_home / "workspaces.json").exists() or SECRET not in (urchin_home / "workspaces.json").read_text()


def test_a_rejection_quoting_a_cut_value_shows_no_part_of_a_secret(memory: Memory) -> None:
    """Errors quote at most ~40 characters of a bad value: the cut must not fall inside a secret,
    which the redactor would no longer recognise (its first 34 characters would be shown)."""
    from urchin.errors import ValidationError

    bad = [{"content": "x", "meta": {f"k\x01{SECRET}": 1}},
           {"content": "x", "meta": {f"outer {SECRET}": {"k\x01": 1}}},
           {"content": "x", "meta": {f"{SECRET}{SECRET}": {"k\x01": 1}}},
           {"content": "x", "timestamp": f"at {SECRET}"},
           {"content": "x", "timestamp": f"0001-01-01T00:00:00Z {SECRET}"}]
    for item in bad:
        result = memory.ingest([item])[0]
        assert result.status == "rejected"
        assert SECRET[:12] not in (result.reason or ""), result.reason
        try:
            memory.prepare(item, None)
        except ValidationError as exc:
            assert SECRET[:12] not in str(exc) and SECRET[:12] not in exc.field, str(exc)
        else:
            raise AssertionError("accepted")


def _claude_line(uuid: str, content: object, kind: str = "user") -> str:
    return orjson.dumps({"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/dev/shop",
                         "sessionId": "sess1", "version": "2", "type": kind, "uuid": uuid,
                         "timestamp": "2025-10-01T09:00:00.000Z",
                         "message": {"role": kind, "content": content}}).decode()


def test_one_hostile_transcript_line_costs_no_other_line(tmp_path: Path, urchin_home: Path) -> None:
    """A tool call nested 900 deep (orjson writes 254) in a Claude transcript: the lines around it are
    collected, the collector's cursor moves on, and the next run has nothing left to fail on."""
    claude = tmp_path / "claude"
    (claude / "projects" / "-p").mkdir(parents=True)
    deep = "[" * 900 + "]" * 900
    tool = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"x": "DEEP"}}]
    lines = [_claude_line("u1", "first pelican"),
             _claude_line("u2", tool, "assistant").replace('"DEEP"', deep),
             _claude_line("u3", "last heron")]
    (claude / "projects" / "-p" / "sess1.jsonl").write_text("\n".join(lines) + "\n")
    env = {"URCHIN_CLAUDE_DIR": str(claude)}
    first = run_urchin("collect", "claude", "--json", env=env)
    assert first.returncode == 0, first.stderr
    journal = (urchin_home / "journal" / "events.jsonl").read_text()
    assert "first pelican" in journal and "last heron" in journal, first.stdout
    again = call_urchin("collect", "claude", "--json", env=env)
    assert "error" not in again.stdout.replace('"errors":[]', ""), again.stdout


def test_one_unforeseen_gemini_message_costs_no_other(tmp_path: Path, urchin_home: Path) -> None:
    """A whole-file transcript (Gemini's session-*.json) with one message the adapter cannot read
    (`toolCalls: 5`): its other messages, and the files after it, are still collected."""
    import os

    chats = tmp_path / "gemini" / "tmp" / "abc" / "chats"
    chats.mkdir(parents=True)
    messages = [{"id": "g1", "timestamp": "2025-12-17T10:00:00.000Z", "type": "user", "content": "first pelican"},
                {"id": "g2", "timestamp": "2025-12-17T10:00:01.000Z", "type": "gemini", "content": "ok",
                 "toolCalls": 5},
                {"id": "g3", "timestamp": "2025-12-17T10:00:02.000Z", "type": "user", "content": "last heron"}]
    (chats / "session-1.json").write_bytes(orjson.dumps({"sessionId": "s1", "messages": messages}))
    (chats / "session-2.json").write_bytes(orjson.dumps({"sessionId": "s2", "messages": [
        {"id": "h1", "timestamp": "2025-12-17T11:00:00.000Z", "type": "user", "content": "second file egret"}]}))
    for path in chats.iterdir():
        os.utime(path, (1_700_000_000, 1_700_000_000))   # settled: read to the end
    done = run_urchin("collect", "gemini", env={"URCHIN_GEMINI_DIR": str(tmp_path / "gemini")})
    assert done.returncode == 0, done.stderr
    journal = (urchin_home / "journal" / "events.jsonl").read_text()
    for text in ("first pelican", "last heron", "second file egret"):
        assert text in journal, done.stdout


def test_a_hook_payload_with_hostile_names_still_records_the_prompt(urchin_home: Path) -> None:
    """Names an adapter takes from an agent's payload (session id, cwd) are made valid, as the
    workspace already is: a prompt is never lost over them, and hooks.log holds no secret."""
    payloads = [
        {"hook_event_name": "UserPromptSubmit", "session_id": "s\x00one", "cwd": "/tmp", "prompt": "nul pelican"},
        {"hook_event_name": "UserPromptSubmit", "session_id": "s" * 5000, "cwd": "/tmp", "prompt": "long heron"},
        {"hook_event_name": "UserPromptSubmit", "session_id": "s3", "cwd": "/x" * 3000, "prompt": "deep egret"},
        {"hook_event_name": "UserPromptSubmit", "session_id": "s4", "cwd": "/tmp/a\x00b", "prompt": "nul cwd ibis"},
    ]
    for payload in payloads:
        done = run_urchin("hook", "claude", input=orjson.dumps(payload).decode())
        assert done.returncode == 0
    journal = (urchin_home / "journal" / "events.jsonl").read_text()
    missing = [p["prompt"] for p in payloads if p["prompt"] not in journal]
    log = urchin_home / "hooks.log"
    assert missing == [], log.read_text()[:2000] if log.exists() else ""
    bad = {"hook_event_name": "UserPromptSubmit", "session_id": "s5", "cwd": f"/tmp/{SECRET}/" + "y/" * 3000,
           "prompt": "secret cwd"}
    run_urchin("hook", "claude", input=orjson.dumps(bad).decode())
    assert not log.exists() or SECRET not in log.read_text()


def test_a_terminal_is_never_sent_control_sequences_from_stored_text(urchin_home: Path, tmp_path: Path) -> None:
    """Events hold what tools printed, pages included: on a terminal, the CLI's text shows their control
    characters as U+FFFD, so no stored escape sequence (OSC 52 writes the clipboard) reaches it."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    hostile = "before \x1b]52;c;ZXZpbA==\x07 after \x1b[2J \x9b31m pelican"
    _import(urchin_home, tmp_path, [{"id": "esc1", "content": hostile, "title": "t\x1b[31m"}])
    out: dict[str, bytes] = {}
    for args in (("search", "pelican"), ("recent",), ("get", "esc1"), ("semantic", "pelican")):
        master, slave = os.openpty()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-m", "urchin", *args], stdout=slave, stderr=slave, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=30)
        os.close(master)
        out[args[0]] = b"".join(chunks)
    assert b"pelican" in out["search"] and b"pelican" in out["recent"]
    for name, data in out.items():
        assert b"\x1b" not in data and b"\x07" not in data and "\x9b".encode() not in data, (name, data[:300])
