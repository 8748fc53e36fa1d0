"""Substring search vs ripgrep over the same journal: cold CLI (whole process), hot p50, index build.

`python bench/bench_search.py --events 1000000` generates the journal if needed (bench/data/),
builds the block index from scratch (timed), then times `python -m urchin search` against
`rg -i -F -c` for a rare, a common and an absent term, interleaved, and prints medians and ratios.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from gen_journal import ABSENT_TERM, COMMON_TERM, DATA, RARE_TERM, generate  # noqa: E402

from urchin.journal import Journal  # noqa: E402
from urchin.search.query import Filters  # noqa: E402
from urchin.search.substring import SubstringSearcher  # noqa: E402

TERMS = (("rare", RARE_TERM.lower()), ("common", COMMON_TERM), ("absent", ABSENT_TERM))
WINDOWS = (("all 90d", 24.0 * 92), ("default 168h", 168.0))


def find_rg() -> str:
    """ripgrep 14.1.0 from the PyPI wheel (dev extras) sits next to the interpreter."""
    here = Path(sys.executable).parent / "rg"
    found = str(here) if here.exists() else shutil.which("rg")
    if not found:
        sys.exit("rg not found: pip install ripgrep==14.1.0 (dev extras)")
    return found


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user+sys) of one whole process."""
    started = time.perf_counter()
    # cwd: `python -m` puts the current folder first on sys.path; time this checkout's urchin
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode not in (0, 1) or (err and b"error" in err):
        sys.exit(f"{cmd}: exit {proc.returncode}: {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def paired(a: list[str], b: list[str], env: dict[str, str], runs: int) -> tuple[list[float], ...]:
    """Run a and b alternately (same noise for both); returns walls and cpus of each."""
    run(a, env), run(b, env)  # warm the page cache and the index
    wa, ca, wb, cb = [], [], [], []
    for _ in range(runs):
        w, c = run(a, env)
        wa.append(w), ca.append(c)
        w, c = run(b, env)
        wb.append(w), cb.append(c)
    return wa, ca, wb, cb


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command (median)")
    parser.add_argument("--journal", type=Path, default=None, help="use this journal instead of generating one")
    parser.add_argument("--keep-index", action="store_true", help="do not rebuild the index first")
    args = parser.parse_args(argv)
    journal_path = args.journal or DATA / f"journal-{args.events}.jsonl"
    if not journal_path.exists():
        print(f"generating {journal_path} ...", flush=True)
        generate(args.events, journal_path)
    size = journal_path.stat().st_size
    rg = find_rg()
    # an installed package has its bytecode compiled (pip does it); a checkout under
    # PYTHONDONTWRITEBYTECODE would recompile every module on every run
    compileall.compile_dir(str(REPO / "urchin"), quiet=1)
    home = Path(tempfile.mkdtemp(prefix="urchin-bench-"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home),
           "URCHIN_EVENT_JOURNAL_PATH": str(journal_path)}
    print(f"journal {journal_path} ({size / 1e6:.0f} MB); python {sys.version.split()[0]}; rg {rg}; "
          f"{os.cpu_count()} cpus; load {os.getloadavg()[0]:.1f}")

    journal = Journal(journal_path)
    searcher = SubstringSearcher(journal)
    if not args.keep_index:
        shutil.rmtree(searcher.index.dir, ignore_errors=True)
    report = searcher.catch_up()
    index_mb = sum(p.stat().st_size for p in searcher.index.dir.iterdir()) / 1e6
    if report.bytes:
        print(f"index build: {report.seconds:.1f}s for {report.events} events "
              f"({report.events / report.seconds:,.0f} events/s, {report.mb_per_s:.0f} MB/s), "
              f"{report.blocks} blocks, index {index_mb:.0f} MB")

    py = [sys.executable]
    base_w, _, help_w, _ = paired(py + ["-c", "pass"], py + ["-m", "urchin", "--help"], env, args.runs)
    print(f"fixed costs: python -c pass {ms(base_w)} ms, python -m urchin --help {ms(help_w)} ms")
    print(f"\ncold, whole process, median of {args.runs} (wall ms; cpu ms in brackets)")
    print(f"{'term':8} {'window':13} {'rg':>7} {'urchin':>7}  ratio   {'rg cpu':>7} {'urchin cpu':>10}")
    ratios = []
    for name, term in TERMS:
        for label, hours in WINDOWS:
            ours = py + ["-m", "urchin", "search", term, "--hours", str(hours), "--limit", "20"]
            theirs = [rg, "-i", "-F", "-c", term, str(journal_path)]
            rw, rc, uw, uc = paired(theirs, ours, env, args.runs)
            ratio = statistics.median(uw) / statistics.median(rw)
            ratios.append(ratio)
            print(f"{name:8} {label:13} {ms(rw)} {ms(uw)}  {ratio:5.2f}x  [{ms(rc)}] [{ms(uc):>9}]", flush=True)
    print(f"worst cold ratio {max(ratios):.2f}x (target <= 1.5x)")

    print("\nhot, one long-lived searcher, p50 of 21 (ms); rg median from above for scale")
    now = int(time.time() * 1000)
    for name, term in TERMS:
        for label, hours in WINDOWS:
            since = now - int(hours * 3_600_000)
            times = []
            hits = 0
            for _ in range(21):
                started = time.perf_counter()
                hits = len(searcher.search(term, since_ms=since, limit=20, filters=Filters()))
                times.append(time.perf_counter() - started)
            print(f"{name:8} {label:13} p50 {ms(times)} ms  p95 {sorted(times)[19] * 1000:6.1f} ms  hits {hits}")
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
