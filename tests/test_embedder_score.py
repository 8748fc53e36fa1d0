"""`urchin semantic` with an embedder shows a calibrated score (issue 32, "one score orders every ranked
list"): not the model's raw cosine, but the cosine measured against the query's own background (its
z-score over a fixed sample of the cache) put through the stated map of urchin.search.score.EMBEDDER.
The list is sorted by that score, and it is the same number through the CLI, HTTP, MCP and in-process.
Uses the real test embedder (all-MiniLM-L6-v2 served by infinity)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import orjson
import pytest

from tests.daemon_fixture import DaemonProcess
from tests.mcp_harness import stdio_session
from urchin.facade import Memory

REPO = Path(__file__).resolve().parent.parent
W = str(24 * 365 * 100)

NOTES = [
    "We rotate OAuth refresh tokens every day and store them in the keychain",
    "Login uses SSO through SAML; passwords are never stored",
    "Postgres with pgvector backs the hybrid index",
    "The nightly backup copies the journal to the NAS",
    "My cat sleeps on the keyboard",
    "The release train leaves on Thursdays at noon",
    "Deploy keys for staging live in the vault under ci/staging",
    "Lunch on Friday is soup in the cafeteria",
    "The flaky test in test_daemon times out under load",
    "We picked ruff over flake8 for linting speed",
    "Rollback a release by redeploying the previous tag",
    "The viewer shows the timeline newest first",
]
QUERIES = ["authentication decisions", "what does the team do", "how do we roll back a release"]


def _env(url: str) -> dict[str, str]:
    return {"URCHIN_EMBEDDER_URL": url, "URCHIN_EMBEDDER_MODEL": "all-MiniLM-L6-v2", "URCHIN_EMBEDDER_API": "openai"}


def _expected(memory: Memory, query: str, event_id: str) -> float:
    """The score by its definition: z of the cosine against the sample's cosines, then the stated map."""
    from urchin.search.score import EMBEDDER, Z_SPAN
    from urchin.search.vectors import BACKGROUND_ROWS

    view = memory.embedding_view()
    cache = view.cache()
    q = np.asarray(view.embedder.embed_query(query), np.float64)
    q /= np.linalg.norm(q)
    matrix = np.asarray(cache._matrix[:len(cache)], np.float64)
    sample = matrix[np.unique(np.linspace(0, len(matrix) - 1, min(len(matrix), BACKGROUND_ROWS)).astype(int))] @ q
    cosine = float(matrix[[cache.id_at(i) for i in range(len(cache))].index(event_id)] @ q)
    z = (cosine - sample.mean()) / max(sample.std(), 0.02)
    raw = EMBEDDER.dense * min(1.0, max(0.0, z / Z_SPAN)) + EMBEDDER.bias
    return round(1 / (1 + math.exp(-raw)), 4)


@pytest.mark.slow
def test_semantic_with_an_embedder_shows_the_calibrated_score_and_is_sorted_by_it(
        embedder_url: str, urchin_home: Path) -> None:
    from urchin.config import Settings

    memory = Memory(Settings.resolve(urchin_home, env=_env(embedder_url)))
    memory.ingest([{"id": f"n{i}", "content": text} for i, text in enumerate(NOTES)])
    floors = set()
    for query in QUERIES:
        hits = memory.semantic(query, hours=float(W), limit=12).hits
        assert len(hits) == len(NOTES)
        scores = [h.score for h in hits]
        assert all(a >= b for a, b in zip(scores, scores[1:], strict=False)), (query, scores)  # sorted by it
        # not the raw cosine: the results no closer to the query than its background (the last of 12 here)
        # all score the same floor, one number for every query, whatever their cosines
        assert len(set(scores[-3:])) == 1, (query, scores)
        floors.add(scores[-1])
    assert len(floors) == 1 and floors.pop() < 0.01
    from urchin.search.score import EMBEDDER
    from urchin.search.semantic import embedder_evidence

    for query in QUERIES:       # the score by its definition
        for hit in memory.semantic(query, hours=float(W), limit=12).hits:
            assert hit.score == _expected(memory, query, hit.event.id), (query, hit.event.id)
    # explain's parts add up to the raw sum, and the map from raw to the score is the stated one
    why = EMBEDDER.explain(embedder_evidence(0.61, 0.12, 0.08))
    assert math.isclose(sum(why["parts"].values()), why["raw"], abs_tol=1e-5)
    assert why["score"] == round(1 / (1 + math.exp(-why["raw"])), 4) and "exp(-raw)" in why["map"]
    # ... and each hit's own, when asked: its cosine against the query's background, and the same score
    for hit in memory.semantic(QUERIES[0], hours=float(W), limit=12, explain=True).hits:
        why = hit.explain
        assert why is not None and why["scale"] == EMBEDDER.name and why["score"] == hit.score, why
        assert math.isclose(sum(why["parts"].values()), why["raw"], abs_tol=1e-5), why
        c = why["cosine"]
        assert math.isclose(c["z"], (c["value"] - c["backgroundMean"]) / c["backgroundSpread"], abs_tol=1e-4), c


def _cli(home: Path, env: dict[str, str], args: list[str], alone: bool) -> Any:
    run_env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home), **env}
    run_env.pop("URCHIN_NO_DAEMON", None)
    if alone:
        run_env["URCHIN_NO_DAEMON"] = "1"
    done = subprocess.run([sys.executable, "-m", "urchin", *args, "--json"], env=run_env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


async def _mcp(home: Path, env: dict[str, str], query: str) -> Any:
    async with stdio_session({"URCHIN_HOME": str(home), **env}) as session:
        result = await session.call_tool("urchin_semantic_search", {"query": query, "hours": float(W), "limit": 12})
        assert not result.is_error
        return result.structured_content


@pytest.mark.slow
def test_the_embedders_score_is_the_same_number_through_every_road(embedder_url: str, tmp_path: Path) -> None:
    from urchin.config import Settings

    home, env = tmp_path / "home", _env(embedder_url)
    memory = Memory(Settings.resolve(home, env=env))
    memory.ingest([{"id": f"n{i}", "content": text} for i, text in enumerate(NOTES)])
    memory.embed()
    query = QUERIES[0]
    want = [(h.event.id, round(h.score or 0.0, 6)) for h in memory.semantic(query, hours=float(W), limit=12).hits]
    assert want[-1][1] == want[-2][1] < 0.01, want      # calibrated: below the background, one floor
    args = ["semantic", query, "--hours", W, "--limit", "12"]
    alone = _cli(home, env, args, alone=True)
    daemon = DaemonProcess(home, env=env).start()
    try:
        with daemon.client() as http:
            reply = http.get("/semantic", params={"query": query, "hours": W, "limit": 12})
            assert reply.status_code == 200, reply.text
        roads = {"alone": alone, "http": reply.json(), "cli": _cli(home, env, args, alone=False),
                 "mcp": anyio.run(_mcp, home, env, query)}
    finally:
        daemon.stop()
    for road, answer in roads.items():
        assert answer["mode"] == "embedder (all-MiniLM-L6-v2)", road
        got = [(e["id"], e["score"]) for e in answer["events"]]
        assert got == want, (road, got, want)
