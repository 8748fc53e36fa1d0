"""The daemon's embedded PostgreSQL: it never outlives its daemon or a killed CLI (a killed daemon's
server is adopted by the next one), its feed runs at the lowest priority, and a removed home's data is
swept without holding a start. (Split from test_daemon_lifecycle.py, so the two run on both workers.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.daemon_fixture import REPO, DaemonProcess
from tests.pg_fixture import initdb_done


def _pg_folder(home: Path) -> Path:
    return (home / "pg").resolve()   # as root a symlink into /var/lib/urchin/pg


def _postmaster(home: Path) -> int | None:
    """The pid postmaster.pid names once the server is ready, else None."""
    try:
        lines = (_pg_folder(home) / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    return int(lines[0]) if len(lines) >= 8 and lines[7].strip() == "ready" else None


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting for init to reap it has exited too)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def _exits(pid: int, seconds: float = 10.0) -> bool:
    """`pid` is gone, or goes within `seconds` (a stopped server removes its pid file just before it exits)."""
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _indexing_daemon(home: Path) -> tuple[DaemonProcess, int]:
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    daemon = DaemonProcess(initdb_done(home), "--with-index").start(90)
    deadline = time.monotonic() + 90
    while (pid := _postmaster(home)) is None:
        assert time.monotonic() < deadline, daemon.log()
        time.sleep(0.1)
    # the daemon registers as the server's user just after it is ready (polled: a fixed 1 s was a
    # second of every start, and may be short on a loaded machine)
    assert daemon.proc is not None
    deadline = time.monotonic() + 5
    while f"[{daemon.proc.pid}," not in _holders(home).replace(" ", "") and time.monotonic() < deadline:
        time.sleep(0.05)
    return daemon, pid


def _feed_a_little(daemon: DaemonProcess) -> None:
    """Keep the feeder busy, so the stop races a feed as it does in real use."""
    with daemon.client() as client:
        events = [{"content": f"postgres lifecycle {i}"} for i in range(200)]
        assert client.post("/ingest/batch", json={"events": events}).status_code == 200


def _index_follower(home: Path, first_start: bool = False) -> subprocess.Popen[bytes]:
    """`urchin index --follow` in-process (no daemon): a CLI holding the embedded server (`first_start`:
    on a home without its data yet, so its start runs initdb, as a new user's first does)."""
    if not first_start:
        initdb_done(home)
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), "URCHIN_NO_DAEMON": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "index", "--follow"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while _postmaster(home) is None:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stopping_the_daemon_stops_its_postgres_every_time(tmp_path: Path, sig: int) -> None:
    """Even after a holder died without a word: a SIGKILLed `urchin index --follow` left the server
    running and its pid in the holders' list; every later daemon's stop must stop the server."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    home = tmp_path / "home"
    home.mkdir()
    killed = _index_follower(home, first_start=True)
    killed.kill()
    killed.wait()
    for _ in range(2):      # the first daemon after the dead holder, and the one after it
        daemon, pid = _indexing_daemon(home)
        try:
            _feed_a_little(daemon)
            daemon.signal(sig)
            assert daemon.wait(40) == 0, daemon.log()
        finally:
            daemon.stop()
        assert _gone(pid), f"postgres {pid} outlived its daemon: {daemon.log()}"
        assert not (_pg_folder(home) / "postmaster.pid").exists()


def test_a_live_cli_keeps_the_server_until_it_exits(tmp_path: Path) -> None:
    """Never stop a server in use: a CLI feeding the index outlasts the daemon, then its exit stops it."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    home = tmp_path / "home"
    home.mkdir()
    daemon, pid = _indexing_daemon(home)
    follower = _index_follower(home)
    holders = _pg_folder(home).with_name(_pg_folder(home).name + ".holders")
    deadline = time.monotonic() + 60
    while str(follower.pid) not in (holders.read_text() if holders.exists() else ""):
        assert time.monotonic() < deadline and follower.poll() is None
        time.sleep(0.1)
    try:
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(40) == 0
        assert _postmaster(home) == pid and not _gone(pid)
        follower.send_signal(signal.SIGINT)
        follower.wait(40)
        assert _gone(pid)
    finally:
        daemon.stop()
        if follower.poll() is None:
            follower.kill()


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _policy(pid: int) -> int:
    """The scheduling class (field 41 of /proc/PID/stat): 0 normal, 5 SCHED_IDLE."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[38])


def _server_processes(postmaster: int) -> list[int]:
    """The processes the postmaster forked (one backend per connection, and its own helpers)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_the_feed_runs_at_the_lowest_priority_and_goes_on_after_its_server_stops(tmp_path: Path) -> None:
    """Background work never slows a query: the feed and its server processes run at nice 19 (the
    child in the SCHED_IDLE class), the daemon's query threads and the postmaster at 0 (issue 16).
    The child may not start the server (the server would inherit its priority): when it stops, the
    daemon starts it again, at nice 0, and the feed resumes."""
    home = tmp_path / "home"
    daemon, postmaster = _indexing_daemon(home)
    try:
        child = daemon.index_process()
        assert _nice(child) == 19 and _policy(child) == os.SCHED_IDLE
        # its own process group (a terminal's Ctrl-C is the daemon's), the daemon's session (its autogroup)
        assert daemon.proc is not None and os.getpgid(child) == child != os.getpgid(daemon.proc.pid)
        assert os.getsid(child) == os.getsid(daemon.proc.pid)
        assert b"-P" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")   # never the cwd's modules
        assert _nice(daemon.proc.pid) == 0 and _policy(daemon.proc.pid) == 0
        _feed_a_little(daemon)
        deadline = time.monotonic() + 30     # the feed's connection: a backend reniced with it
        while 19 not in [_nice(pid) for pid in _server_processes(postmaster) if not _gone(pid)]:
            assert time.monotonic() < deadline, daemon.log()
            time.sleep(0.2)
        with daemon.client() as client:      # a query's backend is not lowered
            assert client.post("/context", json={"query": "postgres lifecycle"}).status_code == 200
        niceness = {_nice(pid) for pid in _server_processes(postmaster) if not _gone(pid)}
        assert niceness >= {0, 19}
        for pid in _server_processes(postmaster):   # a backend is its own session: its autogroup is lowered too
            group = Path(f"/proc/{pid}/autogroup")
            if not _gone(pid) and _nice(pid) == 19 and group.exists():
                assert group.read_text().split()[-1] == "19"
        assert _nice(postmaster) == 0 and _policy(postmaster) == 0
        assert {_policy(pid) for pid in _server_processes(postmaster) if not _gone(pid)} == {0}
        os.kill(postmaster, signal.SIGQUIT)          # the postmaster's "immediate shutdown": a crash
        deadline = time.monotonic() + 30
        while (again := _postmaster(home)) in (None, postmaster):
            assert time.monotonic() < deadline, daemon.log()
            time.sleep(0.2)
        assert _nice(again) == 0 and _policy(again) == 0
        with daemon.client() as client:
            written = client.post("/ingest", json={"id": "after-crash", "content": "fed after the crash"})
            assert written.status_code == 200
        import psycopg

        from urchin.hybrid.embedded import EmbeddedPostgres

        url = EmbeddedPostgres(home / "pg", stop_at_exit=False, start=False).url()
        deadline = time.monotonic() + 40      # fed by the index process, not by a query's catch-up
        while True:
            with psycopg.connect(url) as conn:
                if conn.execute("SELECT 1 FROM urchin_chunks WHERE chunk_id = 'after-crash'").fetchone():
                    break
            assert time.monotonic() < deadline, daemon.log()
            time.sleep(0.5)
    finally:
        daemon.stop()


