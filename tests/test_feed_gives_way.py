"""The daemon's background feed gives way to its queries (issue 37): the daemon's requests in flight,
shared in a page its index process inherits (`requests_first.share`/`attach`), pause a real feed into
the real PostgreSQL between its small units, for a bounded time each, so a query storm slows the feed
but never stops it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import psycopg
import pytest

from urchin.config import Settings
from urchin.facade import Memory
from urchin.hybrid.base import UNIT_ROWS, GaveWay
from urchin.hybrid.feeder import ASKED_S, GIVE_WAY_BATCH_BYTES, GIVE_WAY_PIECE_BYTES, Feeder
from urchin.hybrid.pg_link import PgLink
from urchin.hybrid.pg_writer import _watched
from urchin.requests_first import GRACE_S, Serving, asked_within, attach, give_way, share, shared_wait_s

EVENTS = 3 * UNIT_ROWS + 5     # four units of rows to build and four to copy (one batch)


@pytest.fixture
def page() -> Iterator[int]:
    """This process as the daemon (its requests in the shared page) and as its index process (reading
    that page, mapped again from the descriptor as the child maps the one it inherits)."""
    fd = share()
    if fd is None:
        pytest.skip("no memfd here: the feed gives way to the daemon's own threads only")
    assert attach(fd)
    yield fd
    attach(None)


def _feeding_memory(settings: Settings, most: float) -> Memory:
    memory = Memory(settings)
    memory.ingest([{"content": f"event {i} about the billing retry budget", "source": "claude", "kind": "note"}
                   for i in range(EVENTS)])
    memory.index_service.give_way = partial(give_way, most)   # as urchin.daemon.indexer's child sets it
    return memory


def _rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM urchin_chunks").fetchone()
        return int(row[0]) if row else 0


def test_a_query_in_flight_holds_the_feed_until_it_is_answered(page: int, pg_settings: Settings,
                                                               pg_url: str) -> None:
    memory = _feeding_memory(pg_settings, most=60.0)
    query = Serving()
    waited = shared_wait_s()
    done: list[Any] = []
    feed = threading.Thread(target=lambda: done.append(memory.index()))
    feed.start()
    feed.join(0.5)
    assert feed.is_alive() and _rows(pg_url) == 0      # paused at its first unit, nothing written
    query.done()                                       # answered: the feed goes on at once, not after 60 s
    feed.join(30)
    assert not feed.is_alive() and done[0].inserted == EVENTS == _rows(pg_url)
    assert shared_wait_s() > waited
    memory.close()


def test_a_query_storm_slows_the_feed_but_never_stops_it(page: int, pg_settings: Settings, pg_url: str) -> None:
    memory = _feeding_memory(pg_settings, most=0.02)
    waited = shared_wait_s()
    with_storm = Serving()          # a query always in flight
    try:
        report = memory.index()
    finally:
        with_storm.done()
    assert report.inserted == EVENTS == _rows(pg_url)
    # each of the 4 units built and 4 copied waited its bound (0.02 s) for the query, then went on
    assert shared_wait_s() - waited >= 8 * 0.02 * 0.9
    memory.close()


def test_a_feed_with_no_query_in_flight_does_not_wait(page: int, pg_settings: Settings, pg_url: str) -> None:
    memory = _feeding_memory(pg_settings, most=60.0)
    threading.Event().wait(GRACE_S * 2)     # the last request of an earlier test ended more than GRACE_S ago
    waited = shared_wait_s()
    assert memory.index().inserted == EVENTS == _rows(pg_url)
    assert shared_wait_s() == waited
    memory.close()


def test_a_child_reads_the_daemons_requests_through_the_inherited_page(page: int) -> None:
    code = ("import sys; from urchin.requests_first import attach, give_way\n"
            "assert attach(int(sys.argv[1])); print(give_way(0.05), flush=True); sys.stdin.read()\n"
            "print(give_way(0.05))")
    query = Serving()
    child = subprocess.Popen([sys.executable, "-c", code, str(page)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, pass_fds=(page,), env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "True"      # the daemon is answering a query: it waited
    query.done()
    threading.Event().wait(GRACE_S * 2)
    out, _ = child.communicate("", timeout=30)
    assert out.strip() == "False"                          # answered: no wait


def test_a_feed_writes_small_batches_only_while_queries_come(page: int, pg_settings: Settings) -> None:
    """Small batches (a commit each) cost a first feed ~30% of its rate: they are for while the daemon
    answers queries (one in flight, or one ended in the last ASKED_S), large ones otherwise."""
    memory = Memory(pg_settings)
    text = "the billing retry budget was raised after the outage review " * 8
    memory.ingest([{"content": f"{i} {text}", "source": "claude", "kind": "note"} for i in range(1_500)])
    assert memory.journal.path.stat().st_size > 2 * GIVE_WAY_BATCH_BYTES
    feeder = Feeder(memory.index_service.backend, memory.journal, "d", give_way=lambda: None, asked=asked_within)
    threading.Event().wait(GRACE_S * 2)
    query = Serving()
    assert asked_within(ASKED_S)
    _, small, _ = feeder._prepare(0)
    query.done()
    threading.Event().wait(GRACE_S)
    assert not asked_within(GRACE_S / 2)        # the page says when the last one ended
    _, still_small, _ = feeder._prepare(0)      # ended within ASKED_S: still small
    assert small == still_small <= GIVE_WAY_BATCH_BYTES
    quiet = Feeder(memory.index_service.backend, memory.journal, "d", give_way=lambda: None,
                   asked=lambda seconds: False)
    _, large, _ = quiet._prepare(0)
    assert large > 2 * GIVE_WAY_BATCH_BYTES
    memory.close()


def test_a_large_batch_read_before_the_queries_came_is_written_in_small_ones(pg_settings: Settings,
                                                                            pg_url: str) -> None:
    """The batch read while no query came is large (~4,000 rows a 2 MiB batch): written once they come,
    it goes in transactions of GIVE_WAY_PIECE_BYTES of journal each (~130 rows), the cursor at each one's
    end, so no single INSERT of it is a long stretch of the server's work beside the queries."""
    memory = Memory(pg_settings)
    text = "the billing retry budget was raised after the outage review " * 8
    memory.ingest([{"content": f"{i} {text}", "source": "claude", "kind": "note"} for i in range(1_500)])
    size = memory.journal.path.stat().st_size
    assert size > 3 * GIVE_WAY_BATCH_BYTES
    asked = iter((False,))          # no query when the first batch is read, then queries all the while
    seen: list[int] = []
    with psycopg.connect(pg_url, autocommit=True) as watch:

        def give_way() -> None:     # the cursor as another session sees it, before each unit copied
            if threading.current_thread() is threading.main_thread():
                row = watch.execute("SELECT coalesce(max(byte_offset), 0) FROM urchin_cursors").fetchone()
                seen.append(int(row[0]) if row else 0)

        feeder = Feeder(memory.index_service.backend, memory.journal, "d", give_way=give_way,
                        asked=lambda seconds: next(asked, True), bulk_bytes=None)
        report = feeder.run_once()
    assert report.inserted == 1_500 == _rows(pg_url)
    committed = sorted(set(seen) - {0})       # pieces committed while the batch (the whole journal) was copied
    assert len(committed) >= 2 and committed[-1] < size
    assert all(b - a <= GIVE_WAY_PIECE_BYTES for a, b in zip([0, *committed], committed, strict=False))
    memory.close()


