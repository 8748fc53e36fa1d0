"""Every test gets its own URCHIN_HOME, and helpers to run the real `urchin` command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_fixture import started_by_tests
from tests.embedder_fixture import embedder_url, start_shared, stop_shared  # noqa: F401  (a real embedding server)
from tests.pg_fixture import cluster_names, memory_folder, remove_clusters, remove_template
from urchin.config import Settings
from urchin.facade import Memory

REPO = Path(__file__).resolve().parent.parent
_CLEAN_ENV = ("URCHIN_EVENT_JOURNAL_PATH", "URCHIN_EMBEDDER_URL", "URCHIN_EMBEDDER_MODEL", "URCHIN_EMBEDDER_API",
              "URCHIN_DATABASE_URL", "URCHIN_INTAKE_TOKEN", "URCHIN_DURABILITY", "URCHIN_ACCOUNT_ID",
              "URCHIN_DEVICE_ID", "URCHIN_PORT", "URCHIN_HOST", "URCHIN_CLAUDE_DIR", "URCHIN_COPILOT_DIR",
              "URCHIN_GEMINI_DIR", "URCHIN_CODEX_DIR", "URCHIN_SHELL_HISTORY", "URCHIN_GIT_ROOTS", "CLAUDE_CONFIG_DIR",
              "COPILOT_HOME", "CODEX_HOME", "XDG_DATA_HOME", "URCHIN_NO_DAEMON", "NOTIFY_SOCKET")


def pytest_configure(config: pytest.Config) -> None:
    # The tests' folders (tmp_path: homes, journals, workspaces) in memory where there is room: the same
    # files and calls, without the disk's fsync waits (~4 ms each here) and ext4's inode searches. Set in
    # the controller before its basetemp is made; the workers get theirs under it. pytest keeps its last
    # three runs there as it does in /tmp.
    if config.option.basetemp is None and not os.environ.get("PYTEST_DEBUG_TEMPROOT") and memory_folder():
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(memory_folder())
    if os.environ.get("URCHIN_TEST_CPU"):   # per-module CPU table (tests/cpu_meter.py)
        from tests.cpu_meter import CpuMeter

        config.pluginmanager.register(CpuMeter(), "urchin-cpu-meter")
    if "not slow" not in (config.option.markexpr or ""):   # `make test-fast` runs nothing that embeds
        start_shared(config)   # under xdist: one test embedder for all workers


def _fs_type(path: Path) -> str:
    """The type of the file system holding `path` (/proc/self/mounts' longest mount point above it)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        point = fields[1].replace("\\040", " ")
        if len(point) > len(best) and (str(path) + "/").startswith(point.rstrip("/") + "/"):
            best, kind = point, fields[2]
    return kind


@pytest.fixture
def disk_path() -> Iterator[Path]:
    """A new folder on a disk's file system, for tests of the page cache: tmp_path may be in memory
    (tmpfs, above), where a file's pages are the file and never leave the page cache."""
    folder = Path(tempfile.mkdtemp(prefix="urchin-disk-")).resolve()
    try:
        if _fs_type(folder) in ("tmpfs", "ramfs", ""):
            pytest.skip(f"{folder} is not on a disk's file system")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# Tests that start real servers or processes are `slow` without saying so: `make test-fast` leaves them
# out (the inner loop: in-process tests only); `make test` runs everything.
_SERVER_FIXTURES = frozenset({"pg_server", "pg_url", "pg_settings", "own_pg", "team_server", "team_db",
                              "embedder_url", "page", "browser"})
_PROCESS_HELPERS = ("DaemonProcess", "run_urchin", "stdio_session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if _SERVER_FIXTURES & set(getattr(item, "fixturenames", ())) or \
                any(hasattr(module, name) for name in _PROCESS_HELPERS):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadscope`: the modules longest first (tests/schedule.py)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.schedule import LongestFirst

    return LongestFirst(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_shared(config)


@pytest.fixture(autouse=True)
def urchin_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "urchin-home"
    monkeypatch.setenv("URCHIN_HOME", str(home))
    # Collectors and install-hooks default to folders under the user's home: never the real one.
    monkeypatch.setenv("URCHIN_USER_HOME", str(tmp_path / "user-home"))
    for name in _CLEAN_ENV:
        monkeypatch.delenv(name, raising=False)
    clusters = cluster_names()
    yield home
    # A failed test must not leave its daemons running (for an hour), nor the PostgreSQL data of its
    # homes (as root ~40 MB each under /var/lib/urchin/pg, outside the basetemps pytest removes).
    while started_by_tests:
        started_by_tests.pop().stop()
    remove_clusters(tmp_path, clusters)


@pytest.fixture(autouse=True, scope="session")
def _session_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end: the PostgreSQL data of the module fixtures' homes (under this worker's basetemp),
    and the worker's initdb template (tests/pg_fixture.py `initdb_done`)."""
    yield
    remove_clusters(tmp_path_factory.getbasetemp())
    remove_template()


@pytest.fixture
def settings(urchin_home: Path) -> Settings:
    return Settings.resolve(urchin_home)


@pytest.fixture
def memory(settings: Settings) -> Memory:
    return Memory(settings)


def run_urchin(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a new process (`python -m urchin`), as a user would."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "urchin", *args], input=input, env=full_env,
                          capture_output=True, text=isinstance(input, str) or input is None, timeout=timeout)


def create_token(home: Path, *args: str) -> str:
    """`urchin token create ARGS` on `home`: the new token."""
    made = run_urchin("token", "create", *args, env={"URCHIN_HOME": str(home)})
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()

from tests.pg_fixture import (  # noqa: E402,F401  (index tests; the team tests' TCP server)
    own_pg,
    pg_server,
    pg_server_url,
    pg_settings,
    pg_url,
    team_db,
    team_server,
)
