"""A ranked leg's tiered gathering (urchin/hybrid/gather.py) against the real PostgreSQL: which chunks the
budget takes (step by step, the recent window first, each month in order, each month's rows in the
order they were stored), and how often it reads each month to take them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from urchin.config import Settings
from urchin.facade import Memory
from urchin.hybrid.base import Filter, Tier, split_key
from urchin.hybrid.pg_legs import RECENT_DAYS
from urchin.hybrid.postgres import PostgresIndex
from urchin.hybrid.sparse import term_id, to_sparsevec, tokens
from urchin.timestamps import format_timestamp

WORDS = ("quokka", "marmot", "wombat", "numbat", "dingo")
MONTH = re.compile(r"urchin_chunks_\d{4}m\d{2}")


def _events(words: tuple[str, ...], now: datetime) -> list[dict[str, Any]]:
    """Each event holds a prefix of `words` (none to all), at times spread over three or four months in
    an order unlike the journal's, none within hours of the recent window's edge."""
    out = []
    for i in range(30 * (len(words) + 1)):
        days = (i * 7.3) % 88 + 0.5
        days += 0.6 if abs(days - RECENT_DAYS) < 0.3 else 0
        held = " ".join(words[: i % (len(words) + 1)])
        out.append({"id": f"e{i:03d}", "content": f"{held} note {i}", "source": "claude", "kind": "conversation",
                    "timestamp": format_timestamp(now - timedelta(days=days))})
    return out


def _steps(words: tuple[str, ...], item: Any) -> list[Tier]:
    """hybrid.plan's steps for these words: every word, all but the last, ..., the first two, then any."""
    items = tuple(item(w) for w in words)
    return [*(Tier(items[:n], True) for n in range(len(items), 1, -1)), Tier(items, False)]


def _oracle(events: list[dict[str, Any]], words: tuple[str, ...], cutoff: datetime, budget: int) -> set[str]:
    """The first `budget` chunks: by step (the first each holds), recent window first, month, journal order."""
    order = []
    for index, event in enumerate(events):
        held = len(event["content"].split()) - 2
        step = len(words) - held if held >= 2 else (len(words) - 1 if held == 1 else None)
        if step is None:
            continue
        moment = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
        order.append(((step, moment < cutoff, (moment.year, moment.month), index), event["id"]))
    return {event_id for _, event_id in sorted(order)[:budget]}


@pytest.fixture(params=[3, 5], ids=["3 words", "5 words"])
def fed(request: pytest.FixtureRequest, pg_settings: Settings) -> Iterator[tuple[PostgresIndex, tuple[str, ...],
                                                                                  list[dict[str, Any]]]]:
    words = WORDS[: request.param]
    events = _events(words, datetime.now(UTC))
    with Memory(pg_settings) as memory:
        memory.ingest(events)
        memory.index()
        yield memory.index_service.backend, words, events


def _leg(backend: PostgresIndex, leg: str, words: tuple[str, ...], budget: int) -> list[Any]:
    """One leg's gathered candidates (a limit above the budget: every one comes back), no neighbours."""
    if leg == "keyword":
        return backend.keyword(list(words), None, Filter(), 100_000, 0, None, _steps(words, str), budget)
    terms = _steps(words, lambda w: term_id(tokens(w)[0]))
    vector = to_sparsevec({t: 1.0 for t in terms[-1].items})
    return backend.sparse(vector, [], Filter(), 100_000, 0, terms, budget)


LEGS = ("keyword", "token-cosine")


def test_the_budget_takes_each_step_and_window_in_order(fed: Any) -> None:
    """Whatever step the budget runs out in (its recent part, its older part, a step read with the one
    before it), the chunks ranked are the first `budget` in the gathering's order."""
    backend, words, events = fed
    total = len(_oracle(events, words, datetime.now(UTC) - timedelta(days=RECENT_DAYS), 10_000))
    for budget in [*range(1, total + 3, 5), total]:
        with backend.conn.transaction():
            cutoff = backend.conn.execute("SELECT now()").fetchone()[0] - timedelta(days=RECENT_DAYS)
            legs = {leg: _leg(backend, leg, words, budget) for leg in LEGS}
        expected = _oracle(events, words, cutoff, budget)
        for leg, rows in legs.items():
            assert {split_key(r.chunk_id)[1] for r in rows} == expected, (leg, budget)


def test_a_cascade_reads_each_month_once_per_pair_of_steps(fed: Any) -> None:
    """When the budget is not full before the last step (the every-word step holds few chunks: most
    questions in real text), each pair of every-word steps reads each month once, not once per step
    and window (at 1M events each such read of a month's index cost ~10 ms of CPU)."""
    backend, words, events = fed
    steps = len(_steps(words, str))
    moments = [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")) for e in events]
    months = {(m.year, m.month) for m in moments}
    for leg in LEGS:
        with backend.conn.transaction():
            cutoff = backend.conn.execute("SELECT now()").fetchone()[0] - timedelta(days=RECENT_DAYS)
            before = _reads(backend)
            rows = _leg(backend, leg, words, 10_000)
            reads = sum(count - before.get(name, 0) for name, count in _reads(backend).items())
        assert rows
        recent = {m for m in months if m >= (cutoff.year, cutoff.month)}
        older = {m for m in months if m <= (cutoff.year, cutoff.month)}
        # the first step's recent part on its own, then one read of every month per pair of every-word
        # steps; a step left over (the any-word step, an odd every-word one) reads each window's months
        pairs, alone = (steps - 1) // 2, (steps - 1) % 2 + 1
        allowed = pairs * (len(recent) + len(months)) + alone * (len(recent) + len(older))
        assert reads <= allowed < steps * (len(recent) + len(older)), (leg, reads, allowed)


def _reads(backend: PostgresIndex) -> dict[str, int]:
    """How many times this transaction has read each month's partition (any scan of its heap)."""
    rows = backend.conn.execute("SELECT relname, seq_scan + idx_scan FROM pg_stat_xact_user_tables "
                                "WHERE relname LIKE 'urchin_chunks_%'").fetchall()
    return {name: int(count) for name, count in rows if MONTH.fullmatch(name)}
