"""Rules that live once: one timestamp formatter, one token budget, one session-context weighting.
A second copy creeping back (the round-one drift: five timestamp formatters, two packers) fails here."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import urchin
from urchin.hybrid.search_context import pack
from urchin.search.budget import CHARS_PER_TOKEN, TokenBudget
from urchin.search.cosine import neighbour_weights
from urchin.timestamps import format_timestamp

PACKAGE = Path(urchin.__file__).parent


def _sources() -> dict[str, str]:
    return {str(p.relative_to(PACKAGE)): p.read_text("utf-8") for p in PACKAGE.rglob("*.py")}


def test_timestamps_are_written_by_one_function() -> None:
    pattern = re.compile(r"strftime\(\s*['\"]%Y-%m-%dT|\.isoformat\(\s*(timespec|\))")
    exempt = {"timestamps.py",           # the formatter itself
              "facade/timeline.py"}      # day labels: dates (2026-05-04), not times
    offenders = [name for name, text in _sources().items() if pattern.search(text) and name not in exempt]
    assert offenders == [], f"format times with urchin.timestamps.format_timestamp, not by hand: {offenders}"


def test_the_token_estimate_is_declared_once() -> None:
    offenders = [name for name, text in _sources().items()
                 if re.search(r"^CHARS_PER_TOKEN\s*=", text, re.M) and name != "search/budget.py"]
    assert offenders == []


def test_format_timestamp_is_utc_z_with_or_without_milliseconds() -> None:
    moment = datetime(2026, 5, 4, 22, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(moment) == "2026-05-04T20:00:00.123Z"
    assert format_timestamp(moment, ms=False) == "2026-05-04T20:00:00Z"
    assert format_timestamp(datetime(2026, 5, 4, 20, 0)) == "2026-05-04T20:00:00.000Z"   # naive is UTC
    now = datetime.strptime(format_timestamp(ms=False), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - now).total_seconds()) < 5


def test_budget_takes_whole_pieces_then_cuts_one_at_a_line_boundary() -> None:
    budget = TokenBudget(10)                       # 40 characters
    assert budget.take("a" * 20) == "a" * 20 and not budget.cut
    assert budget.take("line one\nline two\nline three") == "line one\nline two"
    assert budget.cut and budget.used == 10
    assert budget.take("more") == ""               # spent


def test_budget_never_drops_the_first_piece_but_drops_a_later_one_without_a_line_boundary() -> None:
    first = TokenBudget(2)
    assert first.take("several words without any newline") == "several"
    later = TokenBudget(3)
    assert later.take("abcd") == "abcd"
    assert later.take("no newline in reach here") == ""
    assert TokenBudget(None).take("x" * 10_000) == "x" * 10_000


def test_pack_and_memories_share_the_budget_rule() -> None:
    results = [{"id": str(i), "content": text} for i, text in enumerate(["x" * 16, "one\ntwo\nthree four"])]
    packed, truncated, used = pack(results, 6)
    assert truncated and [r["content"] for r in packed] == ["x" * 16, "one\ntwo"] and packed[1]["cut"]
    assert used == 4 + -(-len("one\ntwo") // CHARS_PER_TOKEN)


def test_neighbour_weights_decay_by_distance_and_vanish_at_zero() -> None:
    assert neighbour_weights(0.5, 3) == [0.5, 0.25, 0.125]
    assert neighbour_weights(0.0, 3) == [] and neighbour_weights(0.5, 0) == []


def test_numbers_booleans_and_unknown_parameters_are_checked_in_one_place() -> None:
    rules = ("must be a whole number", "must be true or false, got", "unknown parameter (")
    offenders = [(name, rule) for name, text in _sources().items() for rule in rules
                 if rule in text and name != "value_checks.py"]
    assert offenders == [], f"use urchin.value_checks (check_number, check_bool, unknown_parameter): {offenders}"
