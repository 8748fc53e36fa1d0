"""`urchin context` beside a daemon, A/B between two checkouts' daemons on one home (issue 37).

    python bench/bench_context_ab.py HOME --base /tmp/base-context [--rounds 2] [--repeat 9] [--no-index]

For each round and each tree (A = `--base`, B = this checkout, alternating), starts that tree's
`urchin serve --no-collect` (with `--no-index` when asked) on HOME, asks `POST /context` once to warm
it, then times `--repeat` times: `POST /context` from this process (wall), the CPU the daemon and its
PostgreSQL spent on those calls (psutil: the daemon's process tree and the server's processes), and
`urchin context QUESTION` as a whole process (wall, CPU by wait4). HOME keeps its journal and index:
the daemon is stopped with SIGTERM and its PostgreSQL stays on disk.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from bench_daemon_start import spawn, stop  # noqa: E402
from bench_startup import timed  # noqa: E402
from scale_parts import client  # noqa: E402

QUESTIONS = ("why did the retry budget change for the connection pool",   # bench_scale's
             "how do we deploy the server config", "what was the Zanzibar-Quokka error about")


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def _processes(daemon: int, home: Path) -> list[int]:
    """The daemon, its children, and the embedded server's processes (their data under HOME/pg)."""
    pids = [daemon, *(c.pid for c in psutil.Process(daemon).children(recursive=True))]
    # as root the data lives where HOME/pg links to (/var/lib/urchin/pg/...): the server is named by that
    folders = {str(home / "pg"), str((home / "pg").resolve())}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if any(folder in part for part in proc.info["cmdline"] or [] for folder in folders):
            pids += [proc.pid, *(c.pid for c in proc.children(recursive=True))]
    return sorted(set(pids))


def one(tree: Path, home: Path, flags: tuple[str, ...], repeat: int) -> dict[str, Any]:
    proc, _, _ = spawn(tree, home, flags)
    try:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "URCHIN_HOME": str(home)}
        out: dict[str, Any] = {}
        with client(home) as c:
            for q in QUESTIONS:
                c.post("/context", json={"query": q}).raise_for_status()   # connections, caches
            pids = _processes(proc.pid, home)
            for q in QUESTIONS:
                walls, before = [], _cpu(pids)
                for _ in range(repeat):
                    started = time.perf_counter()
                    c.post("/context", json={"query": q}).raise_for_status()
                    walls.append((time.perf_counter() - started) * 1000)
                out[q] = {"http_ms": statistics.median(walls), "server_cpu_ms": (_cpu(pids) - before) / repeat * 1000}
        runs = [timed([sys.executable, "-m", "urchin", "context", QUESTIONS[0]], env) for _ in range(repeat)]
        out["process"] = {"wall_ms": statistics.median(r[0] for r in runs),
                          "cpu_ms": statistics.median(r[1] for r in runs)}
        return out
    finally:
        stop(proc)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--base", type=Path, required=True, help="the A checkout")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--no-index", action="store_true", help="the daemons run with --no-index")
    args = parser.parse_args(argv)
    flags = ("--no-collect", "--no-index") if args.no_index else ("--no-collect",)
    results: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for r in range(args.rounds):
        for name, tree in (("A", args.base), ("B", REPO)):
            results[name].append(one(tree, args.home, flags, args.repeat))
            load = psutil.getloadavg()[0]
            print(f"round {r + 1} {name}: load {load:.1f} " + "; ".join(
                f"{q[:24]}: {v['http_ms']:.1f} ms, server CPU {v['server_cpu_ms']:.1f} ms"
                for q, v in results[name][-1].items() if q != "process")
                + f"; urchin context {results[name][-1]['process']['wall_ms']:.0f} ms "
                f"(CPU {results[name][-1]['process']['cpu_ms']:.0f})", flush=True)
    print(f"{'median over rounds':<34} {'A':>10} {'B':>10} {'B/A':>6}")
    for q in QUESTIONS:
        for field in ("http_ms", "server_cpu_ms"):
            a, b = (statistics.median(x[q][field] for x in results[n]) for n in "AB")
            print(f"{q[:22] + ' ' + field:<34} {a:10.1f} {b:10.1f} {b / a:6.2f}")
    for field in ("wall_ms", "cpu_ms"):
        a, b = (statistics.median(x["process"][field] for x in results[n]) for n in "AB")
        print(f"{'urchin context ' + field:<34} {a:10.1f} {b:10.1f} {b / a:6.2f}")


if __name__ == "__main__":
    main()
