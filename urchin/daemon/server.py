"""Running the daemon: one lock per home, sockets, uvicorn embedded, systemd notify, clean exit.

`Daemon.run()` holds `$URCHIN_HOME/daemon.lock` (flock) for its whole life, warms the hot views,
serves until SIGTERM/SIGINT, lets in-flight requests finish, flushes the group writer (fsync) and
removes `daemon.json`. `READY=1` / `STOPPING=1` go to `$NOTIFY_SOCKET` when systemd set one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import uvicorn
from starlette.routing import BaseRoute

from urchin import daemon_http
from urchin.config import Settings
from urchin.daemon.app import VERSION, DaemonState, Lifespan, build_app
from urchin.daemon.background import CollectorLoop, EmbedderLoop, IndexLoop
from urchin.daemon.edge import Edge, EdgeLimits
from urchin.daemon.follower import Follower
from urchin.daemon.indexer import IndexProcess
from urchin.daemon.logs import LOG_FORMAT, setup_logging
from urchin.daemon.reload import reload_config
from urchin.daemon.security import ensure_token, is_loopback_host
from urchin.daemon.writer import GroupWriter
from urchin.errors import ConfigError, DaemonError
from urchin.facade import Memory
from urchin.facade.hybrid import adopt_embedded, stop_embedded
from urchin.fileio import ensure_private_dir, write_private
from urchin.timestamps import format_timestamp

__all__ = ["Daemon", "DaemonLock", "Extension", "sd_notify", "lock_path", "LOG_FORMAT"]

log = logging.getLogger("urchin.daemon")
GRACE_S = 3.0  # in-flight requests get this long; the rest of the 5 s budget is the final flush

# Adds routes or mounts to the daemon, built on its one hot `Memory` (e.g. the MCP server's
# streamable HTTP at /mcp): returns the routes and the lifespans they need (entered at start-up).
Extension = Callable[[Memory], tuple[Sequence[BaseRoute], Sequence[Lifespan]]]


def lock_path(settings: Settings) -> Path:
    return settings.home / "daemon.lock"


def sd_notify(address: str | None, message: str) -> bool:
    """Send `message` (e.g. `READY=1`) to systemd's notify socket; a no-op without one."""
    if not address:
        return False
    target = "\0" + address[1:] if address.startswith("@") else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(target)
            sock.sendall(message.encode("utf-8"))
        return True
    except OSError as exc:
        log.warning("sd_notify %s to %s failed: %s", message.split("\n")[0], address, exc)
        return False


class DaemonLock:
    """An exclusive flock on `daemon.lock`, holding our pid: one daemon per home, without races.

    A client tests liveness by trying a shared lock without blocking (see `client.find_daemon`),
    so acquiring retries briefly instead of failing on such a momentary probe.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, patience_s: float = 0.5) -> None:
        ensure_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + patience_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                    os.close(fd)
                    raise DaemonError(f"another urchin serve (pid {holder}) is already running on "
                                      f"{self.path.parent}; stop it first (kill {holder})") from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _http_protocol(edge: Edge | None = None) -> Any:
    """httptools with a response's writes joined and every phase of a request bounded by `edge` (by
    default `EdgeLimits()`; urchin/daemon/uvicorn_protocol.py). Without httptools (a dependency, but a
    platform may lack its wheel) the daemon does not run: uvicorn's h11 protocol bounds keep-alive only,
    so any local process could hold the daemon's connections and memory by being slow."""
    try:
        from urchin.daemon.uvicorn_protocol import protocol_for
    except ImportError as exc:
        raise ConfigError(f"httptools: the daemon serves HTTP with it, and it does not import here ({exc}); "
                          "install it (`pip install 'httptools>=0.6'`, a dependency of urchin): uvicorn's "
                          "h11 fallback would serve without the edge's bounds on slow clients") from None
    return protocol_for(edge or Edge(EdgeLimits()))


