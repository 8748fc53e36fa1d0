"""Queries while the daemon learns its term associations (target: busy p50 <= 1.5x idle, as for any
background work).

A growing journal rebuilds the learned associations (urchin/search/assoc.py: a randomised SVD over up
to 50,000 events, seconds of CPU) at a save once it has grown by half. This starts `urchin serve
--no-index` on the first `--events` lines of a gen_journal file: the views are built, the first save
follows and with it a build. `/search` and `/semantic` questions are timed over one keep-alive
connection while the build runs (until the model file appears), then for as long again after it
(idle), on the same daemon. `--repo` runs another checkout's code (an A/B in one sitting).

    python bench/bench_learn.py [--events 40000] [--repo PATH]
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from bench_http_ingest import process_cpu_s  # noqa: E402

QUERIES = ("retry budget", "the", "error", "connection pool", "how do we retry", "fix", "database migration")


def first_lines(source: Path, target: Path, n: int) -> None:
    target.parent.mkdir(parents=True)
    with source.open("rb") as src, target.open("wb") as out:
        out.writelines(itertools.islice(src, n))


def daemon_address(proc: subprocess.Popen[bytes], home: Path) -> tuple[str, dict[str, str]]:
    """The address of the daemon `proc` serving `home`, once it wrote daemon.json, and its auth header."""
    while not (home / "daemon.json").exists():
        if proc.poll() is not None:
            raise SystemExit("daemon exited")
        time.sleep(0.05)
    info = orjson.loads((home / "daemon.json").read_bytes())
    return info["address"], {"authorization": f"Bearer {(home / 'token').read_text().strip()}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", type=Path, default=REPO / "bench" / "data" / "journal-200k.jsonl")
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose code the daemon runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        first_lines(args.journal, home / "journal" / "events.jsonl", args.events)
        env = {**os.environ, "PYTHONPATH": str(args.repo), "URCHIN_HOME": str(home)}
        env.pop("URCHIN_NO_DAEMON", None)
        proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning",
                                 "--no-index"], env=env, cwd=args.repo)  # -m imports from the cwd first
        try:
            address, headers = daemon_address(proc, home)
            with httpx.Client(base_url=address, headers=headers, timeout=300, trust_env=False) as client:
                t = time.perf_counter()
                client.get("/semantic", params={"query": "warm up", "limit": 5}).raise_for_status()
                first = (time.perf_counter() - t) * 1000
                started = time.perf_counter()
                cpu_start = process_cpu_s(proc.pid)
                busy: list[float] = []
                idle: list[float] = []
                built_at = None
                for n in itertools.count():
                    route = ("/search", "/semantic")[n % 2]
                    params = {"query": QUERIES[n // 2 % len(QUERIES)], "limit": 20, "hours": 2160}
                    t = time.perf_counter()
                    client.get(route, params=params).raise_for_status()
                    elapsed = (time.perf_counter() - t) * 1000
                    if built_at is None:
                        busy.append(elapsed)
                        if next(home.glob("**/cosine.assoc.npz"), None) is not None:
                            built_at = time.perf_counter()
                            cpu_built = process_cpu_s(proc.pid)
                    else:
                        idle.append(elapsed)
                        if time.perf_counter() - built_at > max(built_at - started, 5.0):
                            cpu_end, ended = process_cpu_s(proc.pid), time.perf_counter()
                            break
                    if time.perf_counter() - started > 600:
                        raise SystemExit("no model written in 10 minutes")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    assert built_at is not None

    def summary(values: list[float]) -> str:
        values = sorted(values)
        return (f"p50 {statistics.median(values):.1f} ms, p95 {values[int(0.95 * (len(values) - 1))]:.1f} ms, "
                f"max {values[-1]:.1f} ms over {len(values)} queries")

    print(f"code: {args.repo}; {args.events:,} events; load average {os.getloadavg()[0]:.1f}; the first /semantic "
          f"(views built, then a small journal's associations built inline before it, before this change) "
          f"{first:,.0f} ms")
    print(f"while the associations were built ({built_at - started:.1f} s after the views were ready): {summary(busy)}")
    print(f"after (idle, same daemon): {summary(idle)}")
    print(f"the daemon process's CPU: {(cpu_built - cpu_start) / (built_at - started):.2f} s/s during the build, "
          f"{(cpu_end - cpu_built) / (ended - built_at):.2f} s/s after (its own queries; a child's CPU not counted)")
    print(f"busy/idle: p50 {statistics.median(busy) / statistics.median(idle):.2f}x, "
          f"p95 {sorted(busy)[int(0.95 * (len(busy) - 1))] / sorted(idle)[int(0.95 * (len(idle) - 1))]:.2f}x")


if __name__ == "__main__":
    main()
