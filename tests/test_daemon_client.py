"""Clients find the daemon through daemon.json and get the same answers as in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess
from urchin.config import Settings
from urchin.daemon.client import RemoteMemory, daemon_alive, find_daemon, open_memory
from urchin.errors import NotFoundError, QueryError
from urchin.facade import Memory

QUERIES: list[tuple[str, ...]] = [
    ("search", "alpha"),
    ("search", "ALPHA", "--limit", "3"),
    ("search", "beta", "--workspace", "ws-2"),
    ("search", "shared words", "--source", "git", "--kind", "commit"),
    ("search", "nothing matches this"),
    ("search", "shared", "--hours", "0.5"),
    ("recent", "--limit", "7"),
    ("recent", "--source", "shell"),
    ("get", "parity-5"),
    ("semantic", "alpha shared words", "--limit", "5", "--hours", "1000000"),
    ("semantic", "beta", "--workspace", "ws-1"),
    ("search", ""),
    ("search", "x", "--limit", "0"),
    ("get", "missing-id"),
]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    home = tmp_path_factory.mktemp("client") / "home"
    lines = []
    for i in range(60):
        lines.append(orjson.dumps({
            "id": f"parity-{i}", "content": f"{'alpha' if i % 3 == 0 else 'beta'} shared words number {i}",
            "source": ("git", "shell", "claude")[i % 3], "kind": ("commit", "command", "conversation")[i % 3],
            "workspace": f"ws-{i % 4}", "timestamp": f"2020-01-01T00:{i:02d}:00Z" if i < 30 else None,
        }, option=orjson.OPT_APPEND_NEWLINE))
    source = home.parent / "seed.jsonl"
    home.mkdir(parents=True)
    source.write_bytes(b"".join(lines).replace(b',"timestamp":null', b""))
    assert run_urchin("import", str(source), env={"URCHIN_HOME": str(home)}).returncode == 0
    proc = DaemonProcess(home).start()
    yield proc
    proc.stop()


@pytest.mark.parametrize("args", QUERIES, ids=[" ".join(q) or "empty" for q in QUERIES])
def test_cli_gives_the_same_answer_through_the_daemon(daemon: DaemonProcess, args: tuple[str, ...]) -> None:
    env = {"URCHIN_HOME": str(daemon.home)}
    flags = ("--json",) if args[0] != "get" else ()
    remote = run_urchin(*args, *flags, env=env)       # a real process, its fast client and the daemon
    local = call_urchin(*args, *flags, env={**env, "URCHIN_NO_DAEMON": "1"})   # in-process, on its own
    assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, local.stdout, local.stderr)


def test_library_parity_and_result_objects(daemon: DaemonProcess) -> None:
    settings = Settings.resolve(daemon.home)
    remote = open_memory(settings)
    local = open_memory(settings, use_daemon=False)
    assert isinstance(remote, RemoteMemory) and isinstance(local, Memory)
    for kwargs in ({"limit": 50}, {"limit": 5, "workspace": "ws-1"}, {"hours": 1e6, "source": "git"}):
        assert remote.search("shared", **kwargs).to_dict() == local.search("shared", **kwargs).to_dict()
        assert remote.recent(**kwargs).to_dict() == local.recent(**kwargs).to_dict()
    assert remote.get("parity-7") == local.get("parity-7")
    with pytest.raises(NotFoundError):
        remote.get("missing")
    with pytest.raises(QueryError) as caught:
        remote.search("x", limit=5000)
    assert caught.value.field == "limit"
    assert remote.tail(3) == local.tail(3)  # no route: runs in-process, same answer
    remote.close()


def test_remote_ingest_returns_ingest_results(daemon: DaemonProcess) -> None:
    remote = open_memory(Settings.resolve(daemon.home))
    assert isinstance(remote, RemoteMemory)
    results = remote.ingest([{"content": "remote one", "id": "remote-1"}, {"content": ""},
                             {"content": "remote one", "id": "remote-1"}], defaults={"workspace": "remote"})
    assert [r.status for r in results] == ["appended", "rejected", "duplicate"]
    assert results[1].reason == "content: must not be blank"
    single = remote.ingest_one({"content": "remote two"})
    assert single.status == "appended" and single.id  # the client chose the id: retries stay exactly-once
    assert daemon.journal_bytes().count(single.id.encode()) == 1
    assert remote.get("remote-1").workspace == "remote"
    remote.close()


def test_cli_ingest_goes_through_the_daemon(daemon: DaemonProcess) -> None:
    with daemon.client() as client:
        before = client.get("/status").json()["daemon"]["writer"]["events"]
        result = run_urchin("ingest", "cli through the daemon", env={"URCHIN_HOME": str(daemon.home)})
        assert result.returncode == 0 and result.stdout.startswith("appended ")
        assert client.get("/status").json()["daemon"]["writer"]["events"] == before + 1


def test_stale_daemon_json_means_in_process(tmp_path: Path) -> None:
    settings = Settings.resolve(tmp_path / "home")
    settings.home.mkdir(parents=True)
    settings.daemon_file.write_text('{"pid": 999999, "address": "http://127.0.0.1:9"}')
    (settings.home / "daemon.lock").write_text("999999\n")  # nobody holds the flock
    assert not daemon_alive(settings) and find_daemon(settings) is None
    assert isinstance(open_memory(settings), Memory)
    result = run_urchin("ingest", "no daemon here", env={"URCHIN_HOME": str(settings.home)})
    assert result.returncode == 0, result.stderr


def test_vanished_daemon_falls_back_to_in_process(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home).start()
    remote = open_memory(Settings.resolve(home))
    assert isinstance(remote, RemoteMemory)
    assert remote.ingest_one({"content": "before the stop", "id": "v-1"}).status == "appended"
    daemon.stop()
    assert remote.search("before the stop").events[0].id == "v-1"
    assert remote.fell_back
    remote.close()


# What only the daemon itself uses (hot views, group commit, the write path's parts): not a client's API.
_DAEMON_ONLY = {"add_view", "warm", "refresh", "save_views", "followed", "ingest_prepared", "prepare_batch",
                "loading", "release_pages",    # the daemon's start and its follower
                "rejected", "compact", "locate", "open", "cosine_view", "embedding_view", "ingestor", "substring",
                "journal", "forget_log", "index_service", "files", "roots", "settings", "collector_changes",
                "timeline", "activity", "redaction_fingerprint",  # the viewer routes run in the daemon
                "reload_config", "config_state",  # config.toml read again by the daemon itself
                "embed_in_background",
                "open_home"}   # a home's formats, checked by the process opening it (the daemon, or in-process)


def test_remote_memory_has_every_front_end_method_explicitly() -> None:
    assert "__getattr__" not in vars(RemoteMemory)
    wanted = {name for name in dir(Memory) if not name.startswith("_")} - _DAEMON_ONLY
    assert sorted(name for name in wanted if name not in vars(RemoteMemory)) == []


def test_remote_memory_is_a_context_manager_that_closes_its_local_part(daemon: DaemonProcess) -> None:
    with open_memory(Settings.resolve(daemon.home)) as remote:
        assert isinstance(remote, RemoteMemory)
        assert remote.tail(1)                      # runs in-process: opens the local Memory
        local = remote._local
        assert local is not None
        closed: list[bool] = []
        original = local.close
        local.close = lambda: (closed.append(True), original())[1]  # type: ignore[method-assign]
    assert closed == [True] and remote._local is None


def test_semantic_through_the_daemon_says_whose_settings_answered(daemon: DaemonProcess) -> None:
    env = {"URCHIN_HOME": str(daemon.home), "URCHIN_EMBEDDER_URL": "http://127.0.0.1:9/v1",
           "URCHIN_EMBEDDER_MODEL": "m"}
    done = run_urchin("semantic", "alpha", env=env)
    assert done.returncode == 0, done.stderr
    # the one render (CLI text = MCP text): the mode, then notes, before the results
    assert f"note: answered by the daemon (pid {daemon.proc.pid}) with its own settings" in done.stdout  # type: ignore[union-attr]
    assert "URCHIN_EMBEDDER_URL in this shell is not used" in done.stdout
    assert done.stdout.startswith("mode: token-cosine")
