"""What a user installs: the sdist and wheel `scripts/dist.sh` builds (as `make install` does), installed
into a fresh venv and run from a folder outside the checkout; and the Makefile's own installs.

The fresh venv gets the wheel alone (`--no-deps`); its runtime dependencies are this interpreter's
site-packages, reached through a .pth line (offline; a folder named on a .pth line is not scanned for
.pth files, so an editable `urchin` installed there stays out of reach: the test checks which
`urchin` runs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import urchin

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "urchin"


def _package_files() -> set[str]:
    """Every file of the package in the source tree, as the wheel names it (no bytecode)."""
    return {p.relative_to(REPO).as_posix() for p in PACKAGE.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")}


def _tree(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, set[str], set[str]]]:
    """The built distributions' folder, and the checkout's top level before and after the build."""
    out = tmp_path_factory.mktemp("dist")
    before = _tree(REPO)
    built = subprocess.run(["sh", str(REPO / "scripts" / "dist.sh"), str(out), sys.executable],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    yield out, before, _tree(REPO)


def _wheel(out: Path) -> Path:
    (wheel,) = out.glob("*.whl")
    return wheel


def test_the_checkout_has_the_license_pyproject_declares() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License") and "the Urchin authors" in text
    assert re.search(r'^license = "MIT"$', (REPO / "pyproject.toml").read_text(), re.M)


def test_building_leaves_no_build_folder_or_egg_info_in_the_checkout(dist: tuple[Path, set[str], set[str]]) -> None:
    _, before, after = dist
    assert after - before == set()
    assert not {"build", "dist"} & after and not any(name.endswith(".egg-info") for name in after - before)


def test_the_wheel_carries_every_file_of_the_package_and_the_license(
        dist: tuple[Path, set[str], set[str]]) -> None:
    names = set(zipfile.ZipFile(_wheel(dist[0])).namelist())
    assert {n for n in names if n.startswith("urchin/")} == _package_files()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    for sdist in dist[0].glob("*.tar.gz"):        # built when the `build` frontend is installed (make test)
        with tarfile.open(sdist) as archive:
            top, members = sdist.name.removesuffix(".tar.gz"), set(archive.getnames())
        assert {f"{top}/{name}" for name in _package_files() | {"LICENSE", "README.md", "pyproject.toml"}} <= members


@pytest.fixture(scope="module")
def installed(dist: tuple[Path, set[str], set[str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel alone; its dependencies come from this interpreter's site-packages."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True, timeout=60)
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                           "--quiet", "--no-deps", "--no-index", str(_wheel(dist[0]))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    _lend_dependencies(venv)      # after the install: pip must not see this interpreter's urchin-memory
    return venv


def _lend_dependencies(venv: Path) -> None:
    """This interpreter's site-packages, after the venv's own, for the venv's interpreter."""
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    ours = dict.fromkeys(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages"))
    (site / "zz-urchin-test-dependencies.pth").write_text("".join(f"{p}\n" for p in ours))


def _user_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {**env, "URCHIN_HOME": str(home)}


def test_the_installed_wheel_runs_from_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    where, home = tmp_path / "elsewhere", tmp_path / "home"
    where.mkdir()
    env, urchin_bin = _user_env(home), str(installed / "bin" / "urchin")

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run([urchin_bin, *args], cwd=where, env=env, input=stdin, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    imported = subprocess.run([str(installed / "bin" / "python"), "-c", "import urchin; print(urchin.__file__)"],
                              cwd=where, env=env, capture_output=True, text=True, timeout=60).stdout.strip()
    assert Path(imported).is_relative_to(installed), imported          # the wheel's copy, not the checkout
    assert run("--version").strip() == f"urchin, version {urchin.__version__}"
    run("ingest", "--source", "manual", "the wheel install keeps its thesaurus and viewer")
    assert "thesaurus" in run("search", "wheel install")
    _serve_answers_health(urchin_bin, where, env, home)
    tools = _mcp_tools(urchin_bin, where, env)
    assert {"urchin_search", "urchin_ingest"} <= tools


def _serve_answers_health(urchin_bin: str, where: Path, env: dict[str, str], home: Path) -> None:
    daemon = subprocess.Popen([urchin_bin, "serve", "--port", "0", "--no-index"], cwd=where, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
            assert time.monotonic() < deadline, "daemon not ready in 30 s"
            try:
                info = json.loads((home / "daemon.json").read_text())
            except (OSError, ValueError):
                info = {}
            if info.get("pid") == daemon.pid:
                break
            time.sleep(0.05)
        health = httpx.get(info["address"] + "/health", timeout=10, trust_env=False)
        assert health.status_code == 200, health.text
        page = httpx.get(info["address"] + "/", timeout=10, trust_env=False, follow_redirects=True)
        assert page.status_code in (200, 401), page.text            # the viewer's static files are there
    finally:
        daemon.terminate()
        daemon.wait(15)


def _mcp_tools(urchin_bin: str, where: Path, env: dict[str, str]) -> set[str]:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    done = subprocess.run([urchin_bin, "mcp"], cwd=where, env=env, capture_output=True, text=True, timeout=60,
                          input="".join(json.dumps(m) + "\n" for m in messages))
    answers = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines())}
    assert 2 in answers, (done.stdout, done.stderr)
    return {tool["name"] for tool in answers[2]["result"]["tools"]}


def _make_dry_run(target: str, tmp_path: Path) -> str:
    """`make -n TARGET` in a copy of the Makefile: the commands it would run, without running them."""
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").touch()
    done = subprocess.run(["make", "-n", target, "BIN_DIR=/nowhere/bin", "INSTALL_VENV=/nowhere/venv"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_run_installs_the_runtime_extras_only(tmp_path: Path) -> None:
    installs = [line for line in _make_dry_run("run", tmp_path).splitlines() if re.search(r" install .*\s-e\s", line)]
    assert installs and all("postgres" in line and "dev" not in line for line in installs), installs


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_install_builds_outside_the_checkout(tmp_path: Path) -> None:
    commands = _make_dry_run("install", tmp_path)
    assert "scripts/dist.sh" in commands
    assert not re.search(r"pip install [^\n]*'\.(\[|')", commands), commands   # never `pip install .`


def test_an_editable_install_prints_no_packaging_warning(tmp_path: Path) -> None:
    """`make run` and `make test` install the checkout editable: pip must print nothing (pip shows a build
    backend's warnings, boxed, even with --quiet). Done on a copy, into a throwaway venv."""
    source, venv = tmp_path / "src", tmp_path / "venv"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "tests", "bench",
                                                                "docs", "*.egg-info", "build"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    isolation = _isolation()
    if isolation:
        _lend_dependencies(venv)   # the build backend is this interpreter's setuptools
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                           "--quiet", "--no-deps", *isolation, "-e", str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "!!" not in done.stderr, done.stderr


def _isolation() -> list[str]:
    """Build with this interpreter's setuptools when it is recent enough (offline: `make test`'s venv)."""
    try:
        import setuptools
    except ImportError:
        return []
    return ["--no-build-isolation"] if int(setuptools.__version__.split(".")[0]) >= 77 else []


# ---- the README, walked with the installed wheel -------------------------------------------------
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
_ACTOR = re.compile(r'"actor":\{[^{}]*\}')


def _readme_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def _console_steps(block: str) -> list[tuple[str, list[str]]]:
    """`$ command` lines (a trailing backslash continues one) with the lines printed after each."""
    steps: list[tuple[str, list[str]]] = []
    lines = block.splitlines()
    while lines:
        line = lines.pop(0)
        if not line.startswith("$ "):
            steps[-1][1].append(line)
            continue
        command = line[2:]
        while command.endswith("\\") and lines:
            command = command[:-1] + " " + lines.pop(0).strip()
        steps.append((command, []))
    return steps


def _same_shape(text: str) -> str:
    """What may differ between the README's run and this one: ids, times, who and where."""
    return _ACTOR.sub('"actor":{}', _TIME.sub("<time>", _ID.sub("<id>", text)))


def test_the_readme_walks_on_one_machine_with_the_installed_wheel(dist: tuple[Path, set[str], set[str]],
                                                                  installed: Path, tmp_path: Path) -> None:
    """The install block as far as it runs offline (this module built the wheel with the same
    `scripts/dist.sh`; pipx would fetch the dependencies), then every console block in order, in a
    fresh home, with the installed `urchin`: each command succeeds (or fails as shown) and prints what
    the README shows, ids and times aside. The HTTP block runs against a daemon on a free port."""
    import shlex

    [install] = [b for b in _readme_blocks("sh") if "scripts/dist.sh" in b]
    wheel = re.search(r"dist/(urchin_memory-)<version>(-py3-none-any\.whl)", install)
    assert wheel and _wheel(dist[0]).name == f"{wheel[1]}{urchin.__version__}{wheel[2]}"
    where, home = tmp_path / "elsewhere", tmp_path / "home"
    where.mkdir()
    env = {**_user_env(home), "PATH": f"{installed / 'bin'}:{os.environ['PATH']}", "URCHIN_NO_DAEMON": "1"}
    assert "urchin --version" in install

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True,
                              timeout=180)

    assert run("urchin --version").stdout.strip() == f"urchin, version {urchin.__version__}"
    walked = 0
    for block in _readme_blocks("console"):
        steps = _console_steps(block)
        if any(command.startswith("curl") for command, _ in steps):
            _walk_http(steps, run, env, home, where)
            walked += len(steps)
            continue
        for command, shown in steps:
            assert shlex.split(command, comments=True)[0] == "urchin", command
            done = run(command)
            expected_code = 1 if any(line.startswith("error: ") for line in shown) else 0
            assert done.returncode == expected_code, (command, done.stderr)
            if shown:
                got = _same_shape(done.stdout + done.stderr).splitlines()
                assert got == _same_shape("\n".join(shown)).splitlines(), command
            walked += 1
    assert walked >= 12


def _walk_http(steps: list[tuple[str, list[str]]], run: Any, env: dict[str, str], home: Path, where: Path) -> None:
    """The README's curl calls, against a daemon of this home on a free port (not 18799: tests share it)."""
    daemon = subprocess.Popen(["urchin", "serve", "--port", "0", "--no-index"], cwd=where, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        info: dict[str, Any] = {}
        while info.get("pid") != daemon.pid:
            assert daemon.poll() is None and time.monotonic() < deadline, "daemon not ready"
            try:
                info = json.loads((home / "daemon.json").read_text())
            except (OSError, ValueError):
                time.sleep(0.05)
        script = "\n".join(command.replace("http://127.0.0.1:18799", info["address"]) for command, _ in steps)
        done = run(script)
        assert done.returncode == 0, done.stderr
        decoder, text, answers = json.JSONDecoder(), done.stdout.strip(), []
        while text:
            answer, end = decoder.raw_decode(text)
            answers.append(answer)
            text = text[end:].strip()
        ingested, found = answers
        assert ingested["status"] == "appended"
        assert [e["content"] for e in found["events"]] == ["decided to use flock"]
    finally:
        daemon.terminate()
        daemon.wait(15)
