"""No secret reaches disk or an answer, whatever path and whatever field it comes in by.

Every corpus value (realistic fake secrets in realistic text) is placed in every field of an event
that a write path accepts: id, workspace, session, brain, actor.account/device, tags, title,
content, source/kind, meta keys and (nested) values. Each path (CLI ingest, import, HTTP /ingest
and batch, MCP ingest/remember, hooks, a collector) writes them; then every byte under
URCHIN_HOME (journal, sidecars, token-cosine index incl. ids.npy and labels.json, TOML) and every
answer (search, semantic, get, recent through the CLI, HTTP and MCP) is searched for each value,
as written, lowercased, JSON-escaped and as UTF-32 (numpy string arrays); PostgreSQL's heap and WAL
too. Look-alikes (commit SHAs, UUIDs) must come through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.test_redact import CASES
from tests.test_redact_event import SHA, UUIDS
from urchin.config import Settings
from urchin.facade import Memory
from urchin.redact import redact_text

pytestmark = pytest.mark.slow

# Secrets long enough that finding them on disk cannot be chance.
CORPUS = [(text.format(s=secret), secret, kind) for text, secret, kind in CASES if len(secret) >= 12]
WORD = "zebra"  # in every content, so every event answers one search
HOURS = "100000"
_LABEL = re.compile(r"[A-Za-z0-9._-]{1,64}")


# ---- placing a corpus value in every field --------------------------------------------------------
def _one_line(n: int, text: str) -> str:
    """An id allows no line break and at most 256 characters: the text on one line, numbered."""
    return f"{n:02d} " + text.replace("\n", " ").replace("\t", " ")[:250]


def _name(text: str) -> str:
    """A name (workspace, session, tag, actor, meta key) holds no control character."""
    return text.replace("\n", " ").replace("\t", " ")


def _session(n: int, text: str) -> str:
    """A session id short enough that the ids agents derive from it (`claude:<session>:prompt:<hash>`)
    still fit in 256 characters; a private key cut short is still a private key to the rules."""
    return _one_line(n, text)[:200]


def _label(secret: str) -> str | None:
    """A source or kind is a short label: only a bare token that names itself fits in one."""
    return secret if _LABEL.fullmatch(secret) and secret not in redact_text(secret)[0] else None


def _event(n: int, text: str, secret: str) -> dict[str, Any]:
    """One event carrying the value in every field the full event shape has."""
    name = _name(text)  # names refuse control characters (validation): the value on one line
    event: dict[str, Any] = {
        "id": _one_line(n, text), "workspace": name, "session": name, "brain": name, "title": text,
        "content": f"{WORD} {n}: {text}", "tags": [name, f"t{n}"],
        "actor": {"account": name, "device": name},
        "meta": {name: text, "nested": {"deep": [text, {name: 1}]}, "n": n},
    }
    label = _label(secret)
    if label:
        event.update(source=label, kind=label)
    return event


def _folder(n: int, text: str) -> str:
    """A cwd whose last part is the text (a workspace is a folder's name), when the text, its `/`
    gone, still shows what it holds; the rule set cannot see a secret whose context was cut away."""
    name = text.replace("/", " ")
    return "/tmp/proj/" + (name if CORPUS[n][1] not in redact_text(name)[0] else f"plain-{n}")


def _events() -> list[dict[str, Any]]:
    return [_event(n, text, secret) for n, (text, secret, _) in enumerate(CORPUS)]


def _actor_env(n: int) -> dict[str, str]:
    """The stamped identity (`actor`) comes from the environment: a corpus value there too."""
    return {"URCHIN_ACCOUNT_ID": _name(CORPUS[n % len(CORPUS)][0]),
            "URCHIN_DEVICE_ID": _name(CORPUS[(n + 7) % len(CORPUS)][0])}


LOOK_ALIKE_EVENT = {"id": UUIDS[0], "session": UUIDS[1], "workspace": "shop", "tags": [SHA, UUIDS[1]],
                    "content": f"{WORD} look-alikes: commit {SHA} in session {UUIDS[1]}",
                    "meta": {"commit": SHA, SHA: UUIDS[0]}}


# ---- finding values ---------------------------------------------------------------------------
def _probes(secret: str) -> list[bytes]:
    texts = [secret] + [line for line in secret.splitlines() if len(line) >= 16 and "PRIVATE KEY" not in line]
    out: list[bytes] = []
    for text in dict.fromkeys(texts + [t.lower() for t in texts]):
        escaped = orjson.dumps(text)[1:-1].decode()  # JSON-escaped (newlines in PEM, quotes)
        for form in dict.fromkeys((text, escaped)):
            out += [form.encode(), form.encode("utf-32-le")]  # numpy `<U` arrays are UTF-32
    return out


PROBES = [(kind, _probes(secret)) for _, secret, kind in CORPUS]


# Any probe at all, in one pass: a blob it misses holds no probe (search finds the leftmost position where
# any alternative matches), so only the blobs it finds are searched probe by probe (6x faster on a
# PostgreSQL data directory than every probe over every blob).
ANY_PROBE = re.compile(b"|".join(map(re.escape, sorted({p for _, ps in PROBES for p in ps}, key=len, reverse=True))))


def _found(blobs: Iterable[bytes]) -> list[str]:
    blobs = [blob for blob in blobs if ANY_PROBE.search(blob)]
    return [kind for kind, probes in PROBES if any(p in blob for blob in blobs for p in probes)]


def _files(folder: Path) -> Iterator[bytes]:
    for path in folder.rglob("*"):
        yield str(path.relative_to(folder)).encode()  # names too
        if path.is_file():
            yield path.read_bytes()


def _leaks(home: Path) -> list[str]:
    return _found(_files(home))


def _journal(home: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (home / "journal" / "events.jsonl").read_bytes().splitlines()]


def _save_views(home: Path) -> None:
    """The token-cosine index is saved every 10,000 events or when the daemon stops: save it now.
    Then embed every event (a stand-in embedder) so the vector cache, ids included, is written too."""
    from tests.ollama_fake import fake_ollama

    memory = Memory(Settings.resolve(home))
    try:
        memory.semantic(WORD, hours=float(HOURS))
        memory.save_views()
    finally:
        memory.close()
    with fake_ollama() as server:
        env = {"URCHIN_EMBEDDER_URL": server.url, "URCHIN_EMBEDDER_MODEL": "all-minilm",
               "URCHIN_EMBEDDER_API": "ollama"}
        memory = Memory(Settings.resolve(home, env=env))
        try:
            assert memory.semantic(WORD, hours=float(HOURS)).mode.startswith("embedder")
        finally:
            memory.close()


def _assert_clean(home: Path, expected: int) -> None:
    """Nothing on disk, the look-alikes intact, every event stored once with its counts."""
    _save_views(home)
    assert list(home.rglob("ids.npy")) and list(home.rglob("labels.json"))  # the cosine index was saved
    assert [p.stat().st_size for p in home.rglob("vectors/*/ids.txt")] > [0]  # and the vector cache
    assert _leaks(home) == []
    # a hook's recall is audited as an `urchin`/`recall` event (ids and reasons: scanned above with the rest)
    events = [e for e in _journal(home) if (e["source"], e["kind"]) != ("urchin", "recall")]
    assert len(events) == expected
    assert all(e["meta"]["redactions"] for e in events if e["id"] != UUIDS[0])
    look = next((e for e in events if e["id"] == UUIDS[0]), None)
    if look is not None:
        assert (look["session"], look["tags"], look["content"]) == (
            UUIDS[1], [SHA, UUIDS[1]], LOOK_ALIKE_EVENT["content"])
        assert {k: v for k, v in look["meta"].items() if k != "redactions"} == LOOK_ALIKE_EVENT["meta"]


# ---- answers ----------------------------------------------------------------------------------
def _cli_answers(home: Path, env: dict[str, str] | None = None, run: Any = run_urchin) -> list[bytes]:
    """search, semantic, recent (`run`: a real process, or in this one) and get (in this one) through
    the CLI (the daemon when one runs)."""
    out = []
    for args in (("search", WORD), ("semantic", f"{WORD} token password key"), ("recent",)):
        done = run(*args, "--json", "--limit", "1000", "--hours", HOURS, env=env)
        assert done.returncode == 0, done.stderr
        assert len(orjson.loads(done.stdout)["events"]) >= 10   # one object, as HTTP and MCP answer
        out.append(done.stdout.encode())
    for event in _journal(home)[::6]:
        done = call_urchin("get", event["id"], env=env)
        assert done.returncode == 0, done.stderr
        out.append(done.stdout.encode())
    return out


def _http_answers(home: Path, url: str, headers: dict[str, str]) -> list[bytes]:
    params = {"q": WORD, "limit": "1000", "hours": HOURS}
    out = [httpx.get(url + "/search", params=params, headers=headers, timeout=30).content,
           httpx.get(url + "/semantic", params={**params, "q": f"{WORD} token"}, headers=headers, timeout=30).content,
           httpx.get(url + "/recent", params={"limit": "1000", "hours": HOURS}, headers=headers, timeout=30).content]
    for event in _journal(home)[::6]:
        answer = httpx.get(url + "/events/" + quote(event["id"], safe=""), headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        out.append(answer.content)
    assert all(b'"id"' in blob for blob in out)
    return out


async def _mcp_answers(session: Any, home: Path) -> list[bytes]:
    out = []
    calls = [("urchin_search", {"query": WORD, "limit": 1000, "hours": float(HOURS)}),
             ("urchin_semantic_search", {"query": f"{WORD} token", "limit": 1000, "hours": float(HOURS)}),
             ("urchin_recent_activity", {"limit": 1000, "hours": float(HOURS)})]
    calls += [("urchin_get_event", {"id": e["id"]}) for e in _journal(home)[::6]]
    for tool, args in calls:
        result = await session.call_tool(tool, args)
        assert not result.is_error, result
        out.append(orjson.dumps(result.model_dump(mode="json")))
    return out


# ---- write paths ------------------------------------------------------------------------------
def test_cli_ingest_and_import(urchin_home: Path, tmp_path: Path) -> None:
    """The first ingest and the import in a real process, the other ingests in this one (the same
    command, ~0.45 s of a core less each)."""
    written = []
    for n, event in enumerate(_events()[:20]):
        args = ["ingest", "--id", event["id"], "--workspace", event["workspace"], "--session", event["session"],
                "--title", event["title"], "--tag", event["tags"][0], "--tag", event["tags"][1], "--json"]
        if "source" in event:
            args += ["--source", event["source"], "--kind", event["kind"]]
        done = (call_urchin if n else run_urchin)(*args, event["content"], env=_actor_env(n))
        assert done.returncode == 0, done.stderr
        written.append(done.stdout.encode())
    source = tmp_path / "old.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(e) for e in [*_events()[20:], LOOK_ALIKE_EVENT]))
    done = run_urchin("import", str(source))
    assert done.returncode == 0, done.stderr
    answers = _cli_answers(urchin_home)
    assert _found([*written, done.stdout.encode(), done.stderr.encode(), *answers]) == []
    _assert_clean(urchin_home, len(CORPUS) + 1)


def test_look_alikes_are_stored_unchanged(urchin_home: Path, tmp_path: Path) -> None:
    # A commit SHA or a UUID as a tag used to become `[redacted:high_entropy_secret]`.
    done = run_urchin("ingest", "--id", UUIDS[1], "--session", UUIDS[0], "--tag", SHA, "--tag", UUIDS[0],
                      "--workspace", SHA, f"{WORD} commit {SHA}")
    assert done.returncode == 0, done.stderr
    source = tmp_path / "look.jsonl"
    source.write_bytes(orjson.dumps(LOOK_ALIKE_EVENT))
    assert run_urchin("import", str(source)).returncode == 0
    first, second = _journal(urchin_home)
    assert (first["id"], first["session"], first["tags"], first["workspace"], first["content"]) == (
        UUIDS[1], UUIDS[0], [SHA, UUIDS[0]], SHA, f"{WORD} commit {SHA}")
    assert "redactions" not in first.get("meta", {})
    assert {k: second[k] for k in LOOK_ALIKE_EVENT} == LOOK_ALIKE_EVENT


def test_a_rejected_event_echoes_no_secret(urchin_home: Path, tmp_path: Path) -> None:
    # A rule may quote what it refused (`timestamp: … got '…'`); an id names the rejected item.
    bare = [secret for _, secret, _ in CORPUS if _label(secret)]
    bad = [{"content": f"{WORD} {n}", "timestamp": secret} for n, secret in enumerate(bare)]
    bad += [{"content": f"{WORD} {n}", "id": f"{n} {text}", "tags": "not a list"}
            for n, (text, _, _) in enumerate(CORPUS)]
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(e) for e in bad))
    done = run_urchin("import", str(source))
    assert "timestamp" in done.stdout + done.stderr and "tags" in done.stdout + done.stderr
    from tests.daemon_fixture import DaemonProcess

    daemon = DaemonProcess(urchin_home).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        replies = [httpx.post(daemon.url + "/ingest", json=e, headers=headers, timeout=30) for e in bad[::5]]
        batch = httpx.post(daemon.url + "/ingest/batch", json={"events": bad}, headers=headers, timeout=30)
    finally:
        daemon.stop()
    assert {r.status_code for r in replies} == {422} and batch.status_code == 200
    assert _found([done.stdout.encode(), done.stderr.encode(), batch.content, *(r.content for r in replies)]) == []
    assert _leaks(urchin_home) == []


def test_a_retried_event_whose_id_held_a_secret_is_a_duplicate(urchin_home: Path, tmp_path: Path) -> None:
    events = _events()[:8]
    source = tmp_path / "twice.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(e) for e in events))
    assert run_urchin("import", str(source)).returncode == 0
    assert call_urchin("import", str(source)).returncode == 0
    stored = _journal(urchin_home)
    assert len({e["id"] for e in stored}) == len(stored) == 8  # distinct: secrets never collide on a marker
    assert all(e["id"].startswith("redacted-") for e in stored)
    assert oct((urchin_home / "redact-id.key").stat().st_mode & 0o777) == "0o600"
    found = call_urchin("get", events[3]["id"])  # the id as the writer knows it still finds the event
    assert found.returncode == 0 and orjson.loads(found.stdout)["id"] == stored[3]["id"]
    missing = run_urchin("get", "99 " + CORPUS[0][0].replace("\n", " "))
    assert missing.returncode == 1 and "no event with id 'redacted-" in missing.stderr
    assert _found([found.stdout.encode(), missing.stdout.encode(), missing.stderr.encode()]) == []


def test_http_intake(urchin_home: Path) -> None:
    from tests.daemon_fixture import DaemonProcess

    events = _events()
    daemon = DaemonProcess(urchin_home, env=_actor_env(3)).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        replies = []
        for event in events[:30]:
            reply = httpx.post(daemon.url + "/ingest", json=event, headers=headers, timeout=30)
            assert reply.status_code == 200, reply.text
            replies.append(reply.content)
        unstamped = [{k: v for k, v in e.items() if k != "actor"} for e in events[30:]]  # the daemon's identity
        reply = httpx.post(daemon.url + "/ingest/batch", json={"events": [*unstamped, LOOK_ALIKE_EVENT]},
                           headers=headers, timeout=30)
        assert reply.status_code == 200, reply.text
        replies.append(reply.content)
        answers = _http_answers(urchin_home, daemon.url, headers) + _cli_answers(urchin_home)
    finally:
        daemon.stop()
    assert _found(replies + answers) == []
    _assert_clean(urchin_home, len(CORPUS) + 1)


def test_mcp_tools(urchin_home: Path) -> None:
    import anyio

    from tests.mcp_harness import stdio_session

    answers: list[bytes] = []

    async def main() -> None:
        async with stdio_session(_actor_env(5)) as session:
            for n, event in enumerate(_events()):
                if n % 2:
                    tool = "urchin_remember"
                    args = {k: event[k] for k in ("content", "tags", "workspace")}
                else:
                    tool = "urchin_ingest"
                    args = {k: event[k] for k in ("content", "tags", "workspace", "session", "title", "source", "kind")
                            if k in event}
                result = await session.call_tool(tool, args)
                assert not result.is_error, result
                answers.append(orjson.dumps(result.model_dump(mode="json")))
            answers.extend(await _mcp_answers(session, urchin_home))

    anyio.run(main)
    assert _found(answers + _cli_answers(urchin_home, run=call_urchin)) == []
    _assert_clean(urchin_home, len(CORPUS))
