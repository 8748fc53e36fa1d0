"""The daemon's watch helper names the collectors to run within seconds of a change."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from urchin.collectors.watch import collectors_for, watch_collectors, watched_paths
from urchin.config import Settings


def test_a_new_transcript_line_names_the_claude_collector(tmp_path: Path) -> None:
    projects = tmp_path / "user-home" / ".claude" / "projects" / "-p"
    projects.mkdir(parents=True)
    settings = Settings.resolve()
    assert set(watched_paths(settings)) == {"claude"}
    stop = threading.Event()
    seen: list[set[str]] = []

    def consume() -> None:
        for names in watch_collectors(settings, stop, debounce_ms=200, rescan_s=20):
            seen.append(names)
            if len(seen) == 2:
                stop.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    deadline = time.time() + 15
    while not seen and time.time() < deadline:
        time.sleep(0.05)
    assert seen == [{"claude"}]           # the catch-up run at start
    time.sleep(0.5)
    (projects / "s.jsonl").write_text('{"type":"user"}\n')
    thread.join(timeout=15)
    assert seen[1:] == [{"claude"}]       # the change


def test_collectors_for_maps_paths_to_owners(tmp_path: Path) -> None:
    watched = {"claude": [tmp_path / "a"], "codex": [tmp_path / "b"]}
    assert collectors_for({str(tmp_path / "a" / "x" / "y.jsonl")}, watched) == {"claude"}
    assert collectors_for({str(tmp_path / "c")}, watched) == set()


def test_a_change_made_while_the_collectors_run_is_reported_within_seconds(tmp_path: Path) -> None:
    """Changes made while the caller handles a yield (the catch-up collect, or a later one) are not
    lost until the rescan (60 s here): the watcher stays armed meanwhile, and arming is followed by
    one more run of every collector. The first daemon-background test waited 32 s for exactly this."""
    projects = tmp_path / "user-home" / ".claude" / "projects" / "-p"
    projects.mkdir(parents=True)
    settings = Settings.resolve()
    stop = threading.Event()
    seen: list[tuple[float, set[str]]] = []

    def consume() -> None:
        for names in watch_collectors(settings, stop, debounce_ms=200, rescan_s=60):
            seen.append((time.monotonic(), names))
            if len(seen) == 4:
                stop.set()
                return
            time.sleep(0.3)                                   # the collectors run ...
            (projects / f"s{len(seen)}.jsonl").write_text('{"type":"user"}\n')   # ... and a file changes
            time.sleep(0.3)

    started = time.monotonic()
    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    thread.join(timeout=20)
    stop.set()
    assert len(seen) == 4 and all(names == {"claude"} for _, names in seen), seen
    assert seen[-1][0] - started < 15, [round(t - started, 1) for t, _ in seen]
