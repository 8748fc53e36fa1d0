"""A first PostgreSQL feed in this process: CPU per event (this process + the server) and cores used.

    python bench/bench_feed_cpu.py JOURNAL [--label base] [--first]

`Feeder.run_once` on a fresh embedded PostgreSQL, as the daemon's index process feeds (the backfill
path: GIN indexes built at the end), without the daemon's own work or its idle-class scheduling, so an
A/B of two checkouts (`PYTHONPATH=<checkout>`, alternating) compares the feed alone. Prints the rows
phase and the GIN build apart: wall, CPU of this process and of the server (every backend, live and
reaped), and cores used (CPU / wall). `--first` puts this process's and the feeding backend's
scheduling groups (autogroup) at nice -20 for the run (root): on a machine shared with other work it
approximates a quiet one for the rows phase (the GIN build's second session is not raised).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_first_feed import _cpu as _server_cpu  # noqa: E402  (every server process, live and reaped)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("journal", type=Path)
    parser.add_argument("--label", default="")
    parser.add_argument("--first", action="store_true", help="raise this run's scheduling groups (root)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the home and its PostgreSQL live for the run (never beside the journal)")
    args = parser.parse_args()
    from urchin.hybrid.embedded import EmbeddedPostgres, running_pid
    from urchin.hybrid.feeder import Feeder, FeedReport
    from urchin.hybrid.postgres import PostgresIndex
    from urchin.journal import Journal

    folder = Path(tempfile.mkdtemp(prefix="bench-feed-cpu-", dir=args.workdir))
    try:
        path = folder / "journal" / "events.jsonl"
        path.parent.mkdir()
        try:
            os.link(args.journal, path)     # read only, never written
        except OSError:                      # another filesystem
            path.symlink_to(args.journal.resolve())
        lines = sum(1 for _ in args.journal.open("rb"))
        server = EmbeddedPostgres(folder / "pg", relocate_as_root=False)
        backend = PostgresIndex(server.url, owned=True)
        feeding = backend.conn.info.backend_pid       # (starts the server)
        pid = running_pid(folder / "pg") or 0
        if args.first:
            for target in {os.getpid(), feeding}:
                Path(f"/proc/{target}/autogroup").write_text("-20")
        feeder = Feeder(backend, Journal(path, "never"), "bench")
        marks: dict[str, tuple[float, float, float]] = {}
        end_bulk = feeder._end_bulk

        def timed_end_bulk(report: FeedReport) -> None:
            marks["rows"] = (time.perf_counter(), _own_cpu(), _server_cpu(pid))
            end_bulk(report)

        feeder._end_bulk = timed_end_bulk     # type: ignore[method-assign]
        load = os.getloadavg()[0]
        t0, p0, s0 = time.perf_counter(), _own_cpu(), _server_cpu(pid)
        report = feeder.run_once()
        t1, p1, s1 = time.perf_counter(), _own_cpu(), _server_cpu(pid)
        tr, pr, sr = marks.get("rows", (t1, p1, s1))
        import urchin

        code = str(Path(urchin.__file__).parent.parent)
        out: dict[str, Any] = {"label": args.label, "code": code, "events": lines, "fed": report.events,
                               "load": round(load, 1),
                               "wall_s": t1 - t0, "python_s": p1 - p0, "server_s": s1 - s0,
                               "rows_wall_s": tr - t0, "rows_python_s": pr - p0, "rows_server_s": sr - s0,
                               "gin_wall_s": t1 - tr, "gin_server_s": s1 - sr}
        backend.close()
        server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    n = out["events"]
    print(f"{args.label} ({out['code']}): {n:,} events, load {out['load']}; whole feed {out['wall_s']:.1f} s, "
          f"{n / out['wall_s']:,.0f}/s, "
          f"{(out['python_s'] + out['server_s']) / n * 1e6:.0f} us of CPU per event (Python "
          f"{out['python_s'] / n * 1e6:.0f}, server {out['server_s'] / n * 1e6:.0f}), "
          f"{(out['python_s'] + out['server_s']) / out['wall_s']:.2f} cores")
    print(f"  rows phase {out['rows_wall_s']:.1f} s, {n / out['rows_wall_s']:,.0f}/s, Python "
          f"{out['rows_python_s'] / n * 1e6:.0f} + server {out['rows_server_s'] / n * 1e6:.0f} us per event, "
          f"{(out['rows_python_s'] + out['rows_server_s']) / out['rows_wall_s']:.2f} cores; GIN build "
          f"{out['gin_wall_s']:.1f} s, server {out['gin_server_s']:.1f} s")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
