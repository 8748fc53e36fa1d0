"""Cost of `Redactor.redact_event` on synthetic agent-like events (~1% carry a fake secret).

Prints the median CPU us/event over several rounds (process time: the machine is shared and noisy),
events/s, and two yardsticks: the 20 us/event that `urchin import` may spend at its 50,000 events/s
target (redaction may add at most 25% of it, 5 us), and a peer measured in the same run: what import
does to every event anyway, `Event.from_input` + `Event.to_json`.
Run: .venv/bin/python bench/bench_redact.py [--events 100000] [--adversarial]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import make_events  # noqa: E402
from urchin.event import Event  # noqa: E402
from urchin.redact import Redactor  # noqa: E402


def _time(fn: Callable[[Any], Any], items: list[Any], rounds: int) -> float:
    runs = []
    for _ in range(rounds):
        start = time.process_time()
        for item in items:
            fn(item)
        runs.append(time.process_time() - start)
    return statistics.median(runs) / len(items) * 1e6


# Hostile or unlucky inputs of about 1 MiB: every rule must stay linear in the text length.
_ADVERSARIAL = {
    "key=key=…": "token=" * 170_000,
    "key: x lines": "password: x\n" * 80_000,
    "unclosed quotes": '"password": "' * 70_000,
    "eyJ runs": "eyJ" * 300_000,
    "sk- runs": "sk-" * 300_000,
    "PEM headers": "-----BEGIN RSA PRIVATE KEY-----\n" * 30_000,
    "Authorization lines": "Authorization: Bearer " * 45_000,
    "colons": ":" * 1_000_000,
}


def adversarial(redactor: Redactor) -> None:
    for name, text in _ADVERSARIAL.items():
        start = time.process_time()
        redactor.redact_text(text)
        ms = (time.process_time() - start) * 1000
        print(f"  {name:22s} {len(text) / 2**20:5.2f} MiB  {ms:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--secret-share", type=float, default=0.01)
    parser.add_argument("--adversarial", action="store_true", help="also time hostile 1 MiB inputs")
    args = parser.parse_args()
    events = make_events(args.events, args.secret_share)
    redactor = Redactor()
    mean_len = statistics.mean(len(e.content) for e in events)
    redacted = sum(1 for e in events if redactor.redact_event(e) is not e)
    us = _time(redactor.redact_event, events, args.rounds)
    raw = [e.to_dict() for e in events]
    peer = _time(lambda d: Event.from_input(d).to_json(), raw, args.rounds)
    print(f"events: {len(events)}  mean content: {mean_len:.0f} chars  redacted: {redacted}")
    print(f"redact_event: {us:.2f} us/event  ({1e6 / us:,.0f} events/s)")
    print(f"peer Event.from_input + to_json: {peer:.2f} us/event  redaction adds {us / peer * 100:.0f}% to it")
    print(f"share of the 20 us/event import budget: {us / 20 * 100:.0f}% (limit 25%)")
    if args.adversarial:
        print("adversarial inputs (CPU time, one pass each):")
        adversarial(redactor)


if __name__ == "__main__":
    main()
