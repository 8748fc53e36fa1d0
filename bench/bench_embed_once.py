"""Texts sent to the embedder when both the vector cache and the PostgreSQL index need N events' vectors.

    python bench/bench_embed_once.py [--events 2000] [--embedder-url URL] [--daemon [--repo CHECKOUT]]

`urchin semantic`'s vector cache (filled by `urchin embed` or the daemon's embedder loop) and the
PostgreSQL feed (the hybrid's dense leg) both want a vector per event. Three runs on the same
synthetic journal (`bench_index.generate`), each into a fresh home and an emptied index:
- "feed, then embed" and "embed, then feed": the feed takes an event's vector from the cache, or
  embeds it into the cache for both (this code);
- peer, same run: the feed embedding on its own (`Feeder` without `vectors_home`, as before), then
  the cache.
Counts every text given to `Embedder.embed` (a counting wrapper around the real client) and the wall
time. Without `--embedder-url` it starts the test embedding server (scripts/test-embedder.sh).

`--daemon`: the case users run. A daemon (of `--repo`, default this checkout) starts on a home whose
journal holds the events, with the embedder set and its PostgreSQL feed on: its embedder loop fills
the vector cache while its index process feeds and embeds the index, at the same time. Once the
cache holds every event and the index has no row without a vector, the bytes of embedding requests
the server received (its `/metrics`) are set against the bytes of the events' texts once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_index import generate  # noqa: E402
from urchin.config import Settings  # noqa: E402
from urchin.facade import Memory  # noqa: E402
from urchin.hybrid.feeder import Feeder  # noqa: E402
from urchin.search import embedder as embedder_module  # noqa: E402

SENT = [0]


def _count_texts() -> None:
    real = embedder_module.Embedder.embed

    def counted(self: Any, texts: Any) -> Any:
        SENT[0] += len(texts)
        return real(self, texts)

    embedder_module.Embedder.embed = counted  # type: ignore[method-assign]


def _start_embedder() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "test-embedder.sh"), "start", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2, trust_env=False).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(1)
    os.killpg(proc.pid, signal.SIGTERM)
    raise SystemExit("the test embedder did not start")


def run(label: str, journal: Path, root: Path, database_url: str, embedder_url: str) -> None:
    home = root / label.replace(" ", "-").replace(",", "")
    (home / "journal").mkdir(parents=True)
    shutil.copy(journal, home / "journal" / "events.jsonl")
    settings = Settings.resolve(home, database_url=database_url, embedder_url=embedder_url,
                                embedder_model="all-MiniLM-L6-v2", embedder_api="openai")
    SENT[0] = 0
    started = time.perf_counter()
    with Memory(settings) as memory:
        memory.index_service.backend.rebuild()
        if label == "embed, then feed":
            memory.embed(None)
            report = memory.index()
        elif label == "feed, then embed":
            report = memory.index()
            memory.embed(None)
        else:   # the peer: the feed embeds on its own, as before this change
            service = memory.index_service
            report = Feeder(service.backend, memory.journal, settings.device, embedder=service.embedder).run_once()
            memory.embed(None)
        events = report.events
    took = time.perf_counter() - started
    print(f"{label:<34} {SENT[0]:>7,} texts embedded for {events:,} events ({SENT[0] / events:.2f} per event), "
          f"reused from the cache {report.reused:,}; {took:.1f} s", flush=True)


def _request_bytes(url: str) -> tuple[float, float]:
    """(requests, body bytes) the embedding server has received on /v1/embeddings so far."""
    text = httpx.get(url + "/metrics", timeout=10, trust_env=False).text
    found = {}
    for line in text.splitlines():
        for name in ("http_request_size_bytes_count", "http_request_size_bytes_sum"):
            if line.startswith(name + '{handler="/v1/embeddings"}'):
                found[name] = float(line.rsplit(" ", 1)[1])
    return found.get("http_request_size_bytes_count", 0.0), found.get("http_request_size_bytes_sum", 0.0)


def run_daemon(repo: Path, journal: Path, root: Path, url: str, events: int) -> None:
    home = root / f"daemon-{repo.name}"
    (home / "journal").mkdir(parents=True)
    shutil.copy(journal, home / "journal" / "events.jsonl")
    texts = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
    once = sum(len(orjson.dumps(f"{t['title']}\n{t['content']}" if t.get("title") else t["content"])) for t in texts)
    env = {**os.environ, "PYTHONPATH": str(repo), "URCHIN_HOME": str(home), "URCHIN_EMBEDDER_URL": url,
           "URCHIN_EMBEDDER_MODEL": "all-MiniLM-L6-v2", "URCHIN_EMBEDDER_API": "openai"}
    env.pop("URCHIN_NO_DAEMON", None)
    requests0, bytes0 = _request_bytes(url)
    started = time.perf_counter()
    log = (root / f"daemon-{repo.name}.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning"],
                            env=env, stdout=log, stderr=log, cwd=repo)   # `-m` imports from the cwd first
    try:
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            time.sleep(3)
            cached = sum(len(f.read_bytes().splitlines()) for f in (home / "vectors").glob("*/ids.txt")) \
                if (home / "vectors").is_dir() else 0
            if cached < events:
                continue
            status = subprocess.run([sys.executable, "-m", "urchin", "index", "--status", "--json"], env=env,
                                    capture_output=True, timeout=120, cwd=repo)
            try:
                info = orjson.loads(status.stdout)
            except orjson.JSONDecodeError:
                continue
            if info.get("chunks", 0) >= events and info.get("pendingEmbeddings", 1) == 0:
                break
        else:
            raise SystemExit("the daemon did not embed everything in 30 minutes")
        took = time.perf_counter() - started
        # then until no embedding request came for 8 s: the status can be read between a batch's
        # request and its rows' commit, and a writer may still be embedding what the other has
        requests1, bytes1 = _request_bytes(url)
        quiet = 0
        while quiet < 4:
            time.sleep(2)
            now = _request_bytes(url)
            quiet = quiet + 1 if now == (requests1, bytes1) else 0
            requests1, bytes1 = now
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    print(f"daemon of {repo}: {requests1 - requests0:,.0f} embedding requests, {bytes1 - bytes0:,.0f} bytes "
          f"= {(bytes1 - bytes0) / once:.2f}x the {events:,} events' texts once ({once:,} bytes as JSON strings); "
          f"cache and index complete in {took:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--embedder-url", default=None)
    parser.add_argument("--daemon", action="store_true", help="measure a running daemon (see above)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose daemon runs (--daemon)")
    args = parser.parse_args()
    _count_texts()
    proc = None
    url = args.embedder_url
    if url is None:
        proc, url = _start_embedder()
    from urchin.hybrid.embedded import EmbeddedPostgres

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        journal = root / "source" / "events.jsonl"
        journal.parent.mkdir()
        generate(journal, args.events)
        if args.daemon:
            try:
                run_daemon(args.repo.resolve(), journal, root, url, args.events)
            finally:
                if proc is not None:
                    os.killpg(proc.pid, signal.SIGTERM)
            return
        server = EmbeddedPostgres(root / "pg", relocate_as_root=False)
        try:
            for label in ("peer: feed alone, then embed", "feed, then embed", "embed, then feed"):
                run(label, journal, root, server.url(), url)
        finally:
            server.stop()
            if proc is not None:
                os.killpg(proc.pid, signal.SIGTERM)


if __name__ == "__main__":
    main()
