"""The first-start wall: the first `/semantic` after `urchin import` of a big journal, on a fresh daemon.

    python bench/bench_wall.py --journal /tmp/scale/journal-1m.jsonl [--src TREE ...] [--runs 2]
    python bench/bench_wall.py --home HOME --src BASE --src TREE --runs 5 --no-cover

Imports the journal once into a fresh home (`urchin import`; or takes `--home`, one imported before),
then per run and per source tree (`--src`, alternating, the order reversed every other run: e.g. main's
checkout and this one) copies that home without any saved view (the journal hard-linked, as the import
left it: its sidecars stay valid), starts `urchin serve --no-index --no-mcp` on it and measures: start
to `/health`, the first `/semantic` (bench_scale's question over 90 days) and whether it said it left
events out, the daemon's CPU until `/health` and during that first answer (a figure that holds on a
loaded machine, where the wall does not), `/health` and `/search` latencies during the build, and the
time from start until `/semantic` answers with no note (the whole journal covered; not with
`--no-cover`). Medians over runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
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
QUERY = "how do we retry the connection pool"      # bench_scale's FIRST_QUESTION
PARAMS = {"query": QUERY, "hours": 2160, "limit": 20}
_TICK = os.sysconf("SC_CLK_TCK")


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


def _cpu_s(pid: int) -> float:
    """The process's own CPU so far, all its threads (its children's not)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _copy(imported_home: Path, home: Path) -> None:
    """The home without its saved views; the journal hard-linked (a copy is another inode, which makes
    the daemon rebuild the id index's sidecar: not what follows an import)."""
    shutil.rmtree(home, ignore_errors=True)
    journal = Path("journal") / "events.jsonl"

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = {n for n in names if n in ("index", "daemon.json") or n.endswith(".lock")}
        return skip | ({journal.name} if Path(folder) == imported_home / journal.parent else set())

    shutil.copytree(imported_home, home, ignore=ignore)
    os.link(imported_home / journal, home / journal)


def one_run(src: Path, imported_home: Path, work: Path, poll_s: float, limit_s: float,
            cover: bool = True) -> dict[str, Any]:
    home = work / "run"
    _copy(imported_home, home)
    log = (work / "daemon.log").open("ab")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--no-index", "--no-mcp"],
                            env=_env(src, home), stdout=log, stderr=log, cwd=src,
                            start_new_session=True)   # -m: the cwd comes first
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
            out["cpu_health_s"] = cpu = _cpu_s(proc.pid)
            t = time.perf_counter()
            body = http.get("/semantic", params=PARAMS).json()
            out["first_s"] = time.perf_counter() - t
            out["cpu_first_s"] = round(_cpu_s(proc.pid) - cpu, 2)
            out["first_events"] = len(body.get("events", []))
            out["first_note"] = bool(body.get("notes"))
            out["note"] = (body.get("notes") or [""])[0]
            during: dict[str, list[float]] = {"/health": [], "/search": []}
            while cover and body.get("notes") and time.perf_counter() - started < limit_s:
                for route, params in (("/health", {}), ("/search", {"query": "timeout"})):
                    t = time.perf_counter()
                    http.get(route, params=params)
                    during[route].append(time.perf_counter() - t)
                time.sleep(poll_s)
                body = http.get("/semantic", params=PARAMS).json()
            out["covered_s"] = time.perf_counter() - started if not body.get("notes") else None
            out["during_ms"] = {r: round(1000 * statistics.median(v), 1) for r, v in during.items() if v}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # with its build's workers; its last save is not measured
        proc.wait(30)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--journal", type=Path, help="imported once into WORK/imported (or give --home)")
    parser.add_argument("--home", type=Path, help="a home imported before (its journal is hard-linked, never written)")
    parser.add_argument("--src", type=Path, action="append", help="source trees to compare (default: this one)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--work", type=Path, help="where the homes go (kept: the import is reused)")
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--limit", type=float, default=600.0, help="give up on full coverage after this")
    parser.add_argument("--no-cover", action="store_true", help="stop after the first /semantic")
    args = parser.parse_args()
    if (args.journal is None) == (args.home is None):
        parser.error("--journal or --home: one of them")
    srcs = [s.resolve() for s in args.src or [ROOT]]
    work = (args.work or Path(tempfile.mkdtemp(prefix="urchin-wall-"))).resolve()
    base = args.home.resolve() if args.home else imported(args.journal, work, srcs[0])
    results: dict[Path, list[dict[str, Any]]] = {s: [] for s in srcs}
    for i in range(args.runs):
        for src in srcs if i % 2 == 0 else srcs[::-1]:
            r = one_run(src, base, work, args.poll, args.limit, cover=not args.no_cover)
            results[src].append(r)
            print(f"run {i + 1} {src}: {orjson.dumps(r).decode()}", flush=True)
    for src, runs in results.items():
        def med(key: str, runs: list[dict[str, Any]] = runs) -> float | None:
            values = [r[key] for r in runs if r.get(key) is not None]
            return round(statistics.median(values), 2) if values else None
        print(f"{src}: start to /health {med('health_s')} s (daemon CPU {med('cpu_health_s')} s); first /semantic "
              f"{med('first_s')} s (daemon CPU {med('cpu_first_s')} s) "
              f"(a note: {runs[0]['first_note']}, {runs[0]['first_events']} events); whole journal covered "
              f"{med('covered_s')} s after start; during the build {runs[0].get('during_ms')}")


if __name__ == "__main__":
    main()
