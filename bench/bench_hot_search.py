"""Hot `/search` (and `/semantic`) through a running daemon at 1M events, on realistic queries.

Starts `urchin serve` on the gen_journal file (hard-linked, never written), waits for its views,
then times each query over one keep-alive connection: p50/p95 of `--repeat` calls, wall ms as the
client sees it (routing, the search, JSON). Queries: the planted rare and common terms, everyday
words that fill 20 hits at once, keywords of natural questions, and an absent phrase, over 24 h,
168 h and 90 days. The peer is `rg -i -F -c` over the same file, timed in the same run.

    python bench/bench_hot_search.py [--journal bench/data/journal-1000000.jsonl] [--repeat 21] [--busy]

`--busy` times every query twice in one run: on an idle daemon (`--no-index`), then on a daemon whose
first PostgreSQL feed runs (the home's PostgreSQL data removed first), and prints busy/idle per cell.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli_daemon import REPO, start_daemon  # noqa: E402

QUERIES = ("Zanzibar-Quokka", "retry budget", "the", "error", "connection pool", "database migration",
           "timeout", "how do we retry", "fix", "xylophone nebula")
WINDOWS = (24, 168, 2160)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", type=Path, default=REPO / "bench" / "data" / "journal-1000000.jsonl")
    parser.add_argument("--home", type=Path, default=None,
                        help="reuse this home (its journal/events.jsonl, indexes saved by earlier runs)")
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--busy", action="store_true",
                        help="also time every query while the daemon's first Postgres feed runs (the home's "
                             "PostgreSQL data is removed first), and print busy/idle per cell")
    parser.add_argument("--route", default="/search", choices=("/search", "/semantic"))
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(dir=args.journal.parent) as tmp:
        home = args.home or Path(tmp) / "home"
        journal = home / "journal" / "events.jsonl"
        if not journal.exists():
            journal.parent.mkdir(parents=True)
            os.link(args.journal, journal)
        env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home)}
        env.pop("URCHIN_NO_DAEMON", None)
        idle = _run(home, journal, env, args.route, args.repeat, busy=False)
        if args.busy:
            _remove_pg(home)
            busy = _run(home, journal, env, args.route, args.repeat, busy=True)
            ratios = {cell: busy[cell] / idle[cell] for cell in idle}
            worst = max(ratios, key=lambda cell: ratios[cell])
            within = sum(r <= 1.5 for r in ratios.values())
            print(f"busy/idle p50 per cell: median {statistics.median(ratios.values()):.2f}x, "
                  f"{within}/{len(ratios)} cells <= 1.5x, worst {ratios[worst]:.2f}x ({worst[0]!r}, "
                  f"{worst[1]} h: {busy[worst]:.1f} vs {idle[worst]:.1f} ms); sum of p50s busy "
                  f"{sum(busy.values()):.0f} ms, idle {sum(idle.values()):.0f} ms (target: every cell <= 1.5x)")


def _run(home: Path, journal: Path, env: dict[str, str], route: str, repeat: int, busy: bool
         ) -> dict[tuple[str, int], float]:
    print(f"--- {'busy: the first Postgres feed running' if busy else 'idle: no background work'} "
          f"(load average {os.getloadavg()[0]:.2f})")
    daemon = start_daemon(home, env, busy)
    try:
        if busy:
            print(f"feed: {_fed(home, journal, wait=True)} when the queries start")
        p50s = measure(home, journal, route, repeat)
        if busy:
            print(f"feed: {_fed(home, journal)} when they end (below 100%: the feed ran throughout)")
        return p50s
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)


def _remove_pg(home: Path) -> None:
    """A first feed again: the home's embedded PostgreSQL data goes (as root it is a link's target)."""
    link = home / "pg"
    if link.is_symlink():
        target = link.resolve()
        for path in (target, target.with_name(target.name + ".owner"), target.with_name(target.name + ".holders")):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        link.unlink()
    elif link.exists():
        shutil.rmtree(link)


def measure(home: Path, journal: Path, route: str, repeat: int) -> dict[tuple[str, int], float]:
    import orjson

    info = orjson.loads((home / "daemon.json").read_bytes())
    token = (home / "token").read_text().strip()
    rg = shutil.which("rg", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    worst = 0.0
    p50s: dict[tuple[str, int], float] = {}
    with httpx.Client(base_url=info["address"], headers={"authorization": f"Bearer {token}"}, timeout=300,
                      trust_env=False) as client:
        print(f"{'query':<20} {'hours':>6} {'hits':>5} {'p50 ms':>8} {'p95 ms':>8}")
        for query in QUERIES:
            for hours in WINDOWS:
                params = {"query": query, "hours": hours, "limit": 20}
                hits = len(client.get(route, params=params).json()["events"])
                times = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    client.get(route, params=params).raise_for_status()
                    times.append((time.perf_counter() - started) * 1000)
                p50 = statistics.median(times)
                p50s[(query, hours)] = p50
                worst = max(worst, p50)
                print(f"{query:<20} {hours:>6} {hits:>5} {p50:8.1f} {pct(times, 0.95):8.1f}")
    rg_ms = statistics.median(_timed([rg, "-i", "-F", "-c", "retry budget", str(journal)]) for _ in range(5))
    print(f"worst p50 {worst:.1f} ms (target <= 20 ms); rg -i -F -c 'retry budget' {rg_ms:.0f} ms "
          f"({rg_ms / worst:.1f}x the worst p50); load average after: {os.getloadavg()[0]:.2f}")
    return p50s


def _fed(home: Path, journal: Path, wait: bool = False) -> str:
    """How much of the journal the daemon's first feed has committed (its cursor), waiting with `wait`
    until it has begun (the queries must run while it works, not before it starts)."""
    import psycopg

    sys.path.insert(0, str(REPO))
    from urchin.hybrid.embedded import EmbeddedPostgres

    deadline = time.monotonic() + 180
    while True:
        offset = 0
        try:
            with psycopg.connect(EmbeddedPostgres(home / "pg", stop_at_exit=False).url(), connect_timeout=5) as conn:
                row = conn.execute("SELECT max(byte_offset) FROM urchin_cursors").fetchone()
                offset = int(row[0] or 0) if row else 0
        except Exception:  # noqa: BLE001 - not started, or its tables not made yet
            pass
        if offset > 0 or not wait or time.monotonic() > deadline:
            return f"{offset / journal.stat().st_size:.0%} of the journal fed"
        time.sleep(0.5)


def _timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, capture_output=True)
    return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    main()
