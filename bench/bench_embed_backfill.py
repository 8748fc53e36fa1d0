"""Queries while the daemon embeds a backlog (target: busy p50 <= 1.5x idle, as for any background work).

    python bench/bench_embed_backfill.py [--events 3000] [--embedder-url URL] [--repo PATH] [--index]

A daemon (`urchin serve --no-index`, the code of `--repo`; with `--index` its PostgreSQL feed runs
too, and embeds the index's rows from the same cache) starts with an embedder set on a home
whose journal holds `--events` events (bench/gen_journal.py) and none of their vectors: its embedder
loop embeds them in the background. `/semantic` (answered by the embedder's vectors) and `/search`
questions are timed over one keep-alive connection while the vector cache is filled, then for as
long again after it (idle), on the same daemon. Without `--embedder-url` the test embedding server
runs (scripts/test-embedder.sh): a real model on the same two cores, as a user's Ollama would be.
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
from bench_embed_once import _start_embedder  # noqa: E402
from bench_learn import daemon_address  # noqa: E402
from gen_journal import generate  # noqa: E402

QUESTIONS = ("how do we retry failed requests", "what did we decide about the database migration",
             "connection pool errors", "why did the deploy fail", "the", "fix the flaky test")


def cached(home: Path) -> int:
    """Bytes of the vector cache's ids.txt: one line per event embedded."""
    return sum(f.stat().st_size for f in (home / "vectors").glob("*/ids.txt"))


def summary(values: list[float]) -> str:
    values = sorted(values)
    return (f"p50 {statistics.median(values):7.1f} ms, p95 {values[int(0.95 * (len(values) - 1))]:7.1f} ms, "
            f"max {values[-1]:7.1f} ms over {len(values)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--embedder-url", default=None)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose code the daemon runs")
    parser.add_argument("--index", action="store_true", help="the daemon feeds its PostgreSQL index too")
    args = parser.parse_args()
    embedder, url = (None, args.embedder_url) if args.embedder_url else _start_embedder()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            (home / "journal").mkdir(parents=True)
            generate(args.events, home / "journal" / "events.jsonl")
            ids_bytes = sum(len(orjson.loads(line)["id"]) + 1
                            for line in (home / "journal" / "events.jsonl").read_bytes().splitlines())
            env = {**os.environ, "PYTHONPATH": str(args.repo), "URCHIN_HOME": str(home), "URCHIN_EMBEDDER_URL": url,
                   "URCHIN_EMBEDDER_MODEL": "all-MiniLM-L6-v2", "URCHIN_EMBEDDER_API": "openai"}
            env.pop("URCHIN_NO_DAEMON", None)
            command = [sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning"]
            proc = subprocess.Popen(command + ([] if args.index else ["--no-index"]), env=env,
                                    cwd=args.repo)   # -m imports from the cwd first
            try:
                run(proc, home, ids_bytes, args.repo)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    finally:
        if embedder is not None:
            os.killpg(embedder.pid, signal.SIGTERM)


def run(proc: subprocess.Popen[bytes], home: Path, ids_bytes: int, repo: Path) -> None:
    address, headers = daemon_address(proc, home)
    times: dict[tuple[str, bool], list[float]] = {}
    modes: set[str] = set()
    with httpx.Client(base_url=address, headers=headers, timeout=600, trust_env=False) as client:
        started = time.perf_counter()
        done_at = None
        for n in itertools.count():
            route = ("/search", "/semantic")[n % 2]
            params = {"query": QUESTIONS[n // 2 % len(QUESTIONS)], "limit": 10, "hours": 2160}
            t = time.perf_counter()
            answer = client.get(route, params=params)
            elapsed = (time.perf_counter() - t) * 1000
            answer.raise_for_status()
            if route == "/semantic":
                modes.add(str(answer.json().get("mode")))
            busy = done_at is None
            times.setdefault((route, busy), []).append(elapsed)
            if busy and cached(home) >= ids_bytes:
                done_at = time.perf_counter()
            elif not busy and time.perf_counter() - done_at > max(done_at - started, 10.0):
                break
            if time.perf_counter() - started > 1800:
                raise SystemExit("the backlog was not embedded in 30 minutes")
            time.sleep(0.05)      # a user's pace, not a load test
    assert done_at is not None
    print(f"code: {repo}; backlog embedded in {done_at - started:.1f} s; load average {os.getloadavg()[0]:.1f}; "
          f"/semantic modes seen: {', '.join(sorted(modes))}")
    for route in ("/search", "/semantic"):
        busy, idle = times.get((route, True), []), times.get((route, False), [])
        if not busy or not idle:
            continue
        print(f"{route:<10} while embedding: {summary(busy)}")
        print(f"{route:<10} after (idle):     {summary(idle)}")
        print(f"{route:<10} busy/idle p50 {statistics.median(busy) / statistics.median(idle):.2f}x, "
              f"p95 {sorted(busy)[int(0.95 * (len(busy) - 1))] / sorted(idle)[int(0.95 * (len(idle) - 1))]:.2f}x")


if __name__ == "__main__":
    main()
