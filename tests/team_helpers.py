"""The team tests' shared pieces: their homes, events and SQL, the least-privilege roles, the trigram checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from urchin.config import Settings
from urchin.facade import Memory
from urchin.hybrid.pg_roles import add_feeder, setup_roles

__all__ = ["_events", "_sql", "_home", "roles", "_trigram_indexes", "_plan"]


def _events(n: int, word: str, workspace: str = "ws") -> list[dict[str, Any]]:
    return [{"content": f"{word} event {i} about the payments rollout", "workspace": workspace, "source": "claude",
             "kind": "note"} for i in range(n)]


def _sql(url: str, query: str, args: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, args).fetchall()


def _home(tmp_path: Path, name: str, url: str) -> Memory:
    return Memory(Settings.resolve(tmp_path / name, database_url=url, device=name, account="team"))


@pytest.fixture
def roles(team_db: str) -> dict[str, Any]:
    setup = setup_roles(team_db, owner_password="owner-pw", reader_password="reader-pw")
    return {"owner": setup["owner"]["url"] or psycopg.conninfo.make_conninfo(team_db, user="urchin_owner",
                                                                            password="owner-pw"),
            "reader": psycopg.conninfo.make_conninfo(team_db, user="urchin_reader", password="reader-pw"),
            "laptop": add_feeder(team_db, "laptop", "laptop-pw")["url"],
            "desktop": add_feeder(team_db, "desktop", "desktop-pw")["url"]}


def _trigram_indexes(url: str) -> int:
    """How many trigram indexes the chunks have: the table's own and one per partition."""
    return int(_sql(url, "SELECT count(*) FROM pg_indexes WHERE indexdef LIKE '%%gin_trgm_ops%%'")[0][0])


def _plan(url: str, query: str) -> str:
    with psycopg.connect(url) as conn:
        conn.execute("SET enable_seqscan = off")     # a few rows: the planner would scan them anyway
        return "\n".join(r[0] for r in conn.execute("EXPLAIN " + query).fetchall())
