"""`urchin hook <agent>` as agents run it: a real process, payload on stdin, exit 0, silent stdout."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_urchin
from urchin.config import Settings
from urchin.facade import Memory

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = "5f3c2a1e-8d4b-4c1a-9e2f-0a1b2c3d4e5f"
HEAVY = ("numpy", "httpx", "mcp", "starlette", "uvicorn", "pydantic", "psycopg", "click")


def hook(agent: str, payload: bytes | str, *args: str,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    data = payload.encode() if isinstance(payload, str) else payload
    return run_urchin("hook", agent, *args, input=data, env=env)


def journal(home: Path) -> list[dict]:
    path = home / "journal" / "events.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.mark.parametrize("agent,name,kind", [
    ("claude", "UserPromptSubmit", "conversation"), ("claude", "PostToolUse", "tool_use"),
    ("claude", "PostToolUseFailure", "error"), ("claude", "SessionStart", "agent"),
    ("claude", "SessionEnd", "agent"), ("claude", "PreCompact", "agent"),
    ("gemini", "BeforeAgent", "conversation"), ("gemini", "AfterAgent", "conversation"),
    ("gemini", "AfterTool", "tool_use"), ("gemini", "SessionStart", "agent"), ("gemini", "SessionEnd", "agent"),
    ("copilot", "userPromptSubmitted", "conversation"), ("copilot", "postToolUse", "tool_use"),
    ("copilot", "sessionStart", "agent"), ("copilot", "sessionEnd", "agent"), ("copilot", "errorOccurred", "error"),
])
def test_each_recorded_payload_appends_one_event(agent: str, name: str, kind: str, urchin_home: Path) -> None:
    done = hook(agent, (FIXTURES / agent / "hooks" / f"{name}.json").read_bytes())
    assert (done.returncode, done.stdout) == (0, b"")
    [event] = journal(urchin_home)
    assert event["source"] == agent and event["kind"] == kind
    assert event["meta"]["hook"] == name
    assert not (urchin_home / "hooks.log").exists()


def test_claude_hook_fields(urchin_home: Path) -> None:
    hook("claude", (FIXTURES / "claude" / "hooks" / "PostToolUseFailure.json").read_bytes())
    [event] = journal(urchin_home)
    assert event["id"] == f"claude:{SESSION}:tool:toolu_01ABC"
    assert event["session"] == SESSION and event["workspace"] == "shop"
    assert event["content"].startswith("Bash: pytest -q tests/test_checkout.py\nExit code 1")


def test_copilot_timestamp_is_taken_from_milliseconds(urchin_home: Path) -> None:
    hook("copilot", (FIXTURES / "copilot" / "hooks" / "postToolUse.json").read_bytes(), "--event", "postToolUse")
    [event] = journal(urchin_home)
    assert event["timestamp"] == "2025-12-13T16:27:06.000Z"
    assert event["content"] == 'bash: curl -s localhost:8080/health\n{"status":"down","db":"timeout"}'


def test_shell_hook_plain_text_and_json(urchin_home: Path) -> None:
    done = hook("shell", "make deploy ENV=prod", "--shell", "bash", "--exit-code", "2", "--cwd", "/home/dev/web",
                "--started", "1700000400", "--duration-ms", "812", "--session", "77")
    assert (done.returncode, done.stdout) == (0, b"")
    hook("shell", (FIXTURES / "shell" / "hooks" / "command.json").read_bytes())
    hook("shell", " secret-command --token x", "--shell", "bash")   # leading space: private
    first, second = journal(urchin_home)
    assert first["content"] == "make deploy ENV=prod" and first["meta"]["exit_code"] == 2
    assert first["meta"]["duration_ms"] == 812 and first["workspace"] == "web" and first["session"] == "77"
    assert second["id"].startswith("shell:zsh:1700000100:")


def test_hook_and_collector_store_one_copy(urchin_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "user-home" / ".claude"
    shutil.copytree(FIXTURES / "claude", claude, ignore=shutil.ignore_patterns("hooks", "*.txt"))
    transcript = claude / "projects" / "-home-dev-shop" / f"{SESSION}.jsonl"
    for name in ("UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "Stop"):
        payload = orjson.loads((FIXTURES / "claude" / "hooks" / f"{name}.json").read_bytes())
        payload["transcript_path"] = str(transcript)
        assert hook("claude", orjson.dumps(payload)).returncode == 0
    hooked = {e["id"] for e in journal(urchin_home)}
    assert "a0000000-0000-4000-8000-000000000009" in hooked   # Stop found the reply's uuid
    assert len(hooked) == 4
    report = Memory(Settings.resolve()).collect("claude")[0]
    ids = [e["id"] for e in journal(urchin_home)]
    assert len(ids) == len(set(ids))
    assert report.duplicate >= 4   # the transcript's copies of what the hooks wrote


@pytest.mark.parametrize("payload", [b"", b"   \n", b"{not json", b"[1, 2]", b'"a string"'])
def test_bad_payloads_exit_0_and_log(payload: bytes, urchin_home: Path) -> None:
    done = hook("claude", payload)
    assert (done.returncode, done.stdout) == (0, b"")
    log = urchin_home / "hooks.log"
    assert log.read_text().strip()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert journal(urchin_home) == []


def test_unknown_agent_exits_0_and_logs(urchin_home: Path) -> None:
    done = hook("emacs", b"{}")
    assert (done.returncode, done.stdout) == (0, b"")
    assert "agent: must be one of" in (urchin_home / "hooks.log").read_text()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_home_exits_0_and_logs_to_stderr(tmp_path: Path) -> None:
    home = tmp_path / "locked"
    home.mkdir()
    home.chmod(0o500)
    try:
        done = hook("claude", (FIXTURES / "claude" / "hooks" / "UserPromptSubmit.json").read_bytes(),
                    env={"URCHIN_HOME": str(home)})
    finally:
        home.chmod(0o700)
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"claude:" in done.stderr


def test_home_that_is_a_file_exits_0_and_logs_to_stderr(tmp_path: Path) -> None:
    # Works as root too: nothing can be created under a path that is a regular file.
    home = tmp_path / "not-a-folder"
    home.write_text("oops")
    done = hook("claude", (FIXTURES / "claude" / "hooks" / "UserPromptSubmit.json").read_bytes(),
                env={"URCHIN_HOME": str(home)})
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"claude: " in done.stderr and home.read_text() == "oops"


def test_broken_config_exits_0_and_logs(urchin_home: Path) -> None:
    urchin_home.mkdir(parents=True)
    (urchin_home / "config.toml").write_text("[urchin\n")
    done = hook("claude", (FIXTURES / "claude" / "hooks" / "UserPromptSubmit.json").read_bytes())
    assert (done.returncode, done.stdout) == (0, b"")
    assert "not valid TOML" in (urchin_home / "hooks.log").read_text()


def test_click_path_behaves_the_same(urchin_home: Path) -> None:
    # `urchin --home X hook ...` goes through click rather than the fast path.
    done = run_urchin("--home", str(urchin_home), "hook", "claude", input=b"{broken")
    assert (done.returncode, done.stdout) == (0, b"")
    assert "not valid JSON" in (urchin_home / "hooks.log").read_text()


def test_hook_import_path_stays_light(urchin_home: Path) -> None:
    payload = (FIXTURES / "claude" / "hooks" / "PostToolUse.json").read_bytes()
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "urchin", "hook", "claude"], input=payload,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert done.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.decode().splitlines()
                if line.startswith("import time:")}
    assert not imported & set(HEAVY), f"heavy modules on the hook path: {sorted(imported & set(HEAVY))}"
    assert len(journal(urchin_home)) == 1


def test_a_prompt_from_a_folder_whose_name_holds_a_control_character_is_kept(urchin_home: Path,
                                                                            tmp_path: Path) -> None:
    """A workspace derived from the cwd is made a valid name; the prompt is never lost over it."""
    cwd = tmp_path / "odd\nname\x07x"
    cwd.mkdir()
    payload = {"session_id": SESSION, "transcript_path": "/nonexistent.jsonl", "cwd": str(cwd),
               "hook_event_name": "UserPromptSubmit", "prompt": "fix the flaky checkout test"}
    done = hook("claude", orjson.dumps(payload))
    assert (done.returncode, done.stdout) == (0, b"")
    [event] = journal(urchin_home)
    assert event["content"] == "fix the flaky checkout test"
    assert event["workspace"] == "odd\ufffdname\ufffdx"
    assert not (urchin_home / "hooks.log").exists()


# ---- redact, then cap ----------------------------------------------------------------------------
def _cut_through(secret: str, into: int, head: str) -> str:
    """Tool output whose secret the soft cap's cut (64 KiB less room for the marker) goes through,
    `into` characters in, when the event's content is `head` + "\\n" + the output."""
    room = 64 * 1024 - 80
    return "y" * (room - len(head) - 2 - into) + " " + secret + "\n" + "z" * 400


