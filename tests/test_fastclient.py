"""`urchin search|semantic|recent` beside a daemon: the stdlib fast path prints exactly what the full
(click) CLI prints, errors included, and imports nothing heavy (urchin/daemon/fastclient.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import REPO, run_urchin
from tests.daemon_fixture import DaemonProcess

# json and re: their import compiles regular expressions, more instructions than the rest of the fast path;
# collections (operator, reprlib, ...) too is more than the rest (`python -m` imports it: see SCRIPT)
HEAVY = ("click", "httpx", "numpy", "orjson", "starlette", "urchin.cli", "urchin.facade", "urchin.config", "json",
         "re", "enum", "collections")
# what an installed `urchin` script runs (uv's; pip's also imports `re` before us): not runpy, which imports
# collections itself
SCRIPT = "import sys; from urchin.__main__ import entry; sys.exit(entry())"

ANSWERS: list[tuple[str, ...]] = [
    ("search", "alpha"),
    ("search", "ALPHA", "--limit", "3"),
    ("search", "alpha", "--limit=4", "--hours=1e9"),
    ("--home", "{home}", "search", "beta"),
    ("search", "beta", "--workspace", "ws-2"),
    ("search", "shared words", "--source", "GIT", "--kind", "commit"),
    ("search", "colour"),
    ("search", "ünïcødé"),
    ("search", "a&b=c?d%e+f#g"),
    ("search", "nothing matches this"),
    ("search", "number 12"),                     # only older matches: a line on stderr says so
    ("search", "number 12", "--hours", "0.5"),
    ("search", "shared", "--hours", " 0.5 "),
    ("search", "shared", "--hours", "1_000"),
    ("search", "wide", "--hours", "1e7"),
    ("recent", "--limit", "7"),
    ("recent", "--source", "shell", "--hours", "1e7"),
    ("semantic", "alpha shared words", "--limit", "5", "--hours", "1000000"),
    ("semantic", "beta", "--workspace", "ws-1", "--hours", "1e7"),
]
# errors and everything else: the full CLI's own text and exit code (human output only: same path)
FALLBACKS: list[tuple[str, ...]] = [
    ("search", ""),
    ("search", "   "),
    ("search", "x", "--limit", "0"),
    ("search", "x", "--limit", "1001"),
    ("search", "x", "--limit", "2.5"),
    ("search", "x", "--hours", "abc"),
    ("search", "x", "--hours", "-1"),
    ("search", "x", "--hours", "inf"),
    ("search", "x", "--hours", "nan"),
    ("search", "x", "--bogus"),
    ("search", "x", "--help"),
    ("search",),
    ("search", "x", "y"),
    ("search", "x", "--limit"),
    ("search", "x", "--limit", "3", "--limit", "4"),
    ("search", "--", "-dash"),
    ("recent", "extra"),
    ("recent", "--kind", "note"),
    ("semantic", ""),
    ("--home",),
]


def _seed(home: Path) -> None:
    lines = []
    for i in range(60):
        content = f"{'alpha' if i % 3 == 0 else 'beta'} shared words number {i}"
        if i % 5 == 0:
            content += " \x1b[31mcolour\x1b[0m and\ttabs\nnew lines  ünïcødé a&b=c?d%e+f#g"
        if i % 7 == 0:
            content += " wide" * 80
        lines.append(orjson.dumps({
            "id": f"fast-{i}", "content": content,
            "source": ("git", "shell", "claude")[i % 3], "kind": ("commit", "command", "conversation")[i % 3],
            "workspace": f"ws-{i % 4}", "timestamp": f"2020-01-01T00:{i:02d}:00Z" if i < 30 else None,
            "tags": ["t", "ü"] if i % 2 else None,
            "meta": {"f": 1.2e-05, "big": 1e308, "n": -0.0, "nested": {"a": [1, 2.5, None, True]}} if i % 4 else None,
        }, option=orjson.OPT_APPEND_NEWLINE))
    source = home.parent / "seed.jsonl"
    home.mkdir(parents=True)
    source.write_bytes(b"".join(lines).replace(b',"timestamp":null', b"").replace(b',"tags":null', b"")
                       .replace(b',"meta":null', b""))
    assert run_urchin("import", str(source), env={"URCHIN_HOME": str(home)}).returncode == 0


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    home = tmp_path_factory.mktemp("fast") / "home"
    _seed(home)
    proc = DaemonProcess(home).start()
    yield proc
    proc.stop()


def run_full_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The click CLI itself, never the fast path (what `urchin` ran before it existed), in this process:
    the fast path's own process is what is under test, the reference need not start one (~0.45 s of a
    core each, 70 of them); test_the_reference_cli_in_process_is_the_cli_in_a_process checks it."""
    return call_urchin(*args, env=env, click_only=True)


def run_full_cli_process(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "from urchin.cli import main; main(prog_name='python -m urchin')"
    return run_urchin_cmd([sys.executable, "-c", code, *args], env)


def run_urchin_cmd(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(REPO), **env}, capture_output=True, text=True,
                          timeout=60)


