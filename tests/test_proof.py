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
from urchin.memory import Memory

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
