"""Substring search: the `urchin_search` contract, and the block index that makes it fast.

Every search result is compared with what a plain scan of the journal would return where it
matters (`reference`), so the index can only make queries faster, never change an answer.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from freezegun import freeze_time

from tests.conftest import run_urchin
from urchin.event import Event
from urchin.facade import Memory
from urchin.search import blockbuild, blockindex, blockview
from urchin.search.blockbuild import BLOCK_TARGET, bitmap_py, bitmaps_numpy
from urchin.search.query import Filters
from urchin.search.substring import SubstringSearcher
from urchin.timestamps import format_timestamp

NOW = datetime(2026, 5, 4, 20, 0, tzinfo=UTC)
ANY = Filters()
WORDS = ("alpha", "beta", "gamma", "delta", "Straße", "σίσυφος", "naïve", "retry", "budget", "quokka", "path/to/x")


def stamp(minutes_ago: float) -> str:
    return format_timestamp(NOW - timedelta(minutes=minutes_ago))


def add(memory: Memory, *items: dict[str, Any]) -> None:
    results = memory.ingest([{"source": "claude", "kind": "conversation", **item} for item in items])
    assert all(r.status == "appended" for r in results), [r.label for r in results]


def contents(result: Any) -> list[str]:
    return [hit.event.content for hit in result.hits]


def reference(memory: Memory, query: str | None, since_ms: int, limit: int, filters: Filters = ANY,
              oldest_first: bool = False, every: list[Event] | None = None,
              until_ms: int | None = None) -> list[str]:
    """What the contract says, by brute force over every line."""
    folded = query.casefold() if query is not None else None
    if every is None:
        every = [e for _, e in memory.journal.iter_events()]
    events = [e for e in every
              if since_ms <= e.ts_ms <= (until_ms if until_ms is not None else e.ts_ms) and filters.match(e)
              and (folded is None or folded in e.content.casefold())]
    events.sort(key=lambda e: (e.ts_ms, e.id), reverse=True)
    chosen = events[:limit]
    if oldest_first:
        chosen.reverse()
    return [e.id for e in chosen]


def searched(memory: Memory, query: str | None, since_ms: int, limit: int, filters: Filters = ANY,
             oldest_first: bool = False, until_ms: int | None = None) -> list[str]:
    events = memory.substring.search(query, since_ms=since_ms, limit=limit, filters=filters,
                                     oldest_first=oldest_first, until_ms=until_ms)
    return [e.id for e in events]


def fill(memory: Memory, n: int, seed: int = 1) -> None:
    """`n` random events over 30 days, out of order, several blocks' worth."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(3, 60))
        items.append({"id": f"ev-{seed}-{i:05d}", "timestamp": stamp(rng.uniform(0, 30 * 24 * 60)),
                      "content": " ".join(words), "source": rng.choice(("claude", "shell", "git")),
                      "workspace": rng.choice(("w1", "w2")), "session": f"s{rng.randint(0, 5)}",
                      "kind": rng.choice(("conversation", "command", "note"))})
    for start in range(0, n, 500):
        add(memory, *items[start:start + 500])


# ---- the contract ----------------------------------------------------------------------------
@freeze_time(NOW)
def test_unicode_casefold_matches_both_ways(memory: Memory) -> None:
    add(memory, {"content": "Die Straße ist lang", "timestamp": stamp(3)},
        {"content": "GROSSE STRASSE", "timestamp": stamp(2)},
        {"content": "ΣΊΣΥΦΟΣ rolled it", "timestamp": stamp(1)})
    assert contents(memory.search("STRASSE")) == ["GROSSE STRASSE", "Die Straße ist lang"]
    assert contents(memory.search("straße")) == ["GROSSE STRASSE", "Die Straße ist lang"]
    assert contents(memory.search("σίσυφος")) == ["ΣΊΣΥΦΟΣ rolled it"]  # final sigma folds like σ


@freeze_time(NOW)
def test_results_are_newest_first_by_timestamp_not_file_order(memory: Memory) -> None:
    add(memory, {"id": "b", "content": "deploy two", "timestamp": stamp(10)},
        {"id": "old", "content": "deploy backfilled", "timestamp": stamp(600)},
        {"id": "a", "content": "deploy three", "timestamp": stamp(5)},
        {"id": "c", "content": "deploy tie", "timestamp": stamp(10)})
    ids = [hit.event.id for hit in memory.search("DEPLOY").hits]
    assert ids == ["a", "c", "b", "old"]  # equal timestamps: the larger id first