def test_a_large_batch_begun_before_the_queries_came_is_given_up_for_pieces(pg_settings: Settings,
                                                                         pg_url: str) -> None:
    """A large batch begun while no query came (one transaction of ~4,000 rows, its INSERT a long stretch
    of the server's work): a query arriving while its rows are copied rolls it back, and the same rows go
    in pieces of GIVE_WAY_PIECE_BYTES, each committed with its cursor."""
    memory = Memory(pg_settings)
    text = "the billing retry budget was raised after the outage review " * 8
    memory.ingest([{"content": f"{i} {text}", "source": "claude", "kind": "note"} for i in range(1_500)])
    size = memory.journal.path.stat().st_size
    came: list[bool] = []
    seen: list[int] = []
    with psycopg.connect(pg_url, autocommit=True) as watch:

        def give_way() -> None:     # the first query comes while the large batch's first unit is copied
            if threading.current_thread() is threading.main_thread():
                row = watch.execute("SELECT coalesce(max(byte_offset), 0) FROM urchin_cursors").fetchone()
                seen.append(int(row[0]) if row else 0)
                came.append(True)

        feeder = Feeder(memory.index_service.backend, memory.journal, "d", give_way=give_way,
                        asked=lambda seconds: bool(came), bulk_bytes=None)
        report = feeder.run_once()
    assert report.inserted == 1_500 == _rows(pg_url)
    committed = sorted(set(seen) - {0})
    assert len(committed) >= 2 and committed[-1] < size
    assert all(b - a <= GIVE_WAY_PIECE_BYTES for a, b in zip([0, *committed], committed, strict=False))
    memory.close()


def test_a_statement_running_when_a_request_comes_is_cancelled_and_the_session_goes_on(pg_url: str) -> None:
    """The INSERT of a large batch already running when the daemon's first query comes is cancelled
    (GaveWay), its transaction rolled back; the session is fit for the pieces that follow."""
    link = PgLink(pg_url, niceness=19)
    conn = link.conn
    started = time.monotonic()
    with pytest.raises(GaveWay):
        with conn.transaction():
            _watched(conn, lambda: time.monotonic() - started > 0.05, lambda: conn.execute("SELECT pg_sleep(30)"))
    assert time.monotonic() - started < 20
    assert link.read("SELECT 1") == [(1,)]
    _watched(conn, lambda: False, lambda: conn.execute("SELECT 2"))     # nothing asked: it just runs
    link.reset()


