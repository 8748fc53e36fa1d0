"""The Event model: strict validation on input, tolerant reading of stored lines."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from urchin.errors import ValidationError
from urchin.event import HARD_LIMIT_BYTES, Event, new_id


def test_input_is_normalised() -> None:
    event = Event.from_input({"content": "hi", "source": " Claude ", "kind": "Decision",
                              "timestamp": "2026-05-04T22:00:00+02:00", "tags": ["DB", "db", " x "]})
    assert event.timestamp == "2026-05-04T20:00:00.000Z"
    assert (event.source, event.kind, event.tags) == ("claude", "decision", ("db", "x"))
    assert event.ts_ms == int(datetime(2026, 5, 4, 20, tzinfo=UTC).timestamp() * 1000)


def test_missing_timestamp_is_now_and_missing_id_is_a_uuid7() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    event = Event.from_input({"content": "x"}, now=now)
    assert event.timestamp == "2026-01-02T03:04:05.678Z"
    assert event.id[14] == "7" and len(event.id) == 36
    assert new_id(1000) < new_id(2000)


@pytest.mark.parametrize("data, message", [
    ({}, "content: is required"),
    ({"content": "   \n"}, "content: must not be blank"),
    ({"content": 42}, "content: must be a string"),
    ({"content": "x", "timestamp": "yesterday"}, "timestamp: must be an RFC 3339 timestamp"),
    ({"content": "x", "timestamp": 1700000000}, "timestamp: must be an RFC 3339 timestamp string"),
    ({"content": "x", "source": "Not Valid!"}, "source: must be lowercase [a-z0-9._-]"),
    ({"content": "x", "kind": ""}, "kind: must not be blank"),
    ({"content": "x", "tags": "one"}, "tags: must be a list of strings"),
    ({"content": "x", "tags": [1]}, "tags: must be a list of strings"),
    ({"content": "x", "meta": [1]}, "meta: must be a JSON object"),
    ({"content": "x", "actor": "me"}, "actor: must be an object"),
    ({"content": "x", "id": ""}, "id: must be a non-blank string"),
    ({"content": "x", "workspace": 3}, "workspace: must be a string"),
    ({"content": "x" * (HARD_LIMIT_BYTES + 1)}, "content: is 1048577 bytes, over the hard limit"),
])
def test_bad_input_names_the_field_and_rule(data: dict, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Event.from_input(data)
    assert str(caught.value).startswith(message)


def test_content_over_the_soft_cap_is_truncated_with_a_marker() -> None:
    event = Event.from_input({"content": "é" * 1000}, soft_cap=1001)
    assert event.content.startswith("é" * 500) and "truncated by urchin" in event.content
    assert event.meta == {"truncated": True}
    assert len(event.content.split("\n")[0].encode()) <= 1001


def test_unknown_fields_are_kept_in_meta() -> None:
    event = Event.from_input({"content": "x", "tool": "Bash", "meta": {"exit": 0}})
    assert event.meta == {"exit": 0, "tool": "Bash"}


def test_round_trip_through_json() -> None:
    event = Event.from_input({"content": "x", "workspace": "w", "session": "s", "title": "t", "tags": ["a"],
                              "actor": {"account": "me", "device": "box"}, "meta": {"k": [1, 2]}})
    assert Event.from_json(event.to_json()) == event


def test_typescript_reference_line_reads_into_the_model() -> None:
    line = orjson.dumps({
        "id": "evt_01", "timestamp": "2026-03-01T10:00:00.123Z", "source": "claude", "kind": "conversation",
        "content": "We chose pgvector", "summary": "db decision", "sessionId": "sess-9",
        "metadata": {"tool": "Edit"}, "provenance": {"collector": "claude-transcripts"},
        "identity": {"accountId": "acct-1", "deviceId": "laptop"}, "tags": ["db"],
    })
    event = Event.from_json(line)
    assert event is not None
    assert (event.title, event.session, event.actor) == ("db decision", "sess-9",
                                                         {"account": "acct-1", "device": "laptop"})
    assert event.meta == {"tool": "Edit", "provenance": {"collector": "claude-transcripts"}}


def test_rust_reference_line_reads_into_the_model() -> None:
    line = (b'{"id":"0192f5c0-0000-7000-8000-000000000001","timestamp":"2026-03-01T10:00:00Z","source":"codex",'
            b'"kind":"command","content":"cargo test","workspace":"urchin","session":"s1","tags":[],'
            b'"actor":{"account":"me","device":"box"},"meta":{"exit_code":0}}')
    event = Event.from_json(line)
    assert event is not None
    assert event.timestamp == "2026-03-01T10:00:00.000Z"
    assert (event.source, event.workspace, event.meta) == ("codex", "urchin", {"exit_code": 0})


@pytest.mark.parametrize("line", [b"not json", b"[1,2]", b'{"id":"x","timestamp":"2026-01-01T00:00:00Z"}',
                                  b'{"id":"x","timestamp":"never","content":"c"}', b'{"content":"no id"}'])
def test_lines_that_are_not_events_read_as_none(line: bytes) -> None:
    assert Event.from_json(line) is None
