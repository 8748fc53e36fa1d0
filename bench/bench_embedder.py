"""Embedder search latency at 1M cached vectors (target p50 <= 150 ms on the 2-core machine).

Writes N random 384-dim rows through VectorCache (one per minute of event time, so a 168 h window
holds ~10k rows), reopens the cache (memory-mapped), then times 50 queries over the full window
and over the last 168 h; prints medians, plus a plain in-RAM numpy product as the peer.
Usage: python bench/bench_embedder.py [--rows 1000000] [--dir bench/data/vectors] [--queries 50]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from urchin.search.vectors import VectorCache  # noqa: E402

DIM = 384
MINUTE = 60_000
WEEK = 168 * 3_600_000


def build(root: Path, rows: int, chunk: int = 50_000) -> float:
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(1)
    start_ms = 1_700_000_000_000
    started = time.perf_counter()
    with VectorCache(root, "bench-384", DIM) as cache:
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            vectors = rng.standard_normal((n, DIM), dtype=np.float32)
            ids = [f"0190{i:012d}-bench" for i in range(lo, lo + n)]
            ts = [start_ms + i * MINUTE for i in range(lo, lo + n)]
            cache.add(ids, ts, vectors)
    return time.perf_counter() - started


def timed(fn, queries: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    fn(queries[0])  # warm the page cache and code paths
    times = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=Path(__file__).parent / "data" / "vectors")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    build_s = build(args.dir, args.rows)
    print(f"wrote {args.rows:,} rows through VectorCache.add in {build_s:.1f} s "
          f"({args.rows / build_s:,.0f} rows/s)")
    t = time.perf_counter()
    cache = VectorCache(args.dir, "bench-384", DIM).open()
    print(f"open (repair check + mmap) {1000 * (time.perf_counter() - t):.0f} ms, {len(cache):,} rows")
    last_ms = int(cache._ts[-1])
    queries = np.random.default_rng(2).standard_normal((args.queries, DIM), dtype=np.float32)

    full = timed(lambda q: cache.search(q, limit=10), queries)
    week = timed(lambda q: cache.search(q, since_ms=last_ms - WEEK, limit=10), queries)
    in_ram = np.array(cache._matrix)  # the peer: the same product on a plain array
    peer = timed(lambda q: np.argpartition(-(in_ram @ q), 9)[:10], queries)
    print(f"search p50, full window ({len(cache):,} rows): {full:.1f} ms")
    in_week = int(np.sum(cache._ts >= last_ms - WEEK))
    print(f"search p50, 168 h window ({in_week:,} rows): {week:.1f} ms")
    print(f"peer: numpy matvec + argpartition on an in-RAM array: {peer:.1f} ms "
          f"(cache/peer {full / peer:.2f}x)")
    print(f"target p50 <= 150 ms: {'met' if full <= 150 else 'MISSED'}")


if __name__ == "__main__":
    main()