def _same(fast: subprocess.CompletedProcess[str], full: subprocess.CompletedProcess[str]) -> None:
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)


CASES = [(args, as_json) for args in ANSWERS for as_json in (False, True)] + [(args, False) for args in FALLBACKS]


@pytest.mark.parametrize(("args", "as_json"), CASES,
                         ids=[" ".join(c) + (" --json" if j else "") for c, j in CASES])
def test_fast_path_prints_what_the_full_cli_prints(daemon: DaemonProcess, args: tuple[str, ...],
                                                   as_json: bool) -> None:
    env = {"URCHIN_HOME": str(daemon.home)}
    argv = [a.replace("{home}", str(daemon.home)) for a in args] + (["--json"] if as_json else [])
    fast = run_urchin(*argv, env=env)
    _same(fast, run_full_cli(*argv, env=env))


def test_the_reference_cli_in_process_is_the_cli_in_a_process(daemon: DaemonProcess) -> None:
    """The parity above compares with the click CLI run in the test's process: it prints what it prints
    in a process of its own (hits, ANSI, older-match note, usage errors, help), or the parity is moot."""
    env = {"URCHIN_HOME": str(daemon.home)}
    for args in (("search", "colour"), ("search", "colour", "--json"), ("search", "number 12"),
                 ("semantic", "beta", "--workspace", "ws-1", "--hours", "1e7"), ("recent", "--limit", "7", "--json"),
                 ("search", "x", "--limit", "0"), ("search", "x", "--bogus"), ("search", "x", "--help"), ("--home",)):
        _same(run_full_cli(*args, env=env), run_full_cli_process(*args, env=env))


def test_the_cases_exercise_hits_and_ansi(daemon: DaemonProcess) -> None:
    """The parity above means something: hits, ANSI codes (stripped off a pipe), scores, long lines."""
    env = {"URCHIN_HOME": str(daemon.home)}
    human = run_urchin("search", "colour", env=env).stdout
    assert human.count("\n") == 6 and "\x1b" not in human and "colour and tabs new lines" in human
    assert "\\u001b[31m" in run_urchin("search", "colour", "--json", env=env).stdout
    assert "…" in run_urchin("search", "wide", "--hours", "1e7", env=env).stdout
    assert "(0." in run_urchin("semantic", "alpha", "--hours", "1e7", env=env).stdout
    older = run_urchin("search", "number 12", env=env)
    assert older.stdout == "" and older.stderr.startswith("no match in the last 168 h; older matches exist")


@pytest.mark.parametrize("args", [("search", "alpha", "--json"), ("recent", "--limit", "3"),
                                  ("semantic", "beta shared", "--hours", "1e7")])
def test_fast_path_imports_nothing_heavy(daemon: DaemonProcess, args: tuple[str, ...]) -> None:
    env = {"URCHIN_HOME": str(daemon.home)}
    proc = run_urchin_cmd([sys.executable, "-X", "importtime", "-c", SCRIPT, *args], env)
    assert proc.returncode == 0 and proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "urchin.daemon.fastclient" in imported
    assert sorted(m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY) == []
    assert proc.stdout == run_full_cli(*args, env=env).stdout


def test_settings_the_fast_path_does_not_resolve_go_to_the_full_cli(daemon: DaemonProcess, tmp_path: Path) -> None:
    """A bad setting is reported as before, a refused token too, and URCHIN_NO_DAEMON is honoured."""
    env = {"URCHIN_HOME": str(daemon.home)}
    for extra in ({"URCHIN_DURABILITY": "bogus"}, {"URCHIN_INTAKE_TOKEN": "wrong"}, {"URCHIN_NO_DAEMON": "1"},
                  {"URCHIN_PORT": "x"}):
        fast = run_urchin("search", "alpha", env={**env, **extra})
        _same(fast, run_full_cli("search", "alpha", env={**env, **extra}))
    assert run_urchin("search", "alpha", env={**env, "URCHIN_DURABILITY": "bogus"}).returncode == 1
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _same(run_urchin("--home", str(a_file), "search", "x"), run_full_cli("--home", str(a_file), "search", "x", env={}))


def test_without_a_daemon_the_full_cli_answers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _seed(home)
    env = {"URCHIN_HOME": str(home)}
    for args in (("search", "alpha"), ("recent", "--hours", "1e7", "--json"), ("search", "")):
        _same(run_urchin(*args, env=env), run_full_cli(*args, env=env))


def test_on_a_terminal_the_fast_path_shows_control_characters_as_the_full_cli_does() -> None:
    """Both replace C0 (but tab and newline), DEL and C1 with U+FFFD on a terminal (the full CLI's stream
    in urchin/cli/group.py, the fast path's own table, built on first use)."""
    from urchin.cli.group import _CONTROL
    from urchin.daemon.fastclient import _shown_on_terminal

    every = "".join(map(chr, range(0x3000)))
    assert _shown_on_terminal(every) == _CONTROL.sub("\ufffd", every) != every
    assert _shown_on_terminal(every) == _shown_on_terminal(every)   # the table, once built, is the same
