"""Timeline pages by byte-offset cursor, activity per day per source, and the viewer's sign-in codes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess
from urchin.daemon.browser import BrowserSessions
from urchin.errors import QueryError
from urchin.facade import Memory


def _fill(memory: Memory, n: int) -> list[str]:
    """`n` events whose timestamps are not in journal order (days 1, 2, 3, 1, 2, 3, ...); their ids
    newest first by (timestamp, id), the order every timeline page must keep."""
    events = [{"id": f"e{k:03d}", "content": f"note {k}", "source": "claude" if k % 2 else "shell",
               "timestamp": f"2026-03-{1 + k % 3:02d}T10:00:{k % 60:02d}.000Z"} for k in range(n)]
    memory.ingest(events)
    return [e["id"] for e in sorted(events, key=lambda e: (e["timestamp"], e["id"]), reverse=True)]


def _all_pages(memory: Memory, limit: int, **filters: str) -> list[str]:
    seen: list[str] = []
    page = memory.timeline(limit=limit, **filters)
    while True:
        seen += [e.id for e in page.events]
        if page.older is None:
            return seen
        page = memory.timeline(before=page.older, limit=limit, **filters)


def test_pages_walk_the_events_newest_first_by_time_each_event_once(memory: Memory) -> None:
    newest_first = _fill(memory, 23)
    for limit in (1, 5, 23, 100):
        assert _all_pages(memory, limit) == newest_first


def test_events_sharing_a_timestamp_page_by_id_without_loss(memory: Memory) -> None:
    """A bulk import often stamps many events alike: the cursor's id splits them across pages."""
    memory.ingest([{"id": f"same{k * 5 % 17:02d}", "content": "x", "timestamp": "2026-03-01T10:00:00Z"}
                   for k in range(17)])    # not in id order in the journal
    assert _all_pages(memory, 4) == [f"same{k:02d}" for k in range(16, -1, -1)]


def test_filters_apply_to_every_page(memory: Memory) -> None:
    newest_first = _fill(memory, 12)
    assert _all_pages(memory, 2, source="claude") == [i for i in newest_first if int(i[1:]) % 2]


def test_after_returns_what_arrived_since_in_time_order(memory: Memory) -> None:
    """Live updates: what was appended after a page, whatever its timestamps (a backfill of old events
    arrives too, for the page to place by its time), newest first by time."""
    _fill(memory, 4)
    head = memory.timeline(limit=2).newer
    assert memory.timeline(after=head).events == []
    memory.ingest([{"id": "late1", "content": "later", "timestamp": "2026-03-05T00:00:00Z"},
                   {"id": "old1", "content": "backfilled", "timestamp": "2026-01-01T00:00:00Z"},
                   {"id": "late2", "content": "later still", "timestamp": "2026-03-06T00:00:00Z"}])
    page = memory.timeline(after=head)
    assert [e.id for e in page.events] == ["late2", "late1", "old1"]
    assert memory.timeline(after=page.newer).events == []


def test_a_cursor_from_before_a_forget_still_pages_correctly(memory: Memory) -> None:
    newest_first = _fill(memory, 10)
    first = memory.timeline(limit=3)
    assert [e.id for e in first.events] == newest_first[:3]
    assert first.older is not None
    gone = {newest_first[1], newest_first[6]}   # one on this page, one beyond: the journal is rewritten
    memory.forget(sorted(gone), confirm=True)
    assert memory.forget_log.generation() == 1
    assert _all_pages_from(memory, first.older) == [i for i in newest_first[3:] if i not in gone]


def _all_pages_from(memory: Memory, cursor: str) -> list[str]:
    seen: list[str] = []
    older: str | None = cursor
    while older is not None:
        page = memory.timeline(before=older, limit=2)
        seen += [e.id for e in page.events]
        older = page.older
    return seen


@pytest.mark.parametrize("cursor", ["", "12", "g0.1", "t", "t!!", "tMTIz", "tOmFi", "teDph", "t" + "A" * 9000,
                                    "tMTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM6YQ"])
