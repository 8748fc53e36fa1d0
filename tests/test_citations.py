"""Collected transcript events cite their upstream file, lines and a keyed hash of those bytes; fetching
with that citation returns the event as indexed and says whether the transcript still holds it
(issue 14): in-process, MCP and HTTP, with real files, a real daemon and the embedded PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.daemon_fixture import DaemonProcess
from tests.mcp_harness import stdio_session
from tests.mcp_scenarios import call, call_error
from urchin.config import Settings
from urchin.errors import QueryError
from urchin.facade import Memory

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = "7c1d0e2f-3a4b-4c5d-8e6f-708192a3b4c5"
SECRET = "ghp_" + "Q7r8S9t0U1v2W3x4Y5z6A7b8C9d0E1f2G3h4"


def _line(kind: str, uuid: str, text: str) -> str:
    message = {"role": kind, "content": text} if kind == "user" else \
        {"role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text}]}
    return orjson.dumps({"parentUuid": None, "cwd": "/home/dev/cite", "sessionId": SESSION, "type": kind,
                         "message": message, "uuid": uuid, "timestamp": "2025-11-02T10:00:00.000Z"}).decode()


LINES = [
    orjson.dumps({"type": "summary", "summary": "Retention"}).decode(),
    _line("user", "c0000000-0000-4000-8000-000000000001", "Where is the wombat-ledger retention configured?"),
    _line("assistant", "c0000000-0000-4000-8000-000000000002",
          "The wombat-ledger retention lives in config/retention.toml, ninety days."),
    _line("user", "c0000000-0000-4000-8000-000000000003", f"push the narwhal branch with {SECRET} please"),
]
REPLY = "c0000000-0000-4000-8000-000000000002"


def expected_hash(home: Path, data: bytes) -> str:
    """The citation's hash, computed here from its definition: HMAC-SHA256 under the install's key."""
    key = bytes.fromhex((home / "redact-id.key").read_text().strip())
    return hmac.new(key, b"urchin-origin-v1\x00" + data, hashlib.sha256).hexdigest()[:32]


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    """A Claude Code transcript under the (fake) user home the collectors read."""
    path = tmp_path / "user-home" / ".claude" / "projects" / "-home-dev-cite" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(LINES) + "\n")
    return path


@pytest.fixture
def indexed(pg_settings: Settings, transcript: Path) -> Any:
    memory = Memory(pg_settings)
    memory.collect("claude")
    memory.ingest([{"id": "old-note", "content": "wombat-ledger notes from before citations", "source": "claude"}])
    memory.index()
    yield memory
    memory.close()


def _hit(results: list[dict[str, Any]], event_id: str) -> dict[str, Any]:
    return next(r for r in results if r["id"] == event_id)


def test_a_collected_event_cites_the_upstream_lines_and_their_hash(indexed: Memory, transcript: Path,
                                                                  urchin_home: Path) -> None:
    hit = _hit(indexed.context(query="wombat-ledger retention").results, REPLY)
    upstream = hit["location"]["upstream"]
    assert hit["location"]["journalOffset"] is not None and hit["citation"] == f"urchin://events/{REPLY}"
    assert upstream["path"] == str(transcript) and upstream["startLine"] == upstream["endLine"] == 3
    raw = transcript.read_bytes().split(b"\n")[2]
    assert REPLY.encode() in raw and upstream["contentHash"] == expected_hash(urchin_home, raw)
    event = indexed.get(REPLY).to_dict()
    assert event["meta"]["origin"] == {"path": str(transcript), "lines": [3, 3], "hash": upstream["contentHash"]}


def test_fetch_with_the_citation_returns_the_event_and_follows_the_transcript(indexed: Memory,
                                                                              transcript: Path) -> None:
    hit = _hit(indexed.context(query="wombat-ledger retention").results, REPLY)
    digest = hit["location"]["upstream"]["contentHash"]
    doc = indexed.fetch_source_document("claude", REPLY, digest)
    assert doc["type"] == "event" and doc["content"].startswith("The wombat-ledger retention lives")
    assert doc["upstream"] == {"path": str(transcript), "startLine": 3, "endLine": 3, "contentHash": digest,
                               "status": "unchanged"}
    # the agent rewrites that line (same file, same length of everything else)
    transcript.write_text("\n".join([*LINES[:2], LINES[2].replace("ninety", "thirty"), LINES[3]]) + "\n")
    doc = indexed.fetch_source_document("claude", REPLY, digest)
    assert doc["upstream"]["status"] == "changed" and "ninety days" in doc["content"]   # the version indexed
    transcript.write_text("\n".join(LINES[:2]) + "\n")                                    # cut before line 3
    assert indexed.fetch_source_document("claude", REPLY, digest)["upstream"]["status"] == "changed"
    transcript.unlink()
    assert indexed.fetch_source_document("claude", REPLY, digest)["upstream"]["status"] == "missing"


def test_a_wrong_hash_is_an_error_naming_content_hash(indexed: Memory) -> None:
    with pytest.raises(QueryError) as err:
        indexed.fetch_source_document("claude", REPLY, "0" * 32)
    assert err.value.field == "contentHash" and "changed" in err.value.rule and "lines 3-3" in err.value.rule


def test_an_event_from_before_citations_still_fetches(indexed: Memory) -> None:
    hit = _hit(indexed.context(query="wombat-ledger notes").results, "old-note")
    assert "upstream" not in hit["location"]
    doc = indexed.fetch_source_document("claude", "old-note")
    assert doc["content"] == "wombat-ledger notes from before citations" and "upstream" not in doc
    with pytest.raises(QueryError) as err:
        indexed.fetch_source_document("claude", "old-note", "0" * 32)
    assert err.value.field == "contentHash" and "no upstream citation" in err.value.rule


def test_the_hash_is_of_the_raw_line_and_no_secret_reaches_the_journal_or_a_reply(
        indexed: Memory, transcript: Path, urchin_home: Path) -> None:
    prompt = next(e for e in indexed.tail(50) if "narwhal" in e.content)
    assert SECRET not in prompt.content and "[REDACTED:" in prompt.content
    raw = transcript.read_bytes().split(b"\n")[3]
    assert SECRET.encode() in raw
    assert prompt.meta["origin"]["hash"] == expected_hash(urchin_home, raw)       # the upstream bytes, unredacted
    assert SECRET.encode() not in indexed.settings.journal_path.read_bytes()
    doc = indexed.fetch_source_document("claude", prompt.id, prompt.meta["origin"]["hash"])
    assert doc["upstream"]["status"] == "unchanged" and SECRET not in orjson.dumps(doc).decode()


def test_a_hostile_origin_outside_the_transcript_folders_is_never_read(indexed: Memory, tmp_path: Path,
                                                                       transcript: Path, urchin_home: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"private line\n")
    good = expected_hash(urchin_home, b"private line")    # were it read, the status would be "unchanged"
    link = transcript.parent / "link.jsonl"
    link.symlink_to(outside)
    paths = [str(outside), str(link), f"{transcript.parent}/../../../../outside.jsonl", "/etc/passwd"]
    for n, path in enumerate(paths):
        indexed.ingest([{"id": f"hostile-{n}", "source": "claude", "content": "forged citation",
                         "meta": {"origin": {"path": path, "lines": [1, 1], "hash": good}}}])
        doc = indexed.fetch_source_document("claude", f"hostile-{n}", good)
        assert doc["upstream"]["status"] == "unchecked", (path, doc)
        assert "outside the transcript folders" in doc["upstream"]["reason"]
        assert "private line" not in orjson.dumps(doc).decode()
    # a source whose collector keeps no transcripts reads nothing either
    indexed.ingest([{"id": "hostile-manual", "source": "manual", "content": "forged",
                     "meta": {"origin": {"path": str(transcript), "lines": [3, 3], "hash": good}}}])
    assert indexed.fetch_source_document("manual", "hostile-manual")["upstream"]["status"] == "unchecked"


def test_an_old_checkpoint_without_a_line_count_is_counted_once(settings: Settings, transcript: Path,
                                                                urchin_home: Path) -> None:
    memory = Memory(settings)
    memory.collect("claude")
    checkpoint = settings.collectors_dir / "claude.json"
    data = orjson.loads(checkpoint.read_bytes())
    assert data["files"][str(transcript)]["line"] == 4
    del data["files"][str(transcript)]["line"]                      # as written before line numbers
    checkpoint.write_bytes(orjson.dumps(data))
    added = _line("assistant", "c0000000-0000-4000-8000-000000000005", "The narwhal branch is pushed.")
    with transcript.open("a") as handle:
        handle.write(added + "\n")
    assert memory.collect("claude")[0].appended == 1
    origin = memory.get("c0000000-0000-4000-8000-000000000005").meta["origin"]
    assert origin["lines"] == [5, 5] and origin["hash"] == expected_hash(urchin_home, added.encode())


def test_every_transcript_collector_cites_lines_that_hold_its_events(tmp_path: Path, settings: Settings,
                                                                      urchin_home: Path) -> None:
    home = tmp_path / "user-home"
    shutil.copytree(FIXTURES / "claude", home / ".claude", ignore=shutil.ignore_patterns("hooks", "*.txt"))
    shutil.copytree(FIXTURES / "copilot", home / ".copilot", ignore=shutil.ignore_patterns("hooks"))
    shutil.copytree(FIXTURES / "gemini", home / ".gemini", ignore=shutil.ignore_patterns("hooks"))
    shutil.copytree(FIXTURES / "codex", home / ".codex")
    old = time.time() - 3600
    for path in (home / ".gemini").rglob("session-*"):
        os.utime(path, (old, old))
    memory = Memory(settings)
    memory.collect("all")
    cited = {}
    for event in memory.tail(1000):
        origin = (event.meta or {}).get("origin")
        if origin is None:
            continue
        first, last = origin["lines"]
        raw = Path(origin["path"]).read_bytes().split(b"\n")[first - 1:last]
        assert first == last and origin["hash"] == expected_hash(urchin_home, b"\n".join(raw)), event.id
        cited.setdefault(event.source, 0)
        cited[event.source] += 1
        doc = memory.fetch_source_document(event.source, event.id, origin["hash"])
        assert doc["upstream"]["status"] == "unchanged", doc
    assert set(cited) == {"claude", "codex", "copilot", "gemini"}, cited


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_citations_over_mcp(indexed: Memory, pg_url: str, transcript: Path, anyio_backend: str) -> None:
    # the server reads transcripts under the same user home the collectors did (its settings decide)
    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_USER_HOME": os.environ["URCHIN_USER_HOME"]}
    async with stdio_session(env) as session:
        _, data = await call(session, "search_context", {"query": "wombat-ledger retention"})
        upstream = _hit(data["results"], REPLY)["location"]["upstream"]
        assert upstream["path"] == str(transcript) and upstream["startLine"] == 3
        _, doc = await call(session, "fetch_source_document", {"source": "claude", "id": REPLY,
                                                               "contentHash": upstream["contentHash"]})
        assert doc["upstream"]["status"] == "unchanged" and doc["event"]["id"] == REPLY
        message = await call_error(session, "fetch_source_document", {"source": "claude", "id": REPLY,
                                                                      "contentHash": "f" * 32})
        assert message.startswith("contentHash:"), message


def test_citations_over_http(indexed: Memory, urchin_home: Path, pg_url: str, tmp_path: Path,
                             transcript: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"private line\n")
    good = expected_hash(urchin_home, b"private line")
    daemon = DaemonProcess(urchin_home, "--with-index", env={"URCHIN_DATABASE_URL": pg_url}).start()
    try:
        with daemon.client() as api:
            results = api.post("/context", json={"query": "wombat-ledger retention"}).json()["results"]
            upstream = _hit(results, REPLY)["location"]["upstream"]
            assert upstream["path"] == str(transcript) and upstream["endLine"] == 3
            doc = api.get(f"/sources/claude/documents/{REPLY}", params={"contentHash": upstream["contentHash"]})
            assert doc.status_code == 200 and doc.json()["upstream"]["status"] == "unchanged", doc.text
            wrong = api.get(f"/sources/claude/documents/{REPLY}", params={"contentHash": "f" * 32})
            assert wrong.status_code == 400 and wrong.json()["field"] == "contentHash", wrong.text
            forged = {"id": "hostile-http", "source": "claude", "content": "forged citation",
                      "meta": {"origin": {"path": str(outside), "lines": [1, 1], "hash": good}}}
            assert api.post("/ingest", json=forged).status_code in (200, 201)
            doc = api.get("/sources/claude/documents/hostile-http", params={"contentHash": good})
            assert doc.status_code == 200 and doc.json()["upstream"]["status"] == "unchecked", doc.text
            assert "private line" not in doc.text
    finally:
        daemon.stop()


def test_an_origin_past_what_the_index_holds_is_no_origin_and_the_event_is_still_indexed(indexed: Memory) -> None:
    """Line numbers beyond PostgreSQL's integer validate as event meta (64-bit); as an origin they
    would make the row unstorable, so they are no citation, and the event is indexed and served."""
    indexed.ingest([{"id": "huge-line", "source": "claude", "content": "the quokka-zeppelin citation",
                     "meta": {"origin": {"path": "/tmp/x.jsonl", "lines": [1, 2**40], "hash": "0" * 32}}}])
    indexed.index()
    results = indexed.context(query="quokka-zeppelin").results
    assert [r["id"] for r in results] == ["huge-line"]
    assert "upstream" not in results[0]["location"]
    assert "upstream" not in indexed.fetch_source_document("claude", "huge-line")
