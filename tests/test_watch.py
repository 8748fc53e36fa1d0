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
