"""Durable ingest through the HTTP API with 8 concurrent writers on loopback (target >= 3,000 events/s).

Starts a real daemon (`python -m urchin serve --port 0`) on a fresh home, then runs writer
threads from this process. Every counted event got HTTP 200, i.e. it was fsync'd. Peers measured
in the same run: one in-process writer doing an fsync per event, and the raw fsync latency.

    python bench/bench_http_ingest.py [--writers 8] [--seconds 5] [--batch 1 --batch 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent


def start_daemon(home: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home)}
    env.pop("URCHIN_NO_DAEMON", None)
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning"],
                            env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            info = orjson.loads((home / "daemon.json").read_bytes())
            if info["pid"] == proc.pid:
                return proc, info["address"], (home / "token").read_text().strip()
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("daemon did not start")


def run_writers(url: str, token: str, writers: int, seconds: float, batch: int) -> tuple[int, list[float]]:
    """Events acknowledged in `seconds` by `writers` threads sending `batch` events per request."""
    stop = threading.Event()
    counts = [0] * writers
    latencies: list[list[float]] = [[] for _ in range(writers)]
    body_text = "bench event: a tool ran and printed a modest amount of output " * 3

    def write(worker: int) -> None:
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        with httpx.Client(base_url=url, headers=headers, timeout=30, trust_env=False) as client:
            i = 0
            while not stop.is_set():
                if batch == 1:
                    path, payload = "/ingest", orjson.dumps({"content": f"{body_text} {worker}-{i}", "source": "bench"})
                else:
                    path = "/ingest/batch"
                    payload = orjson.dumps([{"content": f"{body_text} {worker}-{i}-{j}", "source": "bench"}
                                            for j in range(batch)])
                t0 = time.perf_counter()
                response = client.post(path, content=payload)
                latencies[worker].append(time.perf_counter() - t0)
                if response.status_code != 200:
                    raise SystemExit(f"HTTP {response.status_code}: {response.text}")
                counts[worker] += batch
                i += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return sum(counts), [x for per in latencies for x in per]


def in_process_peer(seconds: float) -> float:
    """One in-process writer, fsync per event: what a writer gets without group commit."""
    sys.path.insert(0, str(REPO))
    from urchin.memory import Memory

    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory.open(tmp)
        n = 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            memory.ingest_one({"content": f"peer event {n}"})
            n += 1
        return n / seconds


def fsync_latency_ms(samples: int = 200) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        fd = os.open(Path(tmp) / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        times = []
        for _ in range(samples):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 300 + b"\n")
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
        os.close(fd)
        return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--batch", type=int, action="append", help="events per request (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    batches = args.batch or [1, 10]
    fsync_ms = fsync_latency_ms()
    peer = in_process_peer(min(args.seconds, 3))
    print(f"machine: {os.cpu_count()} cores; fsync median {fsync_ms:.2f} ms "
          f"(so one writer tops out near {1000 / fsync_ms:.0f} durable writes/s)")
    print(f"peer, in-process, fsync per event: {peer:,.0f} events/s")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        proc, url, token = start_daemon(home)
        try:
            run_writers(url, token, args.writers, 1.0, 1)  # warm up: connections, id index
            for batch in batches:
                rates, p50s, p99s = [], [], []
                for _ in range(args.rounds):
                    n, lat = run_writers(url, token, args.writers, args.seconds, batch)
                    rates.append(n / args.seconds)
                    lat.sort()
                    p50s.append(lat[len(lat) // 2] * 1000)
                    p99s.append(lat[int(len(lat) * 0.99)] * 1000)
                rate = statistics.median(rates)
                runs = ", ".join(f"{r:,.0f}" for r in rates)
                print(f"HTTP, {args.writers} writers, {batch} event(s)/request: median {rate:,.0f} acknowledged "
                      f"events/s over {args.rounds} x {args.seconds:g}s (runs: {runs}); "
                      f"request p50 {statistics.median(p50s):.1f} ms p99 {statistics.median(p99s):.1f} ms; "
                      f"{rate / peer:.1f}x the in-process peer; target 3,000: {'met' if rate >= 3000 else 'NOT met'}")
            status = httpx.get(url + "/status", headers={"authorization": f"Bearer {token}"}, trust_env=False,
                               timeout=120).json()
            writer = status["daemon"]["writer"]
            per_fsync = writer["events"] / max(1, writer["writes"])
            print(f"group commit: {writer['events']:,} events in {writer['writes']:,} writes "
                  f"({per_fsync:.1f} events per fsync, largest {writer['largestWrite']})")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)


if __name__ == "__main__":
    main()
