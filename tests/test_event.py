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


# ---- issue 12: whatever validates can be serialised, stored, indexed and fed -----------------------
def _nested(levels: int) -> dict:
    meta: dict = {"leaf": 1}
    for _ in range(levels - 1):
        meta = {"a": meta}
    return meta


@pytest.mark.parametrize("name", ["id", "workspace", "session", "brain"])
@pytest.mark.parametrize("bad", ["\x00", "\x01", "\n", "\x1b", "\x7f", "\ud800"])
def test_names_refuse_control_characters_and_lone_surrogates(name: str, bad: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Event.from_input({"content": "x", name: f"a{bad}b"})
    assert caught.value.field == name and "control characters" in caught.value.rule


@pytest.mark.parametrize("data, field", [
    ({"tags": ["fine", "t\x00"]}, "tags[1]"),
    ({"tags": ["\ud83d"]}, "tags[0]"),
    ({"tags": ["t"] * 257}, "tags"),
    ({"actor": {"account": "a\x00"}}, "actor.account"),
    ({"actor": {"account": 7}}, "actor.account"),
    ({"meta": {"k\x00": 1}}, "meta"),
    ({"meta": {"k": {"x\n": 1}}}, "meta.k"),
    ({"meta": {"n": float("nan")}}, "meta.n"),
    ({"meta": {"n": [1, float("inf")]}}, "meta.n[1]"),
    ({"meta": {"n": 1 << 64}}, "meta.n"),
    ({"meta": {"n": -(1 << 63) - 1}}, "meta.n"),
    ({"meta": {"s": {1, 2}}}, "meta.s"),
    ({"meta": {"b": b"bytes"}}, "meta.b"),
    ({"meta": {1: "x"}}, "meta"),
    ({"meta": _nested(33)}, "meta"),
    ({"meta": _nested(300)}, "meta"),
    ({"meta": _nested(5000)}, "meta"),       # no RecursionError: the depth is checked before going down
    ({"meta": {"big": "x" * (256 * 1024)}}, "meta"),
    ({"id": "i" * 257}, "id"),
    ({"workspace": "w" * 1025}, "workspace"),
    ({"session": "é" * 513}, "session"),         # 1,026 bytes: names are indexed, and index entries are small
    ({"tags": ["t" * 1025]}, "tags[0]"),
    ({"title": "t" * (64 * 1024 + 1)}, "title"),
])
def test_hostile_values_are_refused_naming_the_field(data: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Event.from_input({"content": "x", **data})
    assert caught.value.field == field, caught.value.message


def test_meta_at_the_depth_limit_is_kept_whole() -> None:
    meta = _nested(32)
    event = Event.from_input({"content": "x", "meta": meta})
    assert event.meta == meta and Event.from_json(event.to_json()) == event


def test_text_keeps_control_characters_and_replaces_nul_and_lone_surrogates() -> None:
    event = Event.from_input({"content": "a\x00b\tc\x1b[31md\ud800e", "title": "t\x00",
                              "meta": {"out": "x\x00y", "list": ["\udfff", "ok\n"]}})
    assert event.content == "a\ufffdb\tc\x1b[31md\ufffde"
    assert event.title == "t\ufffd"
    assert event.meta == {"out": "x\ufffdy", "list": ["\ufffd", "ok\n"]}
    assert Event.from_json(event.to_json()) == event


def test_meta_is_plain_json_after_validation() -> None:
    event = Event.from_input({"content": "x", "meta": {"t": (1, 2), "f": 1.5, "n": None, "i": (1 << 64) - 1}})
    assert event.meta == {"t": [1, 2], "f": 1.5, "n": None, "i": (1 << 64) - 1}
    assert Event.from_json(event.to_json()) == event


@pytest.mark.parametrize("ts", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "1969-12-31T23:59:59Z",
                                "0999-01-01T00:00:00.000Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.9999-00:01"])
def test_timestamps_outside_1970_to_9999_utc_are_refused(ts: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Event.from_input({"content": "x", "timestamp": ts})
    assert caught.value.field == "timestamp" and "must be between 1970-01-01" in caught.value.rule


@pytest.mark.parametrize("ts, stored", [("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"),
                                        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
                                        ("9999-12-31T23:59:59+00:00", "9999-12-31T23:59:59.000Z")])
def test_timestamps_at_the_edges_of_the_range_are_kept(ts: str, stored: str) -> None:
    assert Event.from_input({"content": "x", "timestamp": ts}).timestamp == stored


def test_stored_lines_with_impossible_timestamps_are_not_events_and_never_raise() -> None:
    for ts in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"):
        assert Event.from_record({"id": "x", "timestamp": ts, "content": "c"}) is None


def test_a_stored_line_nested_deeper_than_urchin_writes_is_not_an_event() -> None:
    def line(levels: int) -> bytes:
        return (b'{"id":"x","timestamp":"2026-05-04T20:00:00.000Z","content":"c","meta":'
                + b'{"a":' * levels + b"1" + b"}" * levels + b"}")

    kept = Event.from_json(line(32))
    assert kept is not None and Event.from_json(kept.to_json()) == kept
    for levels in (33, 300, 1000):          # orjson reads these, but could never write them back
        assert Event.from_json(line(levels)) is None
        assert Event.from_json(line(levels).decode()) is None
    wide = b'{"id":"x","timestamp":"2026-05-04T20:00:00.000Z","content":"c","meta":{"l":[' + b"[1]," * 500 + b"[1]]}}"
    assert Event.from_json(wide) is not None   # many brackets, little depth: kept


def test_no_cut_leaves_a_recognisable_start_of_a_token() -> None:
    # Every cut Urchin makes before redaction (names, summaries, titles, the soft cap) goes through
    # `clip`: a token the cut goes through loses its kept part, so its prefix + 4 characters never stay.
    from tests.test_hooks import _prefixed
    from urchin.clipping import clip
    from urchin.collectors.text import summarize_input
    from urchin.event import as_name

    for prefix, secret in _prefixed():
        start = secret[:len(prefix) + 4]
        for into in range(len(prefix) + 4, len(secret)):
            text = "ok é " + secret + " tail"
            limit = len("ok é ") + into
            assert start not in clip(text, limit)
            assert start not in clip(text, limit + 1, in_bytes=True)  # é is two bytes
            assert start not in as_name(text, limit + 1)
            assert start not in summarize_input("Bash", {"command": "y" * (400 - into - 1) + " " + secret})
        assert clip("ok " + secret + " tail", len(secret) + 3) == "ok " + secret  # a cut between words keeps both


def test_timestamps_read_the_same_by_the_canonical_shortcut_and_the_general_parse() -> None:
    """An import's timestamps are mostly written as Urchin writes them; those skip the general
    parse. Every timestamp, canonical or near it (out of range, impossible dates, other digits,
    offsets, spaces), gives the same stored text and milliseconds, or the same error, either way."""
    import random

    from urchin.timestamps import format_timestamp, parse_timestamp

    rng = random.Random(34)
    digits = "0123456789" * 3 + "٣９"
    samples = ["1970-01-01T00:00:00.000Z", "1969-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z",
               "2026-02-30T10:00:00.000Z", "2026-13-01T00:00:00.000Z", "0999-01-01T00:00:00.000Z",
               "2026-09-05T18:41:50.563z", " 2026-09-05T18:41:50.563Z", "2026-09-05T18:41:50.563+00:00",
               "2026-09-05 18:41:50.563Z", "٢٠٢٦-09-05T18:41:50.563Z", "2026-09-05T24:00:00.000Z"]
    for _ in range(3000):
        shape = "dddd-dd-ddTdd:dd:dd.dddZ"
        samples.append("".join(rng.choice(digits) if c == "d" else c for c in shape))
    for ts in samples:
        try:
            moment = parse_timestamp(ts)
            canonical = ts[:1] != "0" and bool(__import__("re").fullmatch(
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ts))
            expected: object = (ts if canonical else format_timestamp(moment), int(moment.timestamp() * 1000))
        except ValidationError as exc:
            expected = exc.message
        try:
            event = Event.from_input({"content": "x", "timestamp": ts})
            got: object = (event.timestamp, event.ts_ms)
        except ValidationError as exc:
            got = exc.message
        assert got == expected, ts