def test_a_bad_page_cursor_is_rejected_naming_it(memory: Memory, cursor: str) -> None:
    _fill(memory, 2)
    with pytest.raises(QueryError) as caught:
        memory.timeline(before=cursor)
    assert caught.value.field == "before" and "older" in caught.value.message


@pytest.mark.parametrize("cursor", ["", "12", "g.1", "gx.1", "g0.-1", "g9.0", "g0.1" + "0" * 50, "tMTIzOmE"])
def test_a_bad_arrival_cursor_is_rejected_naming_it(memory: Memory, cursor: str) -> None:
    _fill(memory, 2)
    with pytest.raises(QueryError) as caught:
        memory.timeline(after=cursor)
    assert caught.value.field == "after"


def test_before_and_after_together_are_rejected(memory: Memory) -> None:
    with pytest.raises(QueryError) as caught:
        memory.timeline(before="tMTIzOmE", after="g0.0")
    assert caught.value.field == "after"


def test_activity_counts_events_per_day_per_source(memory: Memory) -> None:
    _fill(memory, 9)
    result = memory.activity(days=5, now=datetime(2026, 3, 4, tzinfo=UTC))
    assert [d["day"] for d in result["days"]] == ["2026-02-28", "2026-03-01", "2026-03-02", "2026-03-03",
                                                  "2026-03-04"]
    assert result["sources"] == ["claude", "shell"] and result["total"] == 9
    assert result["days"][1]["counts"] == {"shell": 2, "claude": 1}
    with memory.journal.path.open("ab") as raw:  # another writer's key order, and a line that is no event
        raw.write(b'{"content":"x","source":"gemini","timestamp":"2026-03-01T09:00:00+00:00","id":"raw"}\nnot json\n')
    assert memory.activity(days=5, now=datetime(2026, 3, 4, tzinfo=UTC))["days"][1]["counts"] == {
        "shell": 2, "claude": 1, "gemini": 1}
    memory.forget(["e000"], confirm=True)  # a rewrite: counted again without it
    assert memory.activity(days=5, now=datetime(2026, 3, 4, tzinfo=UTC))["total"] == 9
    for bad in (0, 367, 1.5, True):
        with pytest.raises(QueryError):
            memory.activity(days=bad)  # type: ignore[arg-type]


def test_a_login_code_works_once() -> None:
    sessions = BrowserSessions()
    code, ttl = sessions.new_code()
    assert ttl == 60
    granted = sessions.exchange(code)
    assert granted is not None and sessions.session(granted[0]) == granted[1]
    assert sessions.exchange(code) is None
    assert sessions.exchange("x" * 43) is None
    assert not sessions.csrf_ok(granted[1], None) and sessions.csrf_ok(granted[1], granted[1].csrf)
    sessions.end(granted[0])
    assert sessions.session(granted[0]) is None


def test_urchin_open_without_a_daemon_says_how_to_start_one(urchin_home: Path) -> None:
    out = run_urchin("open", "--no-browser")
    assert out.returncode == 1 and "urchin serve" in out.stderr and "Traceback" not in out.stderr


