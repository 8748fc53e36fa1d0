"""Team load simulation: N devices feed one shared PostgreSQL (TCP, scram, least-privilege roles) at once.

`python bench/bench_team.py --devices 10 --events 100000 [--kill]`

Each device gets its own home and a synthetic journal (bench/gen_journal.py, distinct seeds, 90 days
of agent-like events) and its own feeder role (`urchin db feeder`); all of them run `urchin index`
as separate processes against one standalone server (tests/pg_tcp.py, fsync on). A reader role runs
`search_context` queries during the feed and after it. Checked: total rows exact, no duplicate ids,
each device's rows in journal order, every cursor at its journal's end. `--kill`: device 0's feeder
is killed (SIGKILL) mid-feed and restarted, twice.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402
import psycopg  # noqa: E402

from bench.gen_journal import generate  # noqa: E402
from tests.pg_tcp import TcpPostgres  # noqa: E402
from urchin.config import Settings  # noqa: E402
from urchin.facade import Memory  # noqa: E402
from urchin.hybrid.pg_roles import add_feeder, setup_roles  # noqa: E402

# natural questions, as an agent asks them (stop words and all): DESIGN.md's "/context p50 <= 50 ms at 1M"
QUERIES = ["what is the retry budget after a timeout", "why did the database migration take a lock on the table",
           "how do we deploy the server config", "which test was flaky in the journal index",
           "how did we fix the cache bug", "what was the Zanzibar-Quokka error about",
           "when does the session token refresh", "how do I rebase onto the release branch"]


def _feeder(home: Path, url: str, device: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), "URCHIN_DATABASE_URL": url,
           "URCHIN_DEVICE_ID": device, "URCHIN_NO_DAEMON": "1"}
    return subprocess.Popen([sys.executable, "-m", "urchin", "index", "--json"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _query_ms(reader: Memory, i: int) -> float:
    started = time.perf_counter()
    reader.context(query=QUERIES[i % len(QUERIES)], limit=10)
    return (time.perf_counter() - started) * 1000


def _check(admin: str, homes: dict[str, Path], per_device: int) -> dict[str, Any]:
    total = per_device * len(homes)
    with psycopg.connect(admin) as conn:
        rows, distinct = conn.execute("SELECT count(*), count(DISTINCT chunk_id) FROM urchin_chunks").fetchone() \
            or (0, 0)
        by_device: dict[str, int] = dict(conn.execute("SELECT device, count(*) FROM urchin_chunks GROUP BY 1")
                                         .fetchall())
        ordered = all([r[0] for r in conn.execute("SELECT chunk_id FROM urchin_chunks WHERE device = %s "
                                                  "ORDER BY journal_offset", (d,))] == _journal_ids(h)
                      for d, h in homes.items())
        cursors = {d: o for d, j, o in conn.execute("SELECT device, journal, byte_offset FROM urchin_cursors "
                                                     "WHERE journal !~ ' #[a-z]+$'").fetchall()}
        parts = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'urchin_chunks'::regclass").fetchone()
    at_end = all(cursors.get(d) == (h / "journal" / "events.jsonl").stat().st_size for d, h in homes.items())
    return {"rows": rows, "expected": total, "duplicates": rows - distinct,
            "exact": rows == distinct == total and all(by_device.get(d) == per_device for d in homes),
            "journal_order": ordered, "cursors_at_end": at_end, "partitions": parts[0] if parts else 0}


def run(server: TcpPostgres, homes: dict[str, Path], per_device: int, kill: bool, queries_after: int) -> dict[str, Any]:
    name = f"bench_{'kill' if kill else 'feed'}_{int(time.time())}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    admin = server.url(name)
    roles = setup_roles(admin, owner_password="owner-pw", reader_password="reader-pw")
    del roles
    urls = {d: add_feeder(admin, d, f"pw-{d}")["url"] for d in homes}
    reader = Memory(Settings.resolve(server.folder / f"reader-{name}",
                                     database_url=server.url(name, "urchin_reader", "reader-pw"), device="reader"))
    reader.context(query="warm up", limit=1)
    started = time.perf_counter()
    procs = {d: _feeder(h, urls[d], d) for d, h in homes.items()}
    during: list[float] = []
    kills, restarts_at = 0, [0.25, 0.5] if kill else []
    victim = next(iter(homes))
    reported = 0.0
    while any(p.poll() is None for p in procs.values()):
        during.append(_query_ms(reader, len(during)))
        elapsed = time.perf_counter() - started
        if elapsed - reported >= 60:
            reported = elapsed
            print(f"  {elapsed:.0f} s: {_fed(admin, homes):.0%} fed, search_context p50 so far "
                  f"{statistics.median(during):.0f} ms ({len(during)} queries), kills {kills}", flush=True)
        if restarts_at and kills < len(restarts_at) and procs[victim].poll() is None and \
                _progress(admin, victim, homes[victim]) >= restarts_at[kills]:
            os.kill(procs[victim].pid, signal.SIGKILL)
            procs[victim].wait()
            kills += 1
            procs[victim] = _feeder(homes[victim], urls[victim], victim)
        time.sleep(0.05 if elapsed < 1 else 0.2)
    seconds = time.perf_counter() - started
    failed = {d: p.stderr.read().decode()[-400:] for d, p in procs.items() if p.returncode and p.stderr}
    after = [_query_ms(reader, i) for i in range(queries_after)]
    with psycopg.connect(admin, autocommit=True) as conn:   # what autovacuum does soon after a bulk feed
        conn.execute("VACUUM ANALYZE urchin_chunks")
    vacuumed = [_query_ms(reader, i) for i in range(queries_after)]
    reader.close()
    result = _check(admin, homes, per_device)
    result.update({"seconds": round(seconds, 1), "events_per_s": round(result["rows"] / seconds),
                   "during_p50_ms": round(statistics.median(during), 1) if during else None,
                   "during_queries": len(during), "after_p50_ms": round(statistics.median(after), 1),
                   "after_p95_ms": round(_p95(after), 1),
                   "after_vacuum_p50_ms": round(statistics.median(vacuumed), 1),
                   "after_vacuum_p95_ms": round(_p95(vacuumed), 1),
                   "after_vacuum_by_question_p50_ms": {q: round(statistics.median(vacuumed[i::len(QUERIES)]), 1)
                                                       for i, q in enumerate(QUERIES)},
                   "kills": kills, "failed": failed})
    return result


def _p95(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(len(samples) * 0.95) - 1)]


def _fed(admin: str, homes: dict[str, Path]) -> float:
    """The share of all journals' bytes behind the feeders' cursors."""
    with psycopg.connect(admin) as conn:
        row = conn.execute("SELECT coalesce(sum(byte_offset), 0) FROM urchin_cursors "
                           "WHERE journal !~ ' #[a-z]+$'").fetchone()
    return (row[0] if row else 0) / max(1, sum((h / "journal" / "events.jsonl").stat().st_size for h in homes.values()))


def _journal_ids(home: Path) -> list[str]:
    """The event ids of a journal in its order (first occurrence): what the rows must match."""
    seen: dict[str, None] = {}
    with (home / "journal" / "events.jsonl").open("rb") as handle:
        for line in handle:
            seen.setdefault(orjson.loads(line)["id"], None)
    return list(seen)


def _progress(admin: str, device: str, home: Path) -> float:
    with psycopg.connect(admin) as conn:
        row = conn.execute("SELECT byte_offset FROM urchin_cursors WHERE device = %s AND journal !~ ' #[a-z]+$'",
                           (device,)).fetchone()
    return (row[0] if row else 0) / max(1, (home / "journal" / "events.jsonl").stat().st_size)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--events", type=int, default=100_000, help="events per device")
    parser.add_argument("--queries", type=int, default=100, help="search_context queries after the feed")
    parser.add_argument("--kill", action="store_true", help="also the run with device 0 killed twice")
    parser.add_argument("--keep", action="store_true", help="leave the server running (to EXPLAIN its queries)")
    args = parser.parse_args(argv)
    server = TcpPostgres(durable=True).start()
    try:
        homes = {}
        for i in range(args.devices):
            home = server.folder / f"home-dev{i:02d}"
            (home / "journal").mkdir(parents=True)
            generate(args.events, home / "journal" / "events.jsonl", seed=1000 + i)
            homes[f"dev{i:02d}"] = home
        print(f"{args.devices} devices x {args.events} events, journals "
              f"{sum((h / 'journal' / 'events.jsonl').stat().st_size for h in homes.values()) / 1e6:.0f} MB",
              flush=True)
        print("feed:", run(server, homes, args.events, False, args.queries), flush=True)
        if args.kill:
            print("kill:", run(server, homes, args.events, True, args.queries), flush=True)
    finally:
        if args.keep:
            print(f"kept: {server.url()} (folder {server.folder}; stop: pg_ctl -D {server.data} stop)", flush=True)
        else:
            server.stop()


if __name__ == "__main__":
    main()
