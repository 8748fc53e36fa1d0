"""Keeps the daemon's hot views current with the journal, whoever appends to it.

A thread watches the journal's folder (watchfiles: inotify on Linux) and also wakes every half
second, since a watch can miss events (network filesystems, a journal replaced by rename); each
wake-up calls `Memory.refresh()`, which reads from the views' byte offset to the end.
"""

from __future__ import annotations

import logging
import threading

from urchin.facade import Memory
from urchin.fileio import ensure_private_dir

__all__ = ["Follower", "PERIOD_S"]

log = logging.getLogger("urchin.daemon.follower")
PERIOD_S = 0.5


class Follower:
    """Call `start()` after `Memory.warm()`; from then on the views trail the journal by < 1 s."""

    def __init__(self, memory: Memory, period_s: float = PERIOD_S) -> None:
        self.memory = memory
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="urchin-follower", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        folder = ensure_private_dir(self.memory.journal.path.parent)
        try:
            self._watch(str(folder))
        except Exception as exc:  # noqa: BLE001 - e.g. out of inotify watches: polling still works
            log.warning("watching %s failed (%s); polling every %.1fs", folder, exc, self.period_s)
            self._poll()

    def _watch(self, folder: str) -> None:
        from watchfiles import watch

        # yield_on_timeout turns the watch's timeout into the periodic check; a short debounce
        # keeps follow latency far under a second while appends stream in.
        for _ in watch(folder, stop_event=self._stop, debounce=50, step=10, rust_timeout=int(self.period_s * 1000),
                       yield_on_timeout=True, raise_interrupt=False, recursive=False):
            self._refresh()

    def _poll(self) -> None:
        while not self._stop.wait(self.period_s):
            self._refresh()

    def _refresh(self) -> None:
        try:
            self.memory.refresh()
            self.memory.release_pages()     # what idle views mapped leaves the daemon's resident set
            self.last_error = None
        except Exception as exc:  # noqa: BLE001 - a transient read error must not kill the follower
            if str(exc) != self.last_error:
                log.error("following the journal failed: %s", exc)
            self.last_error = str(exc)