def test_window_is_relative_to_now(memory: Memory) -> None:
    with freeze_time(NOW):
        add(memory, {"content": "window probe recent", "timestamp": stamp(60)},
            {"content": "window probe old", "timestamp": stamp(60 * 30)})
        assert contents(memory.search("window probe", hours=2)) == ["window probe recent"]
        assert len(memory.search("window probe", hours=31).hits) == 2
    with freeze_time(NOW + timedelta(hours=3)):
        assert contents(memory.search("window probe", hours=2)) == []
        assert contents(memory.search("window probe", hours=4)) == ["window probe recent"]


@freeze_time(NOW)
def test_filters_and_limit_apply_before_the_cut(memory: Memory) -> None:
    items = [{"content": f"filter me {i}", "timestamp": stamp(i), "source": "shell" if i % 3 else "git",
              "workspace": f"w{i % 2}", "session": f"s{i % 4}", "kind": "command" if i % 5 else "note"}
             for i in range(40)]
    add(memory, *items)
    since = int((NOW - timedelta(days=1)).timestamp() * 1000)
    for filters in (Filters.of(source="GIT"), Filters.of(workspace="w1"), Filters.of(session="s3"),
                    Filters.of(kind="note"), Filters.of(source="shell", workspace="w0", kind="command")):
        got = searched(memory, "filter me", since, 5, filters)
        assert got == reference(memory, "filter me", since, 5, filters)
        assert len(got) == 5
    assert len(memory.search("filter me", limit=7, source="git").hits) == 7


@freeze_time(NOW)
def test_lines_that_are_not_json_or_not_events_are_skipped(memory: Memory) -> None:
    add(memory, {"content": "valid needle", "timestamp": stamp(1)})
    memory.journal.append([b"{not json needle", b'["needle"]', b'{"content": "needle, no id or timestamp"}'])
    add(memory, {"content": "another needle", "timestamp": stamp(0)})
    assert contents(memory.search("needle")) == ["another needle", "valid needle"]


@freeze_time(NOW)
def test_json_escaped_characters_are_found(memory: Memory) -> None:
    add(memory, {"content": 'she said "ship it" loudly', "timestamp": stamp(4)},
        {"content": "C:\\Users\\dev\\build.ps1", "timestamp": stamp(3)},
        {"content": "first line\nsecond line\ttabbed", "timestamp": stamp(2)},
        {"content": "a/b/c and a \\u escape literal", "timestamp": stamp(1)})
    assert contents(memory.search('"ship it"')) == ['she said "ship it" loudly']
    assert contents(memory.search("users\\DEV")) == ["C:\\Users\\dev\\build.ps1"]
    assert contents(memory.search("\\")) == ["a/b/c and a \\u escape literal", "C:\\Users\\dev\\build.ps1"]
    assert contents(memory.search("line\nsecond")) == ["first line\nsecond line\ttabbed"]
    assert contents(memory.search("\ttab")) == ["first line\nsecond line\ttabbed"]
    assert contents(memory.search("\\u escape")) == ["a/b/c and a \\u escape literal"]
    assert contents(memory.search("b/c")) == ["a/b/c and a \\u escape literal"]
    assert memory.search("n\\s").hits == []  # the raw JSON has `line\nsecond`; the content does not


@freeze_time(NOW)
def test_lines_from_other_writers_with_unicode_escapes_are_found(memory: Memory) -> None:
    line = ('{"id":"ts-1","timestamp":"' + stamp(1) + '","source":"claude","kind":"note",'
            '"content":"Stra\\u00dfe \\u0041BC"}')
    memory.journal.append([line.encode(), b'{"id": "ts-2", "timestamp": "2026-05-04T21:59:00+02:00", '
                                          b'"content": "spaced \\/ writer", "sessionId": "sx"}'])
    assert contents(memory.search("STRASSE abc")) == ["Straße ABC"]
    assert contents(memory.search("ed / wri")) == ["spaced / writer"]
    assert [hit.event.id for hit in memory.search("writer", session="sx").hits] == ["ts-2"]
    assert [hit.event.id for hit in memory.search("writer", kind="note").hits] == ["ts-2"]  # kind defaults to note


