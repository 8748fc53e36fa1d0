"""`urchin uninstall-hooks` (and `make uninstall`, which runs it first): Urchin's hooks leave every agent's
config and the shells' rc files; the user's own content stays equal in meaning, the file keeps its mode,
a backup is made first, and a second run changes nothing."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import REPO, run_urchin
from urchin.collectors.uninstall import is_urchin_command

# Each agent's settings as a user might have them: their own hooks beside other settings.
MINE = {
    "claude": {"model": "opus", "env": {"TOKEN_FILE": "~/.t"}, "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter --fix"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}},
    "gemini": {"theme": "dark", "hooks": {
        "AfterTool": [{"matcher": "*", "hooks": [{"name": "mine", "type": "command", "command": "my-audit"}]}]}},
    "copilot": {"version": 1, "hooks": {"postToolUse": [{"type": "command", "bash": "my-audit", "timeoutSec": 5}]}},
    "codex": {"model": "o4", "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]}},
}


def _ok(*args: str) -> str:
    """`urchin ARGS` in the test's process (call_urchin: the same entry point), which must succeed."""
    done = call_urchin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("target", list(MINE))
def test_install_then_uninstall_leaves_the_users_settings_as_they_were(tmp_path: Path, target: str) -> None:
    config = tmp_path / f"{target}-settings.json"
    config.write_text(orjson.dumps(MINE[target], option=orjson.OPT_INDENT_2).decode())
    config.chmod(0o640)
    _ok("install-hooks", target, "--config", str(config))
    installed = config.read_bytes()
    assert f"hook {target}".encode() in installed
    backups_before = set(tmp_path.glob("*.urchin-backup-*"))

    out = _ok("uninstall-hooks", target, "--config", str(config))
    assert f"{target}: removed" in out and "backup:" in out
    assert orjson.loads(config.read_bytes()) == MINE[target]
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    (backup,) = set(tmp_path.glob("*.urchin-backup-*")) - backups_before    # the install's own backup stays
    assert backup.read_bytes() == installed and stat.S_IMODE(backup.stat().st_mode) == 0o640

    after = config.read_bytes()
    again = _ok("uninstall-hooks", target, "--config", str(config))
    assert "no Urchin hooks" in again and config.read_bytes() == after
    assert set(tmp_path.glob("*.urchin-backup-*")) - backups_before == {backup}


def test_a_users_hook_added_inside_an_urchin_entry_stays(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    _ok("install-hooks", "claude", "--config", str(config))
    settings = orjson.loads(config.read_bytes())
    settings["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "say finished"})
    config.write_bytes(orjson.dumps(settings))
    _ok("uninstall-hooks", "claude", "--config", str(config))
    assert orjson.loads(config.read_bytes()) == {"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "say finished"}]}]}}


def test_without_a_target_every_default_config_is_cleaned(tmp_path: Path, urchin_home: Path) -> None:
    user = tmp_path / "user-home"                      # URCHIN_USER_HOME (conftest): the agents' folders
    (user / ".claude").mkdir(parents=True)
    (user / ".claude" / "settings.json").write_text(orjson.dumps(MINE["claude"]).decode())
    bashrc, zshrc = user / ".bashrc", user / ".zshrc"
    bashrc.write_text("export EDITOR=vim\nalias ll='ls -l'\n")
    zshrc.write_text("setopt autocd\n")
    for target in ("claude", "gemini", "copilot", "codex", "shell"):
        _ok("install-hooks", target)
    _ok("install-hooks", "shell", "--shell", "zsh")
    assert (user / ".copilot" / "hooks" / "urchin.json").exists()

    out = _ok("uninstall-hooks")
    assert orjson.loads((user / ".claude" / "settings.json").read_bytes()) == MINE["claude"]
    for agent_file in (user / ".gemini" / "settings.json", user / ".codex" / "hooks.json"):
        assert orjson.loads(agent_file.read_bytes()) == {}
    assert not (user / ".copilot" / "hooks" / "urchin.json").exists()     # it held only Urchin's hooks
    assert bashrc.read_text() == "export EDITOR=vim\nalias ll='ls -l'\n" and zshrc.read_text() == "setopt autocd\n"
    assert len(out.splitlines()) == 6 and out.count("removed") == 6, out

    again = _ok("uninstall-hooks")
    assert "removed" not in again and again.count("no Urchin hooks") + again.count("does not exist") == 6


def test_a_config_that_is_not_json_is_reported_and_the_others_still_cleaned(tmp_path: Path) -> None:
    user = tmp_path / "user-home"
    _ok("install-hooks", "codex")
    (user / ".claude").mkdir(parents=True)
    (user / ".claude" / "settings.json").write_text("{ not json")
    done = run_urchin("uninstall-hooks")
    assert done.returncode == 1 and "claude:" in done.stderr and "not valid JSON" in done.stderr
    assert "Traceback" not in done.stderr
    assert (user / ".claude" / "settings.json").read_text() == "{ not json"
    assert b"hook codex" not in (user / ".codex" / "hooks.json").read_bytes()


def test_only_commands_install_hooks_writes_count_as_urchins() -> None:
    ours = ["urchin hook claude", "/home/a/.local/share/urchin-cli/venv/bin/urchin hook gemini",
            "'/opt/my venv/bin/urchin' hook codex", "/usr/bin/python3 -I -m urchin hook claude",
            "python -m urchin hook copilot --event sessionStart", "urchin hook copilot --event postToolUse"]
    not_ours = ["my-wrapper && urchin hook claude", "urchin hook claude; rm -rf ~", "echo urchin hook claude",
                "urchin hook vim", "urchin-fork hook claude", "urchin hook claude --extra",
                "sh -c 'urchin hook claude'", "urchin hook 'claude", ""]
    assert all(is_urchin_command(c) for c in ours)
    assert not any(is_urchin_command(c) for c in not_ours)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_uninstall_removes_the_hooks_before_the_command(tmp_path: Path) -> None:
    user, cli = tmp_path / "user-home", tmp_path / "cli"
    _ok("install-hooks", "claude")
    (cli / "venv" / "bin").mkdir(parents=True)
    urchin_bin = cli / "venv" / "bin" / "urchin"        # stands for the installed command: this checkout's urchin
    urchin_bin.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m urchin \"$@\"\n")
    urchin_bin.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "urchin").symlink_to(urchin_bin)
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    done = subprocess.run(["make", "uninstall", f"BIN_DIR={tmp_path / 'bin'}", f"INSTALL_VENV={cli / 'venv'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert "claude: removed" in done.stdout
    assert b"urchin" not in (user / ".claude" / "settings.json").read_bytes()
    assert not cli.exists() and not (tmp_path / "bin" / "urchin").is_symlink()
