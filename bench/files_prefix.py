"""Retrieval gain of the path + heading-path prefix on workspace-file chunks (issue 9).

Indexes a copy of this repository's `urchin/` package and README into a fresh embedded PostgreSQL
twice (token vectors from `Chunk.retrieval_text` vs the bare chunk text) and reports, for a fixed set
of questions whose answer is one known file (or package), hit@1/hit@5 and MRR of that file's first chunk.
The keyword leg is the same in both runs (its tsvector holds the heading path as title, not the path).
Run: PYTHONPATH=$PWD .venv/bin/python bench/files_prefix.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from urchin.config import Settings
from urchin.facade import Memory
from urchin.hybrid import files as files_mod
from urchin.hybrid.embedded import EmbeddedPostgres

VERBOSE = False
REPO = Path(__file__).resolve().parents[1]
QUESTIONS = [
    ("how is the journal file locked while appending lines", "urchin/journal.py"),
    ("which secrets does redaction mask before storing", "urchin/redact/"),
    ("feeder retries after a database outage with backoff", "urchin/hybrid/feeder.py"),
    ("workspace root path traversal refused for symlinks", "urchin/workspace/roots.py"),
    ("split markdown at headings into chunks with line numbers", "urchin/workspace/chunking.py"),
    ("weighted reciprocal rank fusion of the legs", "urchin/hybrid/search_context.py"),
    ("migrations applied at connect versioned table", "urchin/hybrid/schema.py"),
    ("settings read from environment variables and config toml", "urchin/config.py"),
    ("gitignore rules for workspace files", "urchin/workspace/ignore.py"),
    ("curated memories stored as toml with members", "urchin/workspace/curated.py"),
    ("ranged read of numbered lines of a file", "urchin/workspace/reader.py"),
    ("event id is a uuid v7 and timestamps are parsed", "urchin/event.py"),
    ("daemon background jobs collectors embedder loop", "urchin/daemon/background.py"),
    ("MCP tool input schemas with defaults", "urchin/mcp_server/schemas.py"),
]


def run(memory: Memory, strategy: str) -> dict[str, float]:
    ranks = []
    for question, target in QUESTIONS:
        result = memory.context(query=question, strategy=strategy, sources=["files"], limit=20, per_file_cap=1)
        docs = [r["location"]["path"].split("/", 1)[1] for r in result.results]
        hits = [i for i, d in enumerate(docs, 1) if d == target or (target.endswith("/") and d.startswith(target))]
        ranks.append(hits[0] if hits else None)
        if VERBOSE:
            print(f"  {ranks[-1]} {target} <- {docs[:3]}")
    n = len(ranks)
    return {"hit@1": sum(1 for r in ranks if r == 1) / n, "hit@5": sum(1 for r in ranks if r and r <= 5) / n,
            "mrr": sum(1 / r for r in ranks if r) / n}


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="urchin-bench-prefix-"))
    corpus = tmp / "corpus" / "repo"
    shutil.copytree(REPO / "urchin", corpus / "urchin", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "README.md", corpus / "README.md")
    server = EmbeddedPostgres(tmp / "pg", relocate_as_root=False)
    try:
        for prefix in (True, False):
            import psycopg

            name = f"bench_prefix_{int(prefix)}"
            with psycopg.connect(server.url(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                conn.execute(f'CREATE DATABASE "{name}"')
            from psycopg.conninfo import make_conninfo

            url = make_conninfo(server.url(), dbname=name)
            home = tmp / f"home{int(prefix)}"
            home.mkdir()
            memory = Memory(Settings.resolve(home, database_url=url, device="bench"))
            memory.workspace_add(str(corpus))
            files_mod.PREFIX_RETRIEVAL_TEXT = prefix
            report = memory.index_files()
            label = "path+heading prefix" if prefix else "bare chunk text"
            for strategy in ("semantic", "hybrid"):
                m = run(memory, strategy)
                print(f"{label:22s} {strategy:9s} chunks={report.chunks} hit@1={m['hit@1']:.2f} "
                      f"hit@5={m['hit@5']:.2f} MRR={m['mrr']:.3f}")
            memory.close()
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
