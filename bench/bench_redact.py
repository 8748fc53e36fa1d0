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
    # decoded views (`urchin.redact._decoded`): every character an escape, and escapes of escapes
    "%41 runs": "%41" * 340_000,
    "backslashes": "\\" * 1_000_000,
    "\\n runs": "\\n" * 500_000,
    "&amp; runs": "&amp;" * 200_000,
    "NBSP runs": "\u00a0" * 1_000_000,
    "URL-encoded key: x": "password%3A%20x%0A" * 55_000,
    # second round: terminal colours, octal, %u, HTML without `;`, invisible characters, wraps, nesting
    "ANSI runs": "\x1b[01;31m\x1b[K" * 75_000,
    "overstrike": "a\b" * 500_000,
    "octal runs": "\\101" * 250_000,
    "%u runs": "%u0041" * 170_000,
    "&#61 runs": "&#61" * 250_000,
    "soft hyphens": "\u00ad" * 1_000_000,
    "wrapped ghp_ lines": "ghp_ab\nCD1 " * 100_000,
    "secret: x %252525": "secret: x %252525 " * 58_000,
}


def adversarial(redactor: Redactor) -> None:
    for name, text in _ADVERSARIAL.items():
        start = time.process_time()
        redactor.redact_text(text)
        ms = (time.process_time() - start) * 1000
        print(f"  {name:22s} {len(text) / 2**20:5.2f} MiB  {ms:8.1f} ms")


class _NoRedaction:
    def redact_event(self, event: Event) -> Event:
        return event


def import_ratio(events: list[Event], rounds: int) -> None:
    """`Memory.import_lines` of the same JSONL into fresh homes, with and without redaction, interleaved."""
    import tempfile

    import orjson

    from urchin.facade import Memory

    lines = [orjson.dumps({k: v for k, v in e.to_dict().items() if k != "actor"}) + b"\n" for e in events]
    times: dict[str, list[tuple[float, float]]] = {"with redaction": [], "without": []}
    for _ in range(rounds):
        for label in times:
            with tempfile.TemporaryDirectory() as home:
                memory = Memory.open(home)
                if label == "without":
                    memory.ingestor.redactor = _NoRedaction()  # type: ignore[assignment]
                wall, cpu = time.perf_counter(), time.process_time()
                report = memory.import_lines(lines)
                times[label].append((time.perf_counter() - wall, time.process_time() - cpu))
                assert report.appended == len(lines), report
    for label, runs in times.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"  import {label:15s} {len(lines) / wall:9,.0f} events/s wall"
              f"  {cpu / len(lines) * 1e6:6.2f} us/event CPU")
    with_cpu = statistics.median(r[1] for r in times["with redaction"])
    without_cpu = statistics.median(r[1] for r in times["without"])
    print(f"  redaction adds {(with_cpu / without_cpu - 1) * 100:.0f}% to import CPU time (limit 25%)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--secret-share", type=float, default=0.01)
    parser.add_argument("--adversarial", action="store_true", help="also time hostile 1 MiB inputs")
    parser.add_argument("--import", dest="import_events", type=int, default=0, metavar="N",
                        help="also time `Memory.import_lines` of N events with and without redaction")
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
    if args.import_events:
        print(f"urchin import of {args.import_events} events, {args.rounds} rounds each:")
        import_ratio(make_events(args.import_events, args.secret_share, seed=11), args.rounds)
    if args.adversarial:
        print("adversarial inputs (CPU time, one pass each):")
        adversarial(redactor)


if __name__ == "__main__":
    main()
