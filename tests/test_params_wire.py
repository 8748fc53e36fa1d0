"""What the daemon client sends is what the daemon builds: every typed parameters class (`urchin/params/`)
round-trips through the client's one serialiser (`urchin.params.wire.to_wire`), the transport's encoding
(a query string for a GET route, JSON for the others) and the daemon's parse (the contract's `build`, as
its routes call it) to an equal object, every field compared (those left out of `==` too). Built at the
edge or rebuilt with `dataclasses.replace()`, as a Python caller does."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import httpx
import orjson
import pytest

from urchin.contract import OPERATIONS
from urchin.contract.access import ACCESS
from urchin.contract.routes import request, route
from urchin.params.context import ContextParams
from urchin.params.wire import to_wire

_FILTERS = {"source": "claude", "workspace": "shop", "session": "s-1", "kind": "note"}
_CONTEXT = {"query": "quokka deploys", "strategy": "keyword", "searches": [{"type": "lex", "query": "rollback"}],
            "full_text_weight": 2.0, "semantic_weight": 0.5, "k": 30, "sources": ["claude", "git"],
            "source_ids": ["Shop"], "kinds": ["note"], "workspace": "shop", "session": "s-1", "tags": ["ops"],
            "since": "2026-01-02T03:04:05.123Z", "until": "2026-02-01T00:00:00Z", "include_memories": False,
            "memory_weight": 0.5, "min_score": 0.25, "limit": 7, "token_budget": 500, "explain": True,
            "per_file_cap": 2, "mode": "live", "live_byte_budget": 1000, "devices": ["Laptop"], "accounts": ["Me"]}
# Per operation, values (by `Param.name`) that between them set every field away from its default.
SAMPLES: dict[str, list[dict[str, Any]]] = {
    "search": [{"query": "deploy", "hours": 2.5, "limit": 7, **_FILTERS, "scope": "team"}],
    "semantic": [{"query": "deploy", "hours": 2.5, "limit": 7, **_FILTERS, "min_score": 0.25, "explain": True}],
    "recent": [{"hours": 2.5, "limit": 7, **_FILTERS}],
    "session_context": [{"session": "s-1", "hours": 2.5, "limit": 7}],
    "workspace_context": [{"workspace": "shop", "hours": 2.5, "limit": 7}],
    "get": [{"id": "018f-event"}],
    "tail": [{"count": 7}],
    "get_file": [{"path": "shop/guide.md", "from_line": 3, "max_lines": 9}],
    "get_memory": [{"slug": "release", "token_budget": 99}],
    "document_search": [{"query": "deploy", "limit": 7, "full_text_weight": 1.5, "semantic_weight": 0.5,
                         "tags": ["ops"], "source_type": "file", "content_type": "markdown", "min_score": 0.25,
                         "include_memories": True, "include_conversations": True, "memory_weight": 0.5,
                         "conversation_weight": 1.5}],
    "query_source": [{"source": "shop", "query": "deploy", "limit": 7, "min_score": 0.25}],
    "fetch_document": [{"source": "files", "id": "shop/guide.md", "mode": "live", "content_hash": "sha256:ab"}],
    "get_document": [{"document_id": "shop/guide.md", "include_chunks": True}],
    "ephemeral": [{"action": "start", "minutes": 30.5}, {"action": "end"}],
    "forget": [{"ids": ["e-1", "e-2"], "session": "s-1", "query": "token", "since": "2026-01-02T03:04:05.123Z",
                "until": "2026-02-01T00:00:00+01:00", "confirm": True, "purge": True}],
    "ingest": [{"content": "deploy done", "source": "shell", "kind": "note", "workspace": "shop", "session": "s-1",
                "title": "Deploy", "tags": ["ops"], "timestamp": "2026-01-02T03:04:05.123Z", "id": "e-1"}],
    "remember": [{"content": "We pin numpy below 2", "tags": ["deps", "numpy"], "workspace": "shop"}],
    "recall": [{"workspace": "shop", "cwd": "/work/shop", "session": "s-1", "prompt": "deploy", "budget": 99}],
    "context": [_CONTEXT, {"query": "x", "include_conversations": False, "sources": ["claude"],
                           "source_ids": ["claude"]}],
}


def _every_field(params: Any) -> dict[str, Any]:
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}


def _through_the_daemon(operation: str, params: Any) -> Any:
    """`params` as the daemon client sends them (`request`: its route's path parameters, query string or
    body) and the daemon's route builds them; an operation with no route, as a JSON body."""
    if not ACCESS[operation].routes:
        return OPERATIONS[operation].build(orjson.loads(orjson.dumps(to_wire(params))), "wire")
    method, path, query, body = request(operation, params)
    pattern = re.sub(r"\[\^/\]\+|\.\+", lambda m: f"({m.group(0)})", route(operation).path)   # its slots, captured
    match = re.fullmatch(pattern, path)
    assert match is not None, (path, route(operation).path)
    positional = [p.wire_name for p in OPERATIONS[operation].params if p.positional]
    in_path = {name: unquote(value) for name, value in zip(positional, match.groups(), strict=False)}
    if method == "GET":   # a query string: every value arrives as text
        text = dict(httpx.QueryParams(query).multi_items())
        return OPERATIONS[operation].build({**text, **in_path}, "wire", from_text=True)
    return OPERATIONS[operation].build({**orjson.loads(orjson.dumps(body)), **in_path}, "wire")