def test_a_killed_daemons_index_process_stops_and_its_server_with_it(tmp_path: Path) -> None:
    """SIGKILL leaves no feed running alone: the index process sees its daemon gone and stops,
    releasing the embedded server, which then stops (nobody else holds it)."""
    home = tmp_path / "home"
    killed, postmaster = _indexing_daemon(home)
    child = killed.index_process()
    _feed_a_little(killed)
    killed.signal(signal.SIGKILL)
    killed.wait()
    deadline = time.monotonic() + 30
    while not (_gone(child) and _gone(postmaster)):
        assert time.monotonic() < deadline, f"index process {child} or postgres {postmaster} outlived a killed daemon"
        time.sleep(0.2)
    nxt, _ = _indexing_daemon(home)    # and the next daemon starts one again
    try:
        with nxt.client() as client:
            assert client.post("/context", json={"query": "postgres lifecycle"}).status_code == 200
    finally:
        nxt.stop()


def _holding_cli(home: Path, *args: str) -> subprocess.Popen[bytes]:
    """`urchin ARGS` in-process (no daemon), once it holds the embedded server (listed as a holder)."""
    initdb_done(home)
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), "URCHIN_NO_DAEMON": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "urchin", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while _postmaster(home) is None or str(proc.pid) not in _holders(home):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"urchin {args} never held the server")
        time.sleep(0.05)
    return proc


