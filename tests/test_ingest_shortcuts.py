"""Shortcuts on the per-event ingest path read and decide exactly as the general path does.

Each exists because it runs once per event (`POST /ingest`, the daemon's follower, index builds):
the signed journal lines read inline by `searchable_fields`, the literal routes looked up instead of
scanned by the scope check. The general path stays the reference; these tests compare the two.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from urchin.api_tokens import Grant
from urchin.config import Settings
from urchin.daemon import scopes
from urchin.event import PROOF_FIELD, Event
from urchin.facade import Memory
from urchin.search.fields import searchable_fields


def _fields(event: Event) -> tuple[Any, ...]:
    return (event.id, event.ts_ms, event.source, event.kind, event.content, event.workspace, event.session,
            event.title, event.tags)


def test_lines_the_write_path_signs_are_read_inline_and_as_from_record_reads_them(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    memory.ingest([{"content": "deploy the api", "workspace": "web", "session": "s1", "title": "t",
                    "tags": ["ops", "x"], "meta": {"k": 1}},
                   {"content": "plain note"},
                   {"content": "with an actor", "source": "claude", "kind": "tool"}])
    records = [orjson.loads(line) for _, line in memory.journal.iter_lines(0)]
    assert records and all(PROOF_FIELD in r for r in records)   # every line the write path makes is signed
    expected = [_fields(e) for e in map(Event.from_record, records) if e is not None]
    slow: list[Any] = []
    reference = Event.from_record.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(Event, "from_record", classmethod(lambda cls, r: slow.append(r) or reference(cls, r)))
    assert [searchable_fields(r) for r in records] == expected
    assert slow == []   # a signed line in Urchin's own shape never takes the slow path


@pytest.mark.parametrize("record", [
    {"id": "a", "timestamp": "2026-05-04T20:00:00.000Z", "content": "c", PROOF_FIELD: "AAAAAAAAAAAAAAAA"},
    {"id": "b", "timestamp": "2026-05-04T20:00:00.000Z", "content": "c", PROOF_FIELD: 7,
     "meta": {"workspace": "from-meta"}},
    {"id": "c", "timestamp": "2026-05-04T20:00:00.000Z", "content": "c", PROOF_FIELD: None, "summary": "s"},
    {"id": "d", "timestamp": "yesterday", "content": "c", PROOF_FIELD: "x"},
])
def test_a_proof_key_changes_nothing_that_is_read(record: dict[str, Any]) -> None:
    event = Event.from_record(record)
    assert searchable_fields(record) == (None if event is None else _fields(event))


_METHODS = ("GET", "POST", "DELETE", "PUT")


def _paths() -> set[str]:
    """Every literal route, and paths near them and the patterned ones."""
    out = {"/", "/unknown", "/ingest/", "/ingestx", "/events/x", "/events/", "/hook/claude", "/hook/a/b", "/mcp",
           "/files/r/a.txt", "/memories/m", "/sources/s/search", "/sources/s/documents/d", "/documents/d"}
    for _, pattern, _, _ in scopes._ROUTES:
        out.add(pattern.pattern)
        out.add(pattern.pattern.replace(".+", "x").replace("[^/]+", "y"))
    return out


@pytest.mark.parametrize("grant", [Grant("admin"), Grant("ingest"), Grant("read", ("web",)),
                                   Grant("ingest", ("web", "api"))], ids=lambda g: f"{g.scope}{g.workspaces}")
def test_the_scope_check_decides_every_route_as_the_ordered_scan_does(grant: Grant) -> None:
    for method in _METHODS:
        for path in _paths():
            if (method, path) in scopes._LITERAL:
                assert scopes._LITERAL[method, path] == scopes.route_rule(method, path), (method, path)
            body = orjson.dumps({"content": "c"}) if method == "POST" else None
            assert scopes.check(grant, method, path, b"", body) == _scanned(grant, method, path, body), (method, path)


def _scanned(grant: Grant, method: str, path: str, body: bytes | None) -> Any:
    """`check` with the literal table emptied: the ordered scan alone decides."""
    saved = dict(scopes._LITERAL)
    scopes._LITERAL.clear()
    try:
        return scopes.check(grant, method, path, b"", body)
    finally:
        scopes._LITERAL.update(saved)


def _import_steps(memory: Memory, general: bool) -> list[dict[str, Any]]:
    """The same batches, appended through `append_lines` or through the general `_append` it shortcuts."""
    from urchin.idindex import id_hash
    from urchin.ingest import BatchReport, Prepared

    ingestor = memory.ingestor
    ingestor.keep_ids_in_memory()
    sign = ingestor.journal.proof.sign

    def append(ids: list[str]) -> dict[str, Any]:
        lines = [sign(ingestor.prepare({"id": i, "content": f"event {i}",
                                        "timestamp": "2026-05-04T20:00:00.000Z"}).to_json()) for i in ids]
        hashes = [id_hash(i) for i in ids]
        if not general:
            return ingestor.append_lines(ids, lines, hashes).to_dict()
        report = BatchReport()
        ready = list(enumerate(map(Prepared, ids, lines)))
        for index, result in ingestor._append(ready, None, hashes, tally=report):
            report.add(result, index)
        return report.to_dict()

    reports = [append(["a", "b", "c"]),              # all new
               append(["d", "b", "e"]),              # one already held
               append(["f", "g", "f"])]              # the same id twice in one batch
    memory.forget(["g"])
    reports.append(append(["g", "h"]))               # a forgotten id
    memory.ephemeral("start", 5)
    reports.append(append(["i", "j"]))               # ephemeral mode
    memory.ephemeral("end")
    reports.append(append(["k"]))
    return reports


def test_an_import_batch_of_new_events_is_appended_as_the_general_path_appends_it(tmp_path: Any) -> None:
    homes = [tmp_path / "fast", tmp_path / "general"]
    for home in homes:
        home.mkdir()
    first = {"id": "first", "content": "makes the install key", "timestamp": "2026-05-04T20:00:00.000Z"}
    Memory(Settings.resolve(homes[0])).ingest([first])
    # the same key: the same proofs, so the journals compare byte for byte
    (homes[1] / "redact-id.key").write_bytes((homes[0] / "redact-id.key").read_bytes())
    Memory(Settings.resolve(homes[1])).ingest([first])
    fast, general = (Memory(Settings.resolve(home)) for home in homes)
    assert _import_steps(fast, False) == _import_steps(general, True)
    assert fast.journal.path.read_bytes() == general.journal.path.read_bytes()
    assert [fast.get(i).id for i in "abcdefhk"] == list("abcdefhk")


def test_events_built_by_the_shortcut_are_the_dataclass_s_own_and_stay_frozen() -> None:
    import dataclasses

    given = {"id": "e1", "timestamp": "2026-05-04T20:00:00.000Z", "content": "c", "workspace": "w",
             "session": "s", "title": "t", "brain": "b", "tags": ["x"], "actor": {"account": "a", "device": "d"},
             "meta": {"k": 1}}
    for event in (Event.from_input(given), Event.from_record(given), Event.from_input(given).replace(content="d")):
        assert event is not None and type(event) is Event
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(Event)}
        assert event == Event(**fields) and repr(event) == repr(Event(**fields))
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.content = "changed"  # type: ignore[misc]


def test_a_line_this_process_signed_is_proven_exactly_as_its_hmac_proves_it(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from urchin import proof as proof_module
    from urchin.proof import LineProof

    monkeypatch.setattr(proof_module, "KEEP_SIGNED_BYTES", 4096)   # so that the oldest are dropped too
    proof = LineProof(settings)
    assert not proof.proven(b'{"id":"x"}')          # a reader: what it signs from now on is kept
    lines = [proof.sign(orjson.dumps({"id": f"e{i}", "content": "x" * (i * 7)})) for i in range(60)]
    assert proof._signed and len(proof._signed) < len(lines)   # kept, and bounded
    tampered = [line.replace(b'"id":"e', b'"id":"f') for line in lines]
    swapped = [a[:-18] + b[-18:] for a, b in zip(lines, lines[1:], strict=False)]   # another line's proof
    general = LineProof(settings)                   # the same key, nothing kept: the HMAC decides each
    for line in lines + tampered + swapped + [b'{"id":"x"}']:
        assert proof.proven(line) == general.proven(line)
    assert all(map(proof.proven, lines)) and not any(map(proof.proven, tampered + swapped))
