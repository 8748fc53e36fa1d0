"""What PostgreSQL keeps of a forgotten row: Urchin's own server is vacuumed after each forget and
purged on request (`--purge`); a feeder of a shared database leaves the VACUUM to its owner."""

from __future__ import annotations

from pathlib import Path

import pytest

from urchin.config import Settings
from urchin.facade import Memory


def _events(n: int) -> list[dict[str, object]]:
    return [{"id": f"ev-{i:03d}", "timestamp": f"2026-05-04T10:{i // 60:02d}:{i % 60:02d}Z",
             "content": f"note number {i} about {'pelican' if i % 3 == 0 else 'heron'}", "source": "manual"}
            for i in range(n)]


def _sql(url: str, query: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return list(conn.execute(query).fetchall())


def _data_files(folder: Path) -> bytes:
    """Every data file of a server but its WAL (tables, indexes, TOAST, catalogs, free space maps)."""
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file() and "pg_wal" not in p.parts)


def test_a_forget_on_urchins_own_postgres_vacuums_and_purge_leaves_no_byte(urchin_home: Path) -> None:
    """Urchin's own (embedded) server: every forget VACUUMs the tables it deleted from, and `purge`
    rewrites them (VACUUM FULL, statistics included) so no data file keeps the forgotten text (issue 34 I)."""
    pytest.importorskip("psycopg", reason="the `postgres` extra is not installed")
    import random
    import string

    import psycopg

    from urchin.hybrid.embedded import EmbeddedPostgres

    touched = ["urchin_chunks", "urchin_embeddings", "urchin_terms", "urchin_stats"]   # what a forget changes
    rng = random.Random()
    plain, strong = (prefix + "".join(rng.choices(string.ascii_lowercase, k=16)) for prefix in ("plain", "strong"))
    code = "ZQX-7734-" + "".join(rng.choices(string.ascii_uppercase, k=16))    # a secret a rule added later finds
    memory = Memory(Settings.resolve(urchin_home))     # no database URL: the embedded server, Urchin's own
    try:
        memory.ingest(_events(20) + [{"id": "plain", "content": f"the door code is {plain}"},
                                     {"id": "strong", "content": f"the safe code is {strong}", "title": strong},
                                     {"id": "leaky", "content": f"the gate code is {code}"}])
        assert memory.index().inserted == 23
        folder = memory.settings.pg_dir.resolve()
        url = EmbeddedPostgres(memory.settings.pg_dir, stop_at_exit=False, start=False).url()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")      # as autovacuum would: pg_statistic now samples the columns' values
            conn.execute("CHECKPOINT")
        assert plain.encode() in _data_files(folder) and strong.encode() in _data_files(folder)

        assert memory.forget(["plain"], confirm=True).forgotten == 1
        with psycopg.connect(url, autocommit=True) as conn:
            leaves = [r[0] for r in conn.execute(
                "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relkind = 'r' AND (c.relname = ANY(%s) OR "
                "c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'urchin_chunks'::regclass))",
                (touched,)).fetchall()]
            vacuumed = dict(conn.execute("SELECT relname, last_vacuum IS NOT NULL AND n_dead_tup = 0 "
                                         "FROM pg_stat_user_tables WHERE relname = ANY(%s)", (leaves,)).fetchall())
        assert len(leaves) >= len(touched) and vacuumed == dict.fromkeys(leaves, True)

        result = memory.forget(["strong"], confirm=True, purge=True)
        assert result.forgotten == 1 and any("purged" in note for note in result.notes), result.notes
        files = _data_files(folder)
        assert strong.encode() not in files and plain.encode() not in files
        assert memory.context(query="note number 5").results     # the index still serves

        # the redact rewrite's class: a row's old text, replaced by the rewrite, leaves the files too
        (urchin_home / "config.toml").write_text('[redact]\nextra = { gate_code = "ZQX-[0-9]{4}-[A-Z]+" }\n')
        assert code.encode() in _data_files(folder)
        again = Memory(Settings.resolve(urchin_home))
        try:
            done = again.redact_rewrite(purge=True)
            assert done["rewritten"] == 1 and any("purged" in note for note in done["notes"]), done
            assert code.encode() not in _data_files(folder)
        finally:
            again.close()
    finally:
        memory.close()


def test_a_feeder_of_a_shared_database_never_vacuums(pg_settings: Settings, pg_url: str) -> None:
    """URCHIN_DATABASE_URL: the rows go, the VACUUM is the owner's (contrib/team/TEAM.md), even with purge."""
    memory = Memory(pg_settings)
    try:
        memory.ingest(_events(6))
        memory.index()
        result = memory.forget(["ev-001", "ev-002"], confirm=True, purge=True)
        assert result.forgotten == 2 and any("contrib/team/TEAM.md" in note for note in result.notes), result.notes
        assert _sql(pg_url, "SELECT count(*) FROM urchin_chunks WHERE chunk_id IN ('ev-001', 'ev-002')") == [(0,)]
        assert _sql(pg_url, "SELECT count(*) FROM pg_stat_user_tables WHERE last_vacuum IS NOT NULL") == [(0,)]
    finally:
        memory.close()