@freeze_time(NOW)
def test_queries_shorter_than_three_bytes(memory: Memory) -> None:
    add(memory, {"content": "xq marks", "timestamp": stamp(3)}, {"content": "Maß", "timestamp": stamp(2)},
        {"content": "über", "timestamp": stamp(1)})
    assert contents(memory.search("XQ")) == ["xq marks"]
    assert contents(memory.search("ü")) == ["über"]
    assert contents(memory.search("ß")) == ["Maß"]  # folds to "ss": two bytes, no trigram filter
    assert memory.search("zz").hits == []


@freeze_time(NOW)
def test_trigram_false_positives_are_not_hits(memory: Memory) -> None:
    # every trigram of "abcdef" is in the block ("abc", "bcd", "cde", "def"), the word is not
    add(memory, {"content": "abcd xx", "timestamp": stamp(2)}, {"content": "bcde cdef", "timestamp": stamp(1)})
    assert memory.search("abcdef").hits == []
    assert contents(memory.search("bcde")) == ["bcde cdef"]


@freeze_time(NOW)
def test_recent_and_session_context_match_a_full_scan(memory: Memory) -> None:
    fill(memory, 3000)
    assert memory.substring.catch_up().events == 3000  # nothing searched yet: the first catch-up builds
    since = int((NOW - timedelta(days=7)).timestamp() * 1000)
    assert searched(memory, None, since, 20) == reference(memory, None, since, 20)
    assert [e.id for e in memory.recent(hours=24 * 7).events] == reference(memory, None, since, 20)
    session = [e.id for e in memory.session_context("s2", hours=24 * 7, limit=30).events]
    assert session == reference(memory, None, since, 30, Filters.of(session="s2"), oldest_first=True)


# ---- the index --------------------------------------------------------------------------------
@pytest.mark.parametrize("eager", [48, 0])  # 0: every block goes through the one-shot bitmap AND
@freeze_time(NOW)
def test_many_blocks_give_the_same_answers_as_a_full_scan(memory: Memory, eager: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blockview, "_EAGER", eager)
    fill(memory, 4000)
    view_blocks = memory.substring.catch_up().blocks
    assert view_blocks >= 4, "the journal should span several blocks"
    rng = random.Random(5)
    every = [e for _, e in memory.journal.iter_events()]
    for _ in range(60):
        query = rng.choice((None, rng.choice(WORDS), rng.choice(WORDS)[1:4], "STRASSE", "ß", "quokka alpha",
                            "absent-term", "a"))
        since = int((NOW - timedelta(hours=rng.choice((1, 24, 168, 24 * 40)))).timestamp() * 1000)
        until = rng.choice((None, None, since + rng.randint(1, 10 * 86_400_000)))
        limit = rng.choice((1, 5, 20, 1000))
        filters = rng.choice((Filters(), Filters.of(source="git"), Filters.of(session="s1", workspace="w2"),
                              Filters.of(kind="note")))
        expected = reference(memory, query, since, limit, filters, every=every, until_ms=until)
        assert searched(memory, query, since, limit, filters, until_ms=until) == expected, \
            (query, since, until, limit, filters)


@freeze_time(NOW)
def test_appends_by_another_process_are_caught_up(memory: Memory) -> None:
    fill(memory, 1500)
    assert memory.search("written elsewhere").hits == []  # builds the index in this process
    done = run_urchin("ingest", "--timestamp", stamp(1), "written ELSEWHERE later")
    assert done.returncode == 0, done.stderr
    assert contents(memory.search("written elsewhere")) == ["written ELSEWHERE later"]
    found = run_urchin("search", "ELSEWHERE", "--hours", "100000")  # and the other process sees it too
    assert found.returncode == 0, found.stderr
    assert "written ELSEWHERE later" in found.stdout


