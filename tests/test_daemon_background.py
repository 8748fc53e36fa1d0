"""The daemon's background jobs: collectors follow the agents' files; the embedder backfills vectors."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess


def _search(daemon: DaemonProcess, query: str, path: str = "/search", hours: float = 168) -> dict:
    response = httpx.get(daemon.url + path, params={"query": query, "hours": hours},
                         headers={"Authorization": f"Bearer {daemon.token}"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _wait_for(check, seconds: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_a_new_claude_transcript_is_collected_within_seconds(urchin_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    (claude / "projects").mkdir(parents=True)
    daemon = DaemonProcess(urchin_home, env={"URCHIN_CLAUDE_DIR": str(claude)}).start()
    try:
        project = claude / "projects" / "-work-shop"
        project.mkdir()
        line = {"type": "user", "uuid": "11111111-0000-4000-8000-000000000001", "parentUuid": None,
                "sessionId": "22222222-0000-4000-8000-000000000002", "timestamp": "2026-11-01T10:00:00.000Z",
                "cwd": "/work/shop", "message": {"role": "user", "content": "why is the zebra-coupon test flaky"}}
        (project / "22222222-0000-4000-8000-000000000002.jsonl").write_bytes(orjson.dumps(line) + b"\n")
        found = _wait_for(lambda: _search(daemon, "zebra-coupon", hours=100000)["events"], 45)
        assert found and found[0]["source"] == "claude"
    finally:
        daemon.stop()


def test_serve_without_collectors(urchin_home: Path, tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    project = claude / "projects" / "-work-shop"
    project.mkdir(parents=True)
    line = {"type": "user", "uuid": "11111111-0000-4000-8000-000000000009", "parentUuid": None,
            "sessionId": "s", "timestamp": "2026-11-01T10:00:00.000Z", "cwd": "/work/shop",
            "message": {"role": "user", "content": "the quokka migration"}}
    (project / "s.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    daemon = DaemonProcess(urchin_home, "--no-collect", env={"URCHIN_CLAUDE_DIR": str(claude)}).start()
    try:
        time.sleep(2)
        assert _search(daemon, "quokka", hours=100000)["events"] == []
        assert run_urchin("collect", "claude", env={"URCHIN_CLAUDE_DIR": str(claude)}).returncode == 0
        assert _wait_for(lambda: _search(daemon, "quokka", hours=100000)["events"])  # the test can see it
    finally:
        daemon.stop()


@pytest.mark.slow
def test_the_embedder_backfills_in_the_background(urchin_home: Path, embedder_url: str) -> None:
    env = {"URCHIN_EMBEDDER_URL": embedder_url, "URCHIN_EMBEDDER_MODEL": "all-MiniLM-L6-v2"}
    daemon = DaemonProcess(urchin_home, env=env).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        events = [{"content": f"note {i}: the release train leaves on thursdays"} for i in range(300)]
        assert httpx.post(daemon.url + "/ingest/batch", json={"events": events}, headers=headers,
                          timeout=30).status_code == 200
        # a query meanwhile answers from what is cached: the backlog is the loop's, not the query's
        early = _search(daemon, "when does the release train leave", "/semantic")
        assert early["mode"] == "embedder (all-MiniLM-L6-v2)"
        assert early["notes"] == ["some events are not embedded yet and were not searched: "
                                  "the daemon is embedding them"], early
        vectors = urchin_home / "vectors"
        cached = _wait_for(lambda: any(vectors.rglob("ids.txt")) and
                           sum(len(p.read_bytes().splitlines()) for p in vectors.rglob("ids.txt")) >= 300, 60)
        assert cached, "the daemon did not embed the new events in the background"
        result = _search(daemon, "when does the release train leave", "/semantic")
        assert result["mode"] == "embedder (all-MiniLM-L6-v2)" and result["events"]
    finally:
        daemon.stop()


def test_the_daemon_feeds_the_hybrid_index_and_answers_context(urchin_home: Path, pg_url: str) -> None:
    daemon = DaemonProcess(urchin_home, "--with-index", env={"URCHIN_DATABASE_URL": pg_url}).start()
    try:
        headers = {"Authorization": f"Bearer {daemon.token}"}
        events = [{"content": "We deploy with blue-green switches behind the load balancer", "workspace": "ops"},
                  {"content": "Lunch was pizza again", "workspace": "ops"}]
        assert httpx.post(daemon.url + "/ingest/batch", json={"events": events}, headers=headers,
                          timeout=30).status_code == 200

        def context() -> list:
            response = httpx.post(daemon.url + "/context", headers=headers,
                                  json={"query": "how do we deploy", "workspace": "ops", "limit": 1}, timeout=30)
            assert response.status_code == 200, response.text
            return response.json()["results"]

        results = _wait_for(context, 30)
        assert results and "blue-green" in results[0]["content"]
        assert results[0]["citation"].startswith("urchin://events/")
        bad = httpx.post(daemon.url + "/context", headers=headers, json={"query": "x", "strategy": "magic"}, timeout=30)
        assert bad.status_code == 400 and bad.json()["field"] == "strategy"
        # The CLI goes through the daemon for the same answer.
        out = run_urchin("context", "how do we deploy", "--workspace", "ops", "--limit", "1", "--json",
                         env={"URCHIN_DATABASE_URL": pg_url})
        assert out.returncode == 0, out.stderr
        assert orjson.loads(out.stdout)["results"][0]["citation"] == results[0]["citation"]
    finally:
        daemon.stop()


def _nice_values(pid: int) -> list[int]:
    """The nice value of each thread of `pid` (field 19 of /proc/PID/task/TID/stat)."""
    out = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out.append(int(fields[16]))
    return out


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="per-thread nice values are Linux's")
def test_background_jobs_run_at_a_lower_priority_than_queries(urchin_home: Path) -> None:
    """A collector or feed thread yields the CPU to the threads that answer queries (issue 16)."""
    daemon = DaemonProcess(urchin_home).start()
    try:
        assert daemon.proc is not None
        deadline = time.monotonic() + 10
        while 10 not in _nice_values(daemon.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        values = _nice_values(daemon.proc.pid)
        assert 10 in values and values.count(0) >= 1  # the jobs are lowered, the server is not
        with daemon.client() as client:
            assert client.get("/search", params={"query": "x"}).status_code == 200
    finally:
        daemon.stop()


@pytest.mark.slow
def test_the_embedder_loop_outlives_a_failure_that_is_not_the_embedders(urchin_home: Path, embedder_url: str) -> None:
    """Queries beside the loop leave a backlog to it, so it must not end on a failure of its own (a
    full disk, an unwritable folder): it logs it, backs off and goes on once the cause is gone."""
    from urchin.config import Settings
    from urchin.daemon.background import EmbedderLoop
    from urchin.facade import Memory

    memory = Memory(Settings.resolve(urchin_home, env={"URCHIN_EMBEDDER_URL": embedder_url,
                                                       "URCHIN_EMBEDDER_MODEL": "all-MiniLM-L6-v2"}))
    memory.ingest([{"id": f"n{i}", "content": f"note {i}: the release train leaves on thursdays"} for i in range(40)])
    (urchin_home / "vectors").write_text("not a folder")      # the cache cannot be created: an OSError
    loop = EmbedderLoop(memory)
    loop.BACKOFF_S = loop.IDLE_S = 0.2
    loop.start()
    try:
        assert _wait_for(lambda: loop.last_error)
        assert "NotADirectoryError" in loop.last_error or "FileExistsError" in loop.last_error, loop.last_error
        assert loop._thread is not None and loop._thread.is_alive()
        (urchin_home / "vectors").unlink()
        assert _wait_for(lambda: loop.last_error is None and len(memory.embedding_view().cache()) == 40, 60)
        assert memory.semantic("when does the release train leave").notes == []
    finally:
        loop.stop()
