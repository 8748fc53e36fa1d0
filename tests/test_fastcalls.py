"""`urchin context|recall|get` beside a daemon: the fast path (urchin/daemon/fastcalls.py) prints what the
full click CLI prints, errors included, imports nothing heavy, and agrees with the in-process answer."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess
from tests.test_fastclient import HEAVY, SCRIPT, _same, _seed, run_full_cli, run_urchin_cmd

pytestmark = pytest.mark.slow

ANSWERS: list[tuple[str, ...]] = [
    ("context", "alpha shared words"),
    ("context", "beta", "--limit", "3"),
    ("context", "colour tabs", "--limit=2", "--hours", "1e7"),
    ("context", "alpha", "--workspace", "ws-1", "--session", "none-such"),
    ("--home", "{home}", "context", "ünïcødé a&b=c?d%e+f#g"),
    ("recall",),
    ("recall", "--prompt", "what about alpha shared words"),
    ("recall", "--prompt", "beta number", "--workspace", "ws-1", "--budget", "300"),
    ("recall", "--workspace=ws-2", "--cwd", "/tmp"),
    ("get", "fast-5"),
    ("get", "fast-4"),
    ("get", "fast-35"),
]
FALLBACKS: list[tuple[str, ...]] = [
    ("context", ""),
    ("context", "x", "--limit", "0"),
    ("context", "x", "--limit", "abc"),
    ("context", "x", "--hours", "-1"),
    ("context", "x", "--explain"),
    ("context", "x", "--bogus"),
    ("context",),
    ("recall", "--budget", "0"),
    ("recall", "--budget", "x"),
    ("recall", "extra"),
    ("get", "nope"),
    ("get", ""),
    ("get", " "),
    ("get", "a/../b"),
    ("get",),
]
# --json prints the daemon's body: one case per shape is enough
CASES = [(args, False) for args in ANSWERS + FALLBACKS] + [(args, True) for args in
                                                          ANSWERS[1:3] + ANSWERS[6:7] + ANSWERS[9:10]]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    home = tmp_path_factory.mktemp("fastcalls") / "home"
    _seed(home)
    proc = DaemonProcess(home).start()
    yield proc
    proc.stop()


@pytest.mark.parametrize(("args", "as_json"), CASES, ids=[" ".join(c) + (" --json" if j else "") for c, j in CASES])
def test_fast_path_prints_what_the_full_cli_prints(daemon: DaemonProcess, args: tuple[str, ...],
                                                   as_json: bool) -> None:
    env = {"URCHIN_HOME": str(daemon.home)}
    argv = [a.replace("{home}", str(daemon.home)) for a in args] + (["--json"] if as_json else [])
    fast, full = run_urchin(*argv, env=env), run_full_cli(*argv, env=env)
    # `--hours` reaches back from the moment of each call: the window's start is the one difference
    assert (fast.returncode, _since(fast.stdout), fast.stderr) == (full.returncode, _since(full.stdout), full.stderr)


def _since(text: str) -> str:
    return re.sub(r'"since":"[^"]*"', '"since":"(now - hours)"', text)


@pytest.mark.parametrize("args", [("context", "alpha shared"), ("recall", "--prompt", "alpha shared words", "--json"),
                                  ("get", "fast-5")])
def test_fast_path_imports_nothing_heavy(daemon: DaemonProcess, args: tuple[str, ...]) -> None:
    env = {"URCHIN_HOME": str(daemon.home)}
    run_urchin(*args, env=env)   # the daemon's first /context opens its index: within the fast path's timeout after
    proc = run_urchin_cmd([sys.executable, "-X", "importtime", "-c", SCRIPT, *args], env)
    assert proc.returncode == 0 and proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "urchin.daemon.fastcalls" in imported
    # an event's text is orjson's indent, and orjson's package imports json, re, enum and collections itself
    heavy = set(HEAVY) - ({"orjson", "json", "re", "enum", "collections"} if args[0] == "get" else set())
    assert sorted(m for m in imported if m.split(".")[0] in heavy or m in heavy) == []
    assert not any(m.startswith(("urchin.contract.ops", "urchin.contract.spec", "urchin.event")) for m in imported)


@pytest.mark.parametrize("args", [("get", "fast-5"), ("get", "fast-7", "--json"), ("get", "nope"),
                                  ("recall", "--prompt", "alpha shared words", "--workspace", "ws-0")])
def test_the_fast_path_agrees_with_the_in_process_answer(daemon: DaemonProcess, args: tuple[str, ...]) -> None:
    env = {"URCHIN_HOME": str(daemon.home)}
    _same(run_urchin(*args, env=env), run_urchin(*args, env={**env, "URCHIN_NO_DAEMON": "1"}))


def test_the_cases_exercise_results(daemon: DaemonProcess) -> None:
    """The parity above means something: cited results, a recall block, a whole event."""
    env = {"URCHIN_HOME": str(daemon.home)}
    assert "[1] urchin://events/" in run_urchin("context", "alpha shared words", env=env).stdout
    assert "Urchin" in run_urchin("recall", "--workspace", "ws-1", env=env).stdout
    assert '"id": "fast-5"' in run_urchin("get", "fast-5", env=env).stdout


def test_version_prints_clicks_line_without_click() -> None:
    proc = run_urchin_cmd([sys.executable, "-X", "importtime", "-m", "urchin", "--version"], {})
    assert (proc.returncode, proc.stdout) == (0, run_full_cli("--version", env={}).stdout.replace("python -m urchin",
                                                                                                    "urchin"))
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not {"click", "urchin.cli", "urchin.facade"} & imported