def _holders(home: Path) -> str:
    """The holders' list beside the data (as root the data's place is known once the server started)."""
    try:
        return _pg_folder(home).with_name(_pg_folder(home).name + ".holders").read_text()
    except OSError:
        return ""


@pytest.mark.parametrize("args", [("index", "--follow"), ("index", "--rebuild")], ids=["follow", "rebuild"])
def test_a_killed_cli_leaves_no_postgres_running(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A CLI SIGKILLed while it holds the embedded server runs no clean-up of its own: the server stops
    within seconds anyway (its watchdog), not at the next command, minutes later (issue 34 I)."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    from urchin.config import Settings
    from urchin.facade import Memory

    home = tmp_path / "home"
    home.mkdir()
    if "--rebuild" in args:     # seconds of feeding: the kill lands mid-rebuild
        Memory(Settings.resolve(home)).import_lines(
            orjson.dumps({"id": f"ev-{i:06d}", "content": f"rebuild me {i} " + "word " * 40}) for i in range(30_000))
    proc = _holding_cli(home, *args)
    postmaster = _postmaster(home)
    try:
        assert postmaster is not None and proc.poll() is None, "the command ended before the kill: feed it more"
        proc.kill()
        proc.wait()
        assert _exits(postmaster, 8.0), f"postgres {postmaster} outlived the killed `urchin {' '.join(args)}`"
        assert not (_pg_folder(home) / "postmaster.pid").exists()
    finally:
        proc.kill()
        if postmaster is not None and not _gone(postmaster):
            os.kill(postmaster, signal.SIGINT)    # do not leak it past the test


def test_a_watchdog_never_stops_a_server_another_process_uses(tmp_path: Path) -> None:
    """Two CLIs hold the server; the one SIGKILLed leaves it running for the other, whose exit stops it."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    home = tmp_path / "home"
    home.mkdir()
    killed = _holding_cli(home, "index", "--follow")
    postmaster = _postmaster(home)
    survivor = _holding_cli(home, "index", "--follow")
    try:
        killed.kill()
        killed.wait()
        deadline = time.monotonic() + 3.0      # the watchdog's poll, its release, a stop would be done by then
        while str(killed.pid) in _holders(home):
            assert time.monotonic() < deadline, "the dead holder was never dropped"
            time.sleep(0.05)
        time.sleep(0.5)
        assert postmaster is not None and _postmaster(home) == postmaster and not _gone(postmaster)
        survivor.send_signal(signal.SIGINT)
        survivor.wait(40)
        assert _exits(postmaster, 8.0)
    finally:
        for proc in (killed, survivor):
            proc.kill()
        if postmaster is not None and not _gone(postmaster):
            os.kill(postmaster, signal.SIGINT)


def test_a_killed_daemon_and_its_index_process_leave_no_postgres_running(tmp_path: Path) -> None:
    """Both holders killed at once (their watchdogs live on): the server stops by itself."""
    killed, postmaster = _indexing_daemon(tmp_path / "home")
    try:
        killed.kill_all(watchdogs=False)
        assert _exits(postmaster, 8.0), f"postgres {postmaster} outlived its killed daemon: {killed.log()}"
    finally:
        if not _gone(postmaster):
            os.kill(postmaster, signal.SIGTERM)


def test_a_killed_daemons_postgres_is_adopted_and_stopped_by_the_next(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for _ in range(2):     # twice: the second round follows a daemon that adopted and stopped
        killed, orphan = _indexing_daemon(home)
        killed.kill_all()      # the daemon and its index process at once: nobody releases the server
        time.sleep(0.5)
        assert not _gone(orphan)   # the server a SIGKILL leaves behind
        nxt, pid = _indexing_daemon(home)
        try:
            assert pid == orphan, "the next daemon must adopt the running server, not start a second one"
            _feed_a_little(nxt)
            nxt.signal(signal.SIGTERM)
            assert nxt.wait(40) == 0, nxt.log()
        finally:
            nxt.stop()
        assert _gone(orphan), f"the adopted postgres {orphan} outlived the daemon that adopted it: {nxt.log()}"


def test_a_daemon_without_the_index_stops_the_orphan_it_finds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    killed, orphan = _indexing_daemon(home)
    killed.kill_all()
    assert not _gone(orphan)
    plain = DaemonProcess(home).start(60)     # --no-index
    try:
        assert _exits(orphan), plain.log()
    finally:
        plain.stop()
        if not _gone(orphan):
            os.kill(orphan, signal.SIGTERM)    # the starting code leaves it: do not leak it past the test


@pytest.mark.skipif(os.geteuid() != 0, reason="only as root does the data live outside the home")
def test_the_next_start_removes_the_postgres_of_a_removed_home(tmp_path: Path) -> None:
    """A home removed after its daemon was SIGKILLed leaves a running server and its data under
    /var/lib/urchin/pg: any daemon's next start stops that server and removes the folder."""
    gone = tmp_path / "gone"
    killed, orphan = _indexing_daemon(gone)
    folder = _pg_folder(gone)
    killed.kill_all()
    assert not _gone(orphan)
    shutil.rmtree(gone)
    fresh = DaemonProcess(tmp_path / "fresh").start(60)
    try:
        # the data folders are machine-wide: a daemon of a test running beside this one sweeps the same
        # orphans at its start and may remove this one first, so "gone" is what is asserted; the sweep
        # runs beside the start (the daemon serves meanwhile), so it is waited for
        deadline = time.monotonic() + 30
        while folder.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _exits(orphan) and not folder.exists(), fresh.log()
    finally:
        fresh.stop()
        if not _gone(orphan):
            os.kill(orphan, signal.SIGINT)


@pytest.mark.skipif(os.geteuid() != 0, reason="only as root does the data live outside the home")
def test_a_start_never_waits_on_another_homes_postgres_data(tmp_path: Path) -> None:
    """Sweeping the data of removed homes is housekeeping beside the start: an orphan whose lock
    another process holds (starting, stopping or removing it, which can take STOP_WAIT_S) is skipped,
    and the daemon is serving meanwhile. Before, every start swept first and waited on each lock."""
    from urchin.hybrid import pgdata

    pgdata.ROOT_DATA.mkdir(parents=True, exist_ok=True)
    folder = pgdata.ROOT_DATA / f"test-busy-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir(mode=0o700)
    pgdata.write_small(pgdata.owner_record(folder), orjson.dumps({"link": str(tmp_path / "gone" / "pg")}))
    assert pgdata.is_orphan(folder)
    try:
        with pgdata.folder_lock(folder):      # another process is busy with it, for longer than a start
            started = time.monotonic()
            daemon = DaemonProcess(tmp_path / "home").start(20)
            try:
                assert time.monotonic() - started < 20
                assert daemon.client().get("/health").status_code == 200
                time.sleep(0.5)
                assert folder.is_dir(), "a locked folder is someone's work in progress: skipped, not removed"
            finally:
                daemon.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        pgdata.owner_record(folder).unlink(missing_ok=True)
        folder.with_name(f".{folder.name}.lock").unlink(missing_ok=True)


@pytest.mark.parametrize("left", [b"", b"[12"], ids=["empty", "cut"])
def test_a_handle_list_left_cut_by_a_killed_holder_does_not_stop_the_next_start(tmp_path: Path, left: bytes) -> None:
    """The wheel rewrites `<pgdata>/.handle_pids.json` in place (truncate, then write): a holder killed
    in between (a SIGKILLed `urchin index --follow`, as above) leaves it empty or cut, and the next
    daemon's start failed parsing it, its server left running. Urchin keeps its own holders, so an
    unreadable list is replaced by an empty one before the wheel reads it."""
    home = tmp_path / "home"
    home.mkdir()
    follower = _index_follower(home)
    follower.kill()
    follower.wait()
    (_pg_folder(home) / ".handle_pids.json").write_bytes(left)
    daemon, pid = _indexing_daemon(home)
    try:
        _feed_a_little(daemon)
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(40) == 0, daemon.log()
    finally:
        daemon.stop()
    assert _exits(pid, 20), f"postgres {pid} outlived its daemon: {daemon.log()}"
    assert "JSONDecodeError" not in daemon.log()
