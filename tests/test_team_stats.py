"""Issue 34 D, second round: a feeder's statistics and partitions cannot harm another device.

Statistics: the per-device term counts are kept by the owner's trigger from the chunk rows (a feeder
may not write them, and they are never negative), so a laptop setting its own counts negative no
longer hides the desktop's rows. Partitions: a feeder makes monthly partitions only within a window
(30 years back to a year ahead); every other moment goes to the default partition, and is served.
A database of b0177b1's schema (6), with a feeder's forged counts in it, migrates and is repaired.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.test_team_rls import ACCOUNTS, _home, _sql, feeders, urchin_package_at  # noqa: F401  (the two feeder roles)
from urchin.hybrid.pg_roles import feeder_role, setup_roles
from urchin.hybrid.postgres import PostgresIndex
from urchin.hybrid.schema import MIGRATIONS

WINDOW_BACK, WINDOW_AHEAD = 30 * 12, 12      # months around this one that may have their own partition


def _feed(tmp_path: Path, urls: dict[str, str]) -> None:
    desktop = _home(tmp_path, "desktop", urls["desktop"])
    desktop.ingest([{"content": f"quokka decision {i} about the payments rollout", "source": "claude",
                     "kind": "note"} for i in range(5)])
    desktop.index()
    desktop.close()
    laptop = _home(tmp_path, "laptop", urls["laptop"])
    laptop.ingest([{"content": "zanzibar note", "source": "claude", "kind": "note"}])
    laptop.index()
    laptop.close()


def _desktop_hits(tmp_path: Path, url: str) -> dict[str, int]:
    home = _home(tmp_path, "desktop", url)
    try:
        return {strategy: sum("quokka" in r["content"] for r in home.context(
            query="quokka payments rollout", strategy=strategy, limit=10).results)
                for strategy in ("keyword", "semantic", "hybrid")}
    finally:
        home.close()


def _exact(url: str) -> None:
    """The statistics are the chunk rows' own counts, device by device."""
    assert _sql(url, "SELECT device, value FROM urchin_stats WHERE key = 'chunks' AND value > 0 ORDER BY 1") == \
        _sql(url, "SELECT device, count(*) FROM urchin_chunks GROUP BY 1 ORDER BY 1")
    assert _sql(url, "SELECT term, device, df FROM urchin_terms WHERE df > 0 ORDER BY 1, 2") == \
        _sql(url, "SELECT t, device, count(*) FROM urchin_chunks, unnest(terms) AS t GROUP BY 1, 2 ORDER BY 1, 2")


def _forge_stats(url: str) -> list[str]:
    """What the issue's laptop ran against its own statistics; returns the statements that went through."""
    went = []
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in (
                "UPDATE urchin_stats SET value = -1000000 WHERE device = 'laptop' AND key = 'chunks'",
                "INSERT INTO urchin_stats (device, key, value) VALUES ('laptop', 'chunks', -1000000) "
                "ON CONFLICT (device, key) DO UPDATE SET value = -1000000",
                "INSERT INTO urchin_terms (term, device, df) SELECT term, 'laptop', -1000000 FROM urchin_terms "
                "WHERE device = 'desktop' ON CONFLICT (term, device) DO UPDATE SET df = -1000000",
                "UPDATE urchin_terms SET df = 1000000000 WHERE device = 'laptop'",
                "DELETE FROM urchin_stats WHERE device = 'laptop'"):
            try:
                conn.execute(statement)
                went.append(statement)
            except psycopg.errors.InsufficientPrivilege:
                pass
    return went


def test_a_feeders_statistics_cannot_hide_another_devices_rows(tmp_path: Path, team_db: str,
                                                                feeders: dict[str, str]) -> None:  # noqa: F811
    _feed(tmp_path, feeders)
    assert _desktop_hits(tmp_path, feeders["desktop"]) == {"keyword": 5, "semantic": 5, "hybrid": 5}
    assert _forge_stats(feeders["laptop"]) == []
    assert _desktop_hits(tmp_path, feeders["desktop"]) == {"keyword": 5, "semantic": 5, "hybrid": 5}
    _exact(team_db)
    # nor around the counting trigger: a partition is the owner's, written only through urchin_chunks
    assert _sql(feeders["laptop"], "SELECT c.relname FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid "
                                   "WHERE has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')") == []
    with psycopg.connect(team_db, autocommit=True) as conn:        # not even the owner stores a negative count
        for statement in ("UPDATE urchin_stats SET value = -1", "UPDATE urchin_terms SET df = -1"):
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute(statement)


