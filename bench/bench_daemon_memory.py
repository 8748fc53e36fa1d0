"""A daemon's memory and start-up on a large home (issue 37): `urchin serve` until `/health` answers,
the first `/semantic`, then bench_hot_search's 10 queries x 24/168/2160 h on `/semantic` and `/search`
(twice), 3 s idle, and the daemon's RSS (anonymous and file-backed, from /proc), its peak, and the peak
of the daemon plus its children (PostgreSQL excluded, sampled every 50 ms) all along.

The home is used as it is (build it once: a journal, its `.ids` and `.sidx` sidecars, a saved token-
cosine index; nothing is written to it: no event is ingested). `--repo` runs another checkout's code on
the same home too, alternating with this one's, for an A/B in one sitting.

    python bench/bench_daemon_memory.py HOME [--repo OLD_CHECKOUT] [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

REPO = Path(__file__).resolve().parent.parent
QUERIES = ("Zanzibar-Quokka", "retry budget", "the", "error", "connection pool", "database migration",
           "timeout", "how do we retry", "fix", "xylophone nebula")


class Peaks:
    """Samples the daemon's RSS and its children's (PostgreSQL's excluded) every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.daemon = self.tree = self.children = 0
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                own = self.process.memory_info().rss
                kids = sum(c.memory_info().rss for c in self.process.children(recursive=True)
                           if "postgres" not in c.name())
            except psutil.Error:
                continue
            self.daemon, self.children = max(self.daemon, own), max(self.children, kids)
            self.tree = max(self.tree, own + kids)

    def stop(self) -> None:
        self._stop.set()


def _status_mb(pid: int) -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: int(fields[key].split()[0]) >> 10 for key in ("VmRSS", "RssAnon", "RssFile", "VmHWM")}


def run_once(repo: Path, home: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(repo), "URCHIN_HOME": str(home)}
    env.pop("URCHIN_NO_DAEMON", None)
    (home / "daemon.json").unlink(missing_ok=True)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--no-index", "--no-collect"],
                            env=env, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peaks = Peaks(proc.pid)
    try:
        while True:
            try:
                info = orjson.loads((home / "daemon.json").read_bytes())
                if info.get("pid") == proc.pid:
                    break
            except (OSError, orjson.JSONDecodeError):
                pass
            if proc.poll() is not None:
                raise SystemExit(f"daemon exited {proc.returncode}")
            time.sleep(0.005)
        headers = {"authorization": f"Bearer {(home / 'token').read_text().strip()}"}
        with httpx.Client(base_url=info["address"], headers=headers, trust_env=False, timeout=600) as client:
            health = client.get("/health").json()
            out: dict[str, Any] = {"/health s": round(time.perf_counter() - started, 2),
                                   "loading at /health": ",".join(health.get("loading", [])) or "-"}
            asked = time.perf_counter()
            client.get("/semantic", params={"query": "retry budget", "limit": 20})
            out["first /semantic s"] = round(time.perf_counter() - asked, 2)
            took = []
            for _ in range(2):
                for query in QUERIES:
                    for hours in (24, 168, 2160):
                        asked = time.perf_counter()
                        answer = client.get("/semantic", params={"query": query, "limit": 20, "hours": hours})
                        took.append(time.perf_counter() - asked)
                        assert answer.status_code == 200, answer.text[:200]
                        client.get("/search", params={"query": query, "limit": 20})
            out["/semantic p50 ms"] = round(statistics.median(took) * 1000, 1)
            time.sleep(3.0)    # idle views release their read-only maps after 2 s (the follower looks every 0.5 s)
            now = _status_mb(proc.pid)
            out.update({"RSS MB": now["VmRSS"], "anon MB": now["RssAnon"], "file MB": now["RssFile"],
                        "peak MB": now["VmHWM"], "peak tree MB": peaks.tree >> 20,
                        "CPU s": round(sum(psutil.Process(proc.pid).cpu_times()[:2]), 2)})
        return out
    finally:
        peaks.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--repo", type=Path, default=None, help="another checkout, run alternately on the same home")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    repos = [REPO] if args.repo is None else [args.repo.resolve(), REPO]
    for _ in range(args.runs):
        for repo in repos:
            print(repo.name, orjson.dumps(run_once(repo, args.home.resolve())).decode(), flush=True)


if __name__ == "__main__":
    main()
