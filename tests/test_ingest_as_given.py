"""The import's one pass (`Ingestor.as_given`) for a record already in the journal's own shape writes
what the general path (`prepare`, then `to_json`) writes, or declines.

The general path stays the reference: a batch through `prepare_batch` (which tries the one pass first)
gives the same journal lines, ids and refusals as the general path alone, over records in the
journal's own shape and near it: every field at its edges, keys out of order or unknown, and
secrets in the encodings the redactor decodes (tests/test_redact_decoded.py's), in every field.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_redact import CASES
from tests.test_redact_decoded import BEFORE, WHOLE
from urchin.config import Settings
from urchin.errors import ValidationError
from urchin.facade.bulk import prepare_batch
from urchin.ingest import Ingestor

_CAP = 1024   # the smallest soft cap the settings take: contents reach it cheaply
_UUIDS = [str(uuid.UUID(int=n * 7919 + 1)) for n in range(3)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ingestor, Ingestor]:
    """Two writers of one home (one install key): the one pass tried first, and the general path alone."""
    home = tmp_path_factory.mktemp("as-given")
    made = Settings.resolve(home).with_(soft_cap_bytes=_CAP)
    return Ingestor(made), Ingestor(made)


def _general(ingestor: Ingestor, lines: list[bytes]) -> tuple[int, list[tuple[int, str]], list[str], list[bytes]]:
    """`prepare_batch` as it was before the one pass: every record through `prepare`."""
    rejected: list[tuple[int, str]] = []
    ids: list[str] = []
    out: list[bytes] = []
    for number, line in enumerate(lines, 1):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            rejected.append((number, f"not valid JSON: {exc}"))
            continue
        if not isinstance(record, dict):
            rejected.append((number, "event: must be a JSON object"))
            continue
        try:
            event = ingestor.prepare(record)
        except ValidationError as exc:
            rejected.append((number, ingestor.rejected(record, exc).reason or "rejected"))
            continue
        ids.append(event.id)
        out.append(ingestor.journal.proof.sign(event.to_json()))
    return len(lines), rejected, ids, out


# Each field's edges: what the general path keeps, changes (strips, lowercases, cleans, cuts, drops,
# stamps) or refuses, each beside a value it keeps as given.
def _nested(depth: int) -> Any:
    return [_nested(depth - 1)] if depth else 1


# two meta objects under the size limit whose every string is short (each is cached as clean), then both in one
_HALVES = [{f"k{n}": "v" * 200 for n in range(start, start + 700)} for start in (0, 700)]
_LONG = [c * n for c in ("a", "é", "😀", " ") for n in (255, 256, 257, 1023, 1024, 1025)]
_TEXTS = ["deploy the api", "Ελληνικά Straße ﬁle İ", "a\x00b", "a\ud800b", "", " ", "\n\t", " padded ",
          "tab\tand\nline", "token: see below", "password: x", "-u user:pw", "--token abc", "Bearer",
          "%3D&#61;\x1b[1m\u200b\u00a0", "\x7f", *_LONG]
_NAMES = ["proj-7", " web", "web ", "", "a\tb", "Web", "é" * 256, "é" * 257, "x" * 256, "x" * 257, "x" * 1025,
          "a\u00a0b", "a\u2028b", "a\x00", 7, None, ["web"]]
_EDGES: dict[str, list[Any]] = {
    "id": [*_UUIDS, _UUIDS[0].upper(), " " + _UUIDS[1], _UUIDS[1] + "\n", "e1", "", " ", "a" * 256, "a" * 257,
           "é" * 256, "a\x01", "a\u00a0", 7],   # (no id: a new one each time, not comparable)
    "timestamp": ["2026-09-06T21:25:20.578Z", "2026-09-06T21:25:20Z", "2026-09-06T21:25:20.578+00:00",
                  "2026-02-30T00:00:00.000Z", "2026-09-06T24:00:00.000Z", "0001-01-01T00:00:00.000Z",
                  "0000-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z", "2026-09-06 21:25:20.578Z",
                  "２026-09-06T21:25:20.578Z", "yesterday", 1757193920],
    "source": ["claude", "shell", "Claude", " claude", "claude ", "a b", "", "x" * 64, "x" * 65, "tool_use", "é", 7,
               None],
    "content": _TEXTS + [None, 7, ["x"]],
    "title": [*_TEXTS, "x" * (64 * 1024 + 1), 7, None],
    "tags": [["ops"], ["ops", "x"], [], ["Ops"], [" ops"], ["ops", "ops"], ["ops", "Ops"], [""], ["a b"], ["é" * 256],
             ["é" * 257], ["a\tb"], [7], "ops", None, ["x"] * 257],
    "actor": [{"account": "dev", "device": "laptop"}, {"device": "laptop", "account": "dev"}, {}, {"account": "dev"},
              {"account": 1}, {"account": "a\x01", "device": "laptop"}, {"account": "dev", "device": None}, None,
              "dev", {"account": {"x": 1}}],
    "meta": [{"tool": "Bash", "exit": 0}, {}, {"k": None}, {"k": "a\x00"}, {"k": "\x7f"}, {"k": "a\nb"},
             {"k": [1, {"n": 2}]}, {"k": 1.5}, {"k": True}, {"k": 1 << 64}, {"k": -(1 << 63) - 1},
             {"redactions": {"jwt": 1}}, {"truncated": True}, {"password": "hunter2hunter2"}, {"api_key": "dev"},
             {"k": "x" * 300}, {"k": "x" * (300 * 1024)}, {"d": _nested(31)}, {"d": _nested(32)},
             {"account": "a\x01", "device": "laptop"}, {"account": 1, "device": None},   # what an actor must not be
             [1], "m", None],
    "proof": ["AAAAAAAAAAAAAAAA"],
    "summary": ["a summary"],
}
_EDGES["kind"] = _EDGES["source"]
for _name in ("workspace", "session", "brain"):
    _EDGES[_name] = _NAMES
_ORDER = ["id", "timestamp", "source", "kind", "content", "workspace", "session", "title", "brain", "tags", "actor",
          "meta", "proof", "summary"]
_BASE: dict[str, Any] = {"id": _UUIDS[0], "timestamp": "2026-09-06T21:25:20.578Z", "source": "claude", "kind": "note",
                         "content": "deploy the api", "workspace": "proj-7", "session": "sess-82d3868b",
                         "actor": {"account": "dev", "device": "laptop"}, "meta": {"tool": "Bash", "exit": 0}}
_SECRETS = [secret for _, secret, _ in CASES[::3]]
# A secret as tools print it (every encoding the redactor decodes), in its setting or bare after an escape.
_SECRET_TEXTS = ([encode(secret) for encode in WHOLE.values() for secret in _SECRETS[::4]]
                 + [encode(template.format(s=secret)) for template, secret, _ in CASES[::5] for encode in
                    list(WHOLE.values())[::6]]
                 + [f"see {before}{secret} now" for before in BEFORE for secret in _SECRETS[::9]])


def _lines(records: list[dict[str, Any]]) -> list[bytes]:
    """As JSON may hold them (`\\u` escapes, spaces), twice: the second time, the caches know what the
    first time saw (a source, a name, a clean string), as in a long import."""
    return [json.dumps(r).encode() for r in records] * 2


def _same(pair: tuple[Ingestor, Ingestor], records: list[dict[str, Any]]) -> None:
    lines = _lines(records)
    fast, general = pair
    assert prepare_batch(fast, (list(range(1, len(lines) + 1)), list(lines))) == _general(general, lines)


def test_every_edge_of_every_field_is_written_or_refused_as_the_general_path_does(
        pair: tuple[Ingestor, Ingestor]) -> None:
    records = [{**_BASE, name: value} for name in _ORDER for value in _EDGES[name]]
    records += [{k: v for k, v in _BASE.items() if k != name} for name in _ORDER[2:]]   # each field left out
    records += [dict(reversed(_BASE.items())), {"content": "first", **_BASE}]
    _same(pair, records)
    _same(pair, [{**_BASE, "meta": meta} for meta in (*_HALVES, _HALVES[0] | _HALVES[1])])   # apart: fill a cache


def test_a_secret_in_any_encoding_in_any_field_is_redacted_as_the_general_path_does(
        pair: tuple[Ingestor, Ingestor]) -> None:
    fields = ("content", "title", "workspace", "tags", "actor", "meta", "source", "id")
    shaped = {"tags": lambda s: [s], "actor": lambda s: {"account": "dev", "device": s},
              "meta": lambda s: {"output": s}}
    _same(pair, [{**_BASE, name: shaped.get(name, lambda s: s)(text)} for text in _SECRET_TEXTS for name in fields])


_FIELD = {name: st.sampled_from(values) for name, values in _EDGES.items()}
_SECRET = st.sampled_from(_SECRET_TEXTS)


@st.composite
def _record(draw: st.DrawFn) -> dict[str, Any]:
    """A journal line as `to_dict` writes one, then a few of its fields changed, added or left out."""
    record = dict(_BASE, id=draw(st.sampled_from(_UUIDS)))
    for name in draw(st.lists(st.sampled_from(_ORDER), max_size=3)):
        record[name] = draw(_SECRET) if draw(st.integers(0, 4)) == 0 and name not in ("tags", "actor", "meta") \
            else draw(_FIELD[name])
    for name in draw(st.lists(st.sampled_from(_ORDER[2:]), max_size=2)):   # a new id or time: not comparable
        record.pop(name, None)
    keys = list(record)
    if draw(st.booleans()):
        keys.sort(key=_ORDER.index)   # as `to_dict` orders them
    elif draw(st.booleans()):
        keys = draw(st.permutations(keys))
    return {k: record[k] for k in keys}


@settings(max_examples=200, deadline=None)
@given(st.lists(_record(), min_size=1, max_size=4))
def test_a_batch_through_the_one_pass_is_what_the_general_path_makes(pair: tuple[Ingestor, Ingestor],
                                                                      records: list[dict[str, Any]]) -> None:
    _same(pair, records)


def test_a_journal_in_its_own_shape_takes_the_one_pass(pair: tuple[Ingestor, Ingestor], tmp_path: Path) -> None:
    """Records as bench/gen_journal.py and `urchin export` write them: after the first of each
    source, kind and name, none takes `prepare`; one holding a secret, or anything unusual, does."""
    fast, _ = pair
    shaped = [{"id": _UUIDS[n % 3], "timestamp": f"2026-09-06T21:25:{n:02d}.578Z", "source": ["claude", "shell"][n % 2],
               "kind": "note", "content": f"deploy the api, step {n}" + " é" * (n % 3), "workspace": "proj-7",
               "session": "sess-1", "tags": ["ops"], "actor": {"account": "dev", "device": "laptop"},
               "meta": {"tool": "Bash", "exit": n}} for n in range(12)]
    for record in shaped[:2]:
        fast.prepare(record)
    assert all(fast.as_given(r) == fast.prepare(r).to_json() for r in shaped)
    unusual = [{**shaped[0], "content": "export GITHUB_TOKEN=" + CASES[0][1]}, {**shaped[0], "kind": "Note"},
               {**shaped[0], "extra": 1}, {"content": "x", **shaped[0]}, {**shaped[0], "tags": []},
               {**shaped[0], "timestamp": "2026-09-06T21:25:20Z"}, {**shaped[0], "meta": {}}]
    assert [fast.as_given(r) for r in unusual] == [None] * len(unusual)


# Lines as other writers make them: a key given twice (the last value wins, at the first one's place),
# any JSON in meta (numbers at orjson's edges, a `redactions` claim), timestamps near the canonical form.
_TEXT = st.one_of(st.text(max_size=8), _SECRET,
                  st.sampled_from(_TEXTS[:16] + ["Claude", "ops", "İ", "ﬁ", "e\u0301", "\x85"]))
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(1 << 66), 1 << 66), _TEXT,
                               st.sampled_from([-0.0, 1.0, 1e308, 5e-324, 2.0 ** 53 + 2])),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                     max_leaves=6)
_NEAR = {"timestamp": st.sampled_from(["2026-09-06T21:25:20.5Z", "2026-09-06T21:25:20.578123Z",
                                       "2026-12-31T23:59:60.000Z", "2026-09-06T21:25:20.578+02:00",
                                       "2026-09-06T21:25:20.578z", "2026-09-06T21:25:20,578Z"]),
         "meta": st.dictionaries(_TEXT, _JSON, max_size=3) | st.just({"redactions": {"jwt": 1}, "tool": "Bash"}),
         "tags": st.lists(_TEXT, max_size=3), "actor": st.dictionaries(_TEXT, st.none() | _TEXT, max_size=2)}


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    record = dict(_BASE, id=draw(st.sampled_from(_UUIDS)), tags=["ops"], title="t", brain="b")
    for name in draw(st.lists(st.sampled_from(_ORDER[:12]), max_size=2)):
        record[name] = draw(_NEAR.get(name, _TEXT))
    body = json.dumps(record, ensure_ascii=draw(st.booleans()))[1:-1]
    twice = draw(st.sampled_from([*record, None]))
    if twice is None:
        return b"{" + body.encode("utf-8", "surrogatepass") + b"}"   # a lone surrogate: bytes no UTF-8 allows
    again = f"{json.dumps(twice)}: {json.dumps(draw(_NEAR.get(twice, _TEXT)))}"
    line = "{" + (f"{again}, {body}" if draw(st.booleans()) else f"{body}, {again}") + "}"
    return line.encode("utf-8", "surrogatepass")


@settings(max_examples=150, deadline=None)
@given(st.lists(_line(), min_size=1, max_size=4))
def test_lines_with_a_key_twice_any_meta_or_a_near_timestamp_are_written_as_the_general_path_does(
        pair: tuple[Ingestor, Ingestor], lines: list[bytes]) -> None:
    fast, general = pair
    lines = lines * 2
    assert prepare_batch(fast, (list(range(1, len(lines) + 1)), list(lines))) == _general(general, lines)


def test_with_extra_patterns_the_one_pass_declines_and_an_id_they_match_is_redacted_every_time(
        tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[redact]\nextra = { ticket = "TICKET-[0-9]{4}", build = "0000-000000000001" }\n')
    made = Settings.resolve(tmp_path)
    fast, general = Ingestor(made), Ingestor(made)
    records = [{**_BASE, "id": _UUIDS[1]}, _BASE, {**_BASE, "id": "TICKET-1234"},
               {**_BASE, "content": "see TICKET-1234"}]
    lines = _lines(records)   # twice: the second time every cache knows the labels, names, actor and meta
    got = prepare_batch(fast, (list(range(1, len(lines) + 1)), list(lines)))
    assert got == _general(general, lines)
    assert [fast.as_given(r) for r in records] == [None] * 4   # an extra pattern may match any id
    written = b"".join(got[3]) + "".join(got[2]).encode()
    assert b"TICKET-1234" not in written and _UUIDS[0].encode() not in written
