"""`urchin import` throughput (target >= 50,000 events/s), the index catch-up after it, and a profile.

`python bench/bench_import.py --events 1000000` imports the generated journal into a fresh home
with `python -m urchin import` (whole process), next to a floor peer measured in the same run
(a bare Python loop: orjson parse + serialise + one write, no validation or dedupe), then times
the substring index build that the first search would otherwise pay, and with --profile prints
where the import's time goes (cProfile of an in-process import of up to 200,000 events).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
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

from gen_journal import DATA, generate  # noqa: E402

FLOOR = """
import os, sys, orjson
out = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
batch = []
with open(sys.argv[1], 'rb') as handle:
    for line in handle:
        batch.append(orjson.dumps(orjson.loads(line)))
        if len(batch) >= 4096:
            os.write(out, b"\\n".join(batch) + b"\\n"); batch.clear()
if batch:
    os.write(out, b"\\n".join(batch) + b"\\n")
os.fsync(out)
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user+sys) and output of one whole process (output is small)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{cmd}: exit {proc.returncode}: {out.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime, out.decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="import runs (median)")
    parser.add_argument("--journal", type=Path, default=None, help="import this JSONL instead of a generated one")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of an in-process import")
    args = parser.parse_args(argv)
    source = args.journal or DATA / f"journal-{args.events}.jsonl"
    if not source.exists():
        print(f"generating {source} ...", flush=True)
        generate(args.events, source)
    events = sum(1 for _ in source.open("rb"))
    print(f"input {source}: {events} events, {source.stat().st_size / 1e6:.0f} MB; {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}")
    DATA.mkdir(parents=True, exist_ok=True)
    imports, floors, cpus = [], [], []
    home = Path(tempfile.mkdtemp(prefix="import-home-", dir=DATA))
    for _ in range(args.runs):
        shutil.rmtree(home, ignore_errors=True)
        env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home)}
        env.pop("URCHIN_EVENT_JOURNAL_PATH", None)
        wall, cpu, out = timed([sys.executable, "-m", "urchin", "import", str(source)], env)
        cpus.append(cpu)
        if f"appended {events}," not in out:
            sys.exit(f"unexpected import result: {out}")
        imports.append(wall)
        floor_out = home / "floor.jsonl"
        floor_out.unlink(missing_ok=True)
        floors.append(timed([sys.executable, "-c", FLOOR, str(source), str(floor_out)], env)[0])
        floor_out.unlink(missing_ok=True)
        print(f"  run: urchin import {wall:.2f}s wall, {cpu:.2f}s cpu ({events / wall:,.0f} events/s); "
              f"floor {floors[-1]:.2f}s", flush=True)
    wall, floor = statistics.median(imports), statistics.median(floors)
    cpu = statistics.median(cpus)
    print(f"urchin import: median {wall:.2f}s = {events / wall:,.0f} events/s (target >= 50,000); "
          f"cpu {cpu:.2f}s = {events / cpu:,.0f} events per cpu-second; "
          f"floor peer {floor:.2f}s = {events / floor:,.0f} events/s; ratio {wall / floor:.2f}x")

    from urchin.config import Settings
    from urchin.facade import Memory

    memory = Memory(Settings.resolve(home))
    shutil.rmtree(memory.substring.index.dir, ignore_errors=True)
    report = memory.substring.catch_up()
    print(f"index build of the same journal in one go (`urchin import` does this at its end): "
          f"{report.seconds:.1f}s, "
          f"{report.events / max(report.seconds, 1e-9):,.0f} events/s, {report.mb_per_s:.0f} MB/s, "
          f"{report.blocks} blocks")

    if args.profile:
        sample = min(events, 200_000)
        shutil.rmtree(home, ignore_errors=True)
        memory = Memory(Settings.resolve(home))
        with source.open("rb") as handle:
            lines = [next(handle) for _ in range(sample)]
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.runcall(memory.import_lines, lines)
        elapsed = time.perf_counter() - started
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(22)
        print(f"\nprofile of an in-process import of {sample} events ({elapsed:.1f}s under the profiler):")
        print("\n".join(out.getvalue().splitlines()[4:]))
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
