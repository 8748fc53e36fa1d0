"""Token-cosine's pruning (urchin/search/cosine_prune.py) of two commits in one process: `Memory.semantic`
on a saved home, each call alternating between a base commit's module and this tree's (A B B A ...), the
CPU time of each (user + sys) and the postings each read, and a check that they return the same events
and scores in every cell.

    python bench/bench_prune_ab.py HOME [--base REV] [--base-settings K=V,...] [--repeat 5] [--wide]
                                   [--locomo FILE] [--end-ms MS] [--reach | --absent] [--settings K=V,...]

The home holds `journal/events.jsonl` and its saved token-cosine index (bench_semantic_scale.py). The
base's module is `git show REV:urchin/search/cosine_prune.py`, loaded beside this tree's (it must import
what this tree has); the index and every other module are shared (each side makes block maxima of its
own, with its own settings), so the two differ only by the ranking loop and its cost settings, and
alternating per call puts them under the same load. Cells: bench_hot_search's
queries x windows, limit 20; `--wide` adds LoCoMo questions (`--locomo`), single common words, absent
words, limits 5/20/100; `--reach` instead questions with a word no event holds (LoCoMo's, `--locomo`, names,
typos: none of their rows holds every word) over 24 h, 7 d, 90 d, limits 5/20/100; `--absent` bench_scale's row of
such questions (its 12 cells, limit 20) and their median. `--end-ms`: the windows
end there (the journal's end), not now. `--base-settings`:
cost settings A ranks with (e.g. the base's `block=256`); each side keeps block maxima of its own.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hot_search import QUERIES, WINDOWS  # noqa: E402
from bench_scale import ABSENT_QUESTIONS  # noqa: E402

import urchin.search.cosine as cosine  # noqa: E402
import urchin.search.cosine_prune as this  # noqa: E402
from urchin.config import Settings  # noqa: E402
from urchin.facade import Memory  # noqa: E402
from urchin.search.cosine_settings import RankingSettings  # noqa: E402
from urchin.search.terms import tokenize  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
COMMON = ("the", "error", "test", "file", "function", "build", "deploy", "cache", "database", "fix")
ABSENT = ("qqqzzzx", "xylophone", "zebrafishlantern")
Cell = tuple[str, int, int]
# questions with a word no event of gen_journal's holds: names, typos, words of another world
REACH = ("What did Priya decide about the database migration?", "why did Zanzibar fail the deploy",
         "databse migraton rollback", "conection pool retry", "retyr budget for the cache",
         "timeout erorr in the build", "Is Tim's fix for the flaky test merged?", "kubernetes helm chart timeout",
         "what books has Tim read", "the quokka cache", "Ramanujan's retry budget", "deploy on Thursdya")


def base_module(rev: str) -> ModuleType:
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:urchin/search/cosine_prune.py"],
                            check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("urchin.search.cosine_prune_base", f.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module


def cells(wide: bool, locomo: Path | None, reach: set[str] | None = None, absent: bool = False) -> list[Cell]:
    """`reach`: the index's vocabulary, for questions with a word it lacks."""
    if absent:
        return [(q, h, 20) for q in ABSENT_QUESTIONS for h in WINDOWS]
    if reach is not None:
        asked = [qa["question"] for conv in json.loads(locomo.read_bytes()) for qa in conv["qa"]] if locomo else []
        lacking = [q for q in (*REACH, *asked) if not set(tokenize(q)) <= reach][:60]
        return [(q, h, n) for q in lacking for h in (24, 168, 2160) for n in (5, 20, 100)]
    if not wide:
        return [(q, h, 20) for q in QUERIES for h in WINDOWS]
    questions = [qa["question"] for conv in json.loads(locomo.read_bytes()) for qa in conv["qa"][:8]] if locomo \
        else []
    return [(q, h, n) for q in (*QUERIES, *questions, *COMMON, *ABSENT) for h in (24, 168, 2160) for n in (5, 20, 100)]


