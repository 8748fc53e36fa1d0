"""`urchin import` with worker processes vs the same import in one process, interleaved, same run.

    python bench/bench_import_parallel.py [--journal bench/data/journal-200k.jsonl] [--runs 3]

Both are whole processes over the same input into fresh homes; the one-process peer runs the same
code with another thread alive (urchin/facade/bulk.py then stays serial). The figure excludes the
substring index catch-up that `import` does at its end (timed separately: it is already parallel).
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

REPO = Path(__file__).resolve().parent.parent
CODE = """
import sys, time, threading
from urchin.config import Settings
from urchin.facade import Memory
if sys.argv[3] == "serial":
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
memory = Memory(Settings.resolve(sys.argv[1]))
from urchin.search.blockindex import CatchUp
memory.substring.catch_up = lambda *a, **k: CatchUp(0, 0, 0, False, 0.0)  # timed apart: already parallel
started = time.perf_counter()
with open(sys.argv[2], "rb") as handle:
    report = memory.import_lines(handle)
print(report.appended, report.workers, time.perf_counter() - started)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", type=Path, default=REPO / "bench" / "data" / "journal-200k.jsonl")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cpus; input {args.journal}")
    rates: dict[str, list[float]] = {"parallel": [], "serial": []}
    for _ in range(args.runs):
        for mode in ("parallel", "serial"):
            home = Path(tempfile.mkdtemp(prefix="imp-", dir=args.journal.parent))
            try:
                env = {**os.environ, "PYTHONPATH": str(REPO)}
                started = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", CODE, str(home / "home"), str(args.journal), mode],
                                     env=env, capture_output=True, text=True, check=True).stdout.split()
                wall = time.perf_counter() - started
                appended, workers, seconds = int(out[0]), int(out[1]), float(out[2])
                rates[mode].append(appended / seconds)
                print(f"  {mode:<8} workers={workers} {appended:,} events in {seconds:.2f}s "
                      f"({appended / seconds:,.0f}/s; process {wall:.2f}s)", flush=True)
            finally:
                shutil.rmtree(home, ignore_errors=True)
    par, ser = statistics.median(rates["parallel"]), statistics.median(rates["serial"])
    print(f"import: parallel median {par:,.0f} events/s (target >= 50,000); one process {ser:,.0f}/s; "
          f"ratio {par / ser:.2f}x; load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