@freeze_time(NOW)
def test_incremental_catch_up_cuts_the_same_blocks_as_one_build(memory: Memory, tmp_path: Path) -> None:
    rng = random.Random(3)
    for i in range(60):  # many small catch-ups, each reopening the last block
        add(memory, *({"content": " ".join(rng.choices(WORDS, k=40)) + f" batch{i:03d}x{j}",
                       "timestamp": stamp(rng.uniform(0, 999))} for j in range(rng.randint(1, 40))))
        memory.substring.catch_up()
    whole = SubstringSearcher(memory.journal, tmp_path / "whole")
    whole.catch_up()
    with memory.substring.index.snapshot() as a, whole.index.snapshot() as b:
        assert a.n == b.n >= 2
        assert (list(a.starts), list(a.ends), list(a.mins), list(a.maxs)) == \
               (list(b.starts), list(b.ends), list(b.mins), list(b.maxs))
    since = int((NOW - timedelta(days=1)).timestamp() * 1000)
    for word in WORDS + tuple(f"batch{i:03d}x0" for i in range(60)):
        assert searched(memory, word, since, 50) == reference(memory, word, since, 50), word


@freeze_time(NOW)
def test_deleted_or_corrupt_index_is_rebuilt(memory: Memory) -> None:
    fill(memory, 1500)
    since = int((NOW - timedelta(days=60)).timestamp() * 1000)
    expected = reference(memory, "quokka", since, 30)
    assert searched(memory, "quokka", since, 30) == expected
    memory.substring.close()
    shutil.rmtree(memory.substring.index.dir)
    assert searched(memory, "quokka", since, 30) == expected
    memory.substring.close()
    zones = memory.substring.index.zones_path
    zones.write_bytes(os.urandom(zones.stat().st_size))
    assert searched(memory, "quokka", since, 30) == expected
    assert memory.substring.catch_up().bytes == 0
    bits = memory.substring.index.rows_path
    bits.write_bytes(b"")  # shorter than the header says: rebuilt, never trusted
    fresh = Memory(memory.settings)
    assert searched(fresh, "quokka", since, 30) == expected


@freeze_time(NOW)
def test_torn_tail_and_truncation_rebuild_from_the_damaged_block(memory: Memory) -> None:
    fill(memory, 2000)
    memory.substring.catch_up()
    with memory.journal.path.open("ab") as handle:  # a writer died mid-line
        handle.write(b'{"id":"torn","timestamp":"%s","content":"torn tail quokka' % stamp(0).encode())
    assert "torn" not in searched(memory, "torn tail", 0, 10)
    add(memory, {"id": "after", "content": "after the repair quokka", "timestamp": stamp(0)})
    assert searched(memory, "quokka", 0, 5)[0] == "after"
    assert searched(memory, "torn tail", 0, 10) == []
    # the journal shrinks into the middle of an indexed block, then different lines are written
    size = memory.journal.size()
    with memory.journal.path.open("r+b") as handle:
        handle.seek(size // 2)
        cut = size // 2 + handle.read().index(b"\n") + 1
        handle.truncate(cut)
    add(memory, *({"id": f"new-{i}", "content": f"rewritten quokka {i}", "timestamp": stamp(i)} for i in range(50)))
    for query in ("quokka", "rewritten", "alpha beta", None):
        assert searched(memory, query, 0, 100) == reference(memory, query, 0, 100), query


def test_index_state_reports_the_lag(memory: Memory) -> None:
    add(memory, {"content": "state one"})
    assert memory.substring.index_state()["lagBytes"] == memory.journal.size()  # nothing indexed yet
    memory.search("state")
    state = memory.substring.index_state()
    assert state["lagBytes"] == 0 and state["blocks"] == 1 and state["indexedBytes"] == memory.journal.size()
    add(memory, {"content": "state two"})
    assert memory.substring.index_state()["lagBytes"] > 0


def test_index_files_are_private(memory: Memory) -> None:
    add(memory, {"content": "private please"})
    memory.search("private")
    index = memory.substring.index
    assert index.dir.stat().st_mode & 0o777 == 0o700
    for path in index.dir.iterdir():
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_search_without_a_journal_is_empty_and_writes_nothing(memory: Memory) -> None:
    assert memory.search("anything").hits == []
    assert not memory.substring.index.dir.exists()


def test_python_and_numpy_bitmaps_agree() -> None:
    rng = random.Random(9)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(0, 400))).casefold().encode() for _ in range(5)] + [b"", b"ab"]
    assert bitmaps_numpy(texts) == [bitmap_py(t) for t in texts]


def test_block_target_is_what_the_tests_assume() -> None:
    assert BLOCK_TARGET == 64 << 10 and blockbuild.ROW * 8 == 1 << blockbuild.BITS_LOG2


