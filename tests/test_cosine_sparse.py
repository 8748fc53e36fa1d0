"""Token-cosine ranking over the rows a query reaches (urchin.search.cosine_sparse) is the reference's
ranking: the same ids, order, scores and matches, bit for bit, as the passes over every row of the
window; and a query's work follows its matches, not the rows there are."""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from urchin.event import Event
from urchin.search import assoc, cosine_sparse
from urchin.search.cosine import TokenCosineIndex
from urchin.search.cosine_settings import RankingSettings

BASE = 1_700_000_000_000
COMMON = ["deploy", "cache", "token", "timeout", "database", "migration", "error", "fix"]
RARE = ["zanzibar", "quokka", "kubernetes", "postgresql", "oauth", "flaky"]
FILLER = [f"w{i}" for i in range(120)]
SOURCES = ["claude", "codex", "shell"]
KINDS = ["conversation", "decision", "command", "note"]
DEADLINE_S = 9.0


def _journal(seed: int, n: int) -> list[Event]:
    """Sessions of varying length (some events in none), time ties inside sessions, ~8% backfilled
    (late) events, ids that do not follow arrival order, kinds and sources a query can name."""
    rng = random.Random(seed)
    events, t, session = [], 0, "s0"
    for i in range(n):
        if rng.random() < 0.06:
            session = f"s{i}"
        t += rng.choice((0, 0, 1, 2, 5))            # ties in time
        ts = t if rng.random() > 0.08 else rng.randrange(0, t + 1)   # a late arrival
        words = rng.choices(FILLER, k=rng.randint(2, 9)) + rng.choices(COMMON, k=rng.randint(0, 3))
        if rng.random() < 0.03:
            words.append(rng.choice(RARE))
        events.append(Event(id=f"{rng.getrandbits(40):010x}", timestamp="", content=" ".join(words),
                            ts_ms=BASE + ts * 1000, source=rng.choice(SOURCES), kind=rng.choice(KINDS),
                            workspace=rng.choice(["api", "web"]),
                            session=None if rng.random() < 0.1 else session))
    return events


def _index(events: list[Event], **options: Any) -> TokenCosineIndex:
    index = TokenCosineIndex(RankingSettings(**options))
    index.freeze_postings = 3000                     # several segments, and pending postings
    for a in range(0, len(events), 137):
        index.add_many(events[a:a + 137])
    return index


QUERIES: list[tuple[str, list[list[list[str]]] | None]] = [
    ("deploy", None), ("error fix", None), ("cache timeout token", None), ("zanzibar", None),
    ("quokka kubernetes", None), ("decisions about the database migration", None), ("what did codex say", None),
    ("w3 w7 deploy", None), ("the", None), ("absentword", None), ("w1", None),
    ("deploy cache", [[["deploy"], ["cache"]]]),          # one OR group
    ("deploy w5", [[["deploy"]], [["absentword"]]]),      # a group nothing holds
    ("database migration", [[["database", "migration"]]]),  # an alternative of two words
    ("deploy", [[["staging"]]]),                          # a group word that is no query term: the passes
]


