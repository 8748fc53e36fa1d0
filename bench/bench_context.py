"""`search_context` latency on natural questions at scale, per leg: `bench_context.py [--events N] [--keep DIR]`.

The journal is bench/gen_journal.py's (agent-like text from a ~200-word vocabulary: every word of a
natural question is in 5-20 % of the events, the hard case for a ranked leg). It is fed once into an
embedded PostgreSQL through the real feeder (backfill path); `--keep DIR` keeps that database and
reuses it on the next run. Then each question of bench_team.QUERIES runs `--rounds` times through
`run_context` (hybrid, keyword only, semantic only), and the same run times the peer: the literal
substring search of the question's longest word over the same journal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_team import QUERIES  # noqa: E402
from bench.gen_journal import generate  # noqa: E402
from urchin.hybrid.embedded import EmbeddedPostgres  # noqa: E402
from urchin.hybrid.feeder import Feeder  # noqa: E402
from urchin.hybrid.postgres import PostgresIndex  # noqa: E402
from urchin.hybrid.search_context import run_context  # noqa: E402
from urchin.journal import Journal  # noqa: E402
from urchin.params.context import ContextParams  # noqa: E402
from urchin.search.semantic import TokenCosineView  # noqa: E402
from urchin.search.substring import SubstringSearcher  # noqa: E402


def _prepare(folder: Path, events: int) -> tuple[EmbeddedPostgres, PostgresIndex, Journal]:
    journal = Journal(folder / "journal" / "events.jsonl", "never")
    server = EmbeddedPostgres(folder / "pg", relocate_as_root=False)
    backend = PostgresIndex(server.url)
    ready = folder / "fed"
    if ready.exists() and ready.read_text() == str(events):
        print(f"reusing the {events:,}-event index in {folder}")
        return server, backend, journal
    started = time.perf_counter()
    generate(events, journal.path)
    print(f"generated {events:,} events ({journal.size() / 1e6:.0f} MB) in {time.perf_counter() - started:.0f} s")
    backend.rebuild()
    started = time.perf_counter()
    Feeder(backend, journal, "bench").run_once()
    with backend.conn.transaction():
        backend.conn.execute("ANALYZE urchin_chunks")
    print(f"fed in {time.perf_counter() - started:.0f} s")
    ready.write_text(str(events))
    return server, backend, journal


def _learned(folder: Path, journal: Journal) -> Any:
    """The associations the daemon's token-cosine view would pass to its leg: the model saved beside
    that view's index (built and saved here on the first run, as the daemon's view saves it)."""
    view = TokenCosineView(journal, folder / "cosine")
    model = view.associations()
    if model is None:
        view.catch_up()
        view.save()
        model = view.associations()
    return model


def _time(backend: PostgresIndex, question: str, rounds: int, model: Any = None, **params: object
          ) -> tuple[float, dict]:
    p = ContextParams.build(query=question, limit=10, **params)
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = run_context(backend, p, assoc=model)
        times.append((time.perf_counter() - started) * 1000)
    assert result is not None
    return statistics.median(times), result.coverage


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None, help="folder to keep (and reuse) the fed index in")
    args = parser.parse_args(argv)
    tmp = None
    if args.keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="urchin-bench-context-")
        folder = Path(tmp.name)
    else:
        folder = args.keep
        folder.mkdir(parents=True, exist_ok=True)
    server, backend, journal = _prepare(folder, args.events)
    model = _learned(folder, journal)
    try:
        for q in QUERIES:                                         # warm the caches
            run_context(backend, ContextParams.build(query=q, limit=10), assoc=model)
        searcher = SubstringSearcher(journal)
        medians: dict[str, list[float]] = {"hybrid": [], "keyword": [], "semantic": [], "peer": []}
        print(f"{'question':<58} {'hybrid':>8} {'keyword':>8} {'semantic':>8} {'peer':>7}  candidates")
        for q in QUERIES:
            hybrid, cov = _time(backend, q, args.rounds, model)
            keyword, _ = _time(backend, q, args.rounds, model, strategy="keyword")
            semantic, _ = _time(backend, q, args.rounds, model, strategy="semantic")
            word = max(q.split(), key=len)
            times = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                searcher.search(word, since_ms=0, limit=10)
                times.append((time.perf_counter() - started) * 1000)
            peer = statistics.median(times)
            for name, value in zip(medians, (hybrid, keyword, semantic, peer), strict=True):
                medians[name].append(value)
            legs = " ".join(f"{leg['leg'][:3]}:{leg['candidates']}" for leg in cov["legs"])
            print(f"{q[:58]:<58} {hybrid:8.1f} {keyword:8.1f} {semantic:8.1f} {peer:7.1f}  {legs}")
        p50 = {name: statistics.median(values) for name, values in medians.items()}
        print(f"{'p50 over questions (ms)':<58} {p50['hybrid']:8.1f} {p50['keyword']:8.1f} {p50['semantic']:8.1f} "
              f"{p50['peer']:7.1f}")
        print(f"hybrid / peer (substring search of the question's longest word): {p50['hybrid'] / p50['peer']:.2f}")
    finally:
        backend.close()
        server.stop()
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
