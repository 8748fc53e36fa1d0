"""The daemon's life: one per home, systemd notify, clean SIGTERM, no lost acknowledged write on
SIGKILL, views that follow writes made by other processes (its embedded PostgreSQL's life:
test_daemon_postgres_lifecycle.py)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import orjson

from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess


def _writers(daemon: DaemonProcess, n: int, stop: threading.Event, acked: list[str],
             errors: list[str]) -> list[threading.Thread]:
    """`n` threads POSTing single events as fast as the daemon acknowledges them."""
    lock = threading.Lock()

    def write(worker: int) -> None:
        with daemon.client(timeout=10) as client:
            i = 0
            while not stop.is_set():
                event_id = f"w{worker}-{i}"
                i += 1
                try:
                    response = client.post("/ingest", json={"id": event_id, "content": f"load {event_id}"})
                except httpx.HTTPError:
                    return  # the daemon is gone: this write was never acknowledged
                if response.status_code == 200:
                    with lock:
                        acked.append(event_id)
                elif response.status_code != 503:
                    errors.append(f"{response.status_code} {response.text}")

    threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(n)]
    for thread in threads:
        thread.start()
    return threads


def _journal_ids(path: Path) -> list[str]:
    return [orjson.loads(line)["id"] for line in path.read_bytes().splitlines() if line.strip()]


def test_sigkill_under_eight_writers_loses_no_acknowledged_event(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home).start()
    stop = threading.Event()
    acked: list[str] = []
    errors: list[str] = []
    threads = _writers(daemon, 8, stop, acked, errors)
    deadline = time.monotonic() + 20
    while len(acked) < 400 and time.monotonic() < deadline:
        time.sleep(0.02)
    daemon.signal(signal.SIGKILL)
    daemon.wait()
    stop.set()
    for thread in threads:
        thread.join(15)
    assert len(acked) >= 400 and not errors
    assert (home / "daemon.json").exists()  # stale: nobody removed it

    restarted = DaemonProcess(home).start()  # a stale daemon.json does not stop a restart
    try:
        ids = _journal_ids(restarted.journal)
        counts: dict[str, int] = {}
        for event_id in ids:
            counts[event_id] = counts.get(event_id, 0) + 1
        assert [i for i in acked if counts.get(i) != 1] == []  # every acknowledged event, exactly once
        assert max(counts.values()) == 1
        with restarted.client() as client:
            for event_id in acked[-20:]:
                assert client.get(f"/events/{event_id}").status_code == 200
    finally:
        restarted.stop()


def test_sigterm_drains_writers_and_exits_zero_quickly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home).start()
    idle = daemon.client()
    assert idle.get("/recent").status_code == 200  # an idle keep-alive connection must not hold shutdown
    stop = threading.Event()
    acked: list[str] = []
    errors: list[str] = []
    threads = _writers(daemon, 4, stop, acked, errors)
    while len(acked) < 50:
        time.sleep(0.01)
    started = time.monotonic()
    daemon.signal(signal.SIGTERM)
    code = daemon.wait(10)
    elapsed = time.monotonic() - started
    stop.set()
    for thread in threads:
        thread.join(10)
    idle.close()
    assert code == 0, daemon.log()
    assert elapsed < 5
    assert not (home / "daemon.json").exists()
    assert "Traceback" not in daemon.log()
    ids = _journal_ids(daemon.journal)
    assert set(acked) <= set(ids) and len(ids) == len(set(ids))


def test_sigint_also_stops_cleanly(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path / "home").start()
    daemon.signal(signal.SIGINT)
    assert daemon.wait(10) == 0
    assert not (tmp_path / "home" / "daemon.json").exists()


def test_second_serve_on_the_same_home_is_refused_naming_the_pid(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home).start()
    try:
        second = run_urchin("serve", "--port", "0", env={"URCHIN_HOME": str(home)}, timeout=30)
        assert second.returncode == 1
        assert f"pid {daemon.proc.pid}" in second.stderr  # type: ignore[union-attr]
        assert daemon.info()["pid"] == daemon.proc.pid  # type: ignore[index,union-attr]  # untouched
    finally:
        daemon.stop()


def test_non_loopback_host_is_refused_at_start(tmp_path: Path) -> None:
    result = run_urchin("serve", "--host", "0.0.0.0", "--port", "0", env={"URCHIN_HOME": str(tmp_path / "h")})
    assert result.returncode == 1
    assert "host: must be a loopback address" in result.stderr
    assert not (tmp_path / "h" / "daemon.json").exists()


def test_systemd_notify_ready_then_stopping(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(30)
        daemon = DaemonProcess(tmp_path / "home", env={"NOTIFY_SOCKET": path}).start()
        ready = sock.recv(4096).decode()
        assert "READY=1" in ready.splitlines() and f"MAINPID={daemon.proc.pid}" in ready  # type: ignore[union-attr]
        assert httpx.get(daemon.url + "/health", trust_env=False, timeout=30).status_code == 200  # ready means serving
        daemon.signal(signal.SIGTERM)
        assert sock.recv(4096).decode() == "STOPPING=1"
        assert daemon.wait(10) == 0


def test_unix_socket_is_private_and_serves_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    uds = tmp_path / "run" / "urchin.sock"
    daemon = DaemonProcess(home, "--uds", str(uds)).start()
    try:
        assert daemon.url == f"unix:{uds}"
        assert uds.stat().st_mode & 0o777 == 0o600
        transport = httpx.HTTPTransport(uds=str(uds))
        with httpx.Client(transport=transport, base_url="http://localhost",
                          headers={"authorization": f"Bearer {daemon.token}"}) as client:
            assert client.get("/health").json()["status"] == "ok"
            assert client.post("/ingest", json={"content": "over a unix socket"}).status_code == 200
            assert client.get("/recent").status_code == 200
        found = run_urchin("search", "unix socket", env={"URCHIN_HOME": str(home)})
        assert found.returncode == 0 and "over a unix socket" in found.stdout
    finally:
        daemon.stop()
    assert not uds.exists()


def test_event_from_another_process_is_searchable_within_a_second(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home).start()
    try:
        with daemon.client() as client:
            events_before = client.get("/health").json()["events"]
            # URCHIN_NO_DAEMON: the CLI appends in-process, as a hook or a second machine's tool would.
            done = run_urchin("ingest", "written behind the daemon's back", "--id", "behind-1",
                              env={"URCHIN_HOME": str(home), "URCHIN_NO_DAEMON": "1"})
            assert done.returncode == 0, done.stderr
            written = time.monotonic()
            while client.get("/health").json()["events"] == events_before:  # the follower, not a query
                assert time.monotonic() - written < 1.0, "follower did not see the append within 1 s"
                time.sleep(0.01)
            hits = client.get("/search", params={"query": "behind the daemon"}).json()["events"]
            assert [e["id"] for e in hits] == ["behind-1"]
            assert time.monotonic() - written < 1.0
    finally:
        daemon.stop()


def test_token_comes_from_the_environment_when_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home, env={"URCHIN_INTAKE_TOKEN": "env-token-123"}).start()
    try:
        assert not (home / "token").exists()
        assert daemon.info()["token_path"] is None  # type: ignore[index]
        with daemon.client("env-token-123") as client:
            assert client.get("/recent").status_code == 200
        with daemon.client("other") as client:
            assert client.get("/recent").status_code == 401
    finally:
        daemon.stop()


def test_token_file_is_created_0600_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = DaemonProcess(home).start()
    first = daemon.token
    daemon.stop()
    assert (home / "token").stat().st_mode & 0o777 == 0o600 and len(first) >= 32
    again = DaemonProcess(home).start()
    try:
        assert again.token == first
    finally:
        again.stop()
    assert os.stat(home).st_mode & 0o777 == 0o700


# ---- the embedded PostgreSQL follows its daemon ------------------------------------------------


def test_health_answers_while_an_import_holds_the_journal_and_says_what_is_loading(tmp_path: Path) -> None:
    """What grows with the journal (its id index, its line count) is loaded behind the daemon's start,
    never before it serves: a daemon started while another process holds the journal's lock (an
    import) answers /health, saying it is still loading the id index, and takes its first write once
    the lock is free."""
    from urchin.journal import Journal

    home = tmp_path / "home"
    run_urchin("ingest", "before the daemon", "--id", "first", env={"URCHIN_HOME": str(home), "URCHIN_NO_DAEMON": "1"})
    journal = Journal(home / "journal" / "events.jsonl")
    held = journal.locked()
    held.__enter__()
    daemon = DaemonProcess(home, "--no-collect")
    try:
        daemon.start(timeout=30)
        with daemon.client() as client:
            health = client.get("/health").json()
            assert health["status"] == "ok" and "ids" in health["loading"], health
            found = client.get("/search", params={"query": "before the daemon"}).json()["events"]
            assert [e["id"] for e in found] == ["first"]      # reads do not wait for the lock
            held.__exit__(None, None, None)
            held = None
            deadline = time.monotonic() + 10
            while "loading" in (health := client.get("/health").json()):
                assert time.monotonic() < deadline, health
                time.sleep(0.02)
            assert health["events"] == 1
            again = client.post("/ingest", json={"id": "first", "content": "before the daemon"}).json()
            assert again["status"] == "duplicate", again
    finally:
        if held is not None:
            held.__exit__(None, None, None)
        daemon.stop()
