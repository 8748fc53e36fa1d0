"""Watch the collectors' folders and say which collectors to run, for the daemon.

    for names in watch_collectors(settings, stop_event):
        memory.collect(name) for each name in names     # e.g. {"claude"}

`watch_collectors` yields a set of collector names within about `debounce_ms` of a change under
one of their folders (watchfiles, recursive), plus every collector whose folder exists each
`rescan_s` seconds, so a Gemini message held back until its file settles is still kept and
folders that appear later are picked up. It returns when `stop_event` is set.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from urchin.collectors import COLLECTORS, collector
from urchin.config import Settings

__all__ = ["watch_collectors", "watched_paths", "collectors_for"]


def watched_paths(settings: Settings, names: list[str] | None = None) -> dict[str, list[Path]]:
    """Collector -> the existing paths to watch (a missing folder's nearest existing parent is not
    watched: the periodic rescan notices when it appears)."""
    out: dict[str, list[Path]] = {}
    for name in names or list(COLLECTORS):
        paths = [p for p in collector(name, settings).folders() if p.exists()]
        if name == "git":
            paths = [p / ".git" if (p / ".git").exists() else p for p in paths]
        if paths:
            out[name] = paths
    return out


def collectors_for(changed: set[str], watched: dict[str, list[Path]]) -> set[str]:
    """Which collectors own the changed paths."""
    hit: set[str] = set()
    for raw in changed:
        path = Path(raw)
        for name, roots in watched.items():
            if any(path == root or root in path.parents for root in roots):
                hit.add(name)
    return hit


def watch_collectors(settings: Settings, stop_event: threading.Event, *, names: list[str] | None = None,
                     debounce_ms: int = 1000, rescan_s: float = 30.0, tick_ms: int = 1000) -> Iterator[set[str]]:
    """Yield sets of collector names to run; the first yield is every collector found (catch-up).

    One watcher stays armed for as long as the watched folders stay the same, also while the caller
    runs the collectors it was given, so a change made meanwhile is reported next, not lost until the
    rescan. Once armed (within `tick_ms`), every collector is due once more: a file written between
    the catch-up and the arming is collected within seconds, not at the first rescan.
    """
    import time

    import watchfiles

    watched = watched_paths(settings, names)
    yield set(watched)
    while not stop_event.is_set():
        if not watched:
            if stop_event.wait(rescan_s):
                return
            watched = watched_paths(settings, names)
            if watched:
                yield set(watched)
            continue
        roots = sorted({str(p) for paths in watched.values() for p in paths})
        armed, rescan_at = False, time.monotonic() + rescan_s
        for batch in watchfiles.watch(*roots, stop_event=stop_event, debounce=debounce_ms, rust_timeout=tick_ms,
                                      yield_on_timeout=True, raise_interrupt=False):
            if stop_event.is_set():
                return
            rescan = not armed or time.monotonic() >= rescan_at
            if not batch and not rescan:
                continue
            armed = True
            current = watched_paths(settings, names)
            due = set(current) if rescan else collectors_for({path for _, path in batch}, watched)
            if rescan:
                rescan_at = time.monotonic() + rescan_s
            moved, watched = current != watched, current
            if due:
                yield due
            if moved:
                break          # folders appeared or went: watch the new set
