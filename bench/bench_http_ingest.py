"""Durable ingest through the HTTP API with 8 concurrent writers on loopback (target >= 3,000 events/s).

Starts a real daemon (`python -m urchin serve --port 0`) on a fresh home, then runs writer
threads from this process. Every counted event got HTTP 200, i.e. it was fsync'd. Peers measured
in the same run: one in-process writer doing an fsync per event, and the raw fsync latency.

    python bench/bench_http_ingest.py [--writers 8] [--seconds 5] [--batch 1 --batch 10] [--no-index]

The writers are Python threads with httpx, so the client's own CPU shares the 2 cores with the
daemon. When `wrk` (Debian's package) is on PATH, the one-event-per-request load is also sent by
wrk (C, 2 threads, the same number of connections, every event unique) to show what the daemon
itself sustains. `--no-index`: the daemon runs without its background PostgreSQL feed
(`serve --no-index`), to show that feed's share of the cost.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
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


def start_daemon(home: Path, no_index: bool = False) -> tuple[subprocess.Popen[bytes], str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home)}
    env.pop("URCHIN_NO_DAEMON", None)
    # cwd: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH, so a run from
    # another checkout's root would import that checkout's code
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning",
                             *(["--no-index"] if no_index else [])], env=env, cwd=REPO)
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


_WRK_SCRIPT = """
local counter = 0
local next_id = 0
function setup(thread) thread:set("tid", next_id); next_id = next_id + 1 end
function init(args) token = os.getenv("URCHIN_TOKEN") end
request = function()
  counter = counter + 1
  local body = string.format('{"content":"bench event: a tool ran and printed a modest amount of output %d-%d",'
    .. '"source":"bench"}', tid, counter)
  local headers = {["Content-Type"]="application/json", ["Authorization"]="Bearer " .. token}
  return wrk.format("POST", "/ingest", headers, body)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("URCHIN requests=%d errors=%d p50=%.3f p99=%.3f\\n", summary.requests,
    e.status + e.connect + e.read + e.write + e.timeout, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
"""


def run_wrk(url: str, token: str, connections: int, seconds: float) -> tuple[float, float, float]:
    """(acknowledged events/s, p50 ms, p99 ms) of one event per request sent by wrk; every request must get 200."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_WRK_SCRIPT)
    try:
        done = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds:g}s", "-s", script.name, url],
                              env={**os.environ, "URCHIN_TOKEN": token}, capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(script.name)
    found = re.search(r"URCHIN requests=(\d+) errors=(\d+) p50=([\d.]+) p99=([\d.]+)", done.stdout)
    if not found:
        raise SystemExit(f"wrk: {done.stdout}{done.stderr}")
    requests, errors = int(found.group(1)), int(found.group(2))
    if errors:
        raise SystemExit(f"wrk: {errors} of {requests} requests failed")
    return requests / seconds, float(found.group(3)), float(found.group(4))


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_process_peer(seconds: float) -> float:
    """One in-process writer, fsync per event: what a writer gets without group commit."""
    sys.path.insert(0, str(REPO))
    from urchin.facade import Memory

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
    parser.add_argument("--no-index", action="store_true", help="the daemon without its PostgreSQL feed")
    args = parser.parse_args()
    batches = args.batch or [1, 10]
    fsync_ms = fsync_latency_ms()
    peer = in_process_peer(min(args.seconds, 3))
    print(f"machine: {os.cpu_count()} cores; fsync median {fsync_ms:.2f} ms "
          f"(so one writer tops out near {1000 / fsync_ms:.0f} durable writes/s)")
    print(f"peer, in-process, fsync per event: {peer:,.0f} events/s")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        proc, url, token = start_daemon(home, args.no_index)
        print(f"daemon: {'no index feed' if args.no_index else 'with its background PostgreSQL feed'}; "
              f"load average {os.getloadavg()[0]:.1f}")
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
            if shutil.which("wrk") and 1 in batches:
                runs3, cpu = [], []
                for _ in range(args.rounds):
                    before = process_cpu_s(proc.pid)
                    runs3.append(run_wrk(url, token, args.writers, args.seconds))
                    cpu.append((process_cpu_s(proc.pid) - before) / (runs3[-1][0] * args.seconds) * 1e6)
                rate = statistics.median(r[0] for r in runs3)
                print(f"wrk, {args.writers} connections, 1 event/request: median {rate:,.0f} acknowledged events/s "
                      f"(runs: {', '.join(f'{r[0]:,.0f}' for r in runs3)}); request p50 "
                      f"{statistics.median(r[1] for r in runs3):.1f} ms "
                      f"p99 {statistics.median(r[2] for r in runs3):.1f} ms; daemon process CPU "
                      f"{statistics.median(cpu):.0f} us/event (the index feed's child and its server not counted); "
                      f"target 3,000: {'met' if rate >= 3000 else 'NOT met'}")
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