def _prefixed() -> list[tuple[str, str]]:
    from tests.test_redact import ANTHROPIC, AWS_ID, GH, GOOGLE, SLACK, STRIPE_LIVE

    return [("AKIA", AWS_ID), ("ghp_", GH["p"]), ("sk-ant-", ANTHROPIC), ("xoxb-", SLACK),
            ("sk_live_", STRIPE_LIVE), ("AIza", GOOGLE)]


def _post_tool_use(stdout: str, use_id: str) -> bytes:
    return orjson.dumps({"session_id": SESSION, "hook_event_name": "PostToolUse", "cwd": "/home/dev/shop",
                         "tool_name": "Bash", "tool_input": {"command": "cat big.log"}, "tool_use_id": use_id,
                         "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False}})


def _assert_no_prefix_survives(events: list[dict], prefix: str, secret: str) -> None:
    for event in events:
        assert secret[:len(prefix) + 4] not in orjson.dumps(event).decode()
        assert event["meta"]["truncated"] is True and event["meta"]["redactions"]


def test_a_cut_at_the_soft_cap_keeps_no_part_of_a_secret(urchin_home: Path) -> None:
    # The instance, through the real `urchin hook claude` process.
    from tests.test_redact import AWS_ID

    done = hook("claude", _post_tool_use(_cut_through(AWS_ID, 19, "Bash: cat big.log"), "toolu_cut"))
    assert done.returncode == 0
    [event] = journal(urchin_home)
    _assert_no_prefix_survives([event], "AKIA", AWS_ID)


def test_no_cut_keeps_a_recognisable_start_of_any_prefixed_secret(urchin_home: Path) -> None:
    from urchin.hooks import run_hook

    for n, (prefix, secret) in enumerate(_prefixed()):
        for into in (len(prefix) + 4, len(secret) // 2, len(secret) - 1):
            run_hook("claude", _post_tool_use(_cut_through(secret, into, "Bash: cat big.log"), f"toolu_{n}_{into}"))
        events = [e for e in journal(urchin_home) if e["id"].startswith(f"claude:{SESSION}:tool:toolu_{n}_")]
        assert len(events) == 3
        _assert_no_prefix_survives(events, prefix, secret)


_SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
_EDIT = {"path": "/home/dev/ops/redis.yaml", "old": "maxmemory: 1gb\npolicy: lru\nport: 6379",
         "new": f"maxmemory: 2gb\npolicy: lfu\nport: 6379\ntoken: {_SECRET}"}


def _edit_payloads() -> list[tuple[str, tuple[str, ...], dict]]:
    """One file edit as each agent's hook sends it, with the answer that only restates the path."""
    path, old, new = _EDIT["path"], _EDIT["old"], _EDIT["new"]
    claude = orjson.loads((FIXTURES / "claude" / "hooks" / "PostToolUse.json").read_bytes())
    claude.update(tool_input={"file_path": path, "old_string": old, "new_string": new},
                  tool_response={"filePath": path, "oldString": old, "newString": new, "structuredPatch": []})
    multi = {**claude, "tool_name": "MultiEdit", "tool_use_id": "toolu_multi",
             "tool_input": {"file_path": path, "edits": [{"old_string": old, "new_string": new}]}}
    gemini = orjson.loads((FIXTURES / "gemini" / "hooks" / "AfterTool.json").read_bytes())
    gemini.update(tool_name="replace", tool_input={"file_path": path, "old_string": old, "new_string": new},
                  tool_response={"llmContent": f"Successfully modified file: {path} (1 replacements).",
                                 "returnDisplay": "ok"})
    copilot = orjson.loads((FIXTURES / "copilot" / "hooks" / "postToolUse.json").read_bytes())
    copilot.update(toolName="edit", toolArgs=orjson.dumps({"path": path, "old_str": old, "new_str": new}).decode(),
                   toolResult={"resultType": "success", "textResultForLlm": f"File {path} updated with changes."})
    return [("claude", (), claude), ("claude", (), multi), ("gemini", (), gemini),
            ("copilot", ("--event", "postToolUse"), copilot)]


@pytest.mark.parametrize("agent,args,payload", _edit_payloads(), ids=["claude-edit", "claude-multiedit",
                                                                      "gemini-replace", "copilot-edit"])
def test_an_edit_says_what_it_did_once_and_shows_the_change_redacted(
        agent: str, args: tuple[str, ...], payload: dict, urchin_home: Path) -> None:
    """Not "Edit: /x/redis.yaml updated /x/redis.yaml": the file once, what was replaced, the change."""
    assert hook(agent, orjson.dumps(payload), *args).returncode == 0
    [event] = journal(urchin_home)
    head, _, body = event["content"].partition("\n")
    assert head.endswith(f": {_EDIT['path']} (replaced 3 lines with 4)"), event["content"]
    assert event["content"].count(_EDIT["path"]) == 1
    assert "- policy: lru" in body and "+ policy: lfu" in body
    assert _SECRET not in event["content"] and "+ token: " in body   # the one redactor saw the change


def test_the_recorded_claude_edit_reads_plainly(urchin_home: Path) -> None:
    hook("claude", (FIXTURES / "claude" / "hooks" / "PostToolUse.json").read_bytes())
    [event] = journal(urchin_home)
    assert event["content"] == ("Edit: /home/dev/shop/checkout.py (replaced 1 line with 1)\n"
                                "- total = sum(prices)\n+ total = sum(prices) - coupon")
