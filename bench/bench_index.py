"""Postgres index speed: feed rate (no embedder) and hybrid query latency at N events.

    python bench/bench_index.py [--events 1000000] [--queries 200] [--database-url URL]

Generates agent-like events (Zipf vocabulary, 20 workspaces), feeds them with the real feeder into a
fresh database (embedded PostgreSQL in a temp folder by default), then times `search_context`.
Peers measured in the same run: raw COPY of the same rows into an unindexed table (feed), and the
substring search over the same journal (query).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from urchin.event import Event  # noqa: E402
from urchin.hybrid.feeder import Feeder, event_row  # noqa: E402
from urchin.hybrid.pg_writer import COLUMNS  # noqa: E402
from urchin.hybrid.search_context import run_context  # noqa: E402
from urchin.journal import Journal  # noqa: E402
from urchin.params.context import ContextParams  # noqa: E402
from urchin.search.substring import SubstringSearcher  # noqa: E402
from urchin.timestamps import format_timestamp  # noqa: E402

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "de", "ga", "vo", "xe", "bu", "fi", "ho", "ja"]
KINDS = ["conversation", "tool_use", "command", "note", "decision", "commit"]
SOURCES = ["claude", "copilot", "shell", "git", "gemini", "codex"]


def vocabulary(n: int, rng: random.Random) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < n:
        words.setdefault("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))), None)
    return list(words)


def generate(path: Path, n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    vocab = vocabulary(20000, rng)
    cum, total = [], 0.0
    for i in range(len(vocab)):                              # Zipf: a few words are everywhere
        total += 1 / (i + 1)
        cum.append(total)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    journal = Journal(path, "never")
    batch = []
    for i in range(n):
        words = rng.choices(vocab, cum_weights=cum, k=rng.randint(20, 70))
        moment = start + timedelta(seconds=i * 30)
        ws = f"ws{rng.randrange(20)}"
        batch.append(Event(id=f"ev-{i:08d}", timestamp=format_timestamp(moment), source=rng.choice(SOURCES),
                           kind=rng.choice(KINDS), content=" ".join(words), workspace=ws,
                           session=f"{ws}-s{i // 50}", tags=(rng.choice(["ops", "ui", "db", "ci"]),),
                           ts_ms=int(moment.timestamp() * 1000)).to_json())
        if len(batch) >= 20000:
            journal.append(batch)
            batch = []
    journal.append(batch)
    return vocab


def feed(backend: Any, journal: Journal, bulk: bool = True) -> float:
    backend.rebuild()
    started = time.perf_counter()
    report = Feeder(backend, journal, "bench", **({} if bulk else {"bulk_bytes": None})).run_once()
    elapsed = time.perf_counter() - started
    return report.events / elapsed


def copy_into(conn: Any, table: str, rows: list[Any]) -> float:
    """COPY `rows` into `table` (inside the caller's transaction); the seconds it took."""
    started = time.perf_counter()
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
        for r in rows:
            copy.write_row(tuple(getattr(r, name) for name in COLUMNS))
    return time.perf_counter() - started


def copy_peer(backend: Any, journal: Journal, limit: int) -> float:
    """The same rows (vectors included) COPYed into an unindexed table: what the disk and driver allow."""
    conn = backend.conn
    rows = [event_row(e, o) for o, e in islice(journal.iter_events(0), limit)]
    for row in rows:
        row.device = row.device or ""       # as the feeder stamps it: the key's device is never NULL
    with conn.transaction():
        conn.execute("CREATE TEMP TABLE peer (LIKE urchin_chunks) ON COMMIT DROP")
        return len(rows) / copy_into(conn, "peer", rows)


def time_queries(backend: Any, queries: list[str], **params: Any) -> list[float]:
    out = []
    for q in queries:
        p = ContextParams.build(query=q, limit=10, **params)
        started = time.perf_counter()
        run_context(backend, p)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--no-bulk", action="store_true", help="feed row by row into the indexes (no backfill path)")
    args = parser.parse_args(argv)
    from urchin.hybrid.postgres import PostgresIndex


    with tempfile.TemporaryDirectory(prefix="urchin-bench-index-") as tmp:
        folder = Path(tmp)
        journal = Journal(folder / "journal" / "events.jsonl", "never")
        started = time.perf_counter()
        vocab = generate(journal.path, args.events)
        took = time.perf_counter() - started
        print(f"generated {args.events:,} events ({journal.size() / 1e6:.0f} MB) in {took:.0f} s")
        server = None
        if args.database_url:
            backend = PostgresIndex(args.database_url)
        else:
            from urchin.hybrid.embedded import EmbeddedPostgres

            server = EmbeddedPostgres(folder / "pg", relocate_as_root=False)
            backend = PostgresIndex(server.url)
        rate = feed(backend, journal, bulk=not args.no_bulk)
        peer = copy_peer(backend, journal, min(args.events, 100_000))
        print(f"feed: {rate:,.0f} events/s (target >= 10,000); raw COPY peer {peer:,.0f} rows/s "
              f"(feed / peer = {rate / peer:.2f})")
        with backend.conn.transaction():
            backend.conn.execute("ANALYZE urchin_chunks")
        rng = random.Random(11)
        common, rare = vocab[:200], vocab[200:]
        queries = [" ".join(rng.sample(common, 1) + rng.sample(rare, rng.randint(2, 4))) for _ in range(args.queries)]
        time_queries(backend, queries[:10])                                     # warm the caches
        for label, params in (("hybrid", {}), ("hybrid, workspace filter", {"workspace": "ws3"}),
                              ("keyword", {"strategy": "keyword"}), ("semantic", {"strategy": "semantic"})):
            times = time_queries(backend, queries, **params)
            print(f"query {label:<26} p50 {statistics.median(times):6.1f} ms  "
                  f"p95 {sorted(times)[int(len(times) * 0.95)]:6.1f} ms")
        searcher = SubstringSearcher(journal)
        times = []
        for q in queries[:20]:
            t0 = time.perf_counter()
            searcher.search(q.split()[-1], since_ms=0, limit=10)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"peer: substring search, same journal      p50 {statistics.median(times):6.1f} ms")
        backend.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
