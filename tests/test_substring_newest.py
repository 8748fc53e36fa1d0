"""`SubstringSearcher.newest`: a filtered "newest events" answer kept between calls and brought up to
date from the journal's tail answers exactly as a fresh `search(None, ...)` does, whatever happened
in between (appends, back-dated events, a later or earlier window, forgets and their compaction, a
redaction rewrite, lines the write path did not prove), and a repeated call reads only the tail."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from urchin.config import Settings
from urchin.event import Event
from urchin.facade import Memory
from urchin.search import substring
from urchin.search.query import Filters
from urchin.timestamps import format_timestamp

NOW = datetime.now(UTC)
WORKSPACES = ("alpha", "beta", "gamma")
KINDS = ("conversation", "decision", "commit", "command")


@pytest.fixture
def memory(urchin_home: Path) -> Iterator[Memory]:
    with Memory(Settings.resolve(str(urchin_home))) as m:
        yield m


def _items(rng: random.Random, count: int, tag: str, oldest_minutes: int = 5000) -> list[dict[str, Any]]:
    return [{"id": f"{tag}-{i}", "timestamp": format_timestamp(NOW - timedelta(minutes=rng.uniform(0, oldest_minutes))),
             "source": rng.choice(("claude", "git", "shell")), "kind": rng.choice(KINDS),
             "workspace": rng.choice(WORKSPACES), "session": f"s{rng.randrange(6)}",
             "content": f"event {tag} {i}"} for i in range(count)]


def _since(minutes: int) -> int:
    return int((NOW - timedelta(minutes=minutes)).timestamp() * 1000)


def _check_all(memory: Memory, windows: tuple[int, ...]) -> None:
    searcher = memory.substring
    for workspace in WORKSPACES:
        for filters, limit in ((Filters(workspace=workspace), 25), (Filters(workspace=workspace, kind="decision"), 5),
                               (Filters(workspace=workspace, kind="commit"), 3)):
            for minutes in windows:
                since = _since(minutes)
                kept = [e.id for e in searcher.newest(filters, since_ms=since, limit=limit)]
                fresh = [e.id for e in searcher.search(None, since_ms=since, limit=limit, filters=filters)]
                assert kept == fresh, (filters, limit, minutes)


def test_newest_answers_as_a_fresh_search_through_appends_windows_and_forgets(memory: Memory) -> None:
    rng = random.Random(7)
    memory.ingest(_items(rng, 400, "a"))
    _check_all(memory, (6000, 3000, 1000))               # the window starts later each time: the kept answer is cut
    memory.ingest(_items(rng, 30, "b", oldest_minutes=4000))   # back-dated events among the newest
    _check_all(memory, (1000, 3000, 6000))               # and earlier again: read afresh
    memory.ingest(_items(rng, 5, "c", oldest_minutes=10))
    _check_all(memory, (6000, 900))
    newest = memory.substring.newest(Filters(workspace="alpha"), since_ms=_since(6000), limit=25)
    memory.forget([e.id for e in newest[:3]], confirm=True)          # kept items forgotten: not served again
    _check_all(memory, (6000, 900))
    memory.ingest(_items(rng, 5, "d", oldest_minutes=10))
    _check_all(memory, (6000,))


def test_lines_the_write_path_did_not_prove_are_served_redacted_and_not_kept(memory: Memory,
                                                                            urchin_home: Path) -> None:
    rng = random.Random(8)
    memory.ingest(_items(rng, 60, "a"))
    filters = Filters(workspace="alpha")
    memory.substring.newest(filters, since_ms=_since(6000), limit=25)
    line = {"id": "raw-1", "timestamp": format_timestamp(NOW), "source": "shell", "kind": "command",
            "workspace": "alpha", "content": "export API_KEY=sk-live-abcdefghijklmnopqrstuvwxyz0123"}
    with (urchin_home / "journal" / "events.jsonl").open("ab") as journal:   # another writer, no proof
        journal.write(orjson.dumps(line) + b"\n")
    for _ in range(2):
        kept = memory.substring.newest(filters, since_ms=_since(6000), limit=25)
        fresh = memory.substring.search(None, since_ms=_since(6000), limit=25, filters=filters)
        assert [e.id for e in kept] == [e.id for e in fresh] and kept[0].id == "raw-1"
        assert "abcdefghijklmnopqrstuvwxyz" not in kept[0].content and kept[0].content == fresh[0].content


def test_a_repeated_call_parses_only_what_the_journal_gained(memory: Memory,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9)
    memory.ingest(_items(rng, 600, "a"))
    filters = Filters(workspace="beta")
    first = memory.substring.newest(filters, since_ms=_since(6000), limit=100)
    memory.ingest([{**item, "workspace": "beta"} for item in _items(rng, 3, "b", oldest_minutes=1)])
    parsed: list[bytes] = []
    parse = Event.from_json

    def counting(line: Any) -> Event | None:
        parsed.append(line)
        return parse(line)

    monkeypatch.setattr(Event, "from_json", staticmethod(counting))
    again = memory.substring.newest(filters, since_ms=_since(6000), limit=100)
    assert len(parsed) == 3, len(parsed)                 # the three lines added
    assert {e.id for e in again[:3]} == {"b-0", "b-1", "b-2"}
    assert [e.id for e in again[3:]] == [e.id for e in first[:97]]


def test_a_line_still_being_written_is_left_for_the_next_call(memory: Memory, urchin_home: Path) -> None:
    rng = random.Random(10)
    memory.ingest(_items(rng, 40, "a"))
    filters = Filters(workspace="gamma")
    memory.substring.newest(filters, since_ms=_since(6000), limit=10)
    line = orjson.dumps({"id": "late-1", "timestamp": format_timestamp(NOW), "source": "shell", "kind": "command",
                         "workspace": "gamma", "content": "make release"})
    journal = urchin_home / "journal" / "events.jsonl"
    with journal.open("ab") as handle:                  # half a line: another writer's write in progress
        handle.write(line[:25])
    for finish in (b"", line[25:] + b"\n"):
        with journal.open("ab") as handle:
            handle.write(finish)
        kept = memory.substring.newest(filters, since_ms=_since(6000), limit=10)
        fresh = memory.substring.search(None, since_ms=_since(6000), limit=10, filters=filters)
        assert [e.id for e in kept] == [e.id for e in fresh]
        assert ("late-1" in [e.id for e in kept]) == bool(finish)


def test_what_is_kept_is_bounded_in_bytes_and_answers_stay_right(memory: Memory,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(substring, "_REMEMBERED_BYTES", 60_000)
    rng = random.Random(11)
    memory.ingest([{**item, "content": f"{item['content']} " + "tool output " * 400} for item in _items(rng, 90, "a")])
    searcher = memory.substring
    for limit in (3, 25, 3):                 # big answers (25 x ~5 KB) push the others out, never past the bound
        for workspace in WORKSPACES:
            filters = Filters(workspace=workspace)
            kept = searcher.newest(filters, since_ms=_since(6000), limit=limit)
            assert [e.id for e in kept] == [e.id for e in searcher.search(None, since_ms=_since(6000), limit=limit,
                                                                           filters=filters)]
            assert sum(k.size for k in searcher._kept.values()) <= 60_000
    assert searcher._kept                    # the small ones are kept
