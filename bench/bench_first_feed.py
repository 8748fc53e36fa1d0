"""A daemon's first PostgreSQL feed, end to end: `urchin serve` on a fresh home until the cursor is at
the journal's end and the GIN indexes are built (the backfill path builds them last; none is building).

    python bench/bench_first_feed.py [--journal bench/data/journal-200k.jsonl] [--repo PATH]

`--repo` runs another checkout's daemon (a worktree of an older commit) for a before/after pair.
Prints events/s over the whole wall time; no queries run meanwhile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", type=Path, default=REPO / "bench" / "data" / "journal-200k.jsonl")
    parser.add_argument("--repo", type=Path, default=REPO)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    from scale_parts import feed_done

    from urchin.hybrid.embedded import running_pid

    home = Path(tempfile.mkdtemp(prefix="first-feed-", dir=args.journal.parent)) / "home"
    (home / "journal").mkdir(parents=True)
    os.link(args.journal, home / "journal" / "events.jsonl")
    env = {**os.environ, "PYTHONPATH": str(args.repo), "URCHIN_HOME": str(home)}
    env.pop("URCHIN_NO_DAEMON", None)
    size, lines = args.journal.stat().st_size, sum(1 for _ in args.journal.open("rb"))
    print(f"load average before: {os.getloadavg()[0]:.2f}; {lines:,} events; daemon from {args.repo}")
    started = time.perf_counter()
    daemon = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning"],
                              env=env, cwd=args.repo)   # `-m` imports from the working directory first
    try:
        while not feed_done(home, size):   # three GINs on a single user's index (issue 37), none building
            time.sleep(1)
        seconds = time.perf_counter() - started
        daemon_cpu, server_cpu = _cpu(daemon.pid), _cpu(running_pid(home / "pg"))
        print(f"first feed: {lines:,} events in {seconds:.1f} s ({lines / seconds:,.0f}/s, whole wall time); "
              f"load average after: {os.getloadavg()[0]:.2f}")
        print(f"CPU (user + sys, children included): daemon {daemon_cpu:.1f} s, PostgreSQL {server_cpu:.1f} s; "
              f"{(daemon_cpu + server_cpu) / lines * 1e6:.0f} us per event")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(120)
        link = home / "pg"
        if link.is_symlink():
            target = link.resolve()
            shutil.rmtree(target, ignore_errors=True)
            for extra in (target.with_name(target.name + ".owner"), target.with_name(target.name + ".holders")):
                extra.unlink(missing_ok=True)
        shutil.rmtree(home.parent, ignore_errors=True)


def _cpu(pid: int | None) -> float:
    """CPU seconds of a process and its descendants, live ones and reaped ones (in their parent's children's
    times): a server's backends that ended are in its children's times, the open ones are still running."""
    import psutil

    if pid is None:
        return 0.0
    total = 0.0
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


if __name__ == "__main__":
    main()
