"""`urchin install-hooks`: merges into existing configs, idempotently, with a backup and a dry run."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_urchin
from urchin.collectors.install import render

CONTRIB = {"claude": ("claude-code/settings.json", {}), "gemini": ("gemini-cli/settings.json", {}),
           "copilot": ("copilot-cli/hooks.json", {}), "bash": ("shell/urchin.bash", {"shell": "bash"}),
           "zsh": ("shell/urchin.zsh", {"shell": "zsh"})}


@pytest.mark.parametrize("name", list(CONTRIB))
def test_contrib_files_are_what_install_writes(name: str) -> None:
    path, kwargs = CONTRIB[name]
    target = "shell" if name in ("bash", "zsh") else name
    assert (REPO / "contrib" / path).read_text() == render(target, **kwargs)


def test_claude_merge_keeps_user_settings_and_is_idempotent(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    mine = {"model": "opus", "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [
        {"type": "command", "command": "prettier --write"}]}]}}
    config.write_text(orjson.dumps(mine).decode())
    done = run_urchin("install-hooks", "claude", "--config", str(config))
    assert done.returncode == 0, done.stderr
    merged = orjson.loads(config.read_bytes())
    assert merged["model"] == "opus"
    post = merged["hooks"]["PostToolUse"]
    assert post[0]["hooks"][0]["command"] == "prettier --write"
    assert "hook claude" in post[1]["hooks"][0]["command"] and post[1]["matcher"] == "*"
    assert set(merged["hooks"]) >= {"UserPromptSubmit", "Stop", "SessionStart", "SessionEnd", "PreCompact",
                                    "PostToolUseFailure"}
    backups = list(tmp_path.glob("settings.json.urchin-backup-*"))
    assert len(backups) == 1 and orjson.loads(backups[0].read_bytes()) == mine
    before = config.read_bytes()
    again = run_urchin("install-hooks", "claude", "--config", str(config))
    assert again.returncode == 0 and "already installed" in again.stdout
    assert config.read_bytes() == before
    assert len(list(tmp_path.glob("settings.json.urchin-backup-*"))) == 1


def test_dry_run_prints_a_diff_and_changes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text('{"theme": "dark"}\n')
    done = run_urchin("install-hooks", "gemini", "--config", str(config), "--dry-run")
    assert done.returncode == 0
    assert done.stdout.startswith(f"--- {config}\n+++ {config}\n")
    assert '+  "theme": "dark"' in done.stdout and "hook gemini" in done.stdout
    assert config.read_text() == '{"theme": "dark"}\n'
    assert not list(tmp_path.glob("*.urchin-backup-*"))


def test_copilot_goes_to_the_user_hooks_folder_by_default(tmp_path: Path) -> None:
    done = run_urchin("install-hooks", "copilot")
    assert done.returncode == 0, done.stderr
    written = orjson.loads((tmp_path / "user-home" / ".copilot" / "hooks" / "urchin.json").read_bytes())
    assert written["version"] == 1
    assert written["hooks"]["postToolUse"][0]["bash"].endswith("hook copilot --event postToolUse")


def test_invalid_json_config_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text("{ // a comment\n}")
    done = run_urchin("install-hooks", "claude", "--config", str(config))
    assert done.returncode == 1 and "not valid JSON" in done.stderr
    assert config.read_text() == "{ // a comment\n}"


def test_shell_rc_gets_one_block(tmp_path: Path, urchin_home: Path) -> None:
    rc = tmp_path / ".bashrc"
    rc.write_text("alias ll='ls -l'")
    assert run_urchin("install-hooks", "shell", "--config", str(rc)).returncode == 0
    assert run_urchin("install-hooks", "shell", "--config", str(rc)).returncode == 0
    text = rc.read_text()
    assert text.startswith("alias ll='ls -l'\n# >>> urchin >>>\n") and text.count("# >>> urchin >>>") == 1
    assert (urchin_home / "shell" / "urchin.bash").read_text() == render("shell", shell="bash")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_snippet_records_commands_with_exit_code_and_duration(tmp_path: Path, urchin_home: Path) -> None:
    """A real interactive bash with the snippet, recording through the real `urchin hook shell`."""
    wrapper = tmp_path / "urchin"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {os.sys.executable} -m urchin \"$@\"\n")
    wrapper.chmod(0o755)
    script = (f"source {REPO / 'contrib/shell/urchin.bash'}\n"
              "echo one\nls /nonexistent-urchin\n echo private\nsleep 0.3\nexit\n")
    env = {**os.environ, "URCHIN_BIN": str(wrapper), "HISTCONTROL": "ignorespace", "HISTFILE": str(tmp_path / "h")}
    subprocess.run(["bash", "--noprofile", "--norc", "-i"], input=script, text=True, env=env, capture_output=True,
                   timeout=60)
    journal = urchin_home / "journal" / "events.jsonl"
    deadline = time.time() + 30
    while time.time() < deadline and (not journal.exists() or journal.read_bytes().count(b"\n") < 3):
        time.sleep(0.2)   # the recording runs in the background
    got = {e["content"]: e for e in map(orjson.loads, journal.read_bytes().splitlines())}
    assert set(got) == {"echo one", "ls /nonexistent-urchin", "sleep 0.3"}
    assert got["ls /nonexistent-urchin"]["meta"]["exit_code"] == 2 and got["echo one"]["meta"]["exit_code"] == 0
    assert got["sleep 0.3"]["meta"]["duration_ms"] >= 250
    assert got["echo one"]["meta"]["cwd"] == os.getcwd()
