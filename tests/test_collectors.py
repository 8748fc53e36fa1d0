"""Collectors read the recorded fixtures of each agent into events, once, through the write path."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import run_urchin
from urchin.config import Settings
from urchin.ephemeral import Ephemeral
from urchin.facade import Memory

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE_SESSION = "5f3c2a1e-8d4b-4c1a-9e2f-0a1b2c3d4e5f"
CLAUDE_TRANSCRIPT = f"projects/-home-dev-shop/{CLAUDE_SESSION}.jsonl"


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    """A fake home holding every agent's folder, copied from the fixtures."""
    home = tmp_path / "user-home"
    shutil.copytree(FIXTURES / "claude", home / ".claude", ignore=shutil.ignore_patterns("hooks", "*.txt"))
    shutil.copytree(FIXTURES / "copilot", home / ".copilot", ignore=shutil.ignore_patterns("hooks"))
    shutil.copytree(FIXTURES / "gemini", home / ".gemini", ignore=shutil.ignore_patterns("hooks"))
    shutil.copytree(FIXTURES / "codex", home / ".codex")
    shutil.copy(FIXTURES / "shell" / "bash_history", home / ".bash_history")
    shutil.copy(FIXTURES / "shell" / "zsh_history", home / ".zsh_history")
    fish = home / ".local" / "share" / "fish"
    fish.mkdir(parents=True)
    shutil.copy(FIXTURES / "shell" / "fish_history", fish / "fish_history")
    old = time.time() - 3600   # chat files quiet for an hour: every message is final
    for path in (home / ".gemini").rglob("session-*"):
        os.utime(path, (old, old))
    return home


def events(memory: Memory, source: str | None = None) -> list[dict]:
    out = [e.to_dict() for e in memory.follow(0)[0]]   # every event, in journal order
    return [e for e in out if source is None or e["source"] == source]


def test_claude_transcript_becomes_prompts_replies_and_tool_calls(user_home: Path, memory: Memory) -> None:
    [report] = memory.collect("claude")
    assert report.errors == []
    got = {e["id"]: e for e in events(memory, "claude")}
    prompt = next(e for e in got.values() if e["meta"].get("role") == "user" and not e["meta"].get("history"))
    assert prompt["content"].startswith("Fix the checkout bug:\nthe total ignores")
    assert "ünïcode" in prompt["content"] and "☕" in prompt["content"]
    assert prompt["id"].startswith(f"claude:{CLAUDE_SESSION}:prompt:")
    assert prompt["workspace"] == "shop" and prompt["session"] == CLAUDE_SESSION
    assert prompt["timestamp"] == "2025-10-01T09:00:05.000Z"
    failed = got[f"claude:{CLAUDE_SESSION}:tool:toolu_01ABC"]
    assert failed["kind"] == "error"
    assert failed["content"].startswith("Bash: pytest -q tests/test_checkout.py\nF.\nFAILED")
    edit = got[f"claude:{CLAUDE_SESSION}:tool:toolu_02DEF"]
    assert edit["kind"] == "tool_use" and edit["content"].startswith("Edit: /home/dev/shop/checkout.py")
    reply = got["a0000000-0000-4000-8000-000000000009"]
    assert reply["meta"]["role"] == "assistant" and "2 passed" in reply["content"]
    assert "b0000000-0000-4000-8000-000000000001" in got   # subagent transcript
    texts = " ".join(e["content"] for e in got.values())
    assert "/clear" not in texts and "Caveat" not in texts and "Let me look" not in texts
    assert f"claude:{CLAUDE_SESSION}:tool:toolu_03GHI" not in got     # empty tool output is noise
    # the partial last line is not read yet
    assert "regression test" not in texts


def test_claude_history_folds_pasted_text_and_dedupes_with_the_transcript(user_home: Path, memory: Memory) -> None:
    memory.collect("claude")
    got = events(memory, "claude")
    prompts = [e for e in got if e["content"].startswith("Fix the checkout bug")]
    assert len(prompts) == 1   # history.jsonl's copy has the transcript's id
    pasted = [e for e in got if e["meta"].get("history") and "ZeroDivisionError" in e["content"]]
    assert len(pasted) == 1 and "[Pasted text" not in pasted[0]["content"]
    assert pasted[0]["timestamp"] == "2025-10-01T09:01:40.000Z"


def test_rerunning_a_collector_appends_nothing(user_home: Path, memory: Memory) -> None:
    first = {r.name: r.appended for r in memory.collect("all")}
    assert first["claude"] > 0 and first["copilot"] > 0 and first["gemini"] > 0 and first["codex"] > 0
    size = memory.end_offset()
    again = memory.collect("all")
    assert sum(r.appended for r in again) == 0
    assert memory.end_offset() == size
    # even with the checkpoints gone, deterministic ids make a full re-read append nothing
    shutil.rmtree(memory.settings.collectors_dir)
    assert sum(r.appended for r in memory.collect("all")) == 0
    assert memory.end_offset() == size


