"""The first-start wall: the first `/semantic` after `urchin import` of a big journal, on a fresh daemon.

    python bench/bench_wall.py --journal /tmp/scale/journal-1m.jsonl [--src TREE ...] [--runs 2]

Imports the journal once into a fresh home (`urchin import`), then per run and per source tree
(`--src`, alternating: e.g. main's checkout and this one) copies that home without any saved view,
starts `urchin serve --no-index --no-mcp` on it and measures: start to `/health`, the first
`/semantic`'s latency and whether it said it left events out, `/health` and `/search` latencies
during the build, and the time from start until `/semantic` answers with no note (the whole journal
covered). Medians over runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
QUERY = "flaky pytest fixture timeout"


def _env(src: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("URCHIN_")}
    return {**env, "PYTHONPATH": str(src), "URCHIN_HOME": str(home)}


def imported(journal: Path, work: Path, src: Path) -> Path:
    home = work / "imported"
    if not (home / "journal" / "events.jsonl").exists():
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "urchin", "import", str(journal)], env=_env(src, home), check=True,
                       stdout=subprocess.DEVNULL, cwd=src)
        print(f"import: {time.perf_counter() - started:.1f} s")
    return home


def one_run(src: Path, imported_home: Path, work: Path, poll_s: float, limit_s: float) -> dict[str, Any]:
    home = work / "run"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(imported_home, home, ignore=shutil.ignore_patterns("index", "daemon.json", "*.lock"))
    log = (work / "daemon.log").open("ab")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--no-index", "--no-mcp"],
                            env=_env(src, home), stdout=log, stderr=log, cwd=src)   # -m: the cwd comes first
    out: dict[str, Any] = {}
    try:
        while not (home / "daemon.json").exists() or b"address" not in (home / "daemon.json").read_bytes():
            time.sleep(0.01)
        info = orjson.loads((home / "daemon.json").read_bytes())
        token = (home / "token").read_text().strip()
        with httpx.Client(base_url=info["address"], headers={"authorization": f"Bearer {token}"},
                          timeout=limit_s, trust_env=False) as http:
            while http.get("/health").status_code != 200:
                time.sleep(0.01)
            out["health_s"] = time.perf_counter() - started
            t = time.perf_counter()
            body = http.get("/semantic", params={"query": QUERY}).json()
            out["first_s"] = time.perf_counter() - t
            out["first_events"] = len(body.get("events", []))
            out["first_note"] = bool(body.get("notes"))
            out["note"] = (body.get("notes") or [""])[0]
            during: dict[str, list[float]] = {"/health": [], "/search": []}
            while body.get("notes") and time.perf_counter() - started < limit_s:
                for route, params in (("/health", {}), ("/search", {"query": "timeout"})):
                    t = time.perf_counter()
                    http.get(route, params=params)
                    during[route].append(time.perf_counter() - t)
                time.sleep(poll_s)
                body = http.get("/semantic", params={"query": QUERY}).json()
            out["covered_s"] = time.perf_counter() - started if not body.get("notes") else None
            out["during_ms"] = {r: round(1000 * statistics.median(v), 1) for r, v in during.items() if v}
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--src", type=Path, action="append", help="source trees to compare (default: this one)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--work", type=Path, help="where the homes go (kept: the import is reused)")
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--limit", type=float, default=600.0, help="give up on full coverage after this")
    args = parser.parse_args()
    srcs = args.src or [ROOT]
    work = args.work or Path(tempfile.mkdtemp(prefix="urchin-wall-"))
    base = imported(args.journal, work, srcs[0])
    results: dict[Path, list[dict[str, Any]]] = {s: [] for s in srcs}
    for i in range(args.runs):
        for src in srcs:
            r = one_run(src, base, work, args.poll, args.limit)
            results[src].append(r)
            print(f"run {i + 1} {src}: {orjson.dumps(r).decode()}", flush=True)
    for src, runs in results.items():
        def med(key: str, runs: list[dict[str, Any]] = runs) -> float | None:
            values = [r[key] for r in runs if r.get(key) is not None]
            return round(statistics.median(values), 2) if values else None
        print(f"{src}: start to /health {med('health_s')} s; first /semantic {med('first_s')} s "
              f"(a note: {runs[0]['first_note']}, {runs[0]['first_events']} events); whole journal covered "
              f"{med('covered_s')} s after start; during the build {runs[0].get('during_ms')}")


if __name__ == "__main__":
    main()
