"""Token-cosine from a journal file: build, save, load, a cold `urchin semantic`, hot p50s.

    python bench/bench_cosine_cold.py [--events 1000000] [--journal PATH] [--workers 2] [--queries 50]

Without --journal it writes one (bench/gen_journal.py when present, else the Zipf text of
bench_cosine.py, with 2% of events backfilled out of time order) under a temporary URCHIN_HOME.
Peers measured in the same run: an in-process (1 worker) build and the Event-object path on a
prefix, and `python -m urchin --help` as the floor of any cold CLI call.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_cosine import queries, vocabulary  # noqa: E402

from urchin.config import Settings  # noqa: E402
from urchin.event import Event  # noqa: E402
from urchin.journal import Journal  # noqa: E402
from urchin.search.cosine import TokenCosineIndex  # noqa: E402
from urchin.search.query import Filters  # noqa: E402
from urchin.search.semantic import TokenCosineView  # noqa: E402


def write_journal(path: Path, n: int, seed: int, backfill: float = 0.02) -> None:
    """Zipf text in sessions of 40 over 180 days; `backfill` of events get an older timestamp."""
    rng = np.random.default_rng(seed)
    words = vocabulary(60_000, rng)
    cdf = np.cumsum(1.0 / np.arange(1, len(words) + 1, dtype=np.float64) ** 1.07)
    cdf /= cdf[-1]
    start = int(time.time() * 1000) - 180 * 86_400_000
    ts = start + np.sort(rng.integers(0, 180 * 86_400_000, n))
    late = rng.random(n) < backfill
    ts[late] -= rng.integers(0, 30 * 86_400_000, int(late.sum()))
    sources = ["claude", "codex", "shell", "git", "copilot", "gemini"]
    kinds = ["conversation", "tool_use", "command", "commit", "note", "decision"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for a in range(0, n, 50_000):
            b = min(n, a + 50_000)
            lengths = rng.integers(8, 60, b - a)
            ids = np.searchsorted(cdf, rng.random(int(lengths.sum())))
            pos, lines = 0, []
            for i in range(a, b):
                k = int(lengths[i - a])
                session = i // 40
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(ts[i]) // 1000))
                lines.append(orjson.dumps({
                    "id": f"e{i:08d}", "timestamp": f"{stamp}.{int(ts[i]) % 1000:03d}Z",
                    "source": sources[session % 6], "kind": kinds[i % 6],
                    "content": " ".join([words[j] for j in ids[pos:pos + k]]),
                    "workspace": f"ws{session % 20}", "session": f"s{session}"}))
                pos += k
            out.write(b"\n".join(lines) + b"\n")


def make_journal(path: Path, n: int, seed: int) -> None:
    try:
        import gen_journal  # the substring bench's generator, if merged
    except ImportError:
        write_journal(path, n, seed)
    else:
        gen_journal.generate(n, path, seed)


def timed(fn: object, qs: list[str]) -> tuple[float, float]:
    times = []
    for q in qs:
        t = time.perf_counter()
        fn(q)  # type: ignore[operator]
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def rss_mib() -> float:
    """Peak RSS since the last `reset_peak_rss` (VmHWM), in MiB."""
    return _status("VmHWM:") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> float:
    """Reset the peak to the current RSS (Linux: /proc/self/clear_refs), so a phase is measured alone."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return current_rss_mib()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--journal", type=Path, help="an existing journal file (copied into the bench home)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the temporary URCHIN_HOME")
    parser.add_argument("--write", type=Path, help="only write a journal of --events events to this path")
    args = parser.parse_args()
    if args.write:
        make_journal(args.write, args.events, args.seed)
        return
    home = Path(tempfile.mkdtemp(prefix="urchin-cold-"))
    settings = Settings.resolve(home, env={})
    journal_path = settings.journal_path
    journal_path.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    if args.journal:
        shutil.copyfile(args.journal, journal_path)
    else:
        make_journal(journal_path, args.events, args.seed)
    size = journal_path.stat().st_size
    print(f"journal: {size / 1e6:.0f} MB ready in {time.perf_counter() - t:.1f} s ({journal_path})")
    try:
        run(args, settings)
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace, settings: Settings) -> None:
    journal = Journal(settings.journal_path)
    index_dir = settings.index_dir / "cosine"
    view = TokenCosineView(journal, index_dir, save_every=0, workers=args.workers)
    rss0 = reset_peak_rss()
    t, c = time.perf_counter(), time.process_time()
    view.catch_up()
    view.index.refresh()
    build = time.perf_counter() - t
    n = len(view.index)
    print(f"build, {args.workers} worker(s): {n:,} events in {build:.1f} s = {n / build:,.0f} events/s "
          f"(parent cpu {time.process_time() - c:.1f} s, workers cpu "
          f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime:.1f} s); {view.index.nnz:,} postings, "
          f"{len(view.index._vocab):,} terms; peak RSS {rss_mib():.0f} MiB "
          f"(before {rss0:.0f}), after {current_rss_mib():.0f} ({rss_split()})")
    t = time.perf_counter()
    view.save()
    print(f"save: {time.perf_counter() - t:.2f} s, {du(index_dir) / 2**20:.0f} MiB on disk")
    journal.append([Event.from_input({"content": "one more event after the save"}).to_json()])
    t = time.perf_counter()
    view.catch_up()
    view.save()  # one new event: the frozen segments are hard-linked, the columns written again
    print(f"save after 1 new event: {time.perf_counter() - t:.2f} s")
    del view
    t = time.perf_counter()
    loaded = TokenCosineView(journal, index_dir, save_every=0)
    loaded.catch_up()
    print(f"load + catch up: {time.perf_counter() - t:.2f} s (from disk: {loaded.loaded_from_disk})")
    env = dict(os.environ, URCHIN_HOME=str(settings.home), PYTHONPATH=str(ROOT))
    qs = queries(args.queries, args.seed)
    cold = []
    for q in qs[:5]:
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "urchin", "semantic", q],
                             env=env, capture_output=True, text=True, check=True)
        cold.append(time.perf_counter() - t)
    floor = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "urchin", "--help"], env=env, capture_output=True, check=True)
        floor.append(time.perf_counter() - t)
    print(f"cold `urchin semantic` (whole process): median {statistics.median(cold):.2f} s "
          f"(peer: `urchin --help` {statistics.median(floor):.2f} s); {len(out.stdout.splitlines())} hits")
    now = int(loaded.index._ts.view().max())
    week = now - 168 * 3_600_000
    late = len(loaded.index._late.view())
    p50w, p95w = timed(lambda q: loaded.search(q, since_ms=week, until_ms=now, limit=10, filters=Filters()), qs)
    p50n, p95n = timed(lambda q: loaded.search(q, since_ms=None, limit=10, filters=Filters()), qs)
    print(f"hot, 168 h window: p50 {p50w:6.1f} ms p95 {p95w:6.1f} ms; no window: p50 {p50n:6.1f} ms "
          f"p95 {p95n:6.1f} ms ({late:,} late rows = {late / len(loaded.index):.1%}); window x{p50n / p50w:.1f} faster")
    print(f"RSS after load + queries: {current_rss_mib():.0f} MiB ({rss_split()}; file pages are the mapped index)")
    # Peer on a prefix: the Event-object path, and the in-process batch path.
    prefix = []
    for _, line in journal.iter_lines():
        prefix.append(line)
        if len(prefix) >= 100_000:
            break
    t, c = time.perf_counter(), time.process_time()
    events = [e for e in map(Event.from_json, prefix) if e is not None]
    peer = TokenCosineIndex()
    for a in range(0, len(events), 10_000):
        peer.add_many(events[a:a + 10_000])
    old = len(events) / (time.perf_counter() - t)
    print(f"peer, Event objects + add_many, {len(events):,} events: {old:,.0f} events/s "
          f"(cpu {time.process_time() - c:.1f} s)")


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def current_rss_mib() -> float:
    return _status("VmRSS:")


def rss_split() -> str:
    return f"anonymous {_status('RssAnon:'):.0f} MiB, file {_status('RssFile:'):.0f} MiB"


def _status(key: str) -> float:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


if __name__ == "__main__":
    main()
