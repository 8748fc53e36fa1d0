"""Two running daemons, one `/semantic` A/B: the same (id, score) lists per cell, then per cell the p50
of the wall time the client sees and of the daemon's CPU for the request, alternating A and B.

    python bench/bench_semantic_ab.py HOME_A HOME_B [--repeat 21] [--route /semantic]

Each home has a daemon running (`urchin serve`, e.g. one from the base commit's code and one from the
branch's, each on its own copy of the views with the journal hard-linked). Cells are bench_hot_search's
queries x windows, limit 20. CPU is the sum over the daemon's threads of `/proc/<pid>/task/*/schedstat`
(nanoseconds on a CPU) around each request: on a loaded shared machine it is the steadier figure, the
wall time there being mostly run-queue wait (Linux only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hot_search import QUERIES, WINDOWS  # noqa: E402

Cell = tuple[str, int]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("homes", nargs=2, type=Path, help="the homes of daemon A and daemon B")
    parser.add_argument("--repeat", type=int, default=21, help="requests per cell and daemon")
    parser.add_argument("--route", default="/semantic")
    args = parser.parse_args()
    daemons = [_daemon(home) for home in args.homes]
    cells = [(q, h) for q in QUERIES for h in WINDOWS]
    differ = [cell for cell in cells if len({_ranking(c, args.route, cell) for _, c in daemons}) > 1]
    print(f"rankings identical: {not differ}" + (f" (differ: {differ})" if differ else ""))
    wall: dict[Cell, tuple[list[float], list[float]]] = {cell: ([], []) for cell in cells}
    cpu: dict[Cell, tuple[list[float], list[float]]] = {cell: ([], []) for cell in cells}
    for r in range(args.repeat):
        for q, h in cells:
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                pid, client = daemons[i]
                before, started = _cpu_s(pid), time.perf_counter()
                client.get(args.route, params={"query": q, "hours": h, "limit": 20}).raise_for_status()
                wall[(q, h)][i].append((time.perf_counter() - started) * 1000)
                cpu[(q, h)][i].append((_cpu_s(pid) - before) * 1000)
    print(f"{'query':<20} {'hours':>5} {'A p50':>7} {'B p50':>7} {'B/A':>5} {'A cpu':>7} {'B cpu':>7} {'B/A':>5}")
    rows = []
    for cell in cells:
        w = [statistics.median(x) for x in wall[cell]]
        c = [statistics.median(x) for x in cpu[cell]]
        rows.append((w, c))
        print(f"{cell[0]:<20} {cell[1]:>5} {w[0]:7.2f} {w[1]:7.2f} {w[1] / w[0]:5.2f} {c[0]:7.2f} {c[1]:7.2f} "
              f"{c[1] / c[0]:5.2f}")
    for name, k in (("wall p50", 0), ("CPU", 1)):
        a, b = (statistics.median(row[k][i] for row in rows) for i in (0, 1))
        ratio = statistics.median(row[k][1] / row[k][0] for row in rows)
        worst = [max(row[k][i] for row in rows) for i in (0, 1)]
        print(f"{name}: median cell A {a:.2f} ms, B {b:.2f} ms (B/A {b / a:.3f}), median of per-cell ratios "
              f"{ratio:.3f}; worst cell A {worst[0]:.2f} ms, B {worst[1]:.2f} ms")
    print(f"load average {os.getloadavg()[0]:.2f}")


def _daemon(home: Path) -> tuple[int, httpx.Client]:
    info = orjson.loads((home / "daemon.json").read_bytes())
    token = (home / "token").read_text().strip()
    return info["pid"], httpx.Client(base_url=info["address"], headers={"authorization": f"Bearer {token}"},
                                     timeout=600, trust_env=False)


def _ranking(client: httpx.Client, route: str, cell: Cell) -> tuple[tuple[str, float], ...]:
    answer = client.get(route, params={"query": cell[0], "hours": cell[1], "limit": 20}).json()
    return tuple((e["id"], e["score"]) for e in answer["events"])


def _cpu_s(pid: int) -> float:
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
                total += int(handle.read().split()[0])
        except OSError:
            pass      # a thread that ended meanwhile
    return total / 1e9


if __name__ == "__main__":
    main()
