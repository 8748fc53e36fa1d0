"""A journal line the write path did not prove (a reference Urchin's journal, a line appended by hand,
a proof copied or made up) is redacted before any view serves or indexes it (issue 34 G); lines the
write path wrote carry a valid proof and are served exactly as written."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tests.daemon_fixture import DaemonProcess
from tests.test_redact import GH, _pem
from urchin.config import Settings
from urchin.facade import Memory

PEM = _pem("EC ")
SECRETS = {"github": GH["u"], "pem": PEM}
_BODIES = {"github": GH["u"][4:], "pem": "".join(PEM.splitlines()[1:-1])}


def _fragments() -> set[str]:
    """Every 8 characters of each secret's random part: none may be served or indexed."""
    return {body[i:i + 8] for body in _BODIES.values() for i in range(len(body) - 7)}


def _leaks(text: str) -> set[str]:
    text = text.replace("\\n", "\n").replace("\\/", "/")
    return {piece for piece in _fragments() if piece in text}


def _hand_lines(proven_line: bytes) -> dict[str, bytes]:
    """Lines no write path made: bare, with a proof copied from a proven line, with a made-up proof."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    at = proven_line.rfind(b',"proof":"')
    copied = proven_line[at:] if at > 0 else b',"proof":"' + b"x" * 16 + b'"}'
    out = {}
    for kind, secret in SECRETS.items():
        for variant in ("bare", "copied", "forged"):
            body = orjson.dumps({"id": f"hand-{kind}-{variant}", "timestamp": stamp, "source": "manual",
                                 "kind": "note", "content": f"deploy canary with {secret} today"})
            if variant == "copied":
                body = body[:-1] + copied
            elif variant == "forged":
                body = body[:-1] + b',"proof":"' + b"Ab3_" * 4 + b'"}'
            out[f"hand-{kind}-{variant}"] = body
    return out


def _journal_with_hand_lines(memory: Memory) -> tuple[Any, list[str]]:
    written = memory.ingest([{"id": "ok-1", "content": "deploy canary through the pipeline",
                              "tags": ["release"], "meta": {"step": 1}}])[0]
    assert written.status == "appended"
    hand = _hand_lines(memory.journal.path.read_bytes().splitlines()[-1])
    with memory.journal.path.open("ab") as journal:
        journal.write(b"\n".join(hand.values()) + b"\n")
    return written.event, list(hand)


def test_lines_not_written_by_urchin_are_redacted_in_every_answer_and_the_index(pg_settings: Settings,
                                                                                pg_url: str) -> None:
    import psycopg

    memory = Memory(pg_settings)
    written, hand = _journal_with_hand_lines(memory)
    answers: list[Any] = []
    found = memory.search("deploy canary", limit=50).to_dict()
    assert {e["id"] for e in found["events"]} == {"ok-1", *hand}   # served, redacted, not hidden
    answers.append(found)
    for body in _BODIES.values():           # a query that matched only inside a secret finds nothing
        assert memory.search(body[10:30]).to_dict()["events"] == []
    answers.append(memory.semantic("deploy canary", limit=50).to_dict())
    answers += [memory.get(event_id).to_dict() for event_id in hand]
    answers += [e.to_dict() for e in memory.tail(50)]
    answers.append(memory.recent(limit=50).to_dict())
    answers.append(memory.timeline(limit=50).to_dict())
    assert memory.index().events == 1 + len(hand)
    assert memory.save_views()              # the token-cosine index, on disk: its terms are checked below
    answers.append(memory.context(query="deploy canary", limit=20).to_dict())
    memory.close()
    with psycopg.connect(pg_url) as conn:
        answers.append([list(map(str, row)) for row in conn.execute("SELECT * FROM urchin_chunks").fetchall()])
    text = orjson.dumps(answers, default=str).decode()
    assert "[REDACTED:github_token]" in text and "[REDACTED:private_key]" in text
    assert not _leaks(text)
    views = [p for p in pg_settings.home.rglob("*") if p.is_file() and p != pg_settings.journal_path]
    assert not _leaks(b"".join(p.read_bytes() for p in views).decode("latin-1")), [str(p) for p in views]
    # what the write path wrote is served as it was written, byte for byte
    again = Memory(pg_settings)
    assert again.get("ok-1").to_json() == written.to_json()
    assert [e.to_json() for e in again.search("through the pipeline").events] == [written.to_json()]


def test_a_copied_or_made_up_proof_is_no_proof(settings: Settings, memory: Memory) -> None:
    from urchin.proof import LineProof

    _journal_with_hand_lines(memory)
    proof = LineProof(settings)
    lines = memory.journal.path.read_bytes().splitlines()
    assert lines[0].endswith(b'"}') and b',"proof":"' in lines[0]     # the write path marks what it wrote
    assert [proof.proven(line) for line in lines] == [True] + [False] * 6
    assert not proof.proven(lines[0].replace(b"pipeline", b"pipelinE"))   # any byte changed


def test_the_daemon_api_serves_no_hand_written_secret(urchin_home: Path) -> None:
    memory = Memory(Settings.resolve(urchin_home))
    _, hand = _journal_with_hand_lines(memory)
    daemon = DaemonProcess(urchin_home).start()
    try:
        with daemon.client() as api:
            bodies = [api.get("/search", params={"q": "deploy canary", "limit": 50}).text,
                      api.get("/semantic", params={"q": "deploy canary", "limit": 50}).text,
                      api.get("/recent", params={"limit": 50}).text,
                      api.post("/context", json={"query": "deploy canary"}).text]
            bodies += [api.get(f"/events/{event_id}").text for event_id in hand]
    finally:
        daemon.stop()
    assert all("hand-" in body for body in bodies[:3]), bodies[:3]
    assert not _leaks("".join(bodies))
    assert not _leaks(daemon.log())


def test_redact_rewrite_adopts_lines_no_write_path_proved(settings: Settings, memory: Memory) -> None:
    from urchin.proof import LineProof

    written, hand = _journal_with_hand_lines(memory)
    assert memory.redact_rewrite()["rewritten"] == len(hand)     # the proven line is left as it was
    lines = memory.journal.path.read_bytes().splitlines()
    assert all(LineProof(settings).proven(line) for line in lines) and len(lines) == 1 + len(hand)
    assert not _leaks(memory.journal.path.read_bytes().decode())
    assert memory.get("ok-1").to_json() == written.to_json()


def test_no_answer_that_names_an_id_makes_a_proof_or_a_derived_id(settings: Settings, memory: Memory) -> None:
    """The stored form of an id that holds a secret, or of a rejected one, is HMAC(install key, id),
    and it is answered to anyone who may write (the hooks' ingest-only token too). A proof or a derived
    id made with the same key from a message an id can spell could be forged through that answer: an
    attacker sent `urchin-line-proof-v1\\0<line>` as an id and appended `<line>` with the answer as
    its proof, served raw. Every other use of the key has its own subkey (`urchin/subkeys.py`)."""
    import base64

    from urchin.collectors.ids import keyed_ids, short_hash
    from urchin.proof import LineProof
    from urchin.redact._idkey import IdKey

    memory.ingest_one({"content": "an ordinary proven note"})
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    proof = LineProof(settings)
    for n, domain in enumerate(("", "urchin-line-proof-v1\x00", "line-proof-v2", "\x00")):
        body = orjson.dumps({"id": f"oracle-{n}", "timestamp": stamp, "source": "manual", "kind": "note",
                             "content": f"deploy canary with {GH['u']} today"})
        answer = memory.ingest_one({"id": domain + body.decode(), "content": "x"})   # named, held or refused
        assert answer.id and answer.id.startswith("redacted-"), answer
        mac = base64.urlsafe_b64encode(bytes.fromhex(answer.id.removeprefix("redacted-"))[:12])
        line = body[:-1] + b',"proof":"' + mac + b'"}'
        assert not proof.proven(line), domain
        with memory.journal.path.open("ab") as journal:
            journal.write(line + b"\n")
        served = Memory(settings).get(f"oracle-{n}")
        assert not _leaks(served.content), served.content
    key = IdKey(settings.home)()
    prompt = "should we move the billing service to postgres"
    with keyed_ids(key):
        derived = short_hash(prompt)
    for domain in ("", "urchin-derived-id-v1\x00", "derived-id-v2"):
        answer = memory.ingest_one({"id": domain + prompt + " " + GH["u"], "content": "x"})
        assert answer.id and answer.id.startswith("redacted-") and derived not in answer.id, domain
        answer = memory.ingest_one({"id": domain + prompt, "content": "x"})
        assert derived not in (answer.id or ""), domain


# ---- every reader, not only the ones that serve events (issue 34 G, second review) -------------------
def _fielded_hand_line(stamp: str) -> bytes:
    """A hand line with a secret in every field a view lists: id, source, session and content."""
    secret = GH["u"]
    return orjson.dumps({"id": f"hand-id-{secret}", "timestamp": stamp, "source": f"tool-{secret}",
                         "session": f"sess-{secret}", "kind": "note", "content": f"deploy canary {secret}"})


def _append(memory: Memory, *lines: bytes) -> None:
    with memory.journal.path.open("ab") as journal:
        journal.write(b"".join(line + b"\n" for line in lines))


def test_the_forget_preview_and_its_count_serve_hand_lines_redacted(urchin_home: Path, settings: Settings,
                                                                    memory: Memory) -> None:
    from tests.conftest import run_urchin

    _, hand = _journal_with_hand_lines(memory)
    _append(memory, _fielded_hand_line(datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")))
    again = Memory(settings)
    preview = again.forget(since="2000-01-01T00:00:00Z")
    assert preview.matched == 2 + len(hand) and not preview.confirmed
    shown = orjson.dumps([preview.to_dict(), preview.render(), again.forget(query="canary").to_dict(),
                          again.forget(session="sess-" + GH["u"]).to_dict()]).decode()
    assert {e["id"] for e in preview.preview} >= set(hand)          # listed, redacted, not hidden
    assert "[REDACTED:github_token]" in shown and not _leaks(shown), _leaks(shown)
    cli = run_urchin("forget", "--since", "2000-01-01T00:00:00Z")  # the CLI (and HTTP, MCP) print the same
    assert cli.returncode == 0 and "hand-github-bare" in cli.stdout and not _leaks(cli.stdout + cli.stderr)
    for body in _BODIES.values():       # a query matching only inside what redaction removed selects nothing
        assert again.forget(query=body[10:30]).matched == 0
    # forgetting them by what is shown still removes the lines themselves from the journal
    done = again.forget(since="2000-01-01T00:00:00Z", confirm=True)
    assert done.forgotten == 2 + len(hand) and not _leaks(memory.journal.path.read_bytes().decode())


def test_activity_lists_the_source_of_a_hand_line_redacted(settings: Settings, memory: Memory) -> None:
    memory.ingest_one({"content": "proven", "source": "cli"})
    _append(memory, _fielded_hand_line(datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")))
    activity = Memory(settings).activity(days=3)
    text = orjson.dumps(activity).decode()
    assert activity["total"] == 2 and "cli" in activity["sources"]
    assert "redacted-github_token" in activity["sources"] and not _leaks(text), activity["sources"]


def test_literal_search_answers_as_if_only_the_served_lines_existed(settings: Settings, memory: Memory) -> None:
    """The rule, not one query: for every query and limit, the hits are the `limit` newest of the lines
    as served. A hand line matching only inside what redaction removed neither shows nor takes a
    place: the count of hits tells nothing of a hidden secret (the prefix-by-prefix oracle). (A query
    for the marker redaction inserts, `[REDACTED:…`, is matched on raw lines: it finds a hand line
    only after `urchin redact --rewrite`, which tells nothing of what was removed.)"""
    body = _BODIES["github"]
    for n, ts in enumerate(("2029-01-01T00:00:00.000Z", "2029-06-01T00:00:00.000Z")):
        memory.ingest_one({"id": f"decoy-{n}", "timestamp": ts, "content": f"decoy ghu_{body[:12]} end"})
    _, hand = _journal_with_hand_lines(memory)
    _append(memory, orjson.dumps({"id": "hand-newest", "timestamp": "2030-01-01T00:00:00.000Z", "source": "manual",
                                  "kind": "note", "content": "token " + GH["u"]}))
    again = Memory(settings)
    served = sorted(again.tail(100), key=lambda e: (e.ts_ms, e.id), reverse=True)
    queries = ["ghu_", *(f"ghu_{body[:k]}" for k in (1, 4, 8, 12)), f"ghu_{body[:13]}", body[12:24],
               f"ghu_{body[:3]}!", "deploy canary", "token "]
    for query in queries:
        for limit in (1, 2, 3):
            expected = [e.id for e in served if query.casefold() in e.content.casefold()][:limit]
            found = [e.id for e in again.search(query, hours=24 * 365 * 30, limit=limit).events]
            assert found == expected, (query, limit)
    assert [e.id for e in again.search(f"ghu_{body[:12]}", hours=24 * 365 * 30, limit=1).events] == ["decoy-1"]


def test_no_module_reads_journal_lines_past_the_proof_check() -> None:
    """The class: journal lines are read through `Journal.event` (which redacts a line the write path
    did not prove), never parsed where a view could serve what they hold. Every place that parses a
    JSON line (`Event.from_json`, `loads(…line…)`) or picks fields out of raw bytes (`b'{"id":"'`) is
    listed here with why it may; a new one fails until it reads through the journal (or is listed)."""
    import ast

    import urchin

    package = Path(urchin.__file__).parent
    # modules that scan raw lines for speed but serve only through the proof: they must call it
    served_through_proof = {
        ("search/substring.py", "SubstringSearcher._search_view", "Event.from_json"),  # hits: `_keep_best` serves
        ("search/substring.py", "SubstringSearcher._scan", "Event.from_json"),         # (the fallback scan)
        ("search/substring.py", "SubstringSearcher.older_match", "Event.from_json"),   # (an older match)
        ("search/substring.py", "SubstringSearcher._from_kept", "Event.from_json"),    # (a kept digest's tail)
        ("search/cosine_extract.py", "TermExtractor.from_lines", "loads(line)"),   # token-cosine rows: proof.served
        ("search/embedding_view.py", "EmbeddingView.pending", "loads(line)"),     # ids only, then Journal.event
        ("facade/timeline.py", "_day_and_source", "b'{\"id\":\"'"),         # proven lines only, else Journal.event
    }
    allowed = served_through_proof | {
        ("event.py", "Event.from_json", "loads(line)"),                     # the parse itself
        ("journal.py", "Journal.event", "Event.from_json"),                 # the checked reader
        ("journal.py", "Journal.stats", "Event.from_json"),                 # counts and first/last timestamps
        ("facade/timeorder.py", "_stamps", "Event.from_json"),              # timestamps and offsets only:
        ("facade/timeorder.py", "_stamps", "b'{\"id\":\"'"),                 # the page reads via Journal.event
        ("facade/forgetting.py", "Forgetting.redact_rewrite.rewrite", "Event.from_json"),  # redacts and signs
        ("tombstones.py", "line_id", "loads(line)"), ("tombstones.py", "line_id", "b'{\"id\":\"'"),  # compaction
        ("tombstones.py", "_record", "loads(line)"),                        # the forget log, not the journal
        ("facade/backup.py", "_record", "loads(line)"),                     # the forget log, copied to a backup
        ("idindex.py", "_line_id", "loads(line)"),                          # id -> offset sidecar, never served
        ("search/blockbuild.py", "scan_lines", "loads(line)"),              # trigram/zone maps: a prefilter
        ("search/foldcache.py", "_fold_line", "loads(line)"),               # casefolded copy: a prefilter
        ("facade/bulk.py", "prepare_batch", "loads(line)"),                 # import input, not the journal
        ("daemon/indexer.py", "IndexProcess._relay", "loads(line)"),        # a child's progress reports
        ("daemon/mcprelay.py", "Relay.take", "loads(line)"),                # an agent's JSON-RPC on stdin
        ("collectors/base.py", "loads", "loads(line)"),                     # agents' transcripts, which
        ("collectors/claude.py", "ClaudeCollector.parse", "loads(line)"),   # go through the write path
        ("collectors/claude.py", "_last_reply", "loads(line)"),
        ("collectors/codex.py", "CodexCollector.parse", "loads(line)"),
        ("collectors/copilot.py", "CopilotCollector.parse", "loads(line)"),
        ("collectors/gemini.py", "GeminiCollector.parse", "loads(line)"),
    }
    found = set()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()

        def visit(node: ast.AST, scope: str, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                name = scope
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{scope}.{child.name}" if scope else child.name
                hit = None
                if isinstance(child, ast.Attribute) and child.attr == "from_json" \
                        and isinstance(child.value, ast.Name) and child.value.id == "Event":
                    hit = "Event.from_json"
                elif isinstance(child, ast.Call) and child.args and "line" in ast.unparse(child.args[0]) \
                        and ast.unparse(child.func).split(".")[-1] == "loads":
                    hit = "loads(line)"
                elif isinstance(child, ast.Constant) and isinstance(child.value, bytes) \
                        and child.value.startswith(b'{"id":"'):
                    hit = "b'{\"id\":\"'"
                if hit:
                    found.add((rel, name or "<module>", hit))
                visit(child, name)

        visit(ast.parse(path.read_text("utf-8")), "")
    assert sorted(found - allowed) == [], "read journal lines through Journal.event (urchin/journal.py)"
    assert sorted(allowed - found) == [], "a listed reader is gone: drop it from the list"
    for rel in {rel for rel, _, _ in served_through_proof}:
        text = (package / rel).read_text("utf-8")
        assert ".served(" in text or "journal.event(" in text, rel


def test_a_proof_is_hmac_sha256_of_the_line_under_the_subkey(settings: Settings, memory: Memory) -> None:
    """The proof's definition is fixed (lines written by earlier releases must stay proven): the first
    96 bits, base64url, of HMAC-SHA256 under the install key's line-proof subkey. `subkeys.Hmac` (one
    key's padded states made once) gives `hmac.digest`'s bytes for every key and message length."""
    import base64
    import hmac
    import os

    from urchin.redact._idkey import IdKey
    from urchin.subkeys import LINE_PROOF, Hmac, subkey

    for size in (*range(0, 70), 128, 200):
        key = os.urandom(size)
        for message in (b"", b"x", os.urandom(63), os.urandom(64), os.urandom(65), os.urandom(5000)):
            assert Hmac(key).digest(message) == hmac.digest(key, message, "sha256")
    memory.ingest([{"id": "ok-1", "content": "deploy canary through the pipeline"}])
    line = memory.journal.path.read_bytes().splitlines()[-1]
    body, mac = line[:line.rfind(b',"proof":"')] + b"}", line[-18:-2]
    expected = hmac.digest(subkey(IdKey(settings.home)(), LINE_PROOF), body, "sha256")[:12]
    assert mac == base64.urlsafe_b64encode(expected)