def test_a_devices_statistics_follow_its_rows_whatever_it_writes(tmp_path: Path, team_db: str,
                                                                 feeders: dict[str, str]) -> None:  # noqa: F811
    """The class: every way a feeder changes its own chunks (insert, replay, update, delete, forget,
    files replaced) moves its counts exactly, and nothing else does."""
    _feed(tmp_path, feeders)
    laptop = _home(tmp_path, "laptop", feeders["laptop"])
    laptop.ingest([{"content": f"zanzibar quokka rollout {i}", "source": "claude", "kind": "note"} for i in range(4)])
    laptop.index()
    root = tmp_path / "laptop-files" / "project"
    root.mkdir(parents=True)
    (root / "NOTES.md").write_text("# Plan\n\nThe zanzibar rollout plan.\n")
    laptop.workspace_add(str(root))
    laptop.index_files()
    (root / "NOTES.md").write_text("# Plan\n\nAnother quokka plan, rewritten.\n")
    laptop.index_files()
    _exact(team_db)
    laptop.forget(laptop.tail(2)[0].id)
    laptop.index()
    laptop.close()
    _exact(team_db)
    with psycopg.connect(feeders["laptop"], autocommit=True) as conn:   # its own rows, by hand
        conn.execute("UPDATE urchin_chunks SET terms = terms || terms[1:1], occurred_at = occurred_at + "
                     "interval '1 second' WHERE device = 'laptop'")
        conn.execute("UPDATE urchin_chunks SET terms = '{}' WHERE device = 'laptop' AND content LIKE '%%rollout 1'")
        _exact(team_db)
        conn.execute("DELETE FROM urchin_chunks WHERE device = 'laptop'")
    _exact(team_db)
    assert _sql(team_db, "SELECT value FROM urchin_stats WHERE device = 'laptop'") == [(0,)]
    assert _desktop_hits(tmp_path, feeders["desktop"]) == {"keyword": 5, "semantic": 5, "hybrid": 5}