def _windows(events: list[Event]) -> list[tuple[int | None, int | None]]:
    end = max(e.ts_ms for e in events)
    span = end - BASE
    return [(None, None), (end - span // 10, None), (BASE + span // 3, BASE + span // 2), (None, BASE + span // 5),
            (end - span // 40, end), (BASE + span // 2, BASE + span // 2 + 3000)]


FILTERS: list[dict[str, str]] = [{}, {"workspace": "api"}, {"source": "codex"}, {"kind": "decision"}]


def _cases(events: list[Event]) -> Iterator[tuple[str, Any, int | None, int | None, dict[str, str], int]]:
    sessions = sorted({e.session for e in events if e.session})
    for (query, groups), (since, until) in itertools.product(QUERIES, _windows(events)):
        for filters in [*FILTERS, {"session": sessions[len(sessions) // 2]}]:
            for limit in (1, 10, 20, 60):
                yield query, groups, since, until, filters, limit


def _compare(index: TokenCosineIndex, cases: list[tuple[str, Any, int | None, int | None, dict[str, str], int]],
             deadline: float, minimum: int = 60) -> int:
    """Every case both ways, until the deadline once `minimum` cases are checked."""
    checked = 0
    for query, groups, since, until, filters, limit in cases:
        if checked >= minimum and time.monotonic() > deadline:
            break
        kwargs = {"since_ms": since, "until_ms": until, "limit": limit, "groups": groups, **filters}
        index.reference = False
        fast = index.search(query, **kwargs)
        index.reference = True
        slow = index.search(query, **kwargs)
        index.reference = False
        assert fast == slow, (query, groups, since, until, filters, limit)
        checked += 1
    return checked


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each way ran: the matches holding every word alone, the reach, or the passes."""
    counts: Counter[str] = Counter()

    def counting(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            counts[name if result is not None else f"{name} declined"] += 1
            return result
        return wrapper

    monkeypatch.setattr(cosine_sparse._Ranking, "_tiered", counting("tiered", cosine_sparse._Ranking._tiered))
    monkeypatch.setattr(cosine_sparse._Ranking, "_reached", counting("reached", cosine_sparse._Ranking._reached))
    monkeypatch.setattr(cosine_sparse, "rank", counting("rank", cosine_sparse.rank))
    return counts


@pytest.mark.parametrize("seed,options", [
    (1, {}),                                                    # the shipped constants
    (2, {"context_turns": 1, "session_slots": 3, "pivot": 1.0}),
    (3, {"context": 0.0, "kind": 0.0, "memory": 0.0}),           # no context: matches alone
])
def test_reaching_rows_ranks_exactly_as_the_passes_over_the_window(seed: int, options: dict[str, Any],
                                                                   taken: Counter[str]) -> None:
    events = _journal(seed, 2500)
    index = _index(events, **options)
    assert len(index._segments) >= 2 and len(index._pending_rows) and len(index._late.view()) > 50
    index.assoc = assoc.build(index, dim=16)                    # learned associations expand queries too
    cases = list(_cases(events))
    random.Random(seed).shuffle(cases)
    checked = _compare(index, cases, time.monotonic() + DEADLINE_S / 3)
    assert checked >= 60
    # each way ran: many holding every word, few (then the neighbours and sessions' newest turns), declined
    assert taken["tiered"] >= 10 and taken["reached"] >= 10 and taken["rank declined"] >= 1, taken


def test_sessions_whose_turns_tie_in_time_give_their_newest_by_id(taken: Counter[str]) -> None:
    """The session leg's other turns all score their session's level: the newest win, then the lower
    id; long sessions of tied turns, walked back from their newest, give the same as the passes."""
    rng = random.Random(7)
    events = []
    for i in range(1200):
        text = "quokka deploy" if i % 97 == 0 else " ".join(rng.choices(FILLER, k=4))
        events.append(Event(id=f"{rng.getrandbits(32):08x}", timestamp="", content=text, ts_ms=BASE + (i // 25) * 1000,
                            source="claude", kind="note", workspace="api", session=f"s{i // 300}"))
    index = _index(events)
    end = BASE + (1199 // 25) * 1000
    cases = [(q, None, since, until, filters, limit) for q in ("quokka", "quokka w1", "w2 quokka deploy")
             for since, until in ((None, None), (BASE + 5000, None), (BASE + 3000, end - 4000))
             for filters in ({}, {"source": "claude"}) for limit in (10, 20, 35)]
    assert _compare(index, cases, time.monotonic() + DEADLINE_S / 3) == len(cases)
    assert taken["reached"] >= 10


def test_a_query_touches_its_matches_not_every_row() -> None:
    """A rare word's query allocates less than a byte per row of the journal, over all of it or a
    window of nearly all of it (the passes over every row allocate several floats per row)."""
    rng = random.Random(11)
    n = 40_000
    events = [Event(id=f"e{i:06d}", timestamp="", content=" ".join(rng.choices(FILLER, k=3))
                    + (" zanzibar" if i % 5000 == 0 else ""), ts_ms=BASE + i * 1000, source="claude",
                    kind="note", workspace=None, session=f"s{i // 50}") for i in range(n)]
    index = TokenCosineIndex()
    index.freeze_postings = 2_000                               # pending postings are few (a daemon's: bounded)
    index.add_many(events)
    index.search("zanzibar")                                    # the first query lends its buffers
    for query, since in (("zanzibar", None), ("zanzibar", BASE + 1000)):
        tracemalloc.start()
        try:
            hits = index.search(query, since_ms=since, limit=20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(hits) == 20
        assert peak < n, f"{query!r} since {since}: {peak:,} bytes allocated for {n:,} rows"


def _workspaces_journal(seed: int, n: int) -> list[Event]:
    """Sessions each in one workspace of five but a few that move (their rows in two or three), rows
    with no workspace or no session, and a session that starts in one workspace and is joined later."""
    rng = random.Random(seed)
    names = ["api", "web", "cli", "ops", "docs"]
    events, t, session, home = [], 0, "s0", "api"
    for i in range(n):
        if rng.random() < 0.04:
            session, home = f"s{i}", rng.choice(names)
        t += rng.choice((0, 1, 2, 5))
        ts = t if rng.random() > 0.08 else rng.randrange(0, t + 1)
        workspace: str | None = home
        if session in ("s0",) or rng.random() < 0.03:       # a session that moves between workspaces
            workspace = rng.choice([*names, None])
        words = rng.choices(FILLER, k=rng.randint(2, 9)) + rng.choices(COMMON, k=rng.randint(0, 3))
        if rng.random() < 0.03:
            words.append(rng.choice(RARE))
        events.append(Event(id=f"{rng.getrandbits(40):010x}", timestamp="", content=" ".join(words),
                            ts_ms=BASE + ts * 1000, source=rng.choice(SOURCES), kind=rng.choice(KINDS),
                            workspace=workspace, session=None if rng.random() < 0.08 else session))
    return events


@pytest.mark.parametrize("seed,options", [(4, {}), (5, {"context_turns": 1, "session_slots": 3})])
def test_a_workspace_query_ranks_its_scope_exactly_as_the_passes(seed: int, options: dict[str, Any],
                                                                 taken: Counter[str]) -> None:
    """Filtered to a workspace, the ranking reads only that workspace's rows and the sessions that
    cross into it (urchin.search.scope), and gives what the passes over every row of the window give:
    a neighbour or a session in another workspace still counts where its session crosses."""
    events = _workspaces_journal(seed, 3000)
    index = _index(events, **options)
    mixed = {e.session for e in events if e.session} - {
        s for s in {e.session for e in events} if len({e.workspace for e in events if e.session == s}) == 1}
    assert len(mixed) >= 3, "the journal must hold sessions crossing workspaces"
    cases = [(q, g, since, until, {"workspace": w, **extra}, limit)
             for (q, g), (since, until) in itertools.product(QUERIES, _windows(events))
             for w in ("api", "web", "ops") for extra in ({}, {"kind": "decision"}) for limit in (1, 10, 40)]
    random.Random(seed).shuffle(cases)
    assert _compare(index, cases, time.monotonic() + DEADLINE_S / 3) >= 60
    assert taken["tiered"] >= 5 and taken["reached"] >= 5, taken


def test_a_workspace_query_adds_only_its_scope_postings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A common word in one workspace of twelve: the scores added are that workspace's matches, not
    every match of the window (the cost follows the workspace, not the journal)."""
    rng = random.Random(12)
    events = [Event(id=f"e{i:06d}", timestamp="", content=" ".join(rng.choices(FILLER, k=3)) + " deploy cache",
                    ts_ms=BASE + i * 1000, source="claude", kind="note", workspace=f"p{(i // 40) % 12}",
                    session=f"s{i // 40}") for i in range(12_000)]
    index = _index(events)
    added: list[int] = []
    postings = cosine_sparse._Ranking._postings

    def counting(self: Any) -> Any:
        out = postings(self)
        added.append(sum(len(rows) for _, _, rows, _ in out))
        return out

    monkeypatch.setattr(cosine_sparse._Ranking, "_postings", counting)
    fast = index.search("deploy cache", workspace="p3", limit=20)
    index.reference = True
    assert fast == index.search("deploy cache", workspace="p3", limit=20)
    assert added and added[0] <= 2 * 1000 + 100, added    # p3's 1,000 rows, two words each


def test_a_recent_window_asks_only_the_segments_holding_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments are made of rows added one after another: a query over the last hour looks its terms up
    in the one or two segments holding that hour, not in every segment (a journal three times larger has
    three times as many), with the same results as the passes over the window."""
    from urchin.search.postings import Segment

    rng = random.Random(5)
    events = [Event(id=f"e{i:06d}", timestamp="", content=" ".join(rng.choices(FILLER, k=4)) + " deploy cache",
                    ts_ms=BASE + i * 1000, source="claude", kind="note", workspace="api",
                    session=f"s{i // 30}") for i in range(6000)]
    index = TokenCosineIndex()
    index.freeze_postings, index.max_merge_postings = 2000, 4000     # segments of ~650 rows
    for a in range(0, len(events), 300):
        index.add_many(events[a:a + 300])
    assert len(index._segments) >= 8
    asked: list[int] = []
    postings = Segment.postings

    def counting(self: Segment, term: int) -> Any:
        asked.append(term)
        return postings(self, term)

    monkeypatch.setattr(Segment, "postings", counting)
    since = BASE + (6000 - 600) * 1000
    fast = index.search("deploy cache", since_ms=since, limit=20)
    assert fast and len(asked) <= 2 * 4, len(asked)      # two terms, in the segments of the last 600 rows
    index.reference = True
    assert fast == index.search("deploy cache", since_ms=since, limit=20)


def test_a_walk_past_a_sessions_first_turn_adds_nothing_whatever_the_links_hold_past_the_rows() -> None:
    """A missing link (-1) read as a row reads the links' storage past the rows: a loaded index's room
    (`map_with_room`: zeros, so row 0). The walk stays at -1 (`_Ranking._gathered`), so a session's first
    turns add nothing from row 0, which holds a match: the same as the passes over the window."""
    events = _journal(13, 1500)
    events[0] = dataclasses.replace(events[0], content="deploy cache deploy")
    index = _index(events)
    for links in (index._prev, index._next):
        assert len(links.data) > len(index)
        links.data[len(index):] = 0                  # as a loaded index's room: row 0
    starts = sum(1 for row in range(len(index)) if index._prev.data[row] < 0)
    assert starts >= 50
    cases = [(q, None, None, None, {}, limit) for q in ("deploy", "deploy cache", "cache fix") for limit in (10, 60)]
    assert _compare(index, cases, time.monotonic() + DEADLINE_S / 3) == len(cases)
