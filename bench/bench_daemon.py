"""The daemon at scale: start-up time to ready, RSS, first-write and hot query latency at 1M events.

Generates (once, cached) a journal of agent-like events, starts `urchin serve` on it, and reports:
time until daemon.json appears (READY), RSS after start and after queries, the latency of the first
write, and p50 of `/search` for rare, common and absent terms beside `rg -i -F -c` (the peer, same file).

    python bench/bench_daemon.py [--events 1000000] [--journal /tmp/urchin-bench/events.jsonl]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
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
WORDS = ("build test deploy refactor parser journal index token cosine search daemon socket fsync flock "
         "commit branch merge rebase review lint mypy ruff pytest fixture schema migration query vector "
         "embedding latency throughput memory cache session workspace agent claude copilot gemini codex "
         "shell command output error warning traceback function class module import config settings").split()
RARE = "zanzibar-quokka"  # appears in 1 event per 100,000


def generate(path: Path, n: int, seed: int = 7) -> None:
    """`n` events (~400 bytes each, like agent transcripts), timestamps over the last 30 days."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        buf = []
        for i in range(n):
            ts_ms = now_ms - (n - i) * (30 * 86_400_000 // n)
            words = rng.choices(WORDS, k=rng.randint(25, 60))
            if i % 100_000 == 50_000:
                words.insert(rng.randrange(len(words)), RARE)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts_ms / 1000)) + f".{ts_ms % 1000:03d}Z"
            buf.append(orjson.dumps({
                "id": f"bench-{i:08d}", "timestamp": stamp, "source": rng.choice(("claude", "shell", "git", "codex")),
                "kind": rng.choice(("conversation", "command", "tool_use", "note")),
                "content": " ".join(words), "workspace": f"proj-{i % 13}", "session": f"s-{i // 500}",
            }))
            if len(buf) >= 10_000:
                out.write(b"\n".join(buf) + b"\n")
                buf = []
        if buf:
            out.write(b"\n".join(buf) + b"\n")
    tmp.rename(path)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--journal", type=Path, default=None, help="cache of the generated journal")
    parser.add_argument("--queries", type=int, default=5, help="repetitions per search term")
    parser.add_argument("--no-search", action="store_true", help="only start-up, RSS and first write")
    args = parser.parse_args()
    cache = args.journal or Path(tempfile.gettempdir()) / f"urchin-bench-daemon-{args.events}" / "events.jsonl"
    if not cache.exists():
        started = time.perf_counter()
        generate(cache, args.events)
        print(f"generated {args.events:,} events ({cache.stat().st_size / 1e6:,.0f} MB) in "
              f"{time.perf_counter() - started:.1f}s -> {cache}")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / "journal").mkdir(parents=True)
        journal = home / "journal" / "events.jsonl"
        shutil.copyfile(cache, journal)
        journal.read_bytes()  # page cache warm, as on a machine in use (and fair to rg below)
        os.sync()  # else the first fsync after start pays for writing the copy out
        env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home)}
        env.pop("URCHIN_NO_DAEMON", None)
        for run in ("first start (builds the id sidecar)", "restart (sidecar present)"):
            proc, ready_s, client = start(home, env)
            try:
                health = client.get("/health").json()
                rss_ready = rss_mb(proc.pid)
                t1 = time.perf_counter()
                client.post("/ingest", json={"content": "first write after start"}).raise_for_status()
                first_write_ms = (time.perf_counter() - t1) * 1000
                print(f"{run}: ready (daemon.json, READY=1) in {ready_s:.2f}s for {health['events']:,} events; "
                      f"RSS {rss_ready:,.0f} MB; first write {first_write_ms:.1f} ms")
                t2 = time.perf_counter()
                client.get("/semantic", params={"query": "fsync latency", "limit": 5}).raise_for_status()
                print(f"  first /semantic (waits for the background token-cosine build): "
                      f"{time.perf_counter() - t2:.1f}s; RSS then {rss_mb(proc.pid):,.0f} MB")
                if run.startswith("restart") and not args.no_search:
                    search(client, journal, args.queries)
                    print(f"RSS after queries: {rss_mb(proc.pid):,.0f} MB (target <= 1,500 MB)")
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)


def start(home: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float, httpx.Client]:
    (home / "daemon.json").unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning"],
                            env=env)
    while not (home / "daemon.json").exists():
        if proc.poll() is not None:
            raise SystemExit("daemon exited")
        time.sleep(0.01)
    ready_s = time.perf_counter() - t0
    info = orjson.loads((home / "daemon.json").read_bytes())
    token = (home / "token").read_text().strip()
    client = httpx.Client(base_url=info["address"], headers={"authorization": f"Bearer {token}"},
                          timeout=900, trust_env=False)
    return proc, ready_s, client


def search(client: httpx.Client, journal: Path, repeat: int) -> None:
    rg = shutil.which("rg", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for label, term in (("rare", RARE), ("common", "fsync"), ("absent", "xylophone-nebula")):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            client.get("/search", params={"query": term, "hours": 24 * 365, "limit": 20}).raise_for_status()
            times.append(time.perf_counter() - t)
        line = f"hot /search {label:<6} p50 {statistics.median(times) * 1000:,.0f} ms"
        if rg:
            rg_times = []
            for _ in range(repeat):
                t = time.perf_counter()
                subprocess.run([rg, "-i", "-F", "-c", term, str(journal)], capture_output=True)
                rg_times.append(time.perf_counter() - t)
            line += (f"; rg -i -F -c p50 {statistics.median(rg_times) * 1000:,.0f} ms "
                     f"(ratio {statistics.median(times) / statistics.median(rg_times):.1f}x)")
        print(line)

if __name__ == "__main__":
    main()
