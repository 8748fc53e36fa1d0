"""The viewer's timeline at scale: server time of `Memory.timeline` pages over a 1M-event journal.

Makes the journal once with `bench/gen_journal.py` (cached), then times what `GET /timeline` does
inside the daemon: the first page (newest 50), the next pages (walking back with the `older`
cursor), a page deep in the file, a filtered first page, an empty live poll (`after` the head), and
the activity chart (first call counts the whole journal once; later calls only what was appended).
Targets: first page p50 <= 100 ms, next page p50 <= 50 ms.

    python bench/bench_viewer.py [--events 1000000] [--journal PATH] [--rounds 50]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from urchin.config import Settings  # noqa: E402
from urchin.facade import Memory  # noqa: E402


def timed(call: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def report(name: str, samples: list[float], target: float | None = None) -> None:
    samples = sorted(samples)
    p50 = statistics.median(samples)
    p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    verdict = "" if target is None else (f"  (target <= {target:g} ms: {'met' if p50 <= target else 'NOT met'})")
    print(f"{name:<42} p50 {p50:8.2f} ms   p95 {p95:8.2f} ms   n={len(samples)}{verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--journal", type=Path, default=None, help="default: bench/data/journal-N.jsonl")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args(argv)
    journal = args.journal or REPO / "bench" / "data" / f"journal-{args.events}.jsonl"
    if not journal.exists():
        print(f"generating {args.events} events into {journal} ...", flush=True)
        subprocess.run([sys.executable, str(REPO / "bench" / "gen_journal.py"), str(args.events), "--out",
                        str(journal)], check=True)
    home = Path(tempfile.mkdtemp(prefix="urchin-bench-viewer-"))
    memory = Memory(Settings.resolve(home, journal_path=journal.absolute()))
    size = journal.stat().st_size
    print(f"journal: {journal} ({size / 1e6:.0f} MB)")

    report("first page (50 newest)", timed(lambda: memory.timeline(limit=50), args.rounds), 100)
    cursor = memory.timeline(limit=50).older
    walk: list[float] = []
    for _ in range(max(args.rounds, 200)):
        start = time.perf_counter()
        page = memory.timeline(before=cursor, limit=50)
        walk.append((time.perf_counter() - start) * 1000)
        cursor = page.older
    report("next page (walking back 50 at a time)", walk, 50)
    middle = f"g0.{size // 2}"
    report("a page in the middle of the journal", timed(lambda: memory.timeline(before=middle, limit=50),
                                                        args.rounds), 50)
    report("first page filtered (source=git)", timed(lambda: memory.timeline(limit=50, source="git"),
                                                     args.rounds))
    head = memory.timeline(limit=1).newer
    report("live poll, nothing new (after=head)", timed(lambda: memory.timeline(after=head), args.rounds))
    report("activity, first call (counts the journal)", timed(lambda: memory.activity(days=30), 1))
    report("activity, later calls", timed(lambda: memory.activity(days=30), args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