def _with(settings: RankingSettings, pairs: str) -> RankingSettings:
    return replace(settings, **{k: int(v) for k, v in (kv.split("=") for kv in pairs.split(",") if kv)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--base", default="HEAD~1", help="the commit whose cosine_prune.py is A")
    parser.add_argument("--repeat", type=int, default=5, help="calls per cell and side")
    parser.add_argument("--wide", action="store_true")
    parser.add_argument("--locomo", type=Path, default=None, help="locomo-dev.json, for --wide")
    parser.add_argument("--end-ms", type=int, default=None)
    parser.add_argument("--reach", action="store_true", help="questions with a word no event holds")
    parser.add_argument("--absent", action="store_true", help="bench_scale's row of such questions")
    parser.add_argument("--base-settings", default="", help="cost settings of A, e.g. first_blocks=12")
    parser.add_argument("--settings", default="", help="cost settings of B (this tree's defaults else)")
    args = parser.parse_args()
    sides = (base_module(args.base), this)
    now = datetime.fromtimestamp(args.end_ms / 1000, tz=UTC) if args.end_ms else None
    memory = Memory(Settings.resolve(args.home))
    memory.semantic("warm up", hours=1e6, limit=5)
    index = memory.cosine_view().index
    own = _with(index.settings, args.settings)
    theirs = _with(index.settings, args.base_settings)
    todo = cells(args.wide, args.locomo, set(index._vocab) if args.reach else None, args.absent)
    print(f"{args.home}: {len(index):,} events, {len(todo)} cells, A = {args.base}, B = this tree")
    rows, differ = [], []
    bounds: list[this.Bounds | None] = [None, None]    # each side makes its own
    for query, hours, limit in todo:
        cpu: tuple[list[float], list[float]] = ([], [])
        hits: dict[int, list[tuple[str, float]]] = {}
        read = [0, 0]
        for r in range(2 * args.repeat + 2):
            i = (r + r // 2) % 2
            cosine.cosine_prune = sides[i]      # type: ignore[assignment]
            index._settings = (theirs, own)[i]  # not `settings =`: that drops the block maxima
            index._bounds = bounds[i]           # each side's own (their blocks may differ)
            index.postings_read = 0
            started = time.process_time()
            result = memory.semantic(query, hours=hours, limit=limit, now=now)
            if r >= 2:      # one of each first: the terms' maxima are made by the first query
                cpu[i].append((time.process_time() - started) * 1000)
            hits[i], read[i], bounds[i] = [(h.event.id, h.score) for h in result.hits], index.postings_read, \
                index._bounds
        cosine.cosine_prune, index._settings, index._bounds = this, own, bounds[1]
        if hits[0] != hits[1]:
            differ.append((query, hours, limit))
        rows.append((query, hours, limit, statistics.median(cpu[0]), statistics.median(cpu[1]), *read))
    print(f"rankings identical: {not differ}" + (f" (differ: {differ})" if differ else ""))
    print(f"{'query':<40} {'hours':>5} {'limit':>5} {'A cpu':>7} {'B cpu':>7} {'B/A':>5} {'A read':>9} {'B read':>9}")
    for query, hours, limit, a, b, ra, rb in sorted(rows, key=lambda row: -row[3])[:20 if len(rows) > 30 else None]:
        print(f"{query[:40]:<40} {hours:>5} {limit:>5} {a:7.2f} {b:7.2f} {b / a:5.2f} {ra:>9,} {rb:>9,}")
    a_cpu, b_cpu = [row[3] for row in rows], [row[4] for row in rows]
    print(f"CPU: median cell A {statistics.median(a_cpu):.2f} ms, B {statistics.median(b_cpu):.2f} ms, median of "
          f"per-cell ratios {statistics.median(b / a for a, b in zip(a_cpu, b_cpu, strict=True)):.3f}; worst cell "
          f"A {max(a_cpu):.2f} ms, B {max(b_cpu):.2f} ms; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
