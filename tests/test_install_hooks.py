"""`urchin install-hooks`: merges into existing configs, idempotently, with a backup and a dry run; keeps
each file's mode and owner, installs a command the agent's cwd cannot shadow, creates no folder for --config."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import REPO, run_urchin
from urchin.collectors.install import hook_command, render

CONTRIB = {"claude": ("claude-code/settings.json", {}), "gemini": ("gemini-cli/settings.json", {}),
           "copilot": ("copilot-cli/hooks.json", {}), "codex": ("codex/hooks.json", {}),
           "bash": ("shell/urchin.bash", {"shell": "bash"}),
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
    done = call_urchin("install-hooks", "claude", "--config", str(config))
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
    again = call_urchin("install-hooks", "claude", "--config", str(config))
    assert again.returncode == 0 and "already installed" in again.stdout
    assert config.read_bytes() == before
    assert len(list(tmp_path.glob("settings.json.urchin-backup-*"))) == 1


def test_dry_run_prints_a_diff_and_changes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text('{"theme": "dark"}\n')
    done = call_urchin("install-hooks", "gemini", "--config", str(config), "--dry-run")
    assert done.returncode == 0
    assert done.stdout.startswith(f"--- {config}\n+++ {config}\n")
    assert '+  "theme": "dark"' in done.stdout and "hook gemini" in done.stdout
    assert config.read_text() == '{"theme": "dark"}\n'
    assert not list(tmp_path.glob("*.urchin-backup-*"))


def test_copilot_goes_to_the_user_hooks_folder_by_default(tmp_path: Path) -> None:
    done = call_urchin("install-hooks", "copilot")
    assert done.returncode == 0, done.stderr
    written = orjson.loads((tmp_path / "user-home" / ".copilot" / "hooks" / "urchin.json").read_bytes())
    assert written["version"] == 1
    assert written["hooks"]["postToolUse"][0]["bash"].endswith("hook copilot --event postToolUse")


def test_invalid_json_config_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text("{ // a comment\n}")
    done = call_urchin("install-hooks", "claude", "--config", str(config))
    assert done.returncode == 1 and "not valid JSON" in done.stderr
    assert config.read_text() == "{ // a comment\n}"


def test_shell_rc_gets_one_block(tmp_path: Path, urchin_home: Path) -> None:
    rc = tmp_path / ".bashrc"
    rc.write_text("alias ll='ls -l'")
    assert call_urchin("install-hooks", "shell", "--config", str(rc)).returncode == 0
    assert call_urchin("install-hooks", "shell", "--config", str(rc)).returncode == 0
    text = rc.read_text()
    assert text.startswith("alias ll='ls -l'\n# >>> urchin >>>\n") and text.count("# >>> urchin >>>") == 1
    assert (urchin_home / "shell" / "urchin.bash").read_text() == render("shell", hook_command(), "bash")


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


# A module the agent's working directory could hold: imported instead of the real orjson, it would run
# on every prompt. It leaves a marker and then behaves (so a vulnerable hook still "works").
EVIL_ORJSON = """import pathlib, sys
pathlib.Path(__file__).with_name("PWNED").write_text("ran")
sys.modules.pop("orjson", None)
sys.path[:] = [p for p in sys.path if p not in ("", ".", str(pathlib.Path(__file__).parent))]
import orjson as _real
globals().update(vars(_real))
"""
BARE_PATH = "/usr/bin:/bin"   # the agent's PATH need not hold urchin


def _evil_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "evil-repo"
    repo.mkdir()
    (repo / "orjson.py").write_text(EVIL_ORJSON)
    fake = repo / "urchin"      # and an `urchin` for a PATH that looks in the cwd
    fake.write_text(f"#!/bin/sh\ntouch {repo / 'PWNED'}\n")
    fake.chmod(0o755)
    return repo


@pytest.mark.parametrize("target", ["claude", "gemini", "copilot", "shell"])
def test_config_keeps_its_mode_and_owner_and_the_backup_is_no_more_readable(tmp_path: Path, target: str) -> None:
    config = tmp_path / ("rc" if target == "shell" else "settings.json")
    config.write_text("# mine\n" if target == "shell" else '{"apiKey": "sk-not-for-others"}\n')
    config.chmod(0o600)
    owner = (os.getuid(), os.getgid())
    if os.geteuid() == 0:      # as root we can give it to someone else and check that it stays theirs
        owner = (4242, 4343)
        os.chown(config, *owner)
    done = call_urchin("install-hooks", target, "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert f"hook {target}" in config.read_text() or "urchin" in config.read_text()
    info = config.stat()
    assert (info.st_mode & 0o7777, info.st_uid, info.st_gid) == (0o600, *owner)
    [backup] = tmp_path.glob(f"{config.name}.urchin-backup-*")
    binfo = backup.stat()
    assert (binfo.st_mode & 0o7777, binfo.st_uid, binfo.st_gid) == (0o600, *owner)
    assert not list(tmp_path.glob(".*urchin-tmp"))


def test_new_agent_config_is_private(tmp_path: Path) -> None:
    done = call_urchin("install-hooks", "gemini")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "user-home" / ".gemini" / "settings.json").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("target", ["claude", "gemini", "copilot"])
def test_installed_hook_cannot_be_shadowed_by_the_agents_cwd(tmp_path: Path, urchin_home: Path, target: str) -> None:
    """The real attack: the agent runs the installed command in a repository holding `orjson.py`."""
    config = tmp_path / "settings.json"
    done = run_urchin("install-hooks", target, "--config", str(config), env={"PATH": BARE_PATH})
    assert done.returncode == 0, done.stderr
    hooks = orjson.loads(config.read_bytes())["hooks"]
    first = next(iter(hooks.values()))[0]
    command = first["bash"] if target == "copilot" else first["hooks"][0]["command"]
    repo = _evil_repo(tmp_path)
    payload = {"hook_event_name": "UserPromptSubmit", "prompt": "hello from the agent", "session_id": "s1",
               "cwd": str(repo), "prompt_text": "hello from the agent", "sessionId": "s1", "timestamp": 1}
    env = {"PATH": BARE_PATH, "URCHIN_HOME": str(urchin_home), "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    ran = subprocess.run(["sh", "-c", command], cwd=repo, input=orjson.dumps(payload), env=env,
                         capture_output=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert not (repo / "PWNED").exists(), f"{command!r} imported the cwd's orjson.py"
    assert not command.startswith(("urchin ", "python")) and " -m urchin" not in command.replace(" -I -m", "")


def test_an_earlier_shadowable_install_is_upgraded_in_place(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    old = f"{sys.executable} -m urchin hook claude"
    mine = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]},
                               {"hooks": [{"type": "command", "command": old, "timeout": 10}]}]}}
    config.write_text(orjson.dumps(mine).decode())
    assert call_urchin("install-hooks", "claude", "--config", str(config)).returncode == 0
    stop = orjson.loads(config.read_bytes())["hooks"]["Stop"]
    assert [h["hooks"][0]["command"] for h in stop] == ["notify-send done", f"{hook_command()} hook claude"]
    again = call_urchin("install-hooks", "claude", "--config", str(config))
    assert "already installed" in again.stdout


@pytest.mark.parametrize("target", ["shell", "claude"])
def test_config_in_a_missing_folder_is_refused_and_nothing_is_created(tmp_path: Path, target: str) -> None:
    config = tmp_path / "nonexistent" / "dir" / "rc"
    done = call_urchin("install-hooks", target, "--config", str(config))
    assert done.returncode in (1, 2)
    assert "--config" in done.stderr and str(config.parent) in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_installed_bash_snippet_needs_no_urchin_on_path(tmp_path: Path, urchin_home: Path) -> None:
    """install-hooks shell, then a real interactive bash whose PATH has no urchin (but the cwd has one)."""
    rc = tmp_path / "rc"
    rc.write_text("")
    assert run_urchin("install-hooks", "shell", "--config", str(rc), env={"PATH": BARE_PATH}).returncode == 0
    repo = _evil_repo(tmp_path)
    env = {"PATH": f".:{BARE_PATH}", "URCHIN_HOME": str(urchin_home), "PYTHONPATH": str(REPO),
           "HOME": str(tmp_path), "HISTFILE": str(tmp_path / "h")}
    subprocess.run(["bash", "--noprofile", "--norc", "-i"], input=f"source {rc}\necho from-the-rc\nexit\n",
                   text=True, env=env, cwd=repo, capture_output=True, timeout=60)
    journal = urchin_home / "journal" / "events.jsonl"
    deadline = time.time() + 30
    while time.time() < deadline and not journal.exists():
        time.sleep(0.2)
    time.sleep(0.3)
    contents = [orjson.loads(line)["content"] for line in journal.read_bytes().splitlines()]
    assert contents == ["echo from-the-rc"]
    assert not (repo / "PWNED").exists()


def test_a_symlinked_config_is_changed_where_it_points(tmp_path: Path) -> None:
    """Dotfiles managers link ~/.claude/settings.json into a repository: the link stays a link."""
    real = tmp_path / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}\n')
    real.chmod(0o640)
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    assert call_urchin("install-hooks", "claude", "--config", str(link)).returncode == 0
    assert link.is_symlink() and "hook claude" in real.read_text()
    assert real.stat().st_mode & 0o777 == 0o640


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_paths_in_the_shell_lines_are_quoted_not_run(tmp_path: Path) -> None:
    """A home or interpreter path holding `$(...)`, quotes or spaces is a path, never a command."""
    odd = tmp_path / "it's a $(touch PWNED-home) dir"
    home = odd / "urchin-home"
    rc = tmp_path / "rc"
    rc.write_text("")
    done = run_urchin("install-hooks", "shell", "--config", str(rc), env={"URCHIN_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    env = {"PATH": BARE_PATH, "HOME": str(tmp_path)}
    sourced = subprocess.run(["bash", "--norc", "-c", f". {shlex.quote(str(rc))}"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=30)
    assert sourced.returncode == 0, sourced.stderr
    assert not list(tmp_path.rglob("PWNED*")), rc.read_text()
    command = shlex.quote(str(odd / "bin" / "urchin"))
    line = next(line for line in render("shell", command, "bash").splitlines() if "__urchin_bin=(" in line)
    probe = f"set -u\n{line}\nprintf '%s' \"${{__urchin_bin[0]}}\""
    ran = subprocess.run(["bash", "--norc", "-c", probe], cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=30)
    assert ran.stdout == str(odd / "bin" / "urchin"), ran.stderr
    assert not list(tmp_path.rglob("PWNED*"))