def _partitions(url: str) -> int:
    return int(_sql(url, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'urchin_chunks'::regclass")[0][0])


def _month(delta: int) -> datetime:
    now = datetime.now(UTC)
    index = now.year * 12 + now.month - 1 + delta
    return datetime(index // 12, index % 12 + 1, 15, tzinfo=UTC)


def test_a_feeder_makes_partitions_only_within_the_window(tmp_path: Path, team_db: str,
                                                          feeders: dict[str, str]) -> None:  # noqa: F811
    _feed(tmp_path, feeders)
    before = _partitions(team_db)
    outside = [datetime(1, 1, 1, tzinfo=UTC), datetime(1000, 6, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC),
               _month(-WINDOW_BACK - 1), _month(WINDOW_AHEAD + 1), *(_month(12 * k) for k in range(2, 60)),
               *(_month(-12 * k) for k in range(31, 90))]
    inside = [_month(-WINDOW_BACK), _month(WINDOW_AHEAD), _month(-5)]
    with psycopg.connect(feeders["laptop"], autocommit=True) as conn:
        for moment in outside + inside:
            conn.execute("SELECT urchin_ensure_partition(%s)", (moment,))
        conn.execute("SELECT urchin_ensure_partition('infinity'), urchin_ensure_partition('-infinity')")
    assert _partitions(team_db) <= before + len(inside)
    names = {r[0] for r in _sql(team_db, "SELECT inhrelid::regclass::text FROM pg_inherits "
                                         "WHERE inhparent = 'urchin_chunks'::regclass")}
    assert {f"urchin_chunks_{m.year:04d}m{m.month:02d}" for m in inside} <= names
    assert _desktop_hits(tmp_path, feeders["desktop"]) == {"keyword": 5, "semantic": 5, "hybrid": 5}


def test_an_event_at_any_valid_time_is_stored_and_served(tmp_path: Path, team_db: str,
                                                         feeders: dict[str, str]) -> None:  # noqa: F811
    moments = [datetime(1970, 1, 1, tzinfo=UTC), datetime(1985, 3, 4, tzinfo=UTC), _month(-WINDOW_BACK - 2),
               _month(WINDOW_AHEAD + 3), datetime(9999, 12, 31, 23, 59, tzinfo=UTC), datetime.now(UTC)]
    laptop = _home(tmp_path, "laptop", feeders["laptop"])
    laptop.ingest([{"content": f"wombat chronicle {i}", "source": "claude", "kind": "note",
                    "timestamp": m.isoformat().replace("+00:00", "Z")} for i, m in enumerate(moments)])
    assert laptop.index().inserted == len(moments)
    for strategy in ("keyword", "semantic", "hybrid"):
        found = [r for r in laptop.context(query="wombat chronicle", strategy=strategy, limit=20).results
                 if "wombat" in r["content"]]
        assert len(found) == len(moments), strategy
    laptop.close()
    where = dict(_sql(team_db, "SELECT content, tableoid::regclass::text FROM urchin_chunks "
                               "WHERE content LIKE 'wombat%%'"))
    assert [where[f"wombat chronicle {i}"] == "urchin_chunks_default" for i in range(len(moments))] == \
        [True, True, True, True, True, False]
    _exact(team_db)


# ---- a database of b0177b1 (schema 6), a feeder's forged counts in it -----------------------------
_B0177B1 = "b0177b1"
# an earlier release's code, under its module names (tests/fixtures/ is left alone by the renames)
_OLD_FEED = (Path(__file__).parent / "fixtures" / "old_release" / "team_feed.py").read_text()


def test_a_database_of_b0177b1_with_forged_counts_migrates_and_is_repaired(tmp_path: Path, team_db: str) -> None:
    old = urchin_package_at(_B0177B1, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(old), "URCHIN_NO_DAEMON": "1"}
    done = subprocess.run([sys.executable, "-c", _OLD_FEED, team_db, str(tmp_path), str(old)], env=env, cwd=old,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _sql(team_db, "SELECT max(version) FROM urchin_migrations") == [(6,)]
    urls = {name: make_conninfo(team_db, user=feeder_role(name), password=f"{name}-pw") for name in ACCOUNTS}
    assert _forge_stats(urls["laptop"]) != []                    # schema 6 lets the laptop write its counts
    with psycopg.connect(urls["laptop"], autocommit=True) as conn:
        conn.execute("SELECT urchin_ensure_partition(%s)", (datetime(1000, 1, 1, tzinfo=UTC),))
    PostgresIndex(team_db).status()                              # the owner's next connection migrates
    assert _sql(team_db, "SELECT max(version) FROM urchin_migrations") == [(MIGRATIONS[-1][0],)]
    _exact(team_db)                                              # counted again from the rows
    assert _forge_stats(urls["laptop"]) == []                    # and no longer the feeder's to write
    old_months = "SELECT count(*) FROM pg_inherits WHERE inhparent = 'urchin_chunks'::regclass " \
                 "AND inhrelid::regclass::text ~ '^urchin_chunks_(1000|1985)m'"
    assert _sql(team_db, old_months) == [(2,)]
    setup_roles(team_db)                                         # folds them into the default partition
    assert _sql(team_db, old_months) == [(0,)]
    assert _sql(team_db, "SELECT tableoid::regclass::text FROM urchin_chunks WHERE content LIKE 'wombat%%'") == \
        [("urchin_chunks_default",)]
    _exact(team_db)
    laptop = _home(tmp_path, "laptop", urls["laptop"])
    assert [r["content"] for r in laptop.context(query="wombat chronicle", limit=5).results] == \
        ["wombat chronicle of 1985"]
    laptop.close()
    assert _forge_stats(urls["laptop"]) == []
    assert _desktop_hits(tmp_path, urls["desktop"]) == {"keyword": 5, "semantic": 5, "hybrid": 5}
    before = _partitions(team_db)
    with psycopg.connect(urls["laptop"], autocommit=True) as conn:
        conn.execute("SELECT urchin_ensure_partition(%s)", (datetime(1200, 1, 1, tzinfo=UTC),))
        conn.execute("SELECT urchin_ensure_partition(%s)", (datetime.now(UTC) + timedelta(days=3 * 365),))
    assert _partitions(team_db) == before