def test_cold_query_path_does_not_import_numpy(memory: Memory) -> None:
    add(memory, {"content": "numpy free"})
    done = run_urchin("search", "numpy", "--json")  # first use builds (small: pure Python)
    assert done.returncode == 0 and orjson.loads(done.stdout)["events"][0]["content"] == "numpy free"
    probe = run_urchin_python("import sys; from urchin.facade import Memory; m = Memory.open(); "
                              "m.search('numpy'); print('numpy' in sys.modules)")
    assert probe.strip() == "False"


def run_urchin_python(code: str) -> str:
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_event_timestamps_in_the_index_match_the_event_model() -> None:
    cache: dict[str, int] = {}
    for ts in ("2026-05-04T20:00:00.123Z", "2024-02-29T23:59:59.999Z", "2026-05-04T22:00:00+02:00",
               "2026-05-04T20:00:00Z", "1999-12-31T23:59:59.001Z"):
        event = Event.from_record({"id": "x", "timestamp": ts, "content": "c"})
        assert event is not None
        assert abs(blockbuild.ts_ms(ts, cache) - event.ts_ms) <= 1, ts  # type: ignore[operator]


# ---- the import fast paths this work added to event.py and ingest.py ---------------------------
@pytest.mark.parametrize(("given", "stored"), [
    ("2026-05-04T20:00:00.123Z", "2026-05-04T20:00:00.123Z"),
    ("2026-05-04T22:00:00.5+02:00", "2026-05-04T20:00:00.500Z"),
    ("2026-05-04T20:00:00Z", "2026-05-04T20:00:00.000Z"),
    ("1970-01-01T01:00:00+01:00", format_timestamp(datetime(1970, 1, 1, tzinfo=UTC))),  # the earliest accepted
])
def test_timestamps_are_stored_canonical(given: str, stored: str) -> None:
    assert Event.from_input({"content": "x", "timestamp": given}).timestamp == stored


def test_bad_canonical_looking_timestamp_is_still_rejected() -> None:
    from urchin.errors import ValidationError

    with pytest.raises(ValidationError, match="timestamp"):
        Event.from_input({"content": "x", "timestamp": "2026-13-04T20:00:00.000Z"})


def test_labels_normalise_the_same_when_cached() -> None:
    from urchin.errors import ValidationError

    for _ in range(2):
        assert Event.from_input({"content": "x", "source": " Claude ", "kind": "NOTE"}).source == "claude"
        with pytest.raises(ValidationError, match="source"):
            Event.from_input({"content": "x", "source": "Bad Label!"})


def test_actor_is_stamped_once_and_a_given_actor_is_kept(memory: Memory) -> None:
    stamped = memory.ingest_one({"content": "who wrote this"})
    assert stamped.event is not None and stamped.event.actor == {"account": memory.settings.account,
                                                                 "device": memory.settings.device}
    given = memory.ingest_one({"content": "mine", "actor": {"account": "a", "device": "d"}})
    assert given.event is not None and given.event.actor == {"account": "a", "device": "d"}
    bad = memory.ingest_one({"content": "bad actor", "actor": "someone"})
    assert bad.status == "rejected" and bad.reason is not None and bad.reason.startswith("actor")


@freeze_time(NOW)
def test_searches_stay_correct_while_another_process_appends(memory: Memory) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    fill(memory, 500)
    writer = ("import sys; from urchin.facade import Memory\n"
              "m = Memory.open()\n"
              "for i in range(300):\n"
              "    m.ingest([{'id': f'live-{i}', 'content': f'live quokka {i} ' + 'pad ' * (i % 50),\n"
              "               'timestamp': sys.argv[1]}])\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", writer, stamp(0)], env=env)
    seen = 0
    while proc.poll() is None:
        found = [i for i in searched(memory, "live quokka", 0, 1000) if i.startswith("live-")]
        assert len(found) >= seen  # what was found stays found
        seen = len(found)
    assert proc.returncode == 0
    assert searched(memory, "live quokka", 0, 1000) == reference(memory, "live quokka", 0, 1000)
    assert len(searched(memory, "live quokka", 0, 1000)) == 300


