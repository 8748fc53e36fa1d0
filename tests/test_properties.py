"""Property-based tests: random and hostile events either get a clear `ValidationError` naming a
field, or go through validate -> journal -> every view (get, substring search, token-cosine) -> the
real PostgreSQL feed and come back intact. Also: query windows either are refused naming the
parameter or run.

Hostile means arbitrary unicode (NUL, control characters, lone surrogates), deep and wide meta,
extreme timestamps and huge or non-finite numbers. Examples are bounded so the file stays fast.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from itertools import count
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from urchin.config import Settings
from urchin.errors import QueryError, ValidationError
from urchin.event import MAX_META_DEPTH, Event, clean_text
from urchin.facade import Memory
from urchin.hybrid.feeder import event_row
from urchin.params.context import ContextParams
from urchin.timestamps import MAX_TIMESTAMP, MIN_TIMESTAMP

FAST = settings(max_examples=100, deadline=None)
SLOW = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])

# ---- strategies ---------------------------------------------------------------------------------
# every code point, surrogates and controls included, with the dangerous ones drawn often
_DANGEROUS = ["\x00", "\x01", "\n", "\t", "\r", "\x1b", "\x7f", "\x85", "\u2028", "\ud800", "\udfff", "\ufeff",
              " ", "é", "🦔"]
_HOSTILE_CHARS = st.characters(exclude_categories=())
hostile_text = st.lists(st.one_of(st.sampled_from(_DANGEROUS), st.text(_HOSTILE_CHARS, max_size=8)),
                        max_size=8).map("".join)
_PLAIN_NAMES = st.from_regex(r"[a-zA-Z0-9é🦔][a-zA-Z0-9 ._:/é🦔-]{0,30}", fullmatch=True)
_ONE_BAD_CHAR = st.tuples(_PLAIN_NAMES, st.sampled_from(_DANGEROUS), st.text(max_size=3)).map("".join)
# long and hard to compress, around the 1,024-byte limit and past PostgreSQL's ~2,700-byte index entries
_LONG_NAMES = st.tuples(st.randoms(use_true_random=False), st.integers(min_value=500, max_value=3500)).map(
    lambda r: "".join(r[0].choices("abcdefghijklmnopqrstuvwxyzé0123456789", k=r[1])))
names = st.one_of(_PLAIN_NAMES, _ONE_BAD_CHAR, hostile_text, _LONG_NAMES)
numbers = st.one_of(st.integers(min_value=-(1 << 70), max_value=1 << 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e308, -1e308, 1e301]))
leaves = st.one_of(st.none(), st.booleans(), numbers, hostile_text)


def _nested(levels: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        meta = {"a": meta}
    return meta


metas = st.one_of(
    st.dictionaries(names, st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)), max_leaves=12), max_size=6),
    st.integers(min_value=1, max_value=80).map(_nested),            # around the depth limit, and far past it
    st.integers(min_value=0, max_value=400).map(lambda n: {f"k{i}": i for i in range(n)}),   # wide
)
_OFFSETS = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
_VALID_TIMES = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30),
                            timezones=st.one_of(st.none(), _OFFSETS)).map(lambda d: d.isoformat())
timestamps = st.one_of(
    _VALID_TIMES,
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59),
                 timezones=st.one_of(st.none(), _OFFSETS)).map(lambda d: d.isoformat()),
    st.sampled_from(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "1970-01-01T00:00:00Z",
                     "9999-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z", "2026-05-04 20:00:00",
                     "2026-02-30T00:00:00Z", "", "now"]),
    hostile_text,
)


@st.composite
def event_inputs(draw: st.DrawFn, content: st.SearchStrategy[str] = hostile_text,
                 names: st.SearchStrategy[str] = names, times: st.SearchStrategy[str] = timestamps) -> dict[str, Any]:
    item: dict[str, Any] = {"content": draw(content)}
    for name, strategy in (("id", names), ("workspace", names), ("session", names), ("brain", names),
                           ("title", hostile_text), ("tags", st.lists(names, max_size=5)), ("meta", metas),
                           ("timestamp", times),
                           ("actor", st.dictionaries(st.sampled_from(["account", "device"]), names, max_size=2))):
        if draw(st.booleans()):
            item[name] = draw(strategy)
    return item


# ---- properties of validation alone -------------------------------------------------------------
_FIELDS = ("content", "id", "timestamp", "workspace", "session", "brain", "title", "tags", "actor", "meta", "source",
           "kind")


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _has_bad_text(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_has_bad_text(k) or _has_bad_text(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_bad_text(v) for v in value)
    return isinstance(value, float) and not math.isfinite(value)


@FAST
@given(event_inputs())
def test_an_event_either_is_refused_naming_a_field_or_serialises_and_reads_back(item: dict[str, Any]) -> None:
    try:
        event = Event.from_input(item)
    except ValidationError as exc:
        assert exc.field.split(".")[0].split("[")[0].split(" ")[0] in _FIELDS, exc.message
        return
    line = event.to_json()                                  # never raises
    assert Event.from_json(line) == event                   # the journal line reads back the same event
    assert MIN_TIMESTAMP <= datetime.fromisoformat(event.timestamp[:-1] + "+00:00") <= MAX_TIMESTAMP
    for value in (event.id, event.workspace, event.session, event.brain, *event.tags, *(event.meta or {})):
        assert value is None or not any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in value)
    assert not _has_bad_text(event.to_dict())               # no NUL, surrogate, NaN anywhere
    assert event.meta is None or _depth(event.meta) <= MAX_META_DEPTH
    # what validated is what was given, up to the documented normalisation
    assert event.content == clean_text(item["content"])
    for name in ("workspace", "session", "brain"):
        given_value = item.get(name)
        assert getattr(event, name) == (given_value.strip() or None if given_value else None)
    row = event_row(event, 0)                               # the PostgreSQL row builds
    assert "\x00" not in row.content + (row.session or "") + (row.workspace or "") + row.chunk_id


@FAST
@given(st.one_of(numbers, st.text(max_size=12), st.booleans(), st.none()),
       st.sampled_from(["search", "recent", "context"]))
def test_a_query_window_is_refused_naming_hours_or_has_a_start(hours: Any, kind: str) -> None:
    assume(hours is not None)
    now = datetime(2026, 5, 4, tzinfo=UTC)
    try:
        if kind == "context":
            params = ContextParams.build(query="x", hours=hours, now=now)
            assert params.since is not None and params.since <= now
        else:
            from urchin.search.query import check_hours, window_start_ms

            assert window_start_ms(check_hours(hours), now) <= now.timestamp() * 1000
    except QueryError as exc:
        assert exc.field == "hours", exc.message


@FAST
@given(timestamps, st.sampled_from(["since", "until"]))
def test_a_context_time_is_refused_naming_it_or_is_a_date_in_range(value: str, name: str) -> None:
    try:
        params = ContextParams.build(query="x", **{name: value})
    except QueryError as exc:
        assert exc.field == name, exc.message
        return
    moment = getattr(params, name)
    assert MIN_TIMESTAMP <= moment <= MAX_TIMESTAMP


# ---- the whole path: journal, views, PostgreSQL ---------------------------------------------------
_MARKS = count()


@pytest.fixture
def pg_memory(pg_settings: Settings) -> Any:
    memory = Memory(pg_settings)
    yield memory
    memory.close()


@SLOW
@given(item=event_inputs(st.one_of(hostile_text, st.text(_HOSTILE_CHARS, max_size=200)),
                         names=st.one_of(_PLAIN_NAMES, _LONG_NAMES, _ONE_BAD_CHAR),
                         times=st.one_of(_VALID_TIMES, timestamps)))
def test_a_valid_event_goes_through_every_view_and_the_feed_intact(pg_memory: Memory, pg_url: str,
                                                                    item: dict[str, Any]) -> None:
    import psycopg

    mark = f"zqmark{next(_MARKS)}x"
    item = {**item, "content": f"{mark}\n{item['content']}"}
    if "id" in item and isinstance(item["id"], str):
        item["id"] += mark                           # hostile still, and never a duplicate of an earlier draw
    result = pg_memory.ingest_one(item)
    if result.status == "rejected":
        assert result.reason and result.reason.split(":")[0].split(".")[0].split("[")[0].split(" ")[0] in _FIELDS
        return
    assert result.status == "appended"
    event = result.event
    assert event is not None
    assert pg_memory.get(event.id) == event
    found = pg_memory.search(mark, hours=10_000_000, limit=1000)
    assert [hit.event for hit in found.hits if hit.event.id == event.id] == [event]
    ranked = pg_memory.semantic(mark, hours=10_000_000, limit=5)
    assert event.id in [hit.event.id for hit in ranked.hits]
    report = pg_memory.index()
    assert report.skipped == 0 and report.offset == pg_memory.end_offset()
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT content, workspace, session, title, tags, source, kind, occurred_at "
                           "FROM urchin_chunks WHERE chunk_id = %s", (event.id,)).fetchone()
    assert row is not None
    assert row[:7] == (event.content, event.workspace, event.session, event.title, list(event.tags), event.source,
                       event.kind)
    assert row[7] == datetime.fromisoformat(event.timestamp[:-1] + "+00:00")
    assert orjson.loads(event.to_json())["id"] == event.id
