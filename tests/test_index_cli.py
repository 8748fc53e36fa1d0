"""`urchin index` and `urchin context` as a user runs them, against the real PostgreSQL (each command once
as a process, the other calls in this one: tests/cli_inprocess.py)."""

from __future__ import annotations

from typing import Any

import orjson

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from urchin.config import Settings
from urchin.facade import Memory


def test_index_then_context_json_is_the_library_object(pg_settings: Settings, pg_url: str) -> None:
    memory = Memory(pg_settings)
    memory.ingest([{"content": "the release checklist lives in docs/release.md", "workspace": "w", "id": "a"},
                   {"content": "tests run with make test", "workspace": "w", "id": "b"}])
    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}
    indexed = run_urchin("index", env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert indexed.stdout.startswith("indexed 2 events (2 new)")
    args = ["release checklist", "--workspace", "w", "--search", "lex:docs", "--explain", "--limit", "5"]
    shown = run_urchin("context", *args, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    out = orjson.loads(shown.stdout)
    expected = memory.context(query="release checklist", workspace="w", searches=[{"type": "lex", "query": "docs"}],
                              explain=True, limit=5).to_dict()
    # "b" may follow as a weak result of the token-cosine leg (it matched a word the thesaurus relates to
    # the question, or a hashed token sharing its id)
    assert [r["id"] for r in out["results"]] == [r["id"] for r in expected["results"]]
    assert out["results"][0]["id"] == "a"
    assert out["coverage"]["legs"] == expected["coverage"]["legs"]
    text = call_urchin("context", *args, env=env)
    assert "urchin://events/a" in text.stdout and "explain:" in text.stdout
    memory.close()


def test_bad_flags_give_a_clear_error(pg_url: str) -> None:
    env = {"URCHIN_DATABASE_URL": pg_url}
    bad = call_urchin("context", "x", "--search", "sql:drop table", env=env)
    assert bad.returncode == 1
    assert bad.stderr.strip() == "error: --search[0].type: must be lex, vec or hyde, got 'sql'"
    assert call_urchin("context", "x", "--min-score", "2", env=env).stderr.strip() == (
        "error: --min-score: must be from 0 to 1, got 2")


def test_index_status_reports_the_cursor(pg_url: str) -> None:
    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "dev"}
    call_urchin("ingest", "hello index", env=env)
    run_urchin("index", env=env)
    status = orjson.loads(run_urchin("index", "--status", "--json", env=env).stdout)
    assert status["chunks"] == 1 and status["behindJournalBytes"] == 0 and status["cursors"][0]["device"] == "dev"
    text = call_urchin("index", "--status", env=env).stdout   # for people: key: value lines, no JSON, no reprs
    assert "chunks: 1" in text.splitlines() and "{" not in text and "None" not in text
    # which database, in words (never the URL: it may hold a password), not the bare word `url`
    assert "database: shared, from URCHIN_DATABASE_URL (`urchin doctor` checks it)" in text.splitlines()


def test_index_follow_prints_progress_while_it_runs(pg_url: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "d"}
    assert call_urchin("ingest", "before following", env=env).returncode == 0
    import threading

    proc = subprocess.Popen([sys.executable, "-m", "urchin", "index", "--follow"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()

    def progress() -> list[str]:
        return [line for line in list(lines) if line.startswith("indexed up to byte")]

    def wait_for(ok: Any) -> None:
        deadline = time.monotonic() + 30
        while not ok() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)

    try:
        wait_for(lambda: any("following the journal" in line for line in list(lines)) and progress())
        before = len(progress())
        assert call_urchin("ingest", "while following", env=env).returncode == 0
        wait_for(lambda: len(progress()) > before)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        finally:   # not stopped by SIGINT in time (the test fails): not left running after the run
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(10)
    err = "".join(lines)
    assert "following the journal" in err
    assert before >= 1 and len(progress()) > before, err   # the backlog, then the event ingested while following
    assert "Traceback" not in err
