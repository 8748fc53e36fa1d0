"""The feeder against the real PostgreSQL: cursor, idempotent replay, rebuild, outage and resume."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from urchin.config import Settings
from urchin.errors import DatabaseError
from urchin.facade import Memory
from urchin.hybrid.feeder import Feeder
from urchin.hybrid.pg_link import pause_autovacuum
from urchin.hybrid.postgres import PostgresIndex
from urchin.hybrid.schema import GIN_INDEXES, MIGRATIONS, TRIGRAM_INDEX
from urchin.hybrid.sparse import doc_columns, doc_vector, int_array, to_sparsevec


def _events(n: int, workspace: str = "ws", **extra: Any) -> list[dict[str, Any]]:
    return [{"content": f"event number {i} about deploying the billing service", "workspace": workspace,
             "source": "claude", "kind": "note", **extra} for i in range(n)]


def _sql(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def _snapshot(url: str) -> tuple[Any, ...]:
    return (_sql(url, "SELECT count(*), count(DISTINCT chunk_id) FROM urchin_chunks")[0],
            _sql(url, "SELECT sum(df), count(*) FROM urchin_terms")[0],
            _sql(url, "SELECT sum(value) FROM urchin_stats WHERE key = 'chunks'")[0],
            _sql(url, "SELECT md5(string_agg(chunk_id || content || tvec::text, ',' ORDER BY chunk_id)) "
                      "FROM urchin_chunks")[0])


def test_feed_indexes_every_event_and_moves_the_cursor(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(25))
    report = memory.index()
    assert (report.events, report.inserted) == (25, 25)
    assert report.offset == memory.end_offset()
    cursor = _sql(pg_url, "SELECT device, journal, byte_offset FROM urchin_cursors")
    assert cursor == [("test-device", str(pg_settings.journal_path), memory.end_offset())]
    assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks")[0][0] == 25
    again = memory.index()
    assert (again.events, again.inserted) == (0, 0)
    memory.close()


def test_migrations_are_recorded_and_applied_once(pg_url: str) -> None:
    PostgresIndex(pg_url).status()
    PostgresIndex(pg_url).status()
    assert _sql(pg_url, "SELECT version FROM urchin_migrations ORDER BY version") == [(v,) for v, _, _ in MIGRATIONS]
    assert _sql(pg_url, "SELECT extversion >= '0.7' FROM pg_extension WHERE extname = 'vector'") == [(True,)]


@pytest.mark.parametrize("gone", [0, 7])
def test_replaying_the_journal_changes_nothing(pg_settings: Settings, pg_url: str, gone: int) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(40))
    memory.index()
    before = _snapshot(pg_url)
    with psycopg.connect(pg_url) as conn:
        # rows of which some are gone: the batch's COPY meets a stored one and goes in by ON CONFLICT
        conn.execute("DELETE FROM urchin_chunks WHERE chunk_id IN (SELECT chunk_id FROM urchin_chunks "
                     "ORDER BY chunk_id LIMIT %s)", (gone,))
        conn.execute("UPDATE urchin_cursors SET byte_offset = 0")
    replay = memory.index()
    assert (replay.events, replay.inserted) == (40, gone)
    assert _snapshot(pg_url) == before
    memory.close()


def test_rebuild_empties_the_index_and_replays_from_zero(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(10))
    memory.index()
    before = _snapshot(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("DELETE FROM urchin_chunks WHERE chunk_id IN (SELECT chunk_id FROM urchin_chunks LIMIT 3)")
    report = memory.index(rebuild=True)
    assert (report.events, report.inserted) == (10, 10)
    assert _snapshot(pg_url) == before
    memory.close()


def test_each_device_resumes_from_its_own_cursor(pg_settings: Settings, pg_url: str, tmp_path: Any) -> None:
    first = Memory(pg_settings)
    first.ingest(_events(5, workspace="a"))
    first.index()
    other = Memory(Settings.resolve(tmp_path / "other-home", database_url=pg_url, device="laptop-2"))
    other.ingest(_events(7, workspace="b"))
    assert other.index().inserted == 7
    first.ingest(_events(2, workspace="a"))
    assert first.index().events == 2
    rows = _sql(pg_url, "SELECT device, byte_offset FROM urchin_cursors ORDER BY device")
    assert rows == [("laptop-2", other.end_offset()), ("test-device", first.end_offset())]
    assert _sql(pg_url, "SELECT workspace, count(*) FROM urchin_chunks GROUP BY 1 ORDER BY 1") == [("a", 7), ("b", 7)]
    first.close()
    other.close()


def test_lines_that_are_not_events_are_skipped(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(2))
    memory.journal.append([b"not json at all", b'{"no": "content"}'])
    memory.ingest([{"content": "after the bad lines\x00with a NUL", "workspace": "ws"}])
    report = memory.index()
    assert report.inserted == 3 and report.offset == memory.end_offset()
    assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks WHERE content LIKE 'after the bad lines%'") == [(1,)]
    memory.close()


def test_a_cursor_moved_by_another_feeder_is_reread_not_overwritten(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(3))
    backend = PostgresIndex(pg_url)
    key = str(pg_settings.journal_path)
    assert backend.write_batch([], "test-device", key, expected=0, new_offset=5) == 0
    with pytest.raises(DatabaseError, match="moved by another feeder"):
        backend.write_batch([], "test-device", key, expected=0, new_offset=10)
    assert backend.cursor("test-device", key) == 5
    backend.close()


def test_an_unreachable_database_is_retried_then_reported(urchin_home: Any) -> None:
    settings = Settings.resolve(urchin_home, database_url="postgresql://nobody@127.0.0.1:1/none", device="d")
    memory = Memory(settings)
    memory.ingest(_events(1))
    naps: list[float] = []
    feeder = Feeder(memory.index_service.backend, memory.journal, "d", retry_for=1.0, sleep=naps.append)
    with pytest.raises(DatabaseError, match="unreachable"):
        feeder.run_once()
    assert naps[:3] == [0.1, 0.2, 0.4]


@pytest.mark.slow
def test_an_outage_mid_feed_loses_and_duplicates_nothing(pg_server: Any, pg_url: str, urchin_home: Any) -> None:
    if pg_server is None:
        pytest.skip("needs the embedded server (URCHIN_TEST_DATABASE_URL is set)")
    settings = Settings.resolve(urchin_home, database_url=pg_url, device="d", durability="never")
    memory = Memory(settings)
    memory.import_lines(f'{{"content": "outage event {i} with some words", "workspace": "w"}}' for i in range(12000))
    feeder = Feeder(memory.index_service.backend, memory.journal, "d", batch_bytes=64 * 1024, retry_for=120)
    feeder.backend.status()               # schema in place before we watch the cursor table
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(report=feeder.run_once()))
    thread.start()
    while not _sql(pg_url, "SELECT count(*) FROM urchin_cursors")[0][0]:
        time.sleep(0.02)
    pg_server.kill()                      # mid-feed: the feeder's next batch fails
    time.sleep(1.5)
    try:
        assert thread.is_alive()          # ...and it is retrying, not finished
    finally:
        pg_server.url()                   # the server comes back
    thread.join(120)
    report = done["report"]
    assert report.retries >= 1
    assert report.offset == memory.end_offset()
    assert _sql(pg_url, "SELECT count(*), count(DISTINCT content) FROM urchin_chunks") == [(12000, 12000)]
    assert _sql(pg_url, "SELECT value FROM urchin_stats WHERE key = 'chunks'") == [(12000,)]
    memory.close()


def test_queries_beside_a_following_feeder_use_their_own_connection(pg_settings: Settings) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(3))
    stop = threading.Event()
    thread = threading.Thread(target=memory.index, kwargs={"follow": True, "stop": stop})
    thread.start()
    try:
        memory.ingest([{"content": "a zeppelin arrives while the feeder follows", "workspace": "ws", "id": "z"}])
        deadline = time.monotonic() + 20
        found: list[str] = []
        while time.monotonic() < deadline and found != ["z"]:
            found = [r["id"] for r in memory.context(query="zeppelin", strategy="keyword").results]
            time.sleep(0.1)
        assert found == ["z"]
    finally:
        stop.set()
        thread.join(20)
    assert not thread.is_alive()
    memory.close()


# ---- backfills: GIN indexes dropped, built once at the end (issue 16) -----------------------------
def _gin_defs(url: str) -> list[tuple[Any, ...]]:
    return _sql(url, "SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                     "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am a ON a.oid = c.relam "
                     "WHERE a.amname = 'gin' AND t.relname LIKE 'urchin\\_chunks%%' ORDER BY 2")


def test_the_backfill_knows_every_gin_index_the_migrations_make(pg_url: str) -> None:
    PostgresIndex(pg_url).status()
    parent = [(name, d) for name, d in _gin_defs(pg_url) if " ON ONLY public.urchin_chunks " in d]
    single_user = {name: d for name, d in GIN_INDEXES.items() if name != TRIGRAM_INDEX}
    assert {name: d.split(" ON ONLY public.urchin_chunks ")[1] for name, d in parent} == single_user


def _trigram_indexes(url: str) -> list[tuple[Any, ...]]:
    """Every trigram index of the chunks: the table's own and each partition's, whatever its name."""
    return _sql(url, "SELECT indexname FROM pg_indexes WHERE indexdef LIKE '%%gin_trgm_ops%%'")


def test_a_single_users_index_has_no_trigram_index_after_any_feed(pg_settings: Settings, pg_url: str) -> None:
    # issue 37: the trigram GIN index served only `search --team` and cost a third of the feed's CPU
    memory = Memory(pg_settings)
    memory.ingest(_events(40) + [{"content": "the Zeppelin over the harbour", "workspace": "ws", "id": "z"}])
    backend = memory.index_service.backend
    Feeder(backend, memory.journal, "d", bulk_bytes=None).run_once()            # row by row
    assert _trigram_indexes(pg_url) == [] and len(_gin_defs(pg_url)) == 9      # 3 GINs x (table + 2 partitions)
    backend.rebuild()
    Feeder(backend, memory.journal, "d", batch_bytes=4096, bulk_bytes=1).run_once()   # a backfill builds 3
    assert _trigram_indexes(pg_url) == [] and len(_gin_defs(pg_url)) == 9
    backend.rebuild()
    assert backend.begin_bulk(1000) is True
    backend.reset()                                            # a backfill died; the next feed builds what it
    memory.index()                                             # dropped, and only what a single user has
    assert _trigram_indexes(pg_url) == [] and len(_gin_defs(pg_url)) == 9
    # a team search over a single user's own rows still finds substrings, by scanning
    found = memory.search("ZEPPELIN OVER", scope="team", hours=24 * 365 * 30)
    assert [h.event.id for h in found.hits] == ["z"]
    memory.close()


def test_a_backfill_drops_the_gin_indexes_and_ends_with_the_same_index(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(300) + [{"content": "a zeppelin over the harbour", "workspace": "ws", "id": "z"},
                                  {"content": "the Zeppelin again", "workspace": "ws", "id": "z2", "title": "airship"}])
    backend = memory.index_service.backend
    Feeder(backend, memory.journal, "d", bulk_bytes=None).run_once()     # row by row
    row_by_row, defs = _snapshot(pg_url), _gin_defs(pg_url)
    assert len(defs) == 9                        # 3 on the table, 3 on each partition: the month's and the default
    backend.rebuild()
    seen: list[int] = []
    autovacuum: list[bool] = []

    def during(done: int, total: int) -> None:
        seen.append(_sql(pg_url, "SELECT count(*) FROM unnest(ARRAY['urchin_chunks_tsv', 'urchin_chunks_tags', "
                                 "'urchin_chunks_terms', 'urchin_chunks_trgm']) n WHERE to_regclass(n) IS NULL")[0][0])
        autovacuum.extend(on for _, on in _autovacuum(pg_url))
        # a query during the backfill still answers (by scanning)
        assert len(_sql(pg_url, "SELECT chunk_id FROM urchin_chunks WHERE tsv @@ 'zeppelin'::tsquery")) <= 2
    report = Feeder(backend, memory.journal, "d", batch_bytes=4096, bulk_bytes=1).run_once(during)
    assert (report.events, report.inserted) == (302, 302) and report.offset == memory.end_offset()
    assert len(seen) > 3 and set(seen) == {4}            # every batch went in without the GIN indexes (no trigram)
    assert _gin_defs(pg_url) == defs                      # ...which are back, on every partition, as migrated
    # no autovacuum (the server's workers, at its priority) during it: the backfill VACUUMs at its end instead
    assert autovacuum and not any(autovacuum) and _autovacuum(pg_url) == [(True, True), (True, True)]
    assert _snapshot(pg_url) == row_by_row
    assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks WHERE content ILIKE '%%zeppelin%%'") == [(2,)]
    hits = [r["id"] for r in memory.context(query="zeppelin airship", strategy="keyword").results]
    assert hits[0] == "z2" and set(hits) == {"z", "z2"}
    again = Feeder(backend, memory.journal, "d", bulk_bytes=1).run_once()   # replay: nothing to feed, no drop
    assert (again.events, again.inserted) == (0, 0) and _gin_defs(pg_url) == defs
    memory.close()


def _autovacuum(url: str) -> list[tuple[bool, bool]]:
    """(VACUUMed by hand since created, autovacuum on) for each partition of urchin_chunks, by name."""
    return [(bool(r[0]), not r[1]) for r in _sql(
        url, "SELECT s.last_vacuum IS NOT NULL, 'autovacuum_enabled=false' = ANY(coalesce(c.reloptions, '{}')) "
             "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid LEFT JOIN pg_stat_user_tables s ON "
             "s.relid = c.oid WHERE i.inhparent = 'urchin_chunks'::regclass ORDER BY c.relname")]


def test_no_backfill_path_when_the_index_already_holds_more_rows_than_are_coming(pg_url: str) -> None:
    backend = PostgresIndex(pg_url)
    backend.status()
    with psycopg.connect(pg_url) as conn:
        conn.execute("INSERT INTO urchin_stats (device, key, value) VALUES ('other', 'chunks', 5000)")
    assert backend.begin_bulk(4000) is False
    assert len(_gin_defs(pg_url)) >= 3
    backend.close()


def test_one_backfill_at_a_time_and_a_dead_ones_indexes_are_built_by_the_next_feed(
        pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(20))
    first, second = PostgresIndex(pg_url), PostgresIndex(pg_url)
    first.status()
    defs = [d for d in _gin_defs(pg_url) if " ON ONLY " in d[1]]       # the table's own (not its partitions')
    assert first.begin_bulk(1000) is True
    assert {on for _, on in _autovacuum(pg_url)} == {False}
    assert second.begin_bulk(1000) is False               # the bulk lock is taken
    assert second.restore_indexes() == []                  # ...and the backfill builds them, not this session
    assert _gin_defs(pg_url) == []
    first.reset()                                          # the backfilling process dies: its lock goes with it
    report = memory.index()                                # a small feed: no backfill, but it builds them first
    after = _gin_defs(pg_url)
    assert report.inserted == 20 and [d for d in after if " ON ONLY " in d[1]] == defs and len(after) == 9
    assert {on for _, on in _autovacuum(pg_url)} == {True}
    assert [r["id"] for r in memory.context(query="deploying", strategy="keyword", limit=1).results]
    second.close()
    memory.close()



def test_a_query_never_vacuums_nor_builds_what_a_dead_backfill_left(pg_settings: Settings, pg_url: str) -> None:
    """A backfill killed in its end VACUUM leaves autovacuum off, one killed before it its GIN indexes
    dropped too: the next feed puts them back, never a query's inline catch-up (a VACUUM (ANALYZE) of
    every row, or the GIN builds, before its answer)."""
    memory = Memory(pg_settings)
    memory.ingest(_events(20))
    memory.index()
    defs = _gin_defs(pg_url)
    with psycopg.connect(pg_url) as conn:       # what a backfill killed in its end VACUUM leaves
        for (name,) in conn.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                                    "WHERE i.inhparent = 'urchin_chunks'::regclass").fetchall():
            pause_autovacuum(conn, name)
    dead = PostgresIndex(pg_url)
    for died_early, gins in ((False, defs), (True, [])):
        if died_early:
            assert dead.begin_bulk(1000) is True
            dead.reset()                                        # killed before its end: its indexes dropped
        memory.ingest(_events(1, workspace="late"))            # behind: the query feeds it inline
        assert [r["id"] for r in memory.context(query="deploying", strategy="keyword", limit=1).results]
        assert memory.index_service.status()["behindJournalBytes"] == 0
        assert {on for _, on in _autovacuum(pg_url)} == {False} and _gin_defs(pg_url) == gins
    memory.index()                                              # the next feed: both back
    assert {on for _, on in _autovacuum(pg_url)} == {True} and _gin_defs(pg_url) == defs
    dead.close()
    memory.close()

def test_the_feeds_one_pass_columns_equal_the_vector_and_its_text_forms() -> None:
    texts = ["", "a", "Deploy the billing service; deploy again", "word " * 70 + "other " * 3,
             " ".join(f"term{i}" for i in range(1500)) + " term7" * 5, "snake_case camelCase src/path.py it's"]
    for text in texts:
        weights = doc_vector(text)
        assert doc_columns(text) == (int_array(sorted(weights)), to_sparsevec(weights))


# ---- a feed's rows lie in journal order (issue 37) ------------------------------------------------------
def _heap_in_journal_order(url: str) -> bool:
    """Each partition's rows lie in the heap in journal order (one connection writing one batch at a time):
    the ranked legs take the first `budget` rows in heap order."""
    parts = _sql(url, "SELECT array_agg(journal_offset ORDER BY ctid) FROM urchin_chunks GROUP BY tableoid")
    return bool(parts) and all(offsets == sorted(offsets) for (offsets,) in parts)


def test_a_feed_in_small_batches_stores_rows_in_journal_order_and_counts_them(pg_settings: Settings,
                                                                             pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(300))
    backend = memory.index_service.backend
    report = Feeder(backend, memory.journal, "d", batch_bytes=4096, bulk_bytes=1).run_once()
    assert (report.events, report.inserted) == (300, 300)
    assert _heap_in_journal_order(pg_url)
    assert _sql(pg_url, "SELECT sum(df) > 0, count(*) > 0 FROM urchin_terms") == [(True, True)]
    assert _sql(pg_url, "SELECT value FROM urchin_stats WHERE key = 'chunks'") == [(300,)]
    memory.close()
