"""Where the Postgres feed's time goes: per-row cost of each index, of `to_tsvector`, and of the Python side.

    python bench/bench_feed_profile.py [--events 30000] [--rounds 3]

Generates the synthetic journal of `bench_index.py`, turns it into rows (timed: the feeder's Python
side), COPYs them once into a staging table, then times the feed's server statement (INSERT ... SELECT
... ON CONFLICT DO NOTHING into the partitioned `urchin_chunks`) with indexes dropped one at a time
inside a transaction that is rolled back, so every variant starts from the same empty schema. Variants
alternate round by round (the machine is shared); medians are reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_index import copy_into, generate  # noqa: E402
from urchin.hybrid.feeder import _rows  # noqa: E402
from urchin.hybrid.pg_writer import COLUMNS  # noqa: E402
from urchin.journal import Journal  # noqa: E402

GIN = ("urchin_chunks_tsv", "urchin_chunks_tags", "urchin_chunks_terms")   # a single user's (no trigram: issue 37)
BTREE = ("urchin_chunks_ws_time", "urchin_chunks_time", "urchin_chunks_session", "urchin_chunks_doc",
         "urchin_chunks_device", "urchin_chunks_source_kind")
GIN_DEF = {"urchin_chunks_tsv": "gin (tsv)", "urchin_chunks_tags": "gin (tags)", "urchin_chunks_terms": "gin (terms)"}
BTREE_DEF = {"urchin_chunks_ws_time": "btree (workspace, occurred_at)", "urchin_chunks_time": "btree (occurred_at)",
             "urchin_chunks_session": "btree (session, occurred_at)", "urchin_chunks_doc": "btree (doc_id)",
             "urchin_chunks_device": "btree (device, occurred_at)", "urchin_chunks_source_kind": "btree (source, kind)"}
BIG = {"gin_pending_list_limit": "1GB", "work_mem": "64MB", "maintenance_work_mem": "256MB"}
NO_TRIGGER = {"session_replication_role": "replica"}     # statement triggers off: the term counting
# label: (indexes dropped, tsv expression dropped, settings, after the insert: "" | "flush" | "rebuild")
VARIANTS: dict[str, tuple[tuple[str, ...], bool, dict[str, str], str]] = {
    "every index (as fed row by row)": ((), False, {}, ""),
    "- GIN on tsv": (("urchin_chunks_tsv",), False, {}, ""),
    "- GIN on terms": (("urchin_chunks_terms",), False, {}, ""),
    "- GIN on tags": (("urchin_chunks_tags",), False, {}, ""),
    "- the 6 btrees": (BTREE, False, {}, ""),
    "- every GIN (the backfill)": (GIN, False, {}, ""),
    "- every GIN, no term-counting trigger": (GIN, False, NO_TRIGGER, ""),
    "- every GIN and btree": (GIN + BTREE, False, {}, ""),
    "- every GIN, tsv not computed": (GIN, True, {}, ""),
    "primary key only, tsv not computed": (GIN + BTREE, True, {}, ""),
    "- every GIN, then CREATE INDEX of the 3 GINs": (GIN, False, BIG, "rebuild"),
    "- every GIN and btree, then CREATE INDEX of all 9": (GIN + BTREE, False, BIG, "rebuild"),
}


def backend_cpu(conn: Any) -> float:
    """CPU seconds (user + sys) the server process behind `conn` has used: steadier than wall on a busy machine."""
    pid = conn.info.backend_pid
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_variant(conn: Any, drop: tuple[str, ...], no_tsv: bool, settings: dict[str, str], after: str) -> float:
    """CPU seconds of the server process for the feed's INSERT with `drop` indexes gone (and tsv a plain
    column), then `after` (flush the GIN pending lists, or build the dropped GINs again); rolled back."""
    try:
        for name, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        for index in drop:
            conn.execute(f"DROP INDEX {index}")
        if no_tsv:
            conn.execute("ALTER TABLE urchin_chunks ALTER COLUMN tsv DROP EXPRESSION")
        started = backend_cpu(conn)
        conn.execute(f"INSERT INTO urchin_chunks ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM stage "
                     "ON CONFLICT (device, chunk_id, occurred_at) DO NOTHING")
        if after == "flush":
            conn.execute("SELECT gin_clean_pending_list(i.indexrelid) FROM pg_index i JOIN pg_class c "
                         "ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
                         "WHERE a.amname = 'gin' AND c.relkind = 'i'")
        elif after == "rebuild":
            for index in drop:
                conn.execute(f"CREATE INDEX {index} ON urchin_chunks USING {GIN_DEF.get(index) or BTREE_DEF[index]}")
        return backend_cpu(conn) - started
    finally:
        conn.rollback()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=None, help="comma-separated variant numbers (1-based)")
    parser.add_argument("--journal", type=Path, default=None,
                        help="feed the first --events lines of this journal (e.g. bench/gen_journal.py's) instead")
    args = parser.parse_args(argv)
    from urchin.hybrid.embedded import EmbeddedPostgres
    from urchin.hybrid.postgres import PostgresIndex

    with tempfile.TemporaryDirectory(prefix="urchin-bench-feedprof-") as tmp:
        folder = Path(tmp)
        journal = Journal(folder / "journal" / "events.jsonl", "never")
        if args.journal:
            journal.path.parent.mkdir(parents=True, exist_ok=True)
            with args.journal.open("rb") as source, journal.path.open("wb") as out:
                out.writelines(line for _, line in zip(range(args.events), source, strict=False))
        else:
            generate(journal.path, args.events)
        started = time.perf_counter()
        result = journal.read_from(0)
        rows = _rows(result.lines, frozenset(), "bench", journal.event)
        prep = time.perf_counter() - started
        print(f"{len(rows):,} rows; Python side (read + parse + event_row): {prep / len(rows) * 1e6:.0f} us/row "
              f"({len(rows) / prep:,.0f} rows/s on one core)")
        server = EmbeddedPostgres(folder / "pg", relocate_as_root=False)
        backend = PostgresIndex(server.url)
        conn = backend.conn
        backend._ensure_partitions(rows)
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE stage (LIKE urchin_chunks INCLUDING DEFAULTS)")
            took = copy_into(conn, "stage", rows)
        print(f"COPY into the unindexed temp table: {took / len(rows) * 1e6:.0f} us/row")
        with conn.transaction():
            conn.execute("ANALYZE stage")
        times: dict[str, list[float]] = {label: [] for label in VARIANTS}
        tsv_times: list[float] = []
        chosen = list(VARIANTS.items())
        if args.only:
            chosen = [chosen[int(i) - 1] for i in args.only.split(",")]
        for _ in range(args.rounds):
            for label, (drop, no_tsv, settings, after) in chosen:
                times[label].append(run_variant(conn, drop, no_tsv, settings, after))
            with conn.transaction():
                started = backend_cpu(conn)
                conn.execute("SELECT count(*) FROM stage WHERE (CASE WHEN title IS NULL THEN ''::tsvector "
                             "ELSE setweight(to_tsvector('english'::regconfig, title), 'A') END || "
                             "setweight(to_tsvector('english'::regconfig, content || ' ' || source), 'B')) "
                             "IS NOT NULL").fetchone()
                tsv_times.append(backend_cpu(conn) - started)
        n = len(rows)
        base = statistics.median(times[chosen[0][0]]) if times[chosen[0][0]] else None
        print(f"\n| variant | server CPU us/row (median of {args.rounds}) | rows/s | vs first |")
        print("|---|---|---|---|")
        for label, _ in chosen:
            med = statistics.median(times[label])
            print(f"| {label} | {med / n * 1e6:.0f} | {n / med:,.0f} | "
                  f"{(med / base) if base else 0:.2f} |")
        med = statistics.median(tsv_times)
        print(f"| to_tsvector alone (SELECT over the staged rows) | {med / n * 1e6:.0f} | {n / med:,.0f} | |")
        backend.close()
        server.stop()


if __name__ == "__main__":
    main()
