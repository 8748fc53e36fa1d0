"""The single write path: per-event status, exact dedupe, and bad input that never touches storage."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from urchin.config import Settings
from urchin.facade import Memory


def _snapshot(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


BAD_ITEMS = [
    ({"source": "x"}, "content: is required"),
    ({"content": "  "}, "content: must not be blank"),
    ({"content": ["list"]}, "content: must be a string"),
    ({"content": "x", "timestamp": "2026-13-45"}, "timestamp: must be an RFC 3339 timestamp"),
    ({"content": "x" * (1024 * 1024 + 10)}, "content: is 1048586 bytes, over the hard limit"),
]


@pytest.mark.parametrize("item, reason", BAD_ITEMS)
def test_bad_input_is_rejected_and_nothing_stored_changes(memory: Memory, urchin_home: Path, item: dict,
                                                          reason: str) -> None:
    memory.ingest_one({"id": "keep", "content": "already here"})
    before = _snapshot(urchin_home)
    result = memory.ingest_one(item)
    assert result.status == "rejected" and result.reason is not None
    assert result.reason.startswith(reason)
    assert _snapshot(urchin_home) == before


def test_duplicate_id_is_reported_and_not_appended(memory: Memory, settings: Settings, urchin_home: Path) -> None:
    assert memory.ingest_one({"id": "a", "content": "one"}).status == "appended"
    before = _snapshot(urchin_home)
    result = memory.ingest_one({"id": "a", "content": "different text, same id"})
    assert (result.status, result.label) == ("duplicate", "duplicate")
    assert _snapshot(urchin_home) == before


def test_duplicates_inside_one_batch(memory: Memory) -> None:
    results = memory.ingest([{"id": "b", "content": "1"}, {"id": "b", "content": "2"}, {"content": ""}])
    assert [r.label for r in results] == ["appended", "duplicate", "rejected: content: must not be blank"]


def test_dedupe_holds_across_the_whole_journal_and_survives_a_lost_sidecar(settings: Settings) -> None:
    memory = Memory(settings)
    memory.ingest([{"id": f"e{i}", "content": f"n{i}"} for i in range(500)])
    sidecar = settings.journal_path.with_name("events.jsonl.ids")
    sidecar.unlink()
    fresh = Memory(settings)
    assert fresh.ingest_one({"id": "e3", "content": "again"}).status == "duplicate"
    assert fresh.ingest_one({"id": "e500", "content": "new"}).status == "appended"
    ids = [orjson.loads(line)["id"] for line in settings.journal_path.read_bytes().splitlines()]
    assert len(ids) == 501 == len(set(ids))


def test_dedupe_sees_events_appended_by_another_writer(settings: Settings) -> None:
    one, two = Memory(settings), Memory(settings)
    one.ingestor.keep_ids_in_memory()
    one.ingest_one({"id": "x1", "content": "from one"})
    two.ingest_one({"id": "x2", "content": "from two"})
    assert one.ingest_one({"id": "x2", "content": "again"}).status == "duplicate"
    assert two.ingest_one({"id": "x1", "content": "again"}).status == "duplicate"


def test_dedupe_after_a_torn_tail_forgets_the_torn_event(settings: Settings) -> None:
    memory = Memory(settings)
    memory.ingest_one({"id": "ok", "content": "fine"})
    with settings.journal_path.open("ab") as handle:
        handle.write(b'{"id":"half","timestamp":"2026-01-01T00:00:00Z","content":"cut')
    assert memory.ingest_one({"id": "half", "content": "whole this time"}).status == "appended"
    assert memory.get("half").content == "whole this time"


def test_import_reports_each_bad_line_and_keeps_going(memory: Memory) -> None:
    lines = [b'{"id":"i1","content":"first"}', b"{not json", b'{"id":"i1","content":"dup"}',
             b'{"content":""}', b"", b'[1]', b'{"id":"i2","content":"last","source":"shell"}']
    report = memory.import_lines(lines)
    assert (report.appended, report.duplicate) == (2, 1)
    assert [n for n, _ in report.rejected] == [2, 4, 6]
    assert report.rejected[1][1] == "content: must not be blank"
    assert report.rejected[0][1].startswith("not valid JSON")


def test_actor_is_stamped_from_identity_settings(urchin_home: Path) -> None:
    settings = Settings.resolve(urchin_home, env={"URCHIN_ACCOUNT_ID": "ada", "URCHIN_DEVICE_ID": "lab"})
    event = Memory(settings).ingest_one({"content": "x"}).event
    assert event is not None and event.actor == {"account": "ada", "device": "lab"}


def test_a_secret_cut_by_the_soft_cap_is_still_redacted(urchin_home: Path) -> None:
    settings = Settings.resolve(urchin_home, env={"URCHIN_SOFT_CAP_BYTES": "4096"})
    token = "ghp_" + "A1b2C3d4E5" * 4
    content = "x" * (4096 - 20) + " " + token + " tail"
    event = Memory(settings).ingest_one({"content": content}).event
    assert event is not None and event.meta is not None and event.meta["truncated"] is True
    assert event.meta["redactions"] == {"github_token": 1}
    stored = settings.journal_path.read_text()
    assert token[:12] not in stored and "ghp_A1b2" not in stored


# ---- issue 12: one bad line never costs another -----------------------------------------------------
def _deep_line(levels: int) -> bytes:
    return b'{"content": "deep", "meta": ' + b'{"a": ' * levels + b"1" + b"}" * levels + b"}"


def test_import_of_hostile_lines_lands_every_good_line(memory: Memory, settings: Settings) -> None:
    bad = [b'{"content": "x", "session": "a\\u0000b"}', _deep_line(300), _deep_line(1000),
           b'{"content": "x", "timestamp": "0001-01-01T00:00:00+01:00"}',
           b'{"content": "x", "timestamp": "9999-12-31T23:59:59-01:00"}', b'{"content": "x", "meta": {"n": 1e400}}',
           b'{"content": "x", "id": "\\ud800"}']
    lines: list[bytes] = []
    for i, line in enumerate(bad):
        lines += [b'{"id": "good-%d", "content": "fine"}' % i, line]
    lines.append(b'{"id": "good-last", "content": "fine"}')
    report = memory.import_lines(lines)
    assert report.appended == len(bad) + 1
    assert [n for n, _ in report.rejected] == list(range(2, 2 * len(bad) + 1, 2))
    reasons = [r for _, r in report.rejected]
    assert reasons[0].startswith("session: ") and reasons[1].startswith("meta: must be nested at most 32")
    assert reasons[3].startswith("timestamp: ") and reasons[4].startswith("timestamp: ")
    ids = [orjson.loads(line)["id"] for line in settings.journal_path.read_bytes().splitlines()]
    assert ids == [f"good-{i}" for i in range(len(bad))] + ["good-last"]


def test_an_event_that_cannot_be_serialised_fails_alone(memory: Memory, settings: Settings) -> None:
    from urchin.event import Event

    deep: dict = {"leaf": 1}
    for _ in range(299):
        deep = {"a": deep}
    # Built past validation (a bug, or a future writer): the write path still isolates it.
    bad = Event(id="bad", timestamp="2026-05-04T20:00:00.000Z", source="x", kind="note", content="x", meta=deep)
    good = [memory.prepare({"id": f"ok-{i}", "content": "fine"}) for i in range(2)]
    results = memory.ingest_prepared([good[0], bad, good[1]])
    assert [(r.id, r.status) for r in results] == [("ok-0", "appended"), ("bad", "rejected"), ("ok-1", "appended")]
    ids = [orjson.loads(line)["id"] for line in settings.journal_path.read_bytes().splitlines()]
    assert ids == ["ok-0", "ok-1"]
    assert memory.ingest_one({"id": "bad", "content": "now valid"}).status == "appended"   # its id was never taken
