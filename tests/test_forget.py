"""Forgetting: tombstone first (every view hides at once), then an atomic compaction; views follow."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from urchin.config import Settings
from urchin.errors import QueryError
from urchin.facade import Memory
from urchin.tombstones import ForgetLog, forget_hash


def _events(n: int, **extra: object) -> list[dict[str, object]]:
    return [{"id": f"ev-{i:03d}", "timestamp": f"2026-05-04T10:{i // 60:02d}:{i % 60:02d}Z",
             "content": f"note number {i} about {'pelican' if i % 3 == 0 else 'heron'}", "source": "manual",
             "session": f"s{i % 4}", **extra} for i in range(n)]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _ids(path: Path) -> list[str]:
    return [orjson.loads(line)["id"] for line in _lines(path)]


def test_forget_by_id_compacts_keeping_every_other_line_byte_identical(memory: Memory) -> None:
    memory.ingest(_events(30))
    before = _lines(memory.journal.path)
    result = memory.forget(["ev-004", "ev-017"], confirm=True)
    assert (result.matched, result.forgotten, result.compacted) == (2, 2, True)
    after = _lines(memory.journal.path)
    assert after == [line for line in before if b'"ev-004"' not in line and b'"ev-017"' not in line]
    assert stat.S_IMODE(os.stat(memory.journal.path).st_mode) == 0o600


def test_forgotten_events_are_gone_from_every_read(memory: Memory) -> None:
    memory.ingest(_events(30))
    memory.forget(session="s1", confirm=True)
    fresh = Memory(memory.settings)  # another process's view of the same files
    for m in (memory, fresh):
        assert all(h.event.session != "s1" for h in m.search("note", hours=1e6, limit=100).hits)
        assert all(h.event.session != "s1" for h in m.recent(hours=1e6, limit=100).hits)
        assert all(h.event.session != "s1" for h in m.semantic("pelican heron note", hours=1e6, limit=100).hits)
        assert m.locate("ev-001") is None
        assert all(e.session != "s1" for e in m.tail(100))
    assert len(fresh.search("note", hours=1e6, limit=100).hits) == 30 - 8


def test_tombstone_hides_before_compaction(memory: Memory) -> None:
    memory.ingest(_events(12))
    memory.search("note", hours=1e6)  # the block index covers the old file
    memory.cosine_view().catch_up()
    with memory.journal.locked():
        memory.forget_log.record_forget([forget_hash("ev-003")])
    assert b"ev-003" in memory.journal.path.read_bytes()  # not compacted yet
    other = Memory(memory.settings)
    for m in (memory, other):
        assert "ev-003" not in [h.event.id for h in m.search("pelican", hours=1e6, limit=50).hits]
        assert "ev-003" not in [h.event.id for h in m.semantic("pelican", hours=1e6, limit=50).hits]
        assert m.locate("ev-003") is None
    assert memory.forget_log.pending()
    assert memory.compact() is not None
    assert b"ev-003" not in memory.journal.path.read_bytes()


def test_forget_by_query_previews_without_confirm(memory: Memory) -> None:
    memory.ingest(_events(9))
    before = memory.journal.path.read_bytes()
    preview = memory.forget(query="PELICAN")
    assert preview.matched == 3 and not preview.confirmed and preview.forgotten == 0
    assert [p["id"] for p in preview.preview] == ["ev-000", "ev-003", "ev-006"]
    assert memory.journal.path.read_bytes() == before
    assert not memory.forget_log.path.exists()
    done = memory.forget(query="pelican", confirm=True)
    assert done.forgotten == 3
    assert _ids(memory.journal.path) == [f"ev-{i:03d}" for i in range(9) if i % 3]


def test_forget_by_time_range(memory: Memory) -> None:
    memory.ingest(_events(10))
    memory.forget(since="2026-05-04T10:00:02Z", until="2026-05-04T10:00:04Z", confirm=True)
    assert _ids(memory.journal.path) == ["ev-000", "ev-001", "ev-005", "ev-006", "ev-007", "ev-008", "ev-009"]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({}, "ids"), ({"ids": [""]}, "ids"), ({"session": " "}, "session"), ({"since": "yesterday"}, "since"),
    ({"since": "2026-05-05T00:00:00Z", "until": "2026-05-04T00:00:00Z"}, "until"),
    ({"ids": ["x"], "confirm": "yes"}, "confirm"), ({"since": "0001-01-01T00:00:00+01:00"}, "since"),
    ({"until": "9999-12-31T23:59:59-01:00"}, "until"), ({"query": "x\u0000", "ids": [1]}, "ids"),
])
def test_bad_forget_requests_name_the_field_and_touch_nothing(memory: Memory, kwargs: dict[str, object],
                                                               field: str) -> None:
    memory.ingest(_events(3))
    before = memory.journal.path.read_bytes()
    with pytest.raises(QueryError) as caught:
        memory.forget(**kwargs)  # type: ignore[arg-type]
    assert caught.value.message.startswith(field)
    assert memory.journal.path.read_bytes() == before


def test_a_forgotten_id_is_never_written_again(memory: Memory) -> None:
    memory.ingest(_events(5))
    memory.forget(["ev-002"], confirm=True)
    again = memory.ingest(_events(5))
    assert [r.status for r in again] == ["duplicate", "duplicate", "suppressed", "duplicate", "duplicate"]
    assert "ev-002" not in _ids(memory.journal.path)
    assert Memory(memory.settings).ingest_one(_events(5)[2]).status == "suppressed"


def test_the_tombstone_holds_no_content_and_is_private(memory: Memory) -> None:
    secretish = "the-content-nobody-may-keep-7781"
    memory.ingest([{"id": "private-1", "content": secretish, "session": "sess-x"}])
    memory.forget(["private-1"], confirm=True)
    raw = memory.forget_log.path.read_bytes()
    assert secretish.encode() not in raw and b"private-1" not in raw and b"sess-x" not in raw
    assert forget_hash("private-1").hex().encode() in raw
    assert stat.S_IMODE(os.stat(memory.forget_log.path).st_mode) == 0o600


def test_a_journal_behind_a_symlink_is_compacted_where_it_lives(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "events.jsonl"
    real.parent.mkdir()
    link = tmp_path / "link.jsonl"
    memory = Memory(Settings.resolve(tmp_path / "home", journal_path=link))
    memory.ingest(_events(3)[:1])
    real.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(real)
    memory.ingest(_events(3)[1:])
    memory.forget(["ev-001"], confirm=True)
    assert link.is_symlink() and _ids(real) == ["ev-000", "ev-002"]


def test_sidecars_follow_the_compaction(memory: Memory) -> None:
    memory.ingest(_events(40))
    memory.search("note", hours=1e6)
    view = memory.cosine_view()
    view.catch_up()
    view.save()
    cosine_dir = memory.settings.index_dir / "cosine"
    assert (cosine_dir / "manifest.json").exists()
    memory.forget(["ev-010", "ev-020"], confirm=True)
    assert not (cosine_dir / "manifest.json").exists()  # the saved copy held them: dropped, rebuilt on use
    fresh = Memory(memory.settings)
    ids = fresh.ingestor.ids
    with fresh.journal.locked():
        ids.catch_up()
    assert ids.lookup("ev-010") is None and ids.lookup("ev-011") is not None
    # the block index was cut where the journal changed: every surviving event is still found
    assert {h.event.id for h in fresh.search("note", hours=1e6, limit=100).hits} == \
        {f"ev-{i:03d}" for i in range(40)} - {"ev-010", "ev-020"}
    assert [h.event.id for h in fresh.semantic("note number 11", hours=1e6, limit=1).hits] == ["ev-011"]


def test_vector_cache_drops_forgotten_rows(memory: Memory, settings: Settings) -> None:
    import numpy as np

    from urchin.search.vectors import VectorCache

    memory.ingest(_events(6))
    cache = VectorCache(settings.home, "test-model", 4).open()  # a long-lived reader (the daemon's)
    cache.add([f"ev-{i:03d}" for i in range(6)], list(range(6)), np.eye(6, 4, dtype=np.float32) + 0.1)
    memory.forget(["ev-001", "ev-004"], confirm=True)
    assert [i for i, _ in cache.search(np.ones(4, np.float32), limit=10)] and len(cache) == 4
    assert "ev-001" not in {i for i, _ in cache.search(np.ones(4, np.float32), limit=10)}
    cache.add(["ev-new"], [9], np.ones((1, 4), np.float32))
    cache.close()
    reopened = VectorCache(settings.home, "test-model", 4).open()
    assert len(reopened) == 5 and "ev-001" not in reopened and "ev-000" in reopened
    assert b"ev-004" not in (reopened.path / "ids.txt").read_bytes()
    assert [reopened.id_at(r) for r in range(5)] == ["ev-000", "ev-002", "ev-003", "ev-005", "ev-new"]


def test_a_compaction_never_holds_up_appends_while_it_waits_for_the_vector_cache(memory: Memory,
                                                                                  settings: Settings) -> None:
    """The drop of forgotten vectors waits for the cache's writers' lock, which the daemon's index
    process holds across an embedding request (seconds, or an unreachable embedder's timeout): it runs
    once the journal lock is released, so appends never wait for an embedder."""
    import threading
    import time

    import numpy as np

    from urchin.search.vectors import VectorCache

    memory.ingest(_events(4))
    holder = VectorCache(settings.home, "m", 4).open()
    holder.add([f"ev-{i:03d}" for i in range(4)], list(range(4)), np.eye(4, dtype=np.float32))
    (holder.path / "journal.offset").write_text("999 0")
    forgetting = threading.Thread(target=memory.forget, args=(["ev-001"],), kwargs={"confirm": True})
    appending = threading.Thread(target=memory.ingest_one, args=({"id": "late", "content": "appended meanwhile"},))
    with holder.exclusive():                  # another writer, mid-request
        forgetting.start()
        deadline = time.monotonic() + 20
        while b"ev-001" in memory.journal.path.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b"ev-001" not in memory.journal.path.read_bytes()     # rewritten; the drop waits
        appending.start()
        appending.join(10)
        assert not appending.is_alive(), "an append waited for the vector cache's writer"
        assert forgetting.is_alive() and memory.forget_log.pending()   # not recorded as cleaned yet
        assert (holder.path / "journal.offset").exists()
    forgetting.join(20)
    assert not forgetting.is_alive()
    holder.close()
    reopened = VectorCache(settings.home, "m", 4).open()
    assert "ev-001" not in reopened and len(reopened) == 3
    assert not (reopened.path / "journal.offset").exists()           # every event is checked again
    assert not memory.forget_log.pending()
    assert memory.get("late").content == "appended meanwhile"


# ---- through the real front ends --------------------------------------------------------------------
def _ingest_file(memory: Memory, n: int) -> None:
    memory.ingest(_events(n))


def test_cli_forget_by_id_session_query_and_range(memory: Memory, urchin_home: Path) -> None:
    from tests.cli_inprocess import call_urchin
    from tests.conftest import run_urchin

    _ingest_file(memory, 24)
    journal = memory.journal.path
    done = run_urchin("forget", "ev-001", "ev-002", "--json")     # a real process; the rest in this one
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["forgotten"] == 2
    preview = call_urchin("forget", "--session", "s3")
    assert preview.returncode == 0 and "would be forgotten" in preview.stdout and "ev-003" in preview.stdout
    # each caller is told how it confirms: the CLI its flag, HTTP and MCP their parameter; counts in words
    assert "(run again with --yes to forget them)" in preview.stdout and "confirm:" not in preview.stdout
    wire = memory.forget(session="s3").render()
    assert "(call again with confirm: true to forget them)" in wire and "--yes" not in wire
    one = memory.forget("ev-005", confirm=True).render()
    assert one.endswith("forgot 1 event and compacted the journal"), one
    assert b'"ev-003"' in journal.read_bytes()
    assert call_urchin("forget", "--session", "s3", "--yes").returncode == 0
    assert call_urchin("forget", "--query", "PELICAN", "--yes").returncode == 0
    assert call_urchin("forget", "--since", "2026-05-04T10:00:20Z", "--until", "2026-05-04T10:00:22Z",
                      "--yes").returncode == 0
    left = _ids(journal)
    assert left == [f"ev-{i:03d}" for i in range(24) if i not in (1, 2, 5, 20, 21, 22) and i % 4 != 3 and i % 3]
    missing = call_urchin("forget", "nope")
    assert missing.returncode == 1 and "not found: nope" in missing.stdout
    usage = call_urchin("forget")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    bad = call_urchin("forget", "--since", "not-a-time", "--yes")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("error: --since: must be an RFC 3339"), bad.stderr   # the flag, as every command
    found = call_urchin("search", "note", "--hours", "100000", "--limit", "100", "--json")
    assert {e["id"] for e in orjson.loads(found.stdout)["events"]} == set(left)


def test_a_collector_rerun_does_not_bring_a_forgotten_event_back(tmp_path: Path, memory: Memory) -> None:
    import shutil

    fixtures = Path(__file__).parent / "fixtures"
    home = tmp_path / "user-home"
    shutil.copytree(fixtures / "claude", home / ".claude", ignore=shutil.ignore_patterns("hooks", "*.txt"))
    memory.collect("claude")
    victim = next(e for e in memory.tail(1000) if e.content.startswith("Fix the checkout bug"))
    assert memory.forget([victim.id], confirm=True).forgotten == 1
    shutil.rmtree(memory.settings.collectors_dir)  # checkpoints gone: the transcript is read again in full
    memory.collect("claude")
    fresh = Memory(memory.settings)
    fresh.collect("claude")
    assert victim.id.encode() not in memory.journal.path.read_bytes()
    assert all(not e.content.startswith("Fix the checkout bug") for e in fresh.tail(1000))


def test_forget_through_a_running_daemon(urchin_home: Path) -> None:
    from tests.conftest import run_urchin
    from tests.daemon_fixture import DaemonProcess

    daemon = DaemonProcess(urchin_home).start()
    try:
        with daemon.client() as http:
            assert http.post("/ingest/batch", json={"events": _events(20)}).status_code == 200
            assert len(http.get("/search", params={"q": "note", "hours": 1e6, "limit": 100}).json()["events"]) == 20
            # a tombstone written by another process hides at once, before any compaction
            other = Memory(Settings.resolve(urchin_home))
            with other.journal.locked():
                other.forget_log.record_forget([forget_hash("ev-005")])
            assert "ev-005" not in {e["id"] for e in http.get("/search", params={"q": "note", "hours": 1e6,
                                                                                "limit": 100}).json()["events"]}
            assert "ev-005" not in {e["id"] for e in http.get("/recent", params={"hours": 1e6,
                                                                                "limit": 100}).json()["events"]}
            assert "ev-005" not in {e["id"] for e in http.get("/semantic", params={"q": "note number 5",
                                                                                  "hours": 1e6}).json()["events"]}
            assert http.get("/events/ev-005").status_code == 404
            # DELETE one event
            gone = http.delete("/events/ev-007")
            assert gone.status_code == 200 and gone.json()["forgotten"] == 1 and gone.json()["compacted"]
            assert http.delete("/events/ev-007").status_code == 404
            assert http.get("/events/ev-007").status_code == 404
            # the batch form previews without confirm, acts with it
            preview = http.post("/forget", json={"session": "s2"}).json()
            assert preview["matched"] == 5 and not preview["confirmed"]
            assert b'"s2"' in daemon.journal_bytes()
            bad = http.post("/forget", json={"session": "s2", "sure": True})
            assert bad.status_code == 400 and bad.json()["field"] == "sure"
            for body, field in (({"since": "nope"}, "since"), ([], "body"), ({}, "ids"),
                                ({"ids": ["ev-001"], "purge": "yes"}, "purge"), ({"ids": [""]}, "ids")):
                refused = http.post("/forget", json=body)
                assert refused.status_code == 400 and refused.json()["field"] == field, (body, refused.text)
                assert refused.json()["error"].startswith(f"{field}: "), refused.text
            assert http.post("/forget", json={"session": "s2", "confirm": True}).json()["forgotten"] == 5
            # the CLI goes through the daemon
            cli = run_urchin("forget", "--query", "pelican", "--yes", "--json")
            assert cli.returncode == 0, cli.stderr
            ids = {e["id"] for e in http.get("/search", params={"q": "note", "hours": 1e6,
                                                                "limit": 100}).json()["events"]}
            expected = {f"ev-{i:03d}" for i in range(20) if i not in (5, 7) and i % 4 != 2 and i % 3}
            assert ids == expected
            assert set(_ids(daemon.journal)) == expected
            # the daemon keeps writing after the rewrite, and its id index knows the new file
            more = http.post("/ingest/batch", json={"events": _events(25)[20:] + _events(5)[1::3]}).json()
            assert (more["appended"], more["duplicate"], more["suppressed"]) == (5, 2, 0)
            assert http.post("/ingest", json=_events(6)[5]).json()["status"].startswith("suppressed")
            assert len(http.get("/search", params={"q": "note", "hours": 1e6,
                                                   "limit": 100}).json()["events"]) == len(expected) + 5
    finally:
        daemon.stop()


def test_mcp_forget_requires_confirm(memory: Memory) -> None:
    import asyncio

    from tests.mcp_harness import stdio_session

    memory.ingest(_events(6))
    before = memory.journal.path.read_bytes()

    async def scenario() -> tuple[object, object, object]:
        async with stdio_session() as session:
            preview = await session.call_tool("urchin_forget", {"ids": ["ev-001"]})
            bad = await session.call_tool("urchin_forget", {"ids": ["ev-001"], "confirm": "yes"})
            nothing = await session.call_tool("urchin_forget", {})
            assert nothing.is_error and nothing.content[0].text.startswith(  # type: ignore[union-attr]
                "ids: say what to forget"), nothing
            done = await session.call_tool("urchin_forget", {"ids": ["ev-001"], "confirm": True})
            return preview, bad, done

    preview, bad, done = asyncio.run(scenario())
    assert not preview.is_error and preview.structured_content["matched"] == 1  # type: ignore[attr-defined]
    assert preview.structured_content["forgotten"] == 0  # type: ignore[attr-defined]
    assert "nothing was changed" in preview.content[0].text  # type: ignore[attr-defined]
    assert bad.is_error and bad.content[0].text.startswith("confirm:")  # type: ignore[attr-defined]
    assert done.structured_content["forgotten"] == 1  # type: ignore[attr-defined]
    # the preview and the bad call changed nothing; the confirmed one removed exactly that line
    assert _lines(memory.journal.path) == [line for line in before.splitlines() if b'"ev-001"' not in line]
    assert memory.forget_log.forget_count() == 1


# ---- PostgreSQL ---------------------------------------------------------------------------------------
def _sql(url: str, query: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return list(conn.execute(query).fetchall())


def test_postgres_rows_go_and_the_cursor_survives_the_rewrite(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(30))
    assert memory.index().inserted == 30
    # tombstone only: the next context call drops the row, before any compaction
    with memory.journal.locked():
        memory.forget_log.record_forget([forget_hash("ev-003")])
    hits = memory.context(query="note number 3 pelican", limit=50).results
    assert hits and "ev-003" not in {h["id"] for h in hits}
    assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks WHERE chunk_id = 'ev-003'") == [(0,)]
    result = memory.forget(session="s1", confirm=True)
    assert result.forgotten == 8 and result.compacted
    assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks WHERE session = 's1' OR chunk_id = 'ev-003'") == [(0,)]
    # new events after the rewrite are fed from the mapped cursor: each once, at its real offset
    memory.ingest(_events(34)[30:])
    memory.index()
    rows = dict(_sql(pg_url, "SELECT chunk_id, journal_offset FROM urchin_chunks"))  # type: ignore[arg-type]
    survivors = {f"ev-{i:03d}" for i in range(30) if i % 4 != 1 and i != 3} | {"ev-030", "ev-031", "ev-032", "ev-033"}
    assert set(rows) == survivors
    offsets = {orjson.loads(line)["id"]: off for off, line in _offsets(memory.journal.path)}
    assert all(rows[f"ev-{i:03d}"] == offsets[f"ev-{i:03d}"] for i in range(30, 34))
    cursors = [r[1] for r in _sql(pg_url, "SELECT device, journal FROM urchin_cursors")]
    assert str(pg_settings.journal_path) in cursors
    assert [c["journal"] for c in memory.index_status()["cursors"]] == [str(pg_settings.journal_path)]
    assert memory.index_status()["behindJournalBytes"] == 0
    memory.close()


def _offsets(path: Path) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        out.append((pos, line.rstrip(b"\n")))
        pos += len(line)
    return out


def test_redact_rewrite_applies_a_rule_added_later(pg_settings: Settings, pg_url: str) -> None:
    from tests.conftest import run_urchin

    memory = Memory(pg_settings)
    secret = "ZQX-7734-SECRET-CODE"
    memory.ingest(_events(8) + [{"id": "leaky", "content": f"the door code is {secret}", "session": "s9"}])
    memory.index()
    before = _lines(memory.journal.path)
    (pg_settings.home / "config.toml").write_text('[redact]\nextra = { door_code = "ZQX-[0-9]{4}-[A-Z-]+" }\n')
    done = run_urchin("redact", "--rewrite", "--json", env={"URCHIN_DATABASE_URL": pg_url,
                                                            "URCHIN_DEVICE_ID": "test-device"})
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout.splitlines()[0])["rewritten"] == 1
    after = _lines(memory.journal.path)
    assert after[:-1] == before[:-1] and after[-1] != before[-1]
    assert secret.encode() not in memory.journal.path.read_bytes()
    fresh = Memory(Settings.resolve(pg_settings.home, database_url=pg_url, device="test-device"))
    assert fresh.get("leaky").content == "the door code is [REDACTED:door_code]"
    assert fresh.search("ZQX", hours=1e6).hits == []
    fresh.index()
    assert _sql(pg_url, f"SELECT count(*) FROM urchin_chunks WHERE content LIKE '%{secret}%'") == [(0,)]
    assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks WHERE chunk_id = 'leaky'") == [(1,)]
    assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks") == [(9,)]
    fresh.close()
    memory.close()


# ---- SIGKILL during compaction -------------------------------------------------------------------------
_FORGETTER = """
import sys
from urchin.config import Settings
from urchin.facade import Memory
Memory(Settings.resolve(sys.argv[1])).forget(sys.argv[2].split(","), confirm=True)
print("done", flush=True)
"""
_WRITER = """
import os, sys, time
from urchin.config import Settings
from urchin.facade import Memory
memory, n = Memory(Settings.resolve(sys.argv[1])), 0
while not os.path.exists(sys.argv[2]):
    result = memory.ingest_one({"id": f"w-{n:05d}", "content": f"writer line {n}", "source": "manual"})
    if result.status == "appended":
        print(result.id, flush=True)
    n += 1
    time.sleep(0.01)   # ~100 writes a second beside each compaction; faster only burnt a core
"""


def _snapshot(memory: Memory) -> bytes:
    with memory.journal.locked():  # no writer is mid-append while we read
        return memory.journal.path.read_bytes()


def _check_old_or_new(after: bytes, before: bytes, forgotten: set[str]) -> str:
    """`after` is `before` or `before` without the forgotten lines, plus whole writer lines appended."""
    assert after.endswith(b"\n")
    old = before.splitlines()
    known = set(old)
    lines = after.splitlines()
    kept = [line for line in lines if line in known]
    extra = [line for line in lines if line not in known]
    assert all(orjson.loads(line)["id"].startswith("w-") for line in extra)
    assert len({orjson.loads(line)["id"] for line in lines}) == len(lines)  # nothing doubled
    new = [line for line in old if orjson.loads(line)["id"] not in forgotten]
    assert kept in (old, new), "the journal is neither the old nor the new file"
    return "old" if kept == old else "new"


@pytest.mark.slow
def test_sigkill_during_compaction_loses_nothing_and_brings_nothing_back(settings: Settings) -> None:
    import random
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    memory = Memory(settings)
    filler = "x" * 300
    memory.import_lines(orjson.dumps({"id": f"ev-{i:05d}", "timestamp": "2026-05-04T10:00:00Z",
                                      "content": f"event {i} {filler}", "source": "manual"})
                        for i in range(8_000))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    stop = settings.home / "stop-writer"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(settings.home), str(stop)], env=env,
                              stdout=subprocess.PIPE, text=True)
    rng = random.Random(1212)
    outcomes: dict[str, int] = {}
    try:
        started = time.monotonic()
        probe = subprocess.run([sys.executable, "-c", _FORGETTER, str(settings.home), "ev-07999"], env=env,
                               capture_output=True, text=True, timeout=60)
        assert probe.stdout.strip() == "done", probe.stderr
        runtime = time.monotonic() - started
        for round_ in range(10):   # random kill points from start-up to rename; 10 keep the test seconds long
            forgotten = {f"ev-{round_ * 50 + k:05d}" for k in range(0, 50, 7)}
            before = _snapshot(memory)
            victim = subprocess.Popen([sys.executable, "-c", _FORGETTER, str(settings.home), ",".join(forgotten)],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.3, 1.05) * runtime)  # the first ~0.3 s is start-up
            victim.kill()
            victim.wait()
            state = _check_old_or_new(_snapshot(memory), before, forgotten)
            recorded = Memory(settings).forget_log.hides(next(iter(forgotten)))
            outcomes[f"{state}/{'tombstone' if recorded else 'none'}"] = outcomes.get(
                f"{state}/{'tombstone' if recorded else 'none'}", 0) + 1
            assert not (state == "new" and not recorded)
            if recorded:  # the next start (or compaction) finishes the job: the set never reappears
                fresh = Memory(settings)
                fresh.compact()
                assert _check_old_or_new(_snapshot(fresh), before, forgotten) == "new"
                assert not any(fresh.locate(i) for i in forgotten)
        assert time.monotonic() - started < 40
    finally:
        stop.touch()
        out, _ = writer.communicate(timeout=30)
    acked = out.split()
    assert len(acked) > 20
    ids = _ids(memory.journal.path)
    assert len(ids) == len(set(ids))
    assert set(acked) <= set(ids)  # every acknowledged write survived every kill
    assert [r.status for r in memory.ingest([{"id": acked[0], "content": "again"}])] == ["duplicate"]
    print(outcomes, f"runtime {runtime:.2f}s")


def test_a_daemon_start_finishes_a_compaction_a_crash_interrupted(urchin_home: Path) -> None:
    from tests.daemon_fixture import DaemonProcess

    memory = Memory(Settings.resolve(urchin_home))
    memory.ingest(_events(10))
    before = _lines(memory.journal.path)
    with memory.journal.locked():  # the tombstone landed, then the process died
        memory.forget_log.record_forget([forget_hash("ev-004")])
    daemon = DaemonProcess(urchin_home).start()
    try:
        assert _lines(daemon.journal) == [line for line in before if b'"ev-004"' not in line]
        with daemon.client() as http:
            assert http.get("/events/ev-004").status_code == 404
            assert http.get("/events/ev-005").status_code == 200
    finally:
        daemon.stop()


def test_a_feeder_behind_the_journal_resumes_at_the_mapped_offset(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest(_events(12))
    memory.index()
    memory.ingest(_events(20)[12:])  # not fed yet: the cursor sits in the middle of what gets rewritten
    memory.forget(["ev-002", "ev-015"], confirm=True)
    memory.ingest(_events(22)[20:])
    memory.index()
    rows = dict(_sql(pg_url, "SELECT chunk_id, journal_offset FROM urchin_chunks"))  # type: ignore[arg-type]
    assert set(rows) == {f"ev-{i:03d}" for i in range(22)} - {"ev-002", "ev-015"}
    offsets = {orjson.loads(line)["id"]: off for off, line in _offsets(memory.journal.path)}
    assert all(rows[i] == offsets[i] for i in rows if i >= "ev-012")  # fed after the rewrite: real offsets
    assert memory.index_status()["behindJournalBytes"] == 0
    memory.close()


def test_offsets_map_across_a_compaction() -> None:
    from urchin.tombstones import Compaction

    done = Compaction(1, ((10, 5, 0), (30, 10, 4), (50, 5, 0)))
    assert [done.map_offset(o) for o in (0, 10, 15, 30, 40, 50, 55, 70)] == [0, 10, 10, 25, 29, 39, 39, 54]


def test_a_compaction_that_never_renamed_is_voided_and_redone(memory: Memory) -> None:
    memory.ingest(_events(6))
    before = _lines(memory.journal.path)
    log = memory.forget_log
    with memory.journal.locked():
        log.record_forget([forget_hash("ev-002")])
        # what a SIGKILL between the intent record and the rename leaves behind
        log._append({"op": "compact", "token": "dead", "dev": 0, "ino": 1, "edits": [[0, 1, 0]]})
    assert log.generation() == 0 and log.pending()
    assert Memory(memory.settings).locate("ev-002") is None
    done = memory.compact()
    assert done is not None and done.generation == 1
    fresh = ForgetLog(memory.journal)
    assert fresh.generation() == 1 and not fresh.pending()
    assert [c.edits for c in fresh.compactions_since(0)] == [done.edits]
    assert _lines(memory.journal.path) == [line for line in before if b'"ev-002"' not in line]


def test_following_the_journal_carries_over_a_compaction(memory: Memory) -> None:
    memory.ingest(_events(10))
    reader = Memory(memory.settings)  # `urchin tail -f` in another process
    _, offset = reader.follow(0)
    memory.forget(["ev-001", "ev-008"], confirm=True)
    memory.ingest(_events(12)[10:])
    events, end = reader.follow(offset)
    assert [e.id for e in events] == ["ev-010", "ev-011"]
    assert end == memory.journal.size()


def test_views_follow_a_rewrite_a_crash_interrupted(memory: Memory, settings: Settings) -> None:
    import numpy as np

    from urchin.search.vectors import VectorCache
    from urchin.tombstones import compact

    memory.ingest(_events(4))
    with VectorCache(settings.home, "m", 4) as cache:
        cache.add([f"ev-{i:03d}" for i in range(4)], list(range(4)), np.eye(4, dtype=np.float32))
    with memory.journal.locked():
        memory.forget_log.record_forget([forget_hash("ev-001")])

    def crash(_: object) -> None:
        raise KeyboardInterrupt  # the process dies after the rename, before the views followed

    with pytest.raises(KeyboardInterrupt):
        compact(memory.journal, memory.forget_log, after=crash)
    assert b"ev-001" not in memory.journal.path.read_bytes()
    assert b"ev-001" in (settings.home / "vectors" / "m" / "ids.txt").read_bytes()
    fresh = Memory(settings)
    assert fresh.forget_log.pending()
    assert fresh.compact() is None  # nothing left to rewrite; the views caught up
    assert b"ev-001" not in (settings.home / "vectors" / "m" / "ids.txt").read_bytes()
    assert not ForgetLog(memory.journal).pending()


# ---- the next command finishes a forget a crash interrupted ---------------------------------------------
# `python -c _CRASHING_CLI POINT urchin-args...`: the real CLI, SIGKILLed right after a crash point of the
# compaction: `forget` (the tombstone is written), `compact` (the rewrite's intent record, before the rename),
# `rename` (the new journal is in place, before the views followed).
_CRASHING_CLI = """
import os, signal, sys
import urchin.tombstones as forget
point, append, rename = sys.argv[1], forget.ForgetLog._append, os.replace
def append_then_die(self, record):
    append(self, record)
    if record.get("op") == point:
        os.kill(os.getpid(), signal.SIGKILL)
def rename_then_die(source, target):
    rename(source, target)
    if point == "rename" and str(target).endswith("events.jsonl"):
        os.kill(os.getpid(), signal.SIGKILL)
# the compaction's rename is urchin.fileio's (Replacement.commit): os.replace, right before the folder's fsync
forget.ForgetLog._append, os.replace = append_then_die, rename_then_die
sys.argv = ["urchin", *sys.argv[2:]]
from urchin.__main__ import entry
entry()
"""


@pytest.mark.parametrize(("point", "command"), [("forget", ("search", "note")), ("compact", ("ingest", "a new note")),
                                               ("rename", ("tail", "-n", "2"))], ids=["forget-search",
                                                                                     "compact-ingest", "rename-tail"])
def test_the_next_command_finishes_a_forget_killed_mid_compaction(urchin_home: Path, point: str,
                                                                   command: tuple[str, ...]) -> None:
    """Not only the next daemon start: any command that opens the journal, without a daemon (issue 34 I)."""
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO, run_urchin

    memory = Memory(Settings.resolve(urchin_home))
    memory.ingest(_events(10))
    before = _lines(memory.journal.path)
    env = {"URCHIN_HOME": str(urchin_home), "URCHIN_NO_DAEMON": "1"}
    killed = subprocess.run([sys.executable, "-c", _CRASHING_CLI, point, "forget", "ev-004"], capture_output=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), **env}, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert ForgetLog(memory.journal).pending()
    assert (b'"ev-004"' in memory.journal.path.read_bytes()) == (point != "rename")
    done = run_urchin(*command, env=env)
    assert done.returncode == 0, done.stderr
    after = _lines(memory.journal.path)
    assert b'"ev-004"' not in memory.journal.path.read_bytes()
    assert after[:9] == [line for line in before if b'"ev-004"' not in line]   # every other line as it was
    assert not ForgetLog(memory.journal).pending()      # the views followed too
    assert memory.locate("ev-004") is None and memory.get("ev-005").id == "ev-005"


def test_the_log_tail_tells_what_the_whole_log_does() -> None:
    """`unfinished` (the tail of the forget log) answers as `pending` (the whole log) for any log: random
    sequences of forget, compact (committed or not, with or without edits), void and cleaned records,
    torn lines, and logs longer than the tail it reads."""
    import random
    import tempfile

    from urchin.journal import Journal

    rng = random.Random(3434)
    with tempfile.TemporaryDirectory() as folder:
        journal = Journal(Path(folder) / "events.jsonl")
        journal.path.write_bytes(b"")
        here = os.stat(journal.path)
        log = ForgetLog(journal)
        for round_ in range(400):
            log.path.unlink(missing_ok=True)
            tokens: list[str] = []
            lines: list[bytes] = []
            for _ in range(rng.randint(0, 8)):
                op = rng.choice(["forget", "compact", "compact", "void", "cleaned", "torn"])
                if op == "forget":
                    many = rng.random() < 0.05       # a big forget: the log outgrows the tail
                    hashes = [os.urandom(16).hex() for _ in range(4000 if many else 2)]
                    lines.append(orjson.dumps({"op": "forget", "count": len(hashes), "hashes": hashes}))
                elif op == "compact":
                    tokens.append(f"t{round_}-{len(tokens)}")
                    ino = here.st_ino if rng.random() < 0.7 else here.st_ino + 1
                    edits = [[0, 10, 0]] if rng.random() < 0.7 else []
                    lines.append(orjson.dumps({"op": "compact", "token": tokens[-1], "dev": here.st_dev, "ino": ino,
                                               "edits": edits}))
                elif op in ("void", "cleaned") and tokens:
                    lines.append(orjson.dumps({"op": op, "token": rng.choice(tokens)}))
                elif op == "torn":
                    lines.append(b'{"op": "forg')
            if lines:
                log.path.write_bytes(b"\n".join(lines) + (b"\n" if rng.random() < 0.8 else b""))
            fresh = ForgetLog(journal)
            assert fresh.unfinished() == fresh.pending(), lines[-3:]



def test_an_ordinary_forget_logs_no_warning_in_any_view(memory: Memory, caplog: pytest.LogCaptureFixture) -> None:
    """A compaction is expected: views that find the journal replaced or shorter after one rebuild
    quietly; only an unexplained change (the journal cut or swapped by hand) is a warning."""
    from urchin.search.semantic import TokenCosineView

    memory.ingest(_events(30))
    follower = TokenCosineView(memory.journal)   # the daemon's view, in another process's place
    assert follower.catch_up() == 30
    memory.semantic("pelican", hours=1e6)
    caplog.set_level("INFO", logger="urchin")
    for forget in ({"ids": ["ev-004"]}, {"query": "heron"}):   # the shorter file, then many lines gone
        memory.forget(**forget, confirm=True)  # type: ignore[arg-type]
        follower.catch_up()
        memory.search("note", hours=1e6)
        memory.semantic("pelican", hours=1e6)
        Memory(memory.settings).semantic("pelican", hours=1e6)
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == []
    assert len(follower.index) == 10 and follower.rebuild_reason == "journal compacted after a forget"
    memory.journal.path.write_bytes(b"\n".join(_lines(memory.journal.path)[:3]) + b"\n")   # cut by hand
    follower.catch_up()
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "token-cosine: journal shorter than the index; rebuilding"]