def test_a_partial_last_line_is_read_once_it_is_complete(user_home: Path, memory: Memory) -> None:
    memory.collect("claude")
    transcript = user_home / ".claude" / CLAUDE_TRANSCRIPT
    with transcript.open("a") as handle:
        handle.write((FIXTURES / "claude" / "partial_line_rest.txt").read_text())
    [report] = memory.collect("claude")
    assert report.appended == 1
    assert any("regression test" in e["content"] for e in events(memory, "claude"))


def test_checkpoint_is_private_and_records_the_offset(user_home: Path, memory: Memory) -> None:
    memory.collect("claude")
    path = memory.settings.collectors_dir / "claude.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = orjson.loads(path.read_bytes())
    transcript = user_home / ".claude" / CLAUDE_TRANSCRIPT
    cursor = data["files"][str(transcript)]
    content = transcript.read_bytes()
    assert cursor["offset"] == content.rfind(b"\n") + 1 < len(content)
    assert cursor["inode"] == transcript.stat().st_ino


def test_a_rotated_file_is_read_from_its_start(tmp_path: Path, memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    history = tmp_path / "zsh_history"
    history.write_text(": 1700000100:2;npm run build\n: 1700000200:1;cargo build\n")
    monkeypatch.setenv("URCHIN_SHELL_HISTORY", str(history))
    mem = Memory(Settings.resolve())
    assert mem.collect("shell")[0].appended == 2
    # the shell rewrites its history: a new, shorter file with one new command
    history.unlink()
    history.write_text(": 1700000300:0;pytest -x\n")
    [report] = mem.collect("shell")
    assert report.appended == 1
    assert [e["content"] for e in events(mem, "shell")] == ["npm run build", "cargo build", "pytest -x"]


def test_a_history_rewritten_in_place_is_noticed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history = tmp_path / "bash_history"
    history.write_text("#1700000000\ngit status\n")
    monkeypatch.setenv("URCHIN_SHELL_HISTORY", str(history))
    mem = Memory(Settings.resolve())
    mem.collect("shell")
    history.write_text("#1700000500\nmake release\n#1700000600\nmake deploy\n")   # same inode, longer, new start
    assert mem.collect("shell")[0].appended == 2


def test_huge_tool_output_is_capped_not_rejected(user_home: Path, memory: Memory) -> None:
    transcript = user_home / ".claude" / "projects" / "-home-dev-big" / "big-session.jsonl"
    transcript.parent.mkdir(parents=True)
    common = {"sessionId": "big-session", "cwd": "/home/dev/big", "timestamp": "2025-10-02T10:00:00.000Z"}
    lines = [
        {**common, "type": "assistant", "uuid": "c1", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_big", "name": "Bash", "input": {"command": "cat huge.log"}}]}},
        {**common, "type": "user", "uuid": "c2", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_big", "content": "ERROR é\n" * 400_000}]}},
    ]
    transcript.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    [report] = memory.collect("claude")
    assert report.rejected == 0
    big = memory.get("claude:big-session:tool:toolu_big")
    assert len(big.content.encode()) <= memory.settings.soft_cap_bytes
    assert "truncated by urchin" in big.content and big.meta and big.meta["truncated"] is True


def test_copilot_session_state(user_home: Path, memory: Memory) -> None:
    memory.collect("copilot")
    got = events(memory, "copilot")
    contents = [e["content"] for e in got]
    assert contents[0] == "Why does /health return 503 après le déploiement?"
    assert got[0]["workspace"] == "api" and got[0]["session"] == "9a8b7c6d-1111-4222-8333-444455556666"
    tool = next(e for e in got if e["kind"] == "tool_use")
    assert tool["content"] == 'bash: curl -s localhost:8080/health\n{"status":"down","db":"timeout"}'
    error = next(e for e in got if e["kind"] == "error")
    assert error["content"] == "view: /home/dev/api/missing.yaml\nPath does not exist"
    assert contents[-1].startswith("The database pool times out")
    assert len(got) == 4   # the empty assistant message and the info line are dropped


def test_gemini_json_and_jsonl_chats(user_home: Path, memory: Memory) -> None:
    memory.collect("gemini")
    got = events(memory, "gemini")
    contents = [e["content"] for e in got]
    assert "List the TODOs in src/ — 日本語 comments too" in contents
    grep = next(e for e in got if e["meta"].get("tool") == "search_file_content")
    assert grep["content"].startswith("search_file_content: TODO (in src)\nFound 2 matches")
    assert "Two TODOs: a retry in src/a.py and a Japanese note in src/b.py." in contents
    assert "Request cancelled." not in contents
    assert all(e["workspace"] == "tools" for e in got)
    # jsonl: the re-appended message wins, the first copy is never stored
    assert "Renamed load_cfg to load_config in 4 files." in contents
    assert "Working on it" not in contents
    assert any(e["meta"].get("tool") == "replace" for e in got)


def test_gemini_holds_the_last_message_until_the_file_settles(user_home: Path, memory: Memory) -> None:
    chat = next((user_home / ".gemini").rglob("session-*.jsonl"))
    os.utime(chat, None)   # just written: the last message may still change
    memory.collect("gemini")
    contents = [e["content"] for e in events(memory, "gemini")]
    assert "Rename the config loader" in contents
    assert "Renamed load_cfg to load_config in 4 files." not in contents
    old = time.time() - 3600
    os.utime(chat, (old, old))
    memory.collect("gemini")
    assert "Renamed load_cfg to load_config in 4 files." in [e["content"] for e in events(memory, "gemini")]


def test_codex_rollout(user_home: Path, memory: Memory) -> None:
    memory.collect("codex")
    got = events(memory, "codex")
    assert [e["kind"] for e in got] == ["conversation", "tool_use", "conversation"]
    assert got[0]["content"] == "Why is terraform plan so slow? Ça prend 5 minutes."
    assert got[0]["session"] == "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5" and got[0]["workspace"] == "infra"
    assert got[1]["content"].startswith("shell: bash -lc terraform providers\nprovider[")
    assert got[1]["meta"]["exit_code"] == 0
    assert got[2]["meta"]["role"] == "assistant"


def test_shell_histories(user_home: Path, memory: Memory) -> None:
    memory.collect("shell")
    got = events(memory, "shell")
    by_shell: dict[str, list[str]] = {}
    for e in got:
        by_shell.setdefault(e["meta"]["shell"], []).append(e["content"])
    assert by_shell["bash"] == ["git status", "make test TARGET=ünïcode", "terraform plan -out=plan.bin"]
    assert by_shell["zsh"] == ["npm run build", "for f in *.py; do\n  black $f\ndone", "echo ăla"]
    assert by_shell["fish"] == ["cargo test --release", "echo multi\nline"]
    build = next(e for e in got if e["content"] == "npm run build")
    assert build["timestamp"] == "2023-11-14T22:15:00.000Z" and build["meta"]["duration_ms"] == 2000
    assert next(e for e in got if e["content"] == "git status")["id"].startswith("shell:bash:1700000000:")


def test_ephemeral_mode_suppresses_and_consumes(user_home: Path, memory: Memory) -> None:
    Ephemeral(memory.settings.home).path.parent.mkdir(parents=True, exist_ok=True)
    Ephemeral(memory.settings.home).path.write_bytes(b'{"started_at": "2025-01-01T00:00:00Z", "until": null}')
    [report] = memory.collect("codex")
    assert report.suppressed == 3 and report.appended == 0
    assert events(memory) == []
    Ephemeral(memory.settings.home).path.unlink()
    assert memory.collect("codex")[0].appended == 0   # what happened during ephemeral mode stays unrecorded


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_git_commits_under_configured_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "code"
    repo = root / "shop"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "checkout.py").write_text("total = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "Subtract the coupon at checkout", "-m", "Café customers were overcharged.")
    monkeypatch.setenv("URCHIN_GIT_ROOTS", str(root))
    mem = Memory(Settings.resolve())
    assert mem.collect("git")[0].appended == 1
    (repo / "README.md").write_text("shop\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "Add a README")
    assert mem.collect("git")[0].appended == 1
    assert mem.collect("git")[0].appended == 0
    commits = events(mem, "git")
    assert commits[0]["content"] == ("Subtract the coupon at checkout\n\nCafé customers were overcharged.\n\n"
                                     "Files:\ncheckout.py")
    assert commits[0]["id"].startswith("git:shop:") and commits[0]["workspace"] == "shop"
    assert commits[1]["title"] == "Add a README"


def test_collect_list_shows_folders_and_counts(user_home: Path) -> None:
    assert run_urchin("collect", "claude").returncode == 0
    listed = run_urchin("collect", "--list", "--json")
    assert listed.returncode == 0
    rows = {r["name"]: r for r in map(orjson.loads, listed.stdout.splitlines())}
    assert rows["claude"]["found"] is True and rows["claude"]["events"] > 0 and rows["claude"]["lastRun"]
    assert rows["claude"]["folders"][0] == str(user_home / ".claude" / "projects")
    assert rows["git"]["found"] is False and rows["codex"]["lastRun"] is None


def test_unknown_collector_is_a_usage_error() -> None:
    done = run_urchin("collect", "emacs")
    assert done.returncode == 2 and "emacs" in done.stderr


def test_a_transcript_cut_at_the_soft_cap_keeps_no_part_of_a_secret(user_home: Path, memory: Memory) -> None:
    # Redact, then cap: the collector's cut goes through each secret at three depths.
    from tests.test_hooks import _assert_no_prefix_survives, _cut_through, _prefixed

    transcript = user_home / ".claude" / "projects" / "-home-dev-big" / "cut-session.jsonl"
    transcript.parent.mkdir(parents=True)
    common = {"sessionId": "cut-session", "cwd": "/home/dev/big", "timestamp": "2025-10-02T10:00:00.000Z"}
    lines, expected = [], {}
    for n, (prefix, secret) in enumerate(_prefixed()):
        for into in (len(prefix) + 4, len(secret) // 2, len(secret) - 1):
            use_id = f"toolu_{n}_{into}"
            expected[use_id] = (prefix, secret)
            call = {"type": "tool_use", "id": use_id, "name": "Bash", "input": {"command": "cat big.log"}}
            result = {"type": "tool_result", "tool_use_id": use_id,
                      "content": _cut_through(secret, into, "Bash: cat big.log")}
            lines.append({**common, "type": "assistant", "uuid": f"a-{use_id}",
                          "message": {"role": "assistant", "content": [call]}})
            lines.append({**common, "type": "user", "uuid": f"u-{use_id}",
                          "message": {"role": "user", "content": [result]}})
    transcript.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    [report] = memory.collect("claude")
    assert report.rejected == 0
    for use_id, (prefix, secret) in expected.items():
        event = memory.get(f"claude:cut-session:tool:{use_id}")
        _assert_no_prefix_survives([event.to_dict()], prefix, secret)


def test_derived_ids_are_keyed_and_what_was_collected_before_is_not_stored_again(
        user_home: Path, memory: Memory, settings: Settings) -> None:
    """Issue 34 H: a prompt's id held sha256(text)[:16], which anyone can compute to confirm a guess;
    it is an HMAC under the install key now. What was collected before (plain ids), read again
    from the start after the upgrade, adds nothing, and what was forgotten stays forgotten."""
    import hashlib
    import re

    from urchin.collectors import COLLECTORS, collector
    from urchin.collectors.base import CollectReport
    from urchin.collectors.checkpoints import Checkpoints

    derived = re.compile(r":(prompt|reply|history):|^shell:")
    # before the upgrade: the same collectors, ids not keyed (what `run` did until now)
    for name in COLLECTORS:
        old = collector(name, settings)
        if old.found():
            old.collect_into(memory.ingest, Checkpoints(settings, name).load(), CollectReport(name))
    before = {e["id"]: e for e in events(memory)}
    plain = [e for e in before.values() if derived.search(e["id"])]
    assert len(plain) >= 10
    assert any(e["id"].endswith(hashlib.sha256(e["content"].strip().encode()).hexdigest()[:16]) for e in plain)
    gone = plain[0]["id"]
    assert memory.forget([gone], confirm=True).forgotten == 1
    shutil.rmtree(settings.collectors_dir)                   # every file is read again from its start
    again = memory.collect("all")
    assert sum(r.appended for r in again) == 0, [r.summary() for r in again]
    assert sum(r.duplicate + r.suppressed for r in again) >= len(before)
    assert gone not in {e["id"] for e in events(memory)}
    # a new home: the same events, under keyed ids that share no digest with the plain ones
    fresh = Memory(Settings.resolve(settings.home.parent / "fresh-home"))
    fresh.collect("all")
    keyed = [e["id"] for e in events(fresh) if derived.search(e["id"])]
    assert len(keyed) == len(plain) and not set(keyed) & set(before)
    digests = {i.rsplit(":", 1)[-1] for i in keyed}
    assert not digests & {i.rsplit(":", 1)[-1] for i in before}


def test_a_codex_patch_says_which_files_and_how_many_lines() -> None:
    from urchin.collectors.text import summarize_input

    patch = ("*** Begin Patch\n*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n+y = 3\n"
             "*** Add File: b.py\n+hi\n*** End Patch")
    assert summarize_input("apply_patch", patch) == "updated src/a.py, added b.py (removed 1 line, added 3 lines)"
    assert summarize_input("apply_patch", {"input": patch}) == summarize_input("apply_patch", patch)
    assert summarize_input("shell", {"command": "ls"}) == "ls"   # not an edit: as before
