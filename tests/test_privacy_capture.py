"""No secret reaches disk or an answer through the capture paths (agent hooks, collectors), curated
memories, or PostgreSQL's heap and WAL; the corpus and its checks are test_privacy.py's (split from it,
so the two halves run on both workers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import REPO, run_urchin
from tests.test_privacy import (
    CORPUS,
    LOOK_ALIKE_EVENT,
    WORD,
    _actor_env,
    _assert_clean,
    _cli_answers,
    _event,
    _events,
    _files,
    _folder,
    _found,
    _label,
    _one_line,
    _session,
)
from tests.test_redact_event import SHA, UUIDS
from urchin.config import Settings
from urchin.facade import Memory
from urchin.hooks import run_hook
from urchin.redact import redact_text
from urchin.workspace.curated import Member

pytestmark = pytest.mark.slow


def _hook(payload: dict[str, Any], env: dict[str, str]) -> None:
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    done = subprocess.run([sys.executable, "-m", "urchin", "hook", "claude"], input=orjson.dumps(payload),
                          env=full, capture_output=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, b"")


def test_agent_hooks(urchin_home: Path, tmp_path: Path) -> None:
    for n, (text, _, _) in enumerate(CORPUS):
        base = {"session_id": _session(n, text), "transcript_path": "/nonexistent.jsonl", "cwd": _folder(n, text)}
        if n % 2:
            payload = {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"{WORD} {n}: {text}"}
        else:
            tool_use = text.replace("\n", " ")  # the hook's id is `claude:<session>:tool:<tool_use_id>`
            payload = {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                       "tool_use_id": tool_use if len(base["session_id"] + tool_use) < 230 else f"t{n}",
                       "tool_input": {"command": text, text: text}, "tool_response": {"stdout": f"{WORD} {text}"}}
        if n % 3 == 0:                     # a third as agents run them: a process each
            _hook(payload, _actor_env(n))
        else:                              # the rest through the same function, in this process
            with pytest.MonkeyPatch.context() as patch:
                for name, value in _actor_env(n).items():
                    patch.setenv(name, value)
                assert run_hook("claude", orjson.dumps(payload)) == 0
    assert _found(_cli_answers(urchin_home)) == []
    assert (urchin_home / "hooks.log").exists() is False or _found([(urchin_home / "hooks.log").read_bytes()]) == []
    _assert_clean(urchin_home, len(CORPUS))


def test_collectors(urchin_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    project = claude / "projects" / "-tmp-proj"
    project.mkdir(parents=True)
    lines = []
    for n, (text, _, _) in enumerate(CORPUS):
        common = {"parentUuid": None, "sessionId": _session(n, text), "timestamp": "2026-05-04T10:00:00.000Z",
                  "cwd": _folder(n, text), "gitBranch": text}
        lines.append(orjson.dumps({**common, "type": "user", "uuid": f"u-{n}",
                                   "message": {"role": "user", "content": f"{WORD} {n}: {text}"}}))
        lines.append(orjson.dumps({**common, "type": "assistant", "uuid": _one_line(n, text),
                                   "message": {"role": "assistant", "model": text,
                                               "content": [{"type": "text", "text": f"{WORD} reply {text}"}]}}))
    (project / "5f3c2a1e-0000-4000-8000-000000000001.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    env = {"URCHIN_CLAUDE_DIR": str(claude), **_actor_env(9)}
    out = run_urchin("collect", "claude", env=env)
    assert out.returncode == 0, out.stderr
    assert _found([out.stdout.encode(), *_cli_answers(urchin_home)]) == []
    _assert_clean(urchin_home, 2 * len(CORPUS))


# ---- curated memories -------------------------------------------------------------------------
def test_curated_memories_are_redacted_in_toml_and_answers(urchin_home: Path) -> None:
    answers = []
    memory = Memory(Settings.resolve(urchin_home))
    for n, (text, _, _) in enumerate(CORPUS):
        if n % 3:                          # two thirds in this process, through the same facade call
            created = memory.memory_create(f"m{n}", text, [Member("query", query=text, source="claude")], title=text)
            answers.append(orjson.dumps(created.summary()))
            continue
        done = (call_urchin if n else run_urchin)("memory", "create", f"m{n}", "--use-when", text, "--title", text,
                                                  "--query", text, "--source", "claude")
        assert done.returncode == 0, done.stderr
        answers.append(done.stdout.encode())
    for run, args in ((run_urchin, ("memory", "list", "--json")), (call_urchin, ("memory", "show", "m3", "--json"))):
        done = run(*args)
        assert done.returncode == 0, done.stderr
        answers.append(done.stdout.encode())
    assert len(list((urchin_home / "memories").glob("*.toml"))) == len(CORPUS)
    assert _found(answers) == []
    assert _found(_files(urchin_home)) == []


def test_a_hand_edited_memory_is_served_redacted(urchin_home: Path) -> None:
    # The TOML is meant to be edited by hand: whatever it holds, answers pass the redactor.
    folder = urchin_home / "memories"
    folder.mkdir(parents=True)
    for n, (text, _, _) in enumerate(CORPUS[:20]):
        body = {"slug": f"hand{n}", "title": text, "use_when": text, "created": "2026-05-04T10:00:00Z"}
        lines = [f"{k} = {orjson.dumps(v).decode()}" for k, v in body.items()]
        lines += ["", "[[members]]", 'type = "query"', f"query = {orjson.dumps(text).decode()}",
                  f"source = {orjson.dumps(text).decode()}"]
        (folder / f"hand{n}.toml").write_text("\n".join(lines) + "\n")
    answers = [run_urchin("memory", "list", "--json"), *(call_urchin("memory", "show", f"hand{n}", "--json")
                                                        for n in (0, 7, 13))]
    assert all(done.returncode == 0 for done in answers), [done.stderr for done in answers]
    assert len(orjson.loads(answers[0].stdout)["memories"]) == 20
    assert _found(done.stdout.encode() for done in answers) == []


def test_a_memory_name_holding_a_secret_is_refused(urchin_home: Path) -> None:
    slug = "sk-" + "abcdef0123456789abcdef0123"
    assert redact_text(slug)[0] != slug
    done = run_urchin("memory", "create", slug, "--use-when", "never", "--query", "x")
    assert done.returncode == 1 and "slug" in done.stderr and "secret" in done.stderr
    assert not (urchin_home / "memories").exists() or not list((urchin_home / "memories").iterdir())


# ---- PostgreSQL ---------------------------------------------------------------------------------
def test_postgres_heap_and_wal_hold_no_value(own_pg: tuple[str, Path], urchin_home: Path) -> None:
    """A server of this test alone: its data directory holds only what this test wrote (the session's
    shared server holds every other test's databases, and scanning them cost seconds)."""
    import psycopg

    from urchin.config import Settings
    from urchin.facade import Memory

    pg_url, data = own_pg
    pg_settings = Settings.resolve(urchin_home, database_url=pg_url, device="test-device")
    memory = Memory(pg_settings)
    results = memory.ingest([*_events(), LOOK_ALIKE_EVENT])
    assert [r.status for r in results] == ["appended"] * (len(CORPUS) + 1)
    report = memory.index()
    assert report.events == len(CORPUS) + 1
    memory.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        stored = conn.execute("SELECT count(*) FROM urchin_chunks").fetchone()
        conn.execute("CHECKPOINT")
    assert stored is not None and stored[0] >= len(CORPUS)
    assert (data / "pg_wal").is_dir() and (data / "base").is_dir()
    assert _found(_files(data)) == []
    assert _found(_files(pg_settings.home)) == []
    wal = b"".join((data / "pg_wal" / name).read_bytes() for name in os.listdir(data / "pg_wal")
                   if (data / "pg_wal" / name).is_file())
    assert UUIDS[0].encode() in wal and SHA.encode() in wal  # the look-alikes went in as they are


def test_the_corpus_really_contains_the_secrets() -> None:
    """Guard against a test that cannot fail: without redaction, every value would be found."""
    assert len(CORPUS) >= 40
    for text, secret, _ in CORPUS:
        assert secret in text
    event = _event(0, *CORPUS[0][:2])
    assert _found([orjson.dumps(event)]) == [CORPUS[0][2]]
    assert _found([CORPUS[5][1].lower().encode("utf-32-le")]) == [CORPUS[5][2]]
    assert sum(1 for _, secret, _ in CORPUS if _label(secret)) >= 10
