"""Token-cosine's block pruning (urchin/search/cosine_prune.py) against reading every match, in process:
`Memory.semantic` (what `/semantic` runs) on saved homes, the two ways alternating per cell, CPU time and
the postings each read (`TokenCosineIndex.postings_read`), and a check that they return the same events
and scores.

    python bench/bench_prune.py HOME [HOME ...] [--repeat 5] [--hours 24,168,2160] [--min-postings N]

Each home holds `journal/events.jsonl` and its saved token-cosine index (see bench_semantic_scale.py).
CPU time (this process's, user + sys) is steadier than wall time on a loaded machine; postings read is a
work counter that load does not change. With two homes, prints the ratios of the last over the first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hot_search import QUERIES  # noqa: E402

from urchin.config import Settings  # noqa: E402
from urchin.facade import Memory  # noqa: E402

Cell = tuple[str, int]


def measure(home: Path, repeat: int, windows: list[int],
            min_postings: int | None = None) -> dict[Cell, dict[bool, tuple[float, int]]]:
    memory = Memory(Settings.resolve(home))
    memory.semantic("warm up", hours=1e6, limit=5)
    index = memory.cosine_view().index
    if min_postings is not None:
        index.settings = replace(index.settings, min_postings=min_postings)
    print(f"{home}: {len(index):,} events")
    print(f"{'query':<20} {'hours':>6} {'pruned cpu ms':>14} {'postings':>9} {'every match cpu ms':>19} "
          f"{'postings':>9}")
    out: dict[Cell, dict[bool, tuple[float, int]]] = {}
    for query in QUERIES:
        for hours in windows:
            cpu: dict[bool, list[float]] = {True: [], False: []}
            read: dict[bool, int] = {}
            answers = {}
            for i in range(2 * repeat + 2):
                prune = i % 2 == 0
                index.prune = prune
                started = time.process_time()
                result = memory.semantic(query, hours=hours, limit=20)
                if i >= 2:      # one of each first: the terms' maxima are made by the first query
                    cpu[prune].append((time.process_time() - started) * 1000)
                read[prune] = index.postings_read
                answers[prune] = [(h.event.id, h.score) for h in result.hits]
            index.prune = True
            if answers[True] != answers[False]:
                raise SystemExit(f"{query!r} {hours} h: the two ways differ")
            cell = out[(query, hours)] = {k: (statistics.median(cpu[k]), read[k]) for k in (True, False)}
            print(f"{query:<20} {hours:>6} {cell[True][0]:14.1f} {cell[True][1]:>9,} {cell[False][0]:19.1f} "
                  f"{cell[False][1]:>9,}")
    for prune, label in ((True, "pruned"), (False, "every match")):
        print(f"{label}: median over cells {statistics.median(c[prune][0] for c in out.values()):.1f} ms CPU, "
              f"worst {max(c[prune][0] for c in out.values()):.1f} ms")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("homes", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hours", default="24,168,2160")
    parser.add_argument("--min-postings", type=int, default=None, help="RankingSettings.min_postings for this run")
    args = parser.parse_args()
    windows = [int(h) for h in args.hours.split(",")]
    runs = [measure(home, args.repeat, windows, args.min_postings) for home in args.homes]
    if len(runs) < 2:
        return
    first, last = runs[0], runs[-1]
    print("--- last / first, per cell: CPU and postings, pruned (every match)")
    for cell in first:
        a, b = first[cell], last[cell]
        ratio = [b[k][0] / a[k][0] if a[k][0] else 0.0 for k in (True, False)]
        reads = [b[k][1] / a[k][1] if a[k][1] else 0.0 for k in (True, False)]
        print(f"{cell[0]:<20} {cell[1]:>6} cpu x{ratio[0]:.2f} (x{ratio[1]:.2f}) postings x{reads[0]:.2f} "
              f"(x{reads[1]:.2f})")


if __name__ == "__main__":
    main()
