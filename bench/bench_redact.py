"""Cost of `Redactor.redact_event` on synthetic agent-like events (~1% carry a fake secret).

Prints the median us/event over several rounds, events/s, and the share of the 20 us/event budget
that `urchin import` has at its 50,000 events/s target (redaction may add at most 25% of it).
Peer measured in the same run: `Event.to_json` on the same events, the one step import always does.
Run: PYTHONPATH=. python bench/bench_redact.py [--events 200000]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.corpus import make_events
from urchin.redact import Redactor


def _time(fn, items, rounds: int) -> float:
    runs = []
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            fn(item)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) / len(items) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--secret-share", type=float, default=0.01)
    args = parser.parse_args()
    events = make_events(args.events, args.secret_share)
    redactor = Redactor()
    mean_len = statistics.mean(len(e.content) for e in events)
    redacted = sum(1 for e in events if redactor.redact_event(e) is not e)
    us = _time(redactor.redact_event, events, args.rounds)
    peer = _time(lambda e: e.to_json(), events, args.rounds)
    print(f"events: {len(events)}  mean content: {mean_len:.0f} chars  redacted: {redacted}")
    print(f"redact_event: {us:.2f} us/event  ({1e6 / us:,.0f} events/s)")
    print(f"Event.to_json (peer): {peer:.2f} us/event  ratio redact/to_json: {us / peer:.1f}x")
    print(f"share of the 20 us/event import budget: {us / 20 * 100:.0f}% (limit 25%)")


if __name__ == "__main__":
    main()
