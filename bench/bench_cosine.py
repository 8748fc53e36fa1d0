"""Token-cosine latency at scale: a synthetic journal of agent-like events, searched hot in-process.

    python bench/bench_cosine.py [--events 1000000] [--queries 50] [--seed 7]

Text follows a Zipf law over a vocabulary of English words, code identifiers and paths; events come
in sessions over 180 days. Prints build time, index memory, and p50/p95 with a 168 h window and with
none, beside a peer measured in the same run: the same index scoring plain cosine (no session context).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from urchin.event import Event  # noqa: E402
from urchin.search import assoc  # noqa: E402
from urchin.search.cosine import TokenCosineIndex  # noqa: E402

_ENGLISH = """run test fix build error fail pass change file add remove update config deploy server client
request response token auth login user session cache index search query result event journal daemon
commit branch merge review decision design schema database table column migration timeout retry
memory leak crash trace stack import module package version release bug issue feature refactor
rename move delete create write read parse format encode decode json yaml http port socket thread
process signal queue worker job task schedule timer clock date time window limit offset page sort
filter rank score vector embed model cosine token word stem stop list set map key value hash lock
""".split()
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "den", "par", "gor", "lin", "tes", "qua"]


def vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    words = list(_ENGLISH)
    seen = set(words)
    while len(words) < size:
        n = int(rng.integers(2, 5))
        word = "".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), n))
        kind = rng.random()
        if kind < 0.08:  # identifiers and paths, as agents write them
            word = f"{word}_{_ENGLISH[int(rng.integers(0, len(_ENGLISH)))]}"
        elif kind < 0.12:
            word = f"src/{word}/{_ENGLISH[int(rng.integers(0, len(_ENGLISH)))]}.py"
        elif kind < 0.15:
            word = word[:1].upper() + word[1:] + _ENGLISH[int(rng.integers(0, len(_ENGLISH)))].capitalize()
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def synthetic_events(n: int, seed: int) -> list[Event]:
    rng = np.random.default_rng(seed)
    words = vocabulary(60_000, rng)
    ranks = np.arange(1, len(words) + 1, dtype=np.float64)
    cdf = np.cumsum(1.0 / ranks**1.07)
    cdf /= cdf[-1]
    lengths = rng.integers(8, 60, n)
    word_ids = np.searchsorted(cdf, rng.random(int(lengths.sum())))
    start = 1_700_000_000_000
    ts = start + np.sort(rng.integers(0, 180 * 86_400_000, n))
    sources = ["claude", "codex", "shell", "git", "copilot", "gemini"]
    kinds = ["conversation", "tool_use", "command", "commit", "note", "decision"]
    events, pos, session = [], 0, 0
    for i in range(n):
        if i % 40 == 0:
            session += 1
        k = int(lengths[i])
        text = " ".join([words[j] for j in word_ids[pos:pos + k]])
        pos += k
        events.append(Event(
            id=f"e{i:08d}", timestamp="", source=sources[session % 6], kind=kinds[i % 6], content=text,
            workspace=f"ws{session % 20}", session=f"s{session}", ts_ms=int(ts[i])))
    return events


# natural questions as an agent asks them (bench_team's, which bench_context times too)
QUESTIONS = ["what is the retry budget after a timeout", "why did the database migration take a lock on the table",
             "how do we deploy the server config", "which test was flaky in the journal index",
             "how did we fix the cache bug", "what was the error about", "when does the session token refresh",
             "how do I rebase onto the release branch"]


def queries(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed + 1)
    words = vocabulary(60_000, np.random.default_rng(seed))
    out = []
    for _ in range(count):
        common = [words[int(i)] for i in rng.integers(0, 150, int(rng.integers(1, 3)))]
        rare = [words[int(i)] for i in rng.integers(150, 20_000, int(rng.integers(1, 3)))]
        out.append(" ".join(common + rare))
    return out


def timed(fn: object, qs: list[str]) -> tuple[float, float]:
    times = []
    for q in qs:
        t = time.perf_counter()
        fn(q)  # type: ignore[operator]
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    t = time.perf_counter()
    events = synthetic_events(args.events, args.seed)
    print(f"generated {len(events):,} events in {time.perf_counter() - t:.1f} s")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    index = TokenCosineIndex()
    t = time.perf_counter()
    for a in range(0, len(events), 10_000):
        index.add_many(events[a:a + 10_000])
    index.refresh()
    build = time.perf_counter() - t
    print(f"built in {build:.1f} s ({len(events) / build:,.0f} events/s); {index.nnz:,} postings, "
          f"{len(index._vocab):,} terms; index memory ~{index.memory_bytes() / 2**20:.0f} MiB "
          f"(peak RSS grew {(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024:.0f} MiB)")
    t = time.perf_counter()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    index.assoc = assoc.build(index)
    print(f"associations built in {time.perf_counter() - t:.1f} s: {len(index.assoc):,} terms, "
          f"~{index.assoc.memory_bytes() / 2**20:.1f} MiB (peak RSS grew "
          f"{(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024:.0f} MiB)")
    qs = queries(args.queries, args.seed)
    now = events[-1].ts_ms
    week = now - 168 * 3_600_000
    for q in qs[:3]:
        index.search(q)  # warm up
    p50, p95 = timed(lambda q: index.search(q, since_ms=week, until_ms=now), qs)
    print(f"search, 168 h window : p50 {p50:7.1f} ms  p95 {p95:7.1f} ms")
    p50n, p95n = timed(lambda q: index.search(q), qs)
    print(f"search, no window    : p50 {p50n:7.1f} ms  p95 {p95n:7.1f} ms")
    p50c, p95c = timed(lambda q: index.search(q, workspace="ws3", source="git"), qs)
    print(f"search, ws+source    : p50 {p50c:7.1f} ms  p95 {p95c:7.1f} ms")
    del events
    shipped = index.settings
    index.settings = replace(shipped, context_turns=0)  # the peer: plain cosine on the same postings
    p50p, p95p = timed(lambda q: index.search(q), qs)
    index.settings = shipped
    print(f"peer, plain cosine (no session context), no window: p50 {p50p:7.1f} ms  p95 {p95p:7.1f} ms; "
          f"context costs x{p50n / p50p:.2f}")
    before = {"context_turns": 2, "expand": 0.0, "session": 0.0, "kind": 0.0, "related": 0.0, "pivot": 1.0,
              "memory": 0.0}  # the constants before issue 15
    index.settings = replace(shipped, **before)  # type: ignore[arg-type]
    p50b, p95b = timed(lambda q: index.search(q, since_ms=week, until_ms=now), qs)
    p50bn, p95bn = timed(lambda q: index.search(q), qs)
    index.settings = shipped
    print(f"before issue 15 (2 turns, no associations, session leg or kind prior): 168 h p50 {p50b:7.1f} ms "
          f"p95 {p95b:7.1f} ms; no window p50 {p50bn:7.1f} ms p95 {p95bn:7.1f} ms")
    round2 = {"related": 0.0, "pivot": 1.0, "memory": 0.0, "session_slots": 2}  # before the thesaurus (round 3)
    now_set = {name: getattr(index, name) for name in round2}
    for q in QUESTIONS:
        index.search(q)  # warm up
    rows = {}
    for label, values in (("before the thesaurus, pivot and memory prior", round2), ("shipped", now_set)):
        for name, value in values.items():
            setattr(index, name, value)
        rows[label] = (timed(lambda q: index.search(q, since_ms=week, until_ms=now), qs + QUESTIONS),
                       timed(lambda q: index.search(q), qs + QUESTIONS))
    for label, ((a50, a95), (b50, b95)) in rows.items():
        print(f"{label} ({len(qs)} word queries + {len(QUESTIONS)} natural questions): 168 h p50 {a50:7.1f} ms "
              f"p95 {a95:7.1f} ms; no window p50 {b50:7.1f} ms p95 {b95:7.1f} ms")

if __name__ == "__main__":
    main()