class _Server(uvicorn.Server):
    """uvicorn's server with start/stop hooks, and signals that end in exit code 0.

    uvicorn re-raises a caught SIGTERM after shutdown, which kills the process with -15; a daemon
    that drained and flushed cleanly should exit 0 instead (systemd reads that as a clean stop).
    """

    def __init__(self, config: uvicorn.Config, daemon: Daemon, memory: Memory) -> None:
        super().__init__(config)
        self.daemon = daemon
        self.memory = memory
        self.reload_asked = False   # set by SIGHUP: config.toml is read again on the next tick

    async def on_tick(self, counter: int) -> bool:
        """Every 0.1 s: config.toml read again when SIGHUP asked, looked at (one stat) every second."""
        if self.reload_asked or counter % 10 == 0:
            force, self.reload_asked = self.reload_asked, False
            reload_config(self.memory, force)
        return await super().on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            self.daemon._on_ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.daemon._on_stopping()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # embedded in a thread (tests, a host program): stopped by Daemon.stop()
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        original[signal.SIGHUP] = signal.signal(signal.SIGHUP, self.handle_hup)
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_hup(self, sig: int, frame: FrameType | None) -> None:
        self.reload_asked = True

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:  # a second signal: stop waiting for slow requests
            self.force_exit = True
        self.should_exit = True


