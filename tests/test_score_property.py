"""Property (issue 32, item 1): over random small journals and queries, every ranked operation through
the CLI, HTTP (a real daemon) and MCP (a real stdio server) answers with scores that never rise down the
list, `minScore` keeps exactly the results at or above it, and (search_context's keyword, hybrid and
semantic strategies, query_source, `urchin semantic`) a result holding every word of the query ranks
above every result that does not, and is never left out while one that does not is shown.

Seeded, and bounded in time: the checks stop at DEADLINE_S (the fixture's start-up aside).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from tests.daemon_fixture import DaemonProcess
from tests.mcp_harness import stdio_session
from urchin.search.terms import tokenize

REPO = Path(__file__).resolve().parent.parent
SEED = 32
DEADLINE_S = 4.0
WORDS = ["deploy", "staging", "rollback", "release", "stripe", "webhook", "secret", "billing", "cache", "queue"]
SOURCES = ["claude", "codex"]
KINDS = ["conversation", "conversation", "decision", "note"]
WORKSPACES = ["wsa", "wsb", "wsc"]
BIG = 24 * 365 * 50     # hours: every event is in the window


def _journal(rng: random.Random) -> list[dict[str, Any]]:
    events = []
    for w, workspace in enumerate(WORKSPACES):
        for i in range(12):
            words = rng.sample(WORDS, rng.randint(1, 4)) + rng.sample(["the", "a", "we", "now"], 1)
            rng.shuffle(words)
            events.append({"id": f"{workspace}-{i}", "content": " ".join(words), "workspace": workspace,
                           "session": f"{workspace}-s{i // 4}", "source": rng.choice(SOURCES),
                           "kind": rng.choice(KINDS), "timestamp": f"2026-01-0{w + 1}T10:00:{i:02d}Z"})
    return events


def _queries(rng: random.Random) -> list[str]:
    out = []
    for _ in range(6):
        words = rng.sample(WORDS, rng.randint(1, 3))
        if rng.random() < 0.3:
            words.append(rng.choice(["codex", "decisions"]))     # a named source, a named kind: priors
        out.append(" ".join(words))
    return out


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, pg_server: Any, pg_server_url: str) -> Iterator[dict[str, Any]]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"urchin_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(pg_server_url, dbname=name)
    home = tmp_path_factory.mktemp("score-property") / "home"
    events = _journal(random.Random(SEED))
    env = {"URCHIN_DATABASE_URL": url, "URCHIN_DEVICE": "prop"}
    proc = DaemonProcess(home, env=env).start()
    try:
        with proc.client() as http:
            assert http.post("/ingest/batch", json={"events": events}).json()["appended"] == len(events)
        done = subprocess.run([sys.executable, "-m", "urchin", "index"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **env, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home),
                                   "URCHIN_NO_DAEMON": "1"})
        assert done.returncode == 0, done.stderr
        yield {"proc": proc, "home": home, "env": env, "events": events}
    finally:
        proc.stop()
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---- the operations: name -> (HTTP request, MCP call, CLI arguments, list key, every-word rule applies)
def _calls(query: str, workspace: str, extra: dict[str, Any]) -> dict[str, tuple[Any, Any, list[str], str, bool]]:
    """`extra` is {} or {"minScore": cut}: every ranked operation takes it, on every front end."""
    out: dict[str, tuple[Any, Any, list[str], str, bool]] = {}
    cut = extra.get("minScore")
    flag = ["--min-score", str(cut)] if cut is not None else []
    param = f"&minScore={cut}" if cut is not None else ""
    for strategy in ("hybrid", "keyword", "semantic"):
        body = {"query": query, "workspace": workspace, "strategy": strategy, "limit": 50, **extra}
        cli = ["context", query, "--workspace", workspace, "--strategy", strategy, "--limit", "50", *flag]
        out[f"context-{strategy}"] = (("POST", "/context", body), ("search_context", body), cli, "results", True)
    find = {"query": query, "limit": 50, **extra}
    out["find"] = (("POST", "/documents/search", find), ("search", find), ["find", query, "--limit", "50", *flag],
                   "results", False)
    out["query_source"] = (("GET", f"/sources/codex/search?query={query}&limit=50{param}", None),
                           ("query_source", {"source": "codex", "query": query, "limit": 50, **extra}),
                           ["query-source", "codex", query, "--limit", "50", *flag], "results", True)
    out["semantic"] = (("GET", f"/semantic?query={query}&workspace={workspace}&hours={BIG}&limit=50{param}", None),
                       ("urchin_semantic_search", {"query": query, "workspace": workspace, "hours": BIG, "limit": 50,
                                                   **extra}),
                       ["semantic", query, "--workspace", workspace, "--hours", str(BIG), "--limit", "50", *flag],
                       "events", True)
    return out


def _items(answer: dict[str, Any], key: str) -> list[tuple[str, str, float]]:
    """(id, text the words are looked for in, score) down the list."""
    out = []
    for item in answer[key]:
        ident = item.get("id") or item.get("chunkId")
        out.append((ident, f"{item.get('content', '')} {item.get('source', '')}", float(item["score"])))
    return out


def _holds_every(text: str, query: str) -> bool:
    return set(tokenize(query)) <= set(tokenize(text))


def _check(items: list[tuple[str, str, float]], query: str, scope: list[dict[str, Any]], rule: bool,
           where: str) -> None:
    scores = [s for _, _, s in items]
    assert scores == sorted(scores, reverse=True), (where, items)
    if not rule:
        return
    held = [_holds_every(text, query) for _, text, _ in items]
    if False in held:
        first = held.index(False)
        assert True not in held[first:], (where, "a result not holding every word ranks above one that does", items)
        shown = {i for i, _, _ in items}
        missing = [e["id"] for e in scope
                   if _holds_every(f"{e['content']} {e['source']}", query) and e["id"] not in shown]
        assert not missing, (where, "left out while a result not holding every word is shown", missing, items)


def _scope(events: list[dict[str, Any]], name: str, workspace: str) -> list[dict[str, Any]]:
    if name == "query_source":
        return [e for e in events if e["source"] == "codex"]
    return [e for e in events if e["workspace"] == workspace]


def test_every_ranked_list_is_sorted_by_its_score_filters_on_it_and_puts_every_word_first(
        daemon: dict[str, Any]) -> None:
    rng = random.Random(SEED + 1)
    queries = _queries(rng)
    events = daemon["events"]
    started = time.monotonic()
    seen: dict[tuple[str, str, str], list[tuple[str, str, float]]] = {}
    checked = 0
    with daemon["proc"].client() as http:
        for query in queries:
            for workspace in WORKSPACES:
                if time.monotonic() - started > DEADLINE_S:
                    break
                for name, ((method, path, body), _, _, key, rule) in _calls(query, workspace, {}).items():
                    reply = http.request(method, path, json=body) if body is not None else http.request(method, path)
                    assert reply.status_code == 200, reply.text
                    items = _items(reply.json(), key)
                    _check(items, query, _scope(events, name, workspace), rule, f"http {name} {query!r}")
                    seen[(name, query, workspace)] = items
                    checked += 1
                # minScore keeps exactly the results at or above it, in every ranked operation: cut at
                # scores of its own list
                for name in _calls(query, workspace, {}):
                    everything = seen[(name, query, workspace)]
                    cuts = sorted({s for _, _, s in everything})
                    for cut in rng.sample(cuts, min(2, len(cuts))):
                        (method, path, body), _, _, key, _ = _calls(query, workspace, {"minScore": cut})[name]
                        reply = http.request(method, path, json=body) if body is not None else http.request(method,
                                                                                                              path)
                        assert reply.status_code == 200, reply.text
                        kept = _items(reply.json(), key)
                        assert kept == [i for i in everything if i[2] >= cut], (name, query, cut, kept, everything)
    assert checked >= 12, checked      # enough ground covered before the deadline
    _mcp_and_cli_agree(daemon, queries[0], WORKSPACES[0], seen)


def _mcp_and_cli_agree(daemon: dict[str, Any], query: str, workspace: str,
                       seen: dict[tuple[str, str, str], list[tuple[str, str, float]]]) -> None:
    """The same lists through MCP and the CLI (the property holds there because the answer is the same)."""
    calls = _calls(query, workspace, {})
    env = {**daemon["env"], "URCHIN_HOME": str(daemon["home"])}

    async def mcp() -> dict[str, Any]:
        out = {}
        async with stdio_session(env) as session:
            for name, (_, (tool, args), _, _, _) in calls.items():
                result = await session.call_tool(tool, args)
                assert not result.is_error, result.content
                out[name] = result.structured_content
        return out

    for name, answer in anyio.run(mcp).items():
        items = _items(answer, calls[name][3])
        assert items == seen[(name, query, workspace)], (name, items)
    # two CLI processes at once (each costs a Python start-up)
    cli_env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    procs = {name: subprocess.Popen([sys.executable, "-m", "urchin", *calls[name][2], "--json"], text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env)
             for name in ("context-hybrid", "semantic")}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert _items(orjson.loads(out), calls[name][3]) == seen[(name, query, workspace)], name