def test_one_event_longer_than_a_piece_is_fed_while_queries_come(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest([{"content": "retry budget " * 8_000, "source": "claude", "kind": "note"}])
    assert memory.journal.path.stat().st_size > GIVE_WAY_PIECE_BYTES
    feeder = Feeder(memory.index_service.backend, memory.journal, "d", give_way=lambda: None,
                    asked=lambda seconds: True, bulk_bytes=None)
    assert feeder.run_once().inserted == 1 == _rows(pg_url)
    memory.close()


def test_the_insert_of_a_batch_waits_for_the_requests_too(pg_settings: Settings, pg_url: str) -> None:
    """The feed gives way before each unit of rows it copies and once more before the INSERT from the
    copied rows (the statement nothing pauses): a request arriving while the last unit was copied holds
    it too."""
    memory = Memory(pg_settings)
    memory.ingest([{"content": f"event {i} about the billing retry budget", "source": "claude", "kind": "note"}
                   for i in range(UNIT_ROWS + 1)])
    rows_seen: list[int] = []
    with psycopg.connect(pg_url, autocommit=True) as watch:

        def give_way() -> None:
            if threading.current_thread() is threading.main_thread():   # the writer's, not the reader's
                rows_seen.append(_rows(pg_url))
        feeder = Feeder(memory.index_service.backend, memory.journal, "d", give_way=give_way,
                        asked=lambda seconds: True, bulk_bytes=None)
        assert feeder.run_once().inserted == UNIT_ROWS + 1
        assert watch.execute("SELECT count(*) FROM urchin_chunks").fetchone() == (UNIT_ROWS + 1,)
    assert rows_seen == [0, 0, 0]       # two units copied, then the INSERT: each waited for, before it ran
    memory.close()


def test_the_background_sessions_commits_do_not_wait_for_the_disk(pg_url: str) -> None:
    """The index process's sessions (a lowered link: the feed, the workspace walk) commit without waiting
    for the WAL's fdatasync: what they write is derived, its cursor in the same transaction; a query's
    session keeps the server's setting."""
    lowered, plain = PgLink(pg_url, niceness=19), PgLink(pg_url)
    try:
        for link, source in ((lowered, "session"), (plain, None)):
            row = link.read("SELECT setting, source FROM pg_settings WHERE name = 'synchronous_commit'")[0]
            assert (row[0] == "off" and row[1] == "session") if source else row[1] != "session"
    finally:
        lowered.reset()
        plain.reset()


def test_a_forget_while_a_batch_is_written_in_pieces_loses_no_event(pg_settings: Settings, pg_url: str) -> None:
    """A forget applied (by another process) while the feed writes a batch read before it: the pieces
    still to commit carry offsets of the journal as it was, so they must not move the cursor the forget
    carried onto the compacted journal: every other event is fed once, the forgotten one is not."""
    memory, other = Memory(pg_settings), Memory(pg_settings)
    text = "the billing retry budget was raised after the outage review " * 8
    memory.ingest([{"id": f"e{i}", "content": f"{i} {text}", "source": "claude", "kind": "note"}
                   for i in range(1_200)])
    assert memory.journal.path.stat().st_size > 2 * GIVE_WAY_BATCH_BYTES
    asked = iter((False,))          # the batch (the whole journal) read large, then written in pieces
    with psycopg.connect(pg_url, autocommit=True) as watch:

        def give_way() -> None:     # once the first piece is in: e1100 is forgotten, in another process
            row = watch.execute("SELECT coalesce(max(byte_offset), 0) FROM urchin_cursors").fetchone()
            if row and row[0] and not other.forget_log.forget_count():
                other.forget(["e1100"], confirm=True)

        feeder = Feeder(memory.index_service.backend, memory.journal, pg_settings.device, give_way=give_way,
                        asked=lambda seconds: next(asked, True), bulk_bytes=None)
        feeder.run_once()
    assert other.forget_log.forget_count() == 1
    memory.ingest([{"id": f"late{i}", "content": f"late {i} {text}", "source": "claude", "kind": "note"}
                   for i in range(3)])
    memory.index()
    with psycopg.connect(pg_url) as conn:
        ids = [r[0] for r in conn.execute("SELECT chunk_id FROM urchin_chunks").fetchall()]
    want = {f"e{i}" for i in range(1_200)} - {"e1100"} | {f"late{i}" for i in range(3)}
    assert len(ids) == len(set(ids)) and set(ids) == want
    other.close()
    memory.close()
