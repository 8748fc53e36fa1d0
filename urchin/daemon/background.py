"""The daemon's background jobs: collectors that follow the agents' files, and the embedder backfill.

Each job is a thread that stops when asked; a failure is logged and retried later, never fatal.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from urchin.daemon.reload import reload_config
from urchin.errors import UrchinError
from urchin.facade import Memory
from urchin.requests_first import lower_thread_priority

__all__ = ["CollectorLoop", "EmbedderLoop", "IndexLoop", "WorkspaceIndexLoop", "Job"]

log = logging.getLogger("urchin.daemon.background")


class Job:
    name = "job"
    niceness = 10     # the job thread's nice value (0: as the daemon's own threads)

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._guarded, name=f"urchin-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _guarded(self) -> None:
        if self.niceness:
            lower_thread_priority(self.niceness)
        try:
            self.run()
        except Exception as exc:  # noqa: BLE001 - a background job must never take the daemon down
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("%s stopped", self.name)

    def run(self) -> None:
        raise NotImplementedError


class CollectorLoop(Job):
    """Runs each collector within seconds of a change under its folders (and every 30 s)."""

    name = "collectors"

    def run(self) -> None:
        for names in self.memory.collector_changes(self.stop_event):
            for name in sorted(names):
                if self.stop_event.is_set():
                    return
                reload_config(self.memory)   # a new [redact] rule applies to what the collector writes next
                try:
                    results = self.memory.collect(name)
                    log.debug("collected %s: %s", name, results)
                except UrchinError as exc:
                    self.last_error = f"{name}: {exc.message}"
                    log.warning("collector %s failed: %s", name, exc.message)


class EmbedderLoop(Job):
    """Embeds new events in the background so searches find them without waiting."""

    name = "embedder"
    BATCH = 256
    IDLE_S = 2.0
    BACKOFF_S = 30.0

    def start(self) -> None:
        self.memory.embed_in_background()     # before the daemon serves a query: backlogs are the loop's
        super().start()

    def run(self) -> None:
        """Queries leave backlogs to this loop, so it never ends but when asked: any failure (an
        embedder outage, a full disk) is logged and retried; should it end anyway, queries embed for
        themselves again."""
        try:
            while not self.stop_event.is_set():
                try:
                    added = self.memory.embed(limit=self.BATCH)["embedded"]
                    self.last_error = None
                except Exception as exc:  # noqa: BLE001 - retried: the loop must outlive what failed
                    message = exc.message if isinstance(exc, UrchinError) else f"{type(exc).__name__}: {exc}"
                    if self.last_error != message:
                        log.warning("embedding in the background failed: %s (retrying every %.0fs)", message,
                                    self.BACKOFF_S)
                    self.last_error = message
                    self.stop_event.wait(self.BACKOFF_S)
                    continue
                if added < self.BATCH:
                    self.stop_event.wait(self.IDLE_S)
        finally:
            if not self.stop_event.is_set():
                self.memory.embed_in_background(False)


class IndexLoop(Job):
    """Feeds the Postgres hybrid index from the journal continuously (when the extra is installed)."""

    name = "index"
    BACKOFF_S = 30.0

    @staticmethod
    def available() -> bool:
        import importlib.util

        return importlib.util.find_spec("psycopg") is not None

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.memory.index(follow=True, stop=self.stop_event)
                return
            except UrchinError as exc:
                self.last_error = exc.message
                log.warning("feeding the index failed: %s (retrying in %.0fs)", exc.message, self.BACKOFF_S)
                self.stop_event.wait(self.BACKOFF_S)


class WorkspaceIndexLoop(Job):
    """Keeps the workspace roots' files in the Postgres index: a walk at start, then one within seconds
    of any change under a root (watchfiles) or to the set of roots (a new root is walked within a tick),
    and every RECHECK_S. Walks are cheap: files whose size and mtime match the catalog are not read."""

    name = "workspace-index"
    RECHECK_S = 30.0
    BACKOFF_S = 30.0
    DEBOUNCE_MS = 400
    TICK_MS = 1000

    def run(self) -> None:
        from watchfiles import watch

        while not self.stop_event.is_set():
            roots = self._roots_stamp()
            folders = [r.path for r in self.memory.workspace_list() if r.path.is_dir()]
            if not folders:
                self._walk()
                self._wait_for_roots(roots)
                continue
            # The watcher runs while a walk does, so a change made during a walk is seen by the next one.
            last = 0.0
            rules = self.memory.redaction_fingerprint()
            for changes in watch(*folders, stop_event=self.stop_event, debounce=self.DEBOUNCE_MS,
                                 rust_timeout=self.TICK_MS, yield_on_timeout=True, raise_interrupt=False):
                if self._roots_stamp() != roots:
                    break   # `workspace add|remove` (any process): watch the new set and walk it now
                # a `[redact]` rule reloaded: every file's stored hash is stale, chunk them again now
                if changes or time.monotonic() - last >= self.RECHECK_S or self.memory.redaction_fingerprint() != rules:
                    rules = self.memory.redaction_fingerprint()
                    if not self._walk():
                        self.stop_event.wait(self.BACKOFF_S)
                    last = time.monotonic()
                    if [r.path for r in self.memory.workspace_list() if r.path.is_dir()] != folders:
                        break          # a root's folder appeared or went away: watch the new set

    def _roots_stamp(self) -> tuple[int, int, int] | None:
        """The roots file's identity, size and mtime: a cheap stat each tick notices `workspace add`."""
        try:
            info = os.stat(self.memory.roots.file)
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    def _wait_for_roots(self, roots: tuple[int, int, int] | None) -> None:
        """No root yet: wait until one is added (checked every tick), or RECHECK_S."""
        deadline = time.monotonic() + self.RECHECK_S
        while time.monotonic() < deadline and self._roots_stamp() == roots:
            if self.stop_event.wait(self.TICK_MS / 1000):
                return

    def _walk(self) -> bool:
        try:
            report = self.memory.index_files()
        except Exception as exc:  # noqa: BLE001 - database outages (psycopg) are not UrchinErrors
            message = exc.message if isinstance(exc, UrchinError) else f"{type(exc).__name__}: {exc}"
            if self.last_error != message:
                log.warning("indexing workspace files failed: %s (retrying every %.0fs)", message, self.BACKOFF_S)
            self.last_error = message
            return False
        self.last_error = None
        if report.indexed or report.removed or report.cataloged:
            log.info("workspace files indexed: %s", report.to_dict())
        return True
