"""No secret reaches disk, whatever path it comes in by: CLI, import, HTTP, MCP, hooks, collectors.

Each write path gets the same corpus of realistic fake secrets embedded in realistic text; then
every file under URCHIN_HOME (journal, sidecars, indexes, logs) is searched for each secret value.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import REPO, run_urchin
from tests.test_redact import CASES

pytestmark = pytest.mark.slow

# Secrets long enough that finding them on disk cannot be chance.
CORPUS = [(text.format(s=secret), secret, kind) for text, secret, kind in CASES if len(secret) >= 12]


def _leaks(home: Path) -> list[str]:
    blobs = [p.read_bytes() for p in home.rglob("*") if p.is_file()]
    leaked = []
    for _, secret, kind in CORPUS:
        needle = secret.encode()
        probes = [needle, orjson.dumps(secret)[1:-1]]  # as written, and JSON-escaped (newlines in PEM)
        for line in secret.splitlines():
            if len(line) >= 16 and "PRIVATE KEY" not in line:
                probes.append(line.encode())
        if any(probe in blob for blob in blobs for probe in probes):
            leaked.append(kind)
    return leaked


def _journal(home: Path) -> list[dict]:
    return [orjson.loads(line) for line in (home / "journal" / "events.jsonl").read_bytes().splitlines()]


def test_cli_ingest_and_import(urchin_home: Path, tmp_path: Path) -> None:
    for text, _, _ in CORPUS[:12]:
        assert run_urchin("ingest", "--title", "pasted", text).returncode == 0
    source = tmp_path / "old.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps({"content": text, "meta": {"raw": text}, "tags": ["t"]})
                                  for text, _, _ in CORPUS))
    assert run_urchin("import", str(source)).returncode == 0
    assert _leaks(urchin_home) == []
    events = _journal(urchin_home)
    assert len(events) == 12 + len(CORPUS)
    assert all(e["meta"]["redactions"] for e in events)


def test_http_intake(urchin_home: Path) -> None:
    from tests.daemon_fixture import DaemonProcess

    daemon = DaemonProcess(urchin_home).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        for text, _, _ in CORPUS[:10]:
            assert httpx.post(daemon.url + "/ingest", json={"content": text}, headers=headers).status_code == 200
        batch = {"events": [{"content": text, "title": text[:80]} for text, _, _ in CORPUS[10:]]}
        assert httpx.post(daemon.url + "/ingest/batch", json=batch, headers=headers).status_code == 200
    finally:
        daemon.stop()
    assert _leaks(urchin_home) == []
    assert len(_journal(urchin_home)) == len(CORPUS)


def test_mcp_tools(urchin_home: Path) -> None:
    import anyio

    from tests.mcp_harness import stdio_session

    async def main() -> None:
        async with stdio_session() as session:
            for n, (text, _, _) in enumerate(CORPUS):
                tool = "urchin_remember" if n % 2 else "urchin_ingest"
                result = await session.call_tool(tool, {"content": text})
                assert not result.is_error

    anyio.run(main)
    assert _leaks(urchin_home) == []
    assert len(_journal(urchin_home)) == len(CORPUS)


def test_agent_hooks(urchin_home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for n, (text, _, _) in enumerate(CORPUS):
        payload = {"session_id": f"s{n}", "transcript_path": "/nonexistent.jsonl", "cwd": "/tmp/proj",
                   "hook_event_name": "UserPromptSubmit", "prompt": text}
        done = subprocess.run([sys.executable, "-m", "urchin", "hook", "claude"], input=orjson.dumps(payload),
                              env=env, capture_output=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, b"")
    assert _leaks(urchin_home) == []
    assert len(_journal(urchin_home)) == len(CORPUS)


def test_collectors(urchin_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    project = claude / "projects" / "-tmp-proj"
    project.mkdir(parents=True)
    lines = []
    for n, (text, _, _) in enumerate(CORPUS):
        lines.append(orjson.dumps({
            "type": "user", "uuid": f"00000000-0000-4000-8000-{n:012d}", "parentUuid": None,
            "sessionId": "5f3c2a1e-0000-4000-8000-000000000001", "timestamp": "2026-05-04T10:00:00.000Z",
            "cwd": "/tmp/proj", "message": {"role": "user", "content": text}}))
    (project / "5f3c2a1e-0000-4000-8000-000000000001.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = run_urchin("collect", "claude", env={"URCHIN_CLAUDE_DIR": str(claude)})
    assert out.returncode == 0, out.stderr
    assert _leaks(urchin_home) == []
    assert len(_journal(urchin_home)) == len(CORPUS)


def test_the_corpus_really_contains_the_secrets() -> None:
    """Guard against a test that cannot fail: without redaction, every secret would be found."""
    assert len(CORPUS) >= 40
    for text, secret, _ in CORPUS:
        assert secret in text