class Daemon:
    """`urchin serve`. Construction does no I/O; `run()` blocks until a signal and returns 0."""

    def __init__(self, settings: Settings, *, host: str | None = None, port: int | None = None,
                 uds: str | None = None, log_level: str = "info", extensions: Sequence[Extension] = (),
                 collect: bool = True, feed_index: bool = True, limits: EdgeLimits | None = None) -> None:
        self.settings = settings
        self.host = host or settings.host
        self.port = settings.port if port is None else port
        self.uds = Path(uds).absolute() if uds else None
        self.log_level = log_level.lower()
        self.extensions = extensions
        self.collect = collect
        self.feed_index = feed_index
        self.limits = limits or EdgeLimits()    # the HTTP edge's bounds (daemon/edge.py); tests make them short
        self.edge: Edge | None = None
        self.address = ""
        self.serves_mcp = False     # said in daemon.json: `urchin mcp` relays its session only to such a daemon
        self._lock = DaemonLock(lock_path(settings))
        self._sock: socket.socket | None = None
        self._server: _Server | None = None
        self.ready = threading.Event()  # set once serving (after daemon.json is written)

    def stop(self) -> None:
        """Ask a running daemon to shut down as SIGTERM would (for a daemon run in a thread)."""
        if self._server is not None:
            self._server.should_exit = True

    def run(self) -> int:
        if self.uds is None and not is_loopback_host(self.host):
            raise ConfigError(f"host: must be a loopback address (127.0.0.1, ::1, localhost), got {self.host!r}; "
                              "the API is for this machine only")
        _http_protocol()    # refused before the home is touched when httptools is missing
        setup_logging(self.log_level)
        for unknown in self.settings.unknown_keys():     # a typo is named, never a reason not to start
            log.warning("%s: %s", self.settings.config_path, unknown)
        ensure_private_dir(self.settings.home)  # 0700, also when an earlier write made it with the umask
        # before anything in the home is touched (lock, token): an older home is upgraded and said once in
        # the log, a newer one refused untouched, a new one recorded
        Memory(self.settings).open_home()
        self._lock.acquire()
        try:
            return self._serve()
        finally:
            stop_embedded(self.settings)   # last: no job can start the embedded PostgreSQL again after this
            self._remove_daemon_file()
            if self.uds is not None:
                with contextlib.suppress(FileNotFoundError):
                    self.uds.unlink()
            self._lock.release()

    def _serve(self) -> int:
        token = ensure_token(self.settings)
        self._sock = self._bind()
        uses_index = self.feed_index and IndexLoop.available()
        adopt_embedded(self.settings, use=uses_index and not self.settings.database_url)
        memory = Memory(self.settings)
        started = time.perf_counter()
        memory.warm()
        offset, lines = memory.followed
        log.info("hot views ready: %d lines (%d bytes) in %.2fs", lines, offset, time.perf_counter() - started)
        writer = GroupWriter(memory)
        follower = Follower(memory)
        state = DaemonState(memory, writer, self.address)
        routes: list[BaseRoute] = []
        lifespans: list[Lifespan] = []
        for extend in self.extensions:
            more_routes, more_lifespans = extend(memory)
            routes.extend(more_routes)
            lifespans.extend(more_lifespans)
        self.serves_mcp = any(getattr(route, "path", None) == "/mcp" for route in routes)
        app = build_app(state, token, extra_routes=routes, lifespans=lifespans)
        # loop and http "auto": uvloop and httptools (dependencies) where they install, asyncio and h11
        # elsewhere; one event per request runs ~1.9x as fast with them (bench/RESULTS.md, issue 16)
        edge = self.edge = Edge(self.limits.for_process())
        config = uvicorn.Config(app, log_config=None, log_level=self.log_level,
                                access_log=self.log_level == "debug", lifespan="on", http=_http_protocol(edge),
                                timeout_keep_alive=math.ceil(edge.limits.idle_s),   # the edge's idle bound is first
                                ws="none",  # no route is a WebSocket: an upgrade never leaves the edge's bounds
                                timeout_graceful_shutdown=int(GRACE_S), server_header=False,
                                proxy_headers=False)   # no proxy stands in front: X-Forwarded-* is not believed
        server = self._server = _Server(config, self, memory)
        jobs: list[CollectorLoop | EmbedderLoop | IndexProcess] = []
        if self.collect:
            jobs.append(CollectorLoop(memory))
        if uses_index:     # the journal feed and the workspace files, in a process at the lowest priority
            jobs.append(IndexProcess(memory, self.log_level))
        if self.settings.embedder_url:
            jobs.append(EmbedderLoop(memory))
        writer.start()
        follower.start()
        for job in jobs:
            job.start()
        try:
            server.run(sockets=[self._sock])
        finally:
            writer.close()  # everything acknowledged is already fsync'd; this writes what is still queued
            follower.stop()
            for job in jobs:
                job.stop()
            memory.save_views()  # the ranked index, so the next start loads it instead of rebuilding
            memory.close()  # the index connection, and the embedded PostgreSQL if this process started it
            log.info("stopped: %s", orjson.dumps(writer.stats.to_dict()).decode())
        return 0

    def _bind(self) -> socket.socket:
        if self.uds is not None:
            ensure_private_dir(self.uds.parent)
            with contextlib.suppress(FileNotFoundError):
                self.uds.unlink()  # a stale socket: we hold the lock, so nobody serves on it
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old = os.umask(0o177)  # born 0600: no window where others could connect
            try:
                sock.bind(str(self.uds))
            finally:
                os.umask(old)
            os.chmod(self.uds, 0o600)
            self.address = f"unix:{self.uds}"
        else:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            # proto must say TCP: asyncio sets TCP_NODELAY on accepted sockets only then, and
            # without it Nagle holds each response body back ~40 ms behind its headers.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.bind((self.host.strip("[]"), self.port))
            except OSError as exc:
                sock.close()
                raise DaemonError(f"cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
            host, port = sock.getsockname()[:2]
            self.address = f"http://[{host}]:{port}" if family == socket.AF_INET6 else f"http://{host}:{port}"
        sock.listen(1024)
        sock.set_inheritable(False)
        return sock

    # ---- called from the server's loop --------------------------------------------------------
    def _on_ready(self) -> None:
        info: dict[str, Any] = {
            "pid": os.getpid(),
            "address": self.address,
            "started": format_timestamp(ms=False),
            "version": VERSION,
            "mcp": self.serves_mcp,
            "code": daemon_http.code_stamp(),
            "token_path": None if self.settings.intake_token else str(self.settings.token_path),
        }
        write_private(self.settings.daemon_file, orjson.dumps(info, option=orjson.OPT_INDENT_2) + b"\n", sync=False)
        log.info("urchin %s serving %s on %s (pid %d); stop with Ctrl-C or kill %d",
                 VERSION, self.settings.journal_path, self.address, os.getpid(), os.getpid())
        sd_notify(self.settings.notify_socket, f"READY=1\nSTATUS=serving on {self.address}\nMAINPID={os.getpid()}")
        self.ready.set()

    def _on_stopping(self) -> None:
        log.info("stopping: finishing in-flight requests")
        sd_notify(self.settings.notify_socket, "STOPPING=1")
        self._remove_daemon_file()  # new clients go in-process from now on

    def _remove_daemon_file(self) -> None:
        try:
            info = orjson.loads(self.settings.daemon_file.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return
        if isinstance(info, dict) and info.get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                self.settings.daemon_file.unlink()
