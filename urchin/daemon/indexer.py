"""The daemon's PostgreSQL work in a process of its own, at the lowest CPU priority.

The journal feed and the workspace walk keep a core busy for minutes on a first start (row building,
`to_tsvector`, GIN builds). In the daemon's process they took the GIL from the threads answering
queries, and a lowered thread holding the GIL made a query wait behind it; the server process doing
the feed's SQL was not lowered at all. Here they run in a child (`python -P -m urchin.daemon.indexer`)
at nice 19 in the SCHED_IDLE class, whose embedded-server backends are reniced to 19 with their
autogroups (not idle-class: a query's backend may wait on a buffer lock one of them holds) and build
indexes on one core: the kernel gives a query's threads the CPU first, no Python lock is shared with
them, and a query's inline catch-up never waits for a lock the feed holds (IndexBusyError).
Priorities do not reach what the feed shares with a query beyond CPU time (the caches and memory
bandwidth of the machine, a sibling hyperthread): the child reads the daemon's requests in flight from
a shared page (`requests_first.share`, inherited) and its feed gives way between small units of work
while one is answered, at most FEED_WAIT_S at a time, so a query storm slows the feed, never stops it.

The daemon's side (`IndexProcess`) starts the child, relays what it reports (rows the database
refused, for `urchin status`), restarts it after a crash, keeps the embedded server running, and
stops it with the daemon. The child ends on SIGTERM, and on its own when the daemon is gone (even
after a SIGKILL). Killing it at any moment loses nothing: each batch commits its rows with the
journal cursor.
"""

from __future__ import annotations

import logging
import os
import pickle
import selectors
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from typing import IO

import orjson

from urchin.daemon.background import IndexLoop, Job, WorkspaceIndexLoop
from urchin.daemon.logs import setup_logging
from urchin.errors import UrchinError
from urchin.facade import Memory
from urchin.processes import NICENESS, PARENT_POLL_S, lowest_priority, python_child
from urchin.requests_first import asked_within, attach, give_way, share

__all__ = ["IndexProcess", "NICENESS", "FEED_WAIT_S", "main"]

log = logging.getLogger("urchin.daemon.indexer")
# The longest the feed waits for the daemon's requests between two of its units. Through a client's queries
# one after another (the bench's cells: seconds of them), each wait ends at this bound and a unit runs: at
# 0.25 s the feed and its server used ~1-2.5 s of CPU beside 10 s of cells; each second bounds that by 4.
FEED_WAIT_S = 1.0


