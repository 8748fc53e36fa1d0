"""Ranked search at scale, in process: `Memory.semantic` (what `/semantic` runs) on saved homes, the rows a
query reaches against the reference passes over every row of its window, alternating in one run.

    python bench/bench_semantic_scale.py HOME_1M HOME_3M [--repeat 9]

Each home holds `journal/events.jsonl` and its saved token-cosine index (a daemon leaves one, e.g. after
`bench/bench_hot_search.py --home HOME`). Times bench_hot_search's queries over 24 h, 168 h and 2160 h
(limit 20) both ways, checks they return the same events and scores, and prints per home the p50 of each
cell, the median over cells, and the ratios between the homes (the last over the first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hot_search import QUERIES, WINDOWS  # noqa: E402

from urchin.config import Settings  # noqa: E402
from urchin.facade import Memory  # noqa: E402

Cell = tuple[str, int]


def measure(home: Path, repeat: int) -> tuple[dict[Cell, float], dict[Cell, float], int]:
    memory = Memory(Settings.resolve(home))
    started = time.perf_counter()
    memory.semantic("warm up", hours=1e6, limit=5)
    view = memory.cosine_view()
    rows = len(view.index)
    print(f"{home}: {rows:,} events, index loaded in {time.perf_counter() - started:.1f} s "
          f"(from disk: {view.loaded_from_disk})")
    fast: dict[Cell, float] = {}
    slow: dict[Cell, float] = {}
    print(f"{'query':<20} {'hours':>6} {'hits':>5} {'reach p50':>10} {'passes p50':>11} {'x':>6}")
    for query in QUERIES:
        for hours in WINDOWS:
            times: dict[bool, list[float]] = {False: [], True: []}
            answers = {}
            for i in range(2 * repeat + 2):
                reference = bool(i % 2)
                view.index.reference = reference
                t = time.perf_counter()
                result = memory.semantic(query, hours=hours, limit=20)
                elapsed = (time.perf_counter() - t) * 1000
                if i >= 2:  # one of each to warm up
                    times[reference].append(elapsed)
                answers[reference] = [(h.event.id, h.score) for h in result.hits]
            view.index.reference = False
            if answers[False] != answers[True]:
                raise SystemExit(f"{query!r} {hours} h: the two ways differ")
            cell = (query, hours)
            fast[cell], slow[cell] = statistics.median(times[False]), statistics.median(times[True])
            print(f"{query:<20} {hours:>6} {len(answers[False]):>5} {fast[cell]:10.1f} {slow[cell]:11.1f} "
                  f"{slow[cell] / fast[cell]:6.1f}")
    print(f"median over cells: reach {statistics.median(fast.values()):.1f} ms, passes "
          f"{statistics.median(slow.values()):.1f} ms; worst cell: reach {max(fast.values()):.1f} ms, passes "
          f"{max(slow.values()):.1f} ms (load average {os.getloadavg()[0]:.2f})")
    return fast, slow, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("homes", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    runs = [measure(home, args.repeat) for home in args.homes]
    if len(runs) < 2:
        return
    (f1, s1, n1), (f2, s2, n2) = runs[0], runs[-1]
    print(f"--- {n2:,} / {n1:,} events")
    for label, a, b in (("reach", f1, f2), ("passes", s1, s2)):
        ratios = sorted(b[c] / a[c] for c in a)
        ma, mb = statistics.median(a.values()), statistics.median(b.values())
        print(f"{label:<7} median over cells {ma:6.1f} -> {mb:6.1f} ms (x{mb / ma:.2f}); per cell ratio median "
              f"x{statistics.median(ratios):.2f}, worst x{ratios[-1]:.2f}; worst cell {max(a.values()):.1f} -> "
              f"{max(b.values()):.1f} ms")
    for hours in WINDOWS:
        a = statistics.median(v for (_, h), v in f1.items() if h == hours)
        b = statistics.median(v for (_, h), v in f2.items() if h == hours)
        print(f"reach, {hours} h: median over queries {a:.1f} -> {b:.1f} ms (x{b / a:.2f})")


if __name__ == "__main__":
    main()