def test_duplicates_are_still_found_with_ids_hashed_once(memory: Memory) -> None:
    first = memory.ingest([{"id": "dup-1", "content": "one"}, {"id": "dup-1", "content": "again in the batch"},
                           {"id": "dup-2", "content": "two"}])
    assert [r.status for r in first] == ["appended", "duplicate", "appended"]
    fresh = Memory(memory.settings)  # another process's view: the sidecar, not this one's memory
    assert [r.status for r in fresh.ingest([{"id": "dup-2", "content": "x"}, {"id": "dup-3", "content": "y"}])] \
        == ["duplicate", "appended"]
    fresh.ingestor.keep_ids_in_memory()
    assert fresh.ingest_one({"id": "dup-3", "content": "z"}).status == "duplicate"


@freeze_time(NOW)
def test_parallel_bulk_build_writes_the_same_index_as_one_process(memory: Memory, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fill(memory, 4000)
    serial = SubstringSearcher(memory.journal, tmp_path / "serial")
    monkeypatch.setattr(blockindex, "_PARALLEL_FROM", 1 << 62)
    serial.catch_up()
    monkeypatch.setattr(blockindex, "_PARALLEL_FROM", 1)
    monkeypatch.setattr(blockindex, "_TASK_BLOCKS", 2)
    parallel = SubstringSearcher(memory.journal, tmp_path / "parallel")
    report = parallel.catch_up()
    assert report.events == 4000 and report.bytes == memory.journal.size()
    assert parallel.index.parallel_blocks >= 4  # the workers did build, the fallback did not hide it
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))   # workers that cannot start
    fallback = SubstringSearcher(memory.journal, tmp_path / "fallback")
    assert fallback.catch_up().events == 4000 and fallback.index.parallel_blocks == 0
    for name in ("zones", "rows", "columns"):
        assert (tmp_path / "parallel" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes(), name
        assert (tmp_path / "fallback" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes(), name


@freeze_time(NOW)
def test_escaped_non_ascii_filter_values_are_found(memory: Memory) -> None:
    line = ('{"id":"esc-1","timestamp":"' + stamp(1) + '","source":"claude","kind":"note",'
            '"content":"plain words","session":"caf\\u00e9"}')
    memory.journal.append([line.encode()])
    add(memory, {"id": "esc-2", "content": "other words", "session": "cafe", "timestamp": stamp(0)})
    assert [e.id for e in memory.session_context("café").events] == ["esc-1"]
    assert [e.id for e in memory.session_context("cafe").events] == ["esc-2"]


class _Counted:
    """A zone column that counts the blocks read from it."""

    def __init__(self, values: Any) -> None:
        self.values, self.reads = values, 0

    def __getitem__(self, i: int) -> int:
        self.reads += 1
        return int(self.values[i])


def test_a_rare_terms_candidates_visit_the_blocks_its_bitmaps_pass_not_the_window() -> None:
    """Past the newest `_EAGER` blocks, the one AND over every bitmap gives the candidates: only the blocks
    it passes are looked at, in the window's order (before: each block of the window was, and an `until`
    filtered all of them by their zone first, as the empty-result hint `older_match` asks over the whole
    journal). The same blocks in the same order as a walk of the window."""
    from array import array

    n, row = 600, blockbuild.ROW
    hashes = blockbuild.query_hashes(b"quokka")
    holding = {7, 300, 301, 598}
    bits = bytearray(n * row)
    for b in holding:
        for h in hashes:
            bits[b * row + (h >> 3)] |= 1 << (h & 7)
    zones = array("q")
    for b in range(n):   # blocks in time order, two sharing a max
        ts = b * 1000 - (1000 if b == 301 else 0)
        zones.extend((b * 100, b * 100 + 100, ts - 500, ts, 0))
    view = blockview.BlockSnapshot(n, n * 100, zones, bytes(bits))
    order = view._newest_first()
    for since, until in ((-blockbuild.FAR, None), (-blockbuild.FAR, 400_000), (250_000, None), (250_000, 590_000)):
        view.mins, view.maxs = _Counted(zones[2::5]), _Counted(zones[3::5])
        got = list(view.candidates(hashes, since, until))
        limit = until + 1 if until is not None else blockbuild.FAR
        assert got == [b for b in order if b in holding and view.maxs.values[b] >= since - 1
                       and view.mins.values[b] <= limit]
        assert view.mins.reads + view.maxs.reads <= 2 * blockview._EAGER + 40, (since, until)