class IndexProcess(Job):
    """Runs the child and relays its reports; a child that dies is started again after RESTART_S, and
    an embedded server that stopped is started again here (the child may not)."""

    name = "index"
    niceness = 0      # it only waits on the child, and starts the embedded server: at the daemon's priority
    RESTART_S = 30.0
    STOP_WAIT_S = 1.5  # then SIGKILL
    WATCH_S = 2.0      # how often the embedded server is checked while the child runs

    def __init__(self, memory: Memory, log_level: str = "info") -> None:
        super().__init__(memory)
        self.log_level = log_level
        self.process: subprocess.Popen[bytes] | None = None
        self._spawn_lock = threading.Lock()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.memory.index_service.start_server()   # here, at nice 0: the child never starts it
                with self._spawn_lock:
                    if self.stop_event.is_set():
                        return
                    self.process = _spawn(self.memory, self.log_level)
            except (UrchinError, OSError) as exc:
                self.last_error = exc.message if isinstance(exc, UrchinError) else f"{type(exc).__name__}: {exc}"
                log.warning("starting the index process failed: %s (retrying in %.0fs)", self.last_error,
                            self.RESTART_S)
                self.stop_event.wait(self.RESTART_S)
                continue
            self._serve(self.process)
            code = self.process.wait()
            if self.stop_event.is_set():
                return
            self.last_error = f"the index process exited with status {code}"
            log.log(logging.INFO if code == 0 else logging.WARNING, "%s; starting it again in %.0fs",
                    self.last_error, self.RESTART_S)
            self.stop_event.wait(self.RESTART_S)

    def _serve(self, process: subprocess.Popen[bytes]) -> None:
        """Relay the child's reports until it exits; meanwhile keep the embedded server running."""
        assert process.stdout is not None
        pending = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                if selector.select(self.WATCH_S):
                    chunk = os.read(process.stdout.fileno(), 65536)
                    if not chunk:
                        return
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        self._relay(line)
                elif not self.stop_event.is_set() and self.memory.index_service.server_stopped():
                    log.warning("the embedded PostgreSQL stopped; starting it again")
                    try:
                        self.memory.index_service.start_server()
                    except UrchinError as exc:
                        self.last_error = exc.message

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        with self._spawn_lock:
            self.stop_event.set()
            process = self.process
        if process is not None and process.poll() is None:
            process.terminate()    # it ends at once (its batch rolls back: nothing is lost)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        super().stop(timeout)

    def _relay(self, line: bytes) -> None:
        try:
            report = orjson.loads(line)
            event_id, reason = report["skip"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return
        if isinstance(event_id, str) and isinstance(reason, str):
            self.memory.index_service.record_skip(event_id, reason)


def _spawn(memory: Memory, log_level: str) -> subprocess.Popen[bytes]:
    """`python -P -m urchin.daemon.indexer` (-P: never the working directory's modules), in its own
    process group (a terminal's Ctrl-C is the daemon's to handle) but the daemon's session (its
    scheduling group: a session of its own would undo the lowered priority under autogroup)."""
    command, env = python_child("urchin.daemon.indexer")
    requests = share()              # the daemon's requests in flight, read by the child's feed
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
                               process_group=0, pass_fds=() if requests is None else (requests,))
    lowest_priority(process.pid)    # now, not once its imports are done (the child says so again first)
    assert process.stdin is not None
    try:
        with process.stdin:
            process.stdin.write(pickle.dumps((memory.settings, log_level, os.getpid(), requests)))
    except OSError:
        process.kill()
        process.wait()
        raise
    return process


# ---- the child ----------------------------------------------------------------------------------
def main(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    lowest_priority()      # first, before any thread starts: they all inherit it
    settings, log_level, parent, requests = pickle.load(stdin)
    setup_logging(log_level)
    # SIGTERM keeps its default action: the child ends at once, even starved (killing it loses nothing:
    # each batch commits with its cursor, an index build left unfinished is built at the next start).
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the daemon decides what Ctrl-C means
    memory = Memory(settings)
    service = memory.index_service
    service.niceness = NICENESS
    if requests is not None:
        if attach(requests):
            service.give_way, service.asked = partial(give_way, FEED_WAIT_S), asked_within
        os.close(requests)   # the map keeps the page: nothing this child starts inherits it
    lock = threading.Lock()

    def report(event_id: str, reason: str) -> None:
        with lock:
            try:
                stdout.write(orjson.dumps({"skip": [event_id, reason]}) + b"\n")
                stdout.flush()
            except (OSError, ValueError):   # the daemon is gone: the parent watch stops us
                pass

    service.skip_listeners.append(report)
    feed = IndexLoop(memory)
    feed.BACKOFF_S = 3.0      # an embedded server that stopped is back within WATCH_S (the daemon starts it)
    jobs = [feed, WorkspaceIndexLoop(memory)]
    for job in jobs:
        job.start()
    try:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:       # the daemon died (SIGKILL): do not feed on alone
                break
            _reload_redaction(memory)
    finally:
        for job in jobs:
            job.stop()
        memory.close()
    return 0


def _reload_redaction(memory: Memory) -> None:
    """config.toml's `[redact]` rules, as the daemon applies them: the files walked next are chunked under
    them (a changed rule changes the files' stored hashes, so each is chunked again). One `stat` when
    nothing changed; the daemon itself logs what a change means (this child only says it applied it)."""
    try:
        change = memory.reload_config()
    except UrchinError as exc:
        log.error("index process: config.toml not reloaded: %s", exc.message)
        return
    if change is not None and "redact" in {key.split(".", 1)[0] for key in change.applied}:
        log.info("index process: redaction rules reloaded; workspace files are chunked again under them")


if __name__ == "__main__":
    sys.exit(main(sys.stdin.buffer, sys.stdout.buffer))
