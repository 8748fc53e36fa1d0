"""Fast extraction from journal lines reads events exactly as `Event.from_record` does, in-process
and in worker processes."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from urchin.event import Event
from urchin.journal import Journal
from urchin.search import cosine_extract, semantic
from urchin.search.cosine import TokenCosineIndex, event_terms
from urchin.search.cosine_extract import TermExtractor
from urchin.search.fields import searchable_fields
from urchin.search.query import Filters
from urchin.search.semantic import TokenCosineView

TS = "2026-05-04T20:00:00.000Z"

ODD_RECORDS: list[Any] = [
    {"id": "plain", "timestamp": TS, "source": "claude", "kind": "note", "content": "deploy the api"},
    {"id": "ref", "timestamp": "2026-05-04T21:00:00+02:00", "content": "reference shape deploy",
     "summary": "Title from summary", "metadata": {"workspace": "billing", "sessionId": "s9"}},
    {"id": "meta-ws", "timestamp": TS, "content": "workspace from meta", "meta": {"workspace": "web"}},
    {"id": "blank-labels", "timestamp": TS, "content": "labels blank", "source": "", "kind": None,
     "workspace": "", "session": 3, "tags": ["Ops", 7, "deploy"]},
    {"id": "naive", "timestamp": "2026-05-04 20:00:00", "content": "naive timestamp deploy"},
    {"id": "nul", "timestamp": TS, "content": "a\x00b deploy\x00", "title": "t\x00"},
    {"id": "bad-ts", "timestamp": "yesterday", "content": "not an event"},
    {"id": "no-content", "timestamp": TS},
    {"id": 5, "timestamp": TS, "content": "id not a string"},
    ["not", "an", "object"],
    "a string",
]


def _fields(event: Event) -> tuple:
    return (event.id, event.ts_ms, event.source, event.kind, event.content, event.workspace, event.session,
            event.title, event.tags)


@pytest.mark.parametrize("record", ODD_RECORDS, ids=lambda r: str(r.get("id") if isinstance(r, dict) else r))
def test_searchable_fields_read_like_from_record(record: Any) -> None:
    event = Event.from_record(record)
    assert searchable_fields(record) == (None if event is None else _fields(event))


_label = st.one_of(st.none(), st.text(max_size=6), st.integers())
_record = st.fixed_dictionaries(
    {"id": st.one_of(st.text(min_size=1, max_size=8), st.integers()),
     "timestamp": st.sampled_from([TS, "2026-05-04T22:00:00+02:00", "2026-05-04", "nope", "2026-13-01T00:00:00Z"]),
     "content": st.one_of(st.text(max_size=30), st.none())},
    optional={"source": _label, "kind": _label, "workspace": _label, "session": _label, "title": _label,
              "tags": st.one_of(st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3), st.text()),
              "meta": st.one_of(st.none(), st.dictionaries(st.sampled_from(["workspace", "sessionId", "summary", "x"]),
                                                           _label, max_size=2)),
              "summary": _label, "provenance": st.text(max_size=5), "proof": st.one_of(st.text(max_size=16), _label)})


@settings(max_examples=300, deadline=None)
@given(_record)
def test_searchable_fields_agree_with_from_record_on_any_record(record: dict) -> None:
    event = Event.from_record(record)
    assert searchable_fields(record) == (None if event is None else _fields(event))


def _lines(records: list[Any]) -> list[tuple[int, bytes]]:
    out, offset = [], 0
    for record in records:
        line = orjson.dumps(record)
        out.append((offset, line))
        offset += len(line) + 1
    out.append((offset, b"{not json"))
    return out


def test_lines_index_like_events() -> None:
    lines = _lines(ODD_RECORDS * 3)
    from_events = TokenCosineIndex()
    from_events.add_many([e for e in (Event.from_json(line) for _, line in lines) if e is not None])
    from_lines = TokenCosineIndex()
    batch = from_lines.extract_lines(lines)
    from_lines.add_batch(batch)
    assert len(batch) == len(from_lines) == len(from_events) == 18
    assert list(batch.offsets) == [o for o, line in lines if Event.from_json(line) is not None]
    assert from_lines._vocab == from_events._vocab
    for query in ("deploy", "title summary", "billing", "ops", "naive timestamp", "a b"):
        assert from_lines.search(query, limit=50) == from_events.search(query, limit=50)
    assert [h.id for h in from_lines.search("deploy", workspace="billing")] == ["ref"] * 3


def _journal_of(path: Path, n: int) -> Journal:
    journal = Journal(path)
    words = ["deploy", "rollback", "cache", "latency", "token", "session", "kubernetes", "postgres"]
    lines = [Event.from_input({"id": f"e{i}", "content": f"{words[i % 8]} {words[i * 7 % 8]} note {i % 13}",
                               "session": f"s{i // 5}", "timestamp": f"2026-05-{1 + i % 28:02d}T10:00:00Z",
                               "workspace": f"w{i % 3}"}).to_json() for i in range(n)]
    lines.insert(7, b"garbage line")
    journal.append(lines)
    return journal


def test_worker_processes_build_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = _journal_of(tmp_path / "events.jsonl", 3000)
    monkeypatch.setattr(semantic, "BULK_BYTES", 1)
    monkeypatch.setattr(cosine_extract, "_CHUNK_BYTES", 20_000)  # many chunks, so both workers take several
    parallel = TokenCosineView(journal, workers=2)
    sequential = TokenCosineView(journal, workers=1)
    assert parallel.catch_up() == sequential.catch_up() == 3000
    assert parallel.offsets.array().tolist() == sequential.offsets.array().tolist()
    assert parallel.next_offset == sequential.next_offset
    assert set(parallel.index._vocab) == set(sequential.index._vocab)
    assert not parallel.index._maps  # the workers' vocabularies are dropped after the build
    for query in ("deploy cache", "kubernetes postgres note", "latency 7"):
        for window in (None, 1_746_000_000_000):
            a = parallel.search(query, since_ms=window, limit=30, filters=Filters())
            b = sequential.search(query, since_ms=window, limit=30, filters=Filters())
            assert [(h.event.id, h.score) for h in a] == [(h.event.id, h.score) for h in b]


def test_a_dead_worker_falls_back_to_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = _journal_of(tmp_path / "events.jsonl", 500)
    monkeypatch.setattr(semantic, "BULK_BYTES", 1)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    view = TokenCosineView(journal, workers=2)
    assert view.catch_up() == 500
    assert view.search("deploy", since_ms=None, limit=3, filters=Filters())


def _children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_workers_end_with_a_parent_killed_by_sigkill(tmp_path: Path) -> None:
    """A build killed mid-extraction (SIGKILL: no clean-up runs) leaves no worker behind: an orphan
    used to wait forever to hand over a frame nobody would read."""
    import signal
    import subprocess
    import sys
    import time

    journal = _journal_of(tmp_path / "events.jsonl", 3000)
    script = ("import sys, time\n"
              "from pathlib import Path\n"
              "from urchin.search import cosine_extract\n"
              "path = Path(sys.argv[1])\n"
              "batches = cosine_extract.extract_parallel(path, 0, path.stat().st_size, 2, chunk=20_000)\n"
              "print('started', flush=True)\n"
              "next(batches)\n"
              "print('read', flush=True)\n"
              "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script, str(journal.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline() == "started\n"
        assert parent.stdout.readline() == "read\n"
        deadline = time.monotonic() + 30
        while not (workers := _children_of(parent.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers
        time.sleep(0.5)   # the workers have their job: they compute, or wait to hand over a frame
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 20
    while any(Path(f"/proc/{pid}").exists() and "(python" in Path(f"/proc/{pid}/stat").read_text() for pid in workers) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
             and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"workers left running after their parent's SIGKILL: {alive}"


_ascii_text = st.lists(st.sampled_from([*"ab Z_9.'/-:,\t\n()é’", "src/a.py", "end.", "don't", "x..y", "CamelCase",
                                        "snake_case", "I", "the"]), max_size=25).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ascii_text.filter(str.isascii), max_size=6))
def test_the_ascii_split_finds_the_words_the_regex_finds(texts: list[str]) -> None:
    by_bytes, by_regex = TermExtractor(), TermExtractor()
    rows_a, terms_a = by_bytes._ascii_tokens(texts)
    rows_b, terms_b = by_regex._regex_tokens(texts)
    vocab_a = {v: k for k, v in by_bytes.vocab.items()}
    vocab_b = {v: k for k, v in by_regex.vocab.items()}
    assert rows_a.tolist() == rows_b.tolist()
    assert [vocab_a[t] for t in terms_a.tolist()] == [vocab_b[t] for t in terms_b.tolist()]


@settings(max_examples=100, deadline=None)
@given(st.lists(_ascii_text, min_size=1, max_size=6))
def test_mixed_ascii_and_unicode_batches_count_terms_per_event(texts: list[str]) -> None:
    events = [Event(id=f"e{i}", timestamp=TS, source="s", kind="note", content=t or "x",
                    title="Tïtle" if i % 2 else None, ts_ms=i) for i, t in enumerate(texts)]
    extractor = TermExtractor()
    batch = extractor.from_events(events)
    names = {v: k for k, v in extractor.vocab.items()}
    start = 0
    for i, event in enumerate(events):
        size = int(batch.sizes[i])
        got = {names[t]: c for t, c in zip(batch.terms[start:start + size].tolist(),
                                           batch.tf[start:start + size].tolist(), strict=True)}
        assert got == dict(Counter(event_terms(event)))  # the definition: tokenize() over the parts
        start += size


_HEAP = """
import sys
from urchin.search import cosine_extract
if sys.argv[1] == "bound":
    cosine_extract.bound_heap()             # what a build child does at its start
def rss():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:")) >> 10
big = b"x" * (16 << 20)
del big                                     # glibc's own policy keeps blocks up to 16 MB in its heap from now on
before = rss()
kept, blocks = [], []
for _ in range(40):                         # a batch's arrays between long-lived objects, then freed
    blocks.append(b"y" * (2 << 20))
    kept.append(b"z" * 100_000)
del blocks
print(rss() - before)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_a_build_child_gives_freed_batches_back_to_the_system() -> None:
    """glibc keeps freed blocks of up to 32 MB in its heap once one as large was freed: a build's batches
    then stayed resident between two spills (~150 MB of the build child's at 3M events). A build child
    maps blocks of 1 MB and more, so what it frees leaves it."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    held = {mode: int(subprocess.run([sys.executable, "-c", _HEAP, mode], env=env, capture_output=True, text=True,
                                     check=True).stdout) for mode in ("default", "bound")}
    assert held["default"] >= 60, held      # the mechanism this guards against, on this libc
    assert held["bound"] <= 12, held    # the kept objects (4 MB)