def test_viewer_routes_over_http(urchin_home: Path) -> None:
    daemon = DaemonProcess(urchin_home, "--no-collect").start()
    try:
        with daemon.client() as client:
            client.post("/ingest", json={"id": "a", "content": "hello"})
            page = client.get("/timeline", params={"limit": 1}).json()
            assert [e["id"] for e in page["events"]] == ["a"] and page["older"] is None
            assert client.get("/timeline", params={"color": "red"}).json()["field"] == "color"
            assert client.get("/timeline", params={"before": "nope"}).json()["field"] == "before"
            assert client.get("/activity", params={"days": "x"}).json()["field"] == "days"
            assert client.post("/ephemeral", json={"action": "maybe"}).json()["field"] == "action"
            assert client.post("/ephemeral", json={"action": "on", "why": 1}).status_code == 400
            assert client.post("/ephemeral", json={"action": "on"}).json()["on"] is True
            assert client.post("/ephemeral", json={"action": "off"}).json()["on"] is False
            code = client.post("/auth/code", json={}).json()
            assert code["path"].startswith("/login?code=")
            assert client.get("/auth/session").status_code == 403  # a token is not a browser session
        out = run_urchin("open", "--no-browser", env={"URCHIN_HOME": str(urchin_home)})
        assert out.returncode == 0, out.stderr
        url = out.stdout.strip().splitlines()[-1]
        assert url.startswith(daemon.url + "/login?code=") and daemon.token not in out.stdout
        login = httpx.get(url, follow_redirects=False, timeout=30)
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and daemon.token not in cookie
        assert httpx.get(url, timeout=30).status_code == 401
        jar = dict(login.cookies)
        assert httpx.get(daemon.url + "/timeline", cookies=jar, timeout=30).status_code == 200
        assert httpx.post(daemon.url + "/auth/code", json={}, cookies=jar,
                          headers={"origin": daemon.url}, timeout=30).status_code == 403  # no CSRF header
        foreign = httpx.get(daemon.url + "/timeline", cookies=jar, headers={"origin": "http://evil.example"},
                            timeout=30)
        assert foreign.status_code == 403
    finally:
        daemon.stop()


def test_the_timeline_route_pages_an_out_of_order_journal_by_time(urchin_home: Path) -> None:
    """`urchin import` of events not in time order, then a backfill of older ones: the routes the
    viewer uses page them newest first by time, each once, and a bad cursor is a 400 naming it."""
    days = ["2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04", "2026-12-03", "2026-12-04", "2026-11-30"]
    batch = urchin_home.parent / "import.jsonl"
    batch.write_text("".join(f'{{"id": "i{k}", "content": "imported {k}", "timestamp": "{day}T1{k}:00:00Z"}}\n'
                             for k, day in enumerate(days)))
    daemon = DaemonProcess(urchin_home, "--no-collect").start()
    try:
        out = run_urchin("import", str(batch), env={"URCHIN_HOME": str(urchin_home)})
        assert out.returncode == 0, out.stderr
        with daemon.client() as client:
            head = client.get("/timeline", params={"limit": 2}).json()
            seen, page = [], head
            while True:
                seen += [(e["timestamp"], e["id"]) for e in page["events"]]
                if page["older"] is None:
                    break
                page = client.get("/timeline", params={"limit": 2, "before": page["older"]}).json()
            assert seen == sorted(seen, reverse=True) and len(seen) == len(days)
            client.post("/ingest", json={"id": "back", "content": "backfill", "timestamp": "2026-11-29T00:00:00Z"})
            arrived = client.get("/timeline", params={"after": head["newer"]}).json()
            assert [e["id"] for e in arrived["events"]] == ["back"]
            bad = client.get("/timeline", params={"before": head["newer"]})
            assert bad.status_code == 400 and bad.json()["field"] == "before"
            assert "`older` cursor" in bad.json()["error"]
    finally:
        daemon.stop()


def test_a_filter_that_skips_many_hands_back_a_cursor_and_loses_nothing(memory: Memory,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A page reads at most MAX_SCAN_LINES lines (whole timestamps at a time): a rare filter gets a
    short page and a cursor to go on, and walking on finds each match once, in time order."""
    from urchin.facade import timeline

    monkeypatch.setattr(timeline, "MAX_SCAN_LINES", 3)
    newest_first = _fill(memory, 30)
    pages = []
    page = memory.timeline(limit=4, source="claude")
    while True:
        pages.append([e.id for e in page.events])
        if page.older is None:
            break
        page = memory.timeline(before=page.older, limit=4, source="claude")
    assert len(pages) > 4 and [i for p in pages for i in p] == [i for i in newest_first if int(i[1:]) % 2]