def _cases() -> list[tuple[str, int]]:
    return [(name, i) for name in sorted(SAMPLES) for i in range(len(SAMPLES[name]))]


def test_every_typed_parameters_class_has_samples_setting_every_field() -> None:
    """A new typed operation, or a new field, needs a sample here (else its wire name goes untested)."""
    typed = {name for name, op in OPERATIONS.items() if op.typed is not None}
    assert set(SAMPLES) == typed
    for name in typed:
        defaults = {f.name: f.default for f in dataclasses.fields(OPERATIONS[name].typed_class())}  # type: ignore[arg-type]
        built = [_every_field(OPERATIONS[name].build(values, "cli")) for values in SAMPLES[name]]
        unset = {field for field, default in defaults.items() if all(b[field] == default for b in built)}
        # roots: resolved by the daemon from sourceIds, never sent; hours: its own test below (it becomes since)
        assert unset <= {"roots", "hours"}, (name, unset)


@pytest.mark.parametrize("operation, sample", _cases())
def test_what_the_client_sends_the_daemon_builds_the_same(operation: str, sample: int) -> None:
    params = OPERATIONS[operation].build(SAMPLES[operation][sample], "cli")
    assert _every_field(_through_the_daemon(operation, params)) == _every_field(params)


@pytest.mark.parametrize("operation, sample", _cases())
def test_a_replaced_copy_is_sent_by_wire_names_too(operation: str, sample: int) -> None:
    """`dataclasses.replace()` rebuilds the object from its fields: what it sends still names each field
    by its wire name (`sourceIds`, not `sources`, for a context's source ids)."""
    params = OPERATIONS[operation].build(SAMPLES[operation][sample], "cli")
    counts = [f.name for f in dataclasses.fields(params) if f.type == "int" and f.name != "k"]
    copy = dataclasses.replace(params, **{name: 5 for name in counts[:1]})
    assert _every_field(_through_the_daemon(operation, copy)) == _every_field(copy)


def test_a_replaced_context_keeps_its_source_ids_apart_from_its_sources() -> None:
    """The daemon resolves `sourceIds` against the workspace roots (a root's files); the same names sent
    as `sources` would filter on a journal source of that name and find nothing."""
    params = dataclasses.replace(ContextParams.parse({"query": "quokka", "sourceIds": ["shop"]}), limit=5)
    sent = to_wire(params)
    assert sent == {"query": "quokka", "sourceIds": ["shop"], "limit": 5}
    again = ContextParams.parse(sent)
    assert (again.sources, again.source_ids, again.limit) == (("shop",), ("shop",), 5)


def test_a_window_in_hours_is_sent_as_hours_and_counted_from_the_daemons_now() -> None:
    params = dataclasses.replace(ContextParams.parse({"query": "x", "hours": 6}), limit=5)
    assert to_wire(params) == {"query": "x", "hours": 6.0, "limit": 5}
    again = _through_the_daemon("context", params)
    assert again.hours == 6.0 and again.since is not None
    assert abs(again.since - (datetime.now(UTC) - timedelta(hours=6))) < timedelta(minutes=1)
