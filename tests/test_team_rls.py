"""Issue 34 D: on a shared database a feeder changes nothing of another device's, in any table.

Two feeder roles (laptop as ana, desktop as bo) feed events, workspace files and vectors; then the
laptop's role attacks every table the catalog lists (a new table without protection fails here):
inserts with the desktop's device or account, updates, deletes, truncates. The desktop's rows stay
byte-identical and its answers unchanged. An event carrying another device's id is another row.
A database of the release before (fbbfdfb, set up and fed by that release's own code) migrates.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.conftest import REPO, run_urchin
from urchin.config import Settings
from urchin.errors import DatabaseError
from urchin.facade import Memory
from urchin.hybrid.pg_roles import add_feeder, feeder_role, setup_roles
from urchin.hybrid.postgres import PostgresIndex
from urchin.hybrid.schema import MIGRATIONS

MAIN = "fbbfdfb"          # the release before issue 34: its schema is MIGRATIONS[:5]
ACCOUNTS = {"laptop": "ana", "desktop": "bo"}
WORDS = {"laptop": "zanzibar", "desktop": "quokka"}
MODEL = "test-model"


def _sql(url: str, query: Any, args: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, args).fetchall()


def _home(tmp_path: Path, name: str, url: str) -> Memory:
    return Memory(Settings.resolve(tmp_path / name, database_url=url, device=name, account=ACCOUNTS[name]))


def _feed(tmp_path: Path, name: str, url: str, vectors: bool = True) -> list[str]:
    """Events, a workspace root named `project` (the same name on both machines) and vectors of one
    device, through its own role. Returns its event ids."""
    home = _home(tmp_path, name, url)
    word = WORDS[name]
    home.ingest([{"content": f"{word} decision {i} about the payments rollout", "workspace": "ws",
                  "session": f"s-{name}", "source": "claude", "kind": "note"} for i in range(3)])
    root = tmp_path / f"{name}-files" / "project"
    root.mkdir(parents=True)
    (root / "NOTES.md").write_text(f"# Plan\n\nThe {word} rollout plan of {name}.\n")
    home.workspace_add(str(root))
    home.index()
    assert home.index_files().indexed == 1
    ids = [e.id for e in home.tail(10)]
    home.close()
    if vectors:
        _embed(url, name)
    return ids


def _embed(url: str, device: str) -> None:
    backend = PostgresIndex(url)
    todo = backend.pending_embeddings(MODEL, 100, device)
    assert todo
    backend.write_embeddings(MODEL, [(key, [1.0, 0.0, 0.5]) for key, *_ in todo])
    backend.close()


@pytest.fixture
def feeders(team_db: str) -> dict[str, str]:
    setup_roles(team_db, owner_password="owner-pw", reader_password="reader-pw")
    urls = {name: add_feeder(team_db, name, f"{name}-pw", account)["url"] for name, account in ACCOUNTS.items()}
    return {**urls, "reader": make_conninfo(team_db, user="urchin_reader", password="reader-pw")}


# ---- every table, from the catalog -------------------------------------------------------------
def _tables(url: str) -> list[str]:
    return [r[0] for r in _sql(url, "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                    "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1")]


def _columns(url: str, table: str) -> list[str]:
    return [r[0] for r in _sql(url, "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                                    "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum", (table,))]


def _theirs(url: str, victim: str) -> dict[str, tuple[Any, ...]]:
    """Per table: a digest of the victim's rows (every row of a table with no device column)."""
    out = {}
    with psycopg.connect(url) as conn:
        for table in _tables(url):
            keyed = "device" in _columns(url, table)
            where = sql.SQL("WHERE t.device = {}").format(sql.Literal(victim)) if keyed else sql.SQL("")
            out[table] = conn.execute(sql.SQL("SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) "
                                              "FROM {} AS t {}").format(sql.Identifier(table), where)).fetchone()
    return out


def _attack(admin: str, attacker: str, me: str, victim: str) -> list[str]:
    """Everything `attacker` (the role feeding `me`) must not be able to do to `victim`'s rows; returns
    what it could. Writes first (rows of its own are their templates), then deletes and truncates."""
    allowed: list[str] = []
    tables = _tables(admin)
    with psycopg.connect(attacker, autocommit=True) as conn:
        # a temporary table is found before the schema's: a shadow map claiming the victim's device
        # must not be what row-level security reads
        conn.execute("CREATE TEMP TABLE urchin_feeders AS SELECT * FROM public.urchin_feeders")
        conn.execute("DELETE FROM pg_temp.urchin_feeders WHERE role = current_user")
        conn.execute("INSERT INTO pg_temp.urchin_feeders (role, device, account) VALUES (current_user, %s, %s)",
                     (victim, ACCOUNTS[victim]))

        def must_fail(table: str, statement: sql.Composable, zero_ok: bool) -> None:
            try:
                cur = conn.execute(statement)
            except psycopg.errors.InsufficientPrivilege:
                return                       # refused (row-level security or no privilege)
            if not (zero_ok and cur.rowcount == 0):
                allowed.append(f"{table}: {statement.as_string(conn)} -> {cur.rowcount} rows")

        for table in tables:
            t = sql.Identifier("public", table)
            assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(t)).fetchone() is not None   # reads
            columns = _columns(admin, table)
            names = sql.SQL(", ").join(map(sql.Identifier, columns))
            if "device" not in columns:   # written by the owner only
                must_fail(table, sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} LIMIT 1").format(t, names, names, t),
                          False)
                must_fail(table, sql.SQL("UPDATE {} SET {} = {}").format(t, sql.Identifier(columns[0]),
                                                                         sql.Identifier(columns[0])), True)
                continue
            forged = {"device": sql.Literal(victim)}
            as_victim = sql.SQL(", ").join(forged.get(c, sql.Identifier(c)) for c in columns)
            mine = sql.SQL("WHERE device = {}").format(sql.Literal(me))
            must_fail(table, sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} {} LIMIT 1").format(
                t, names, as_victim, t, mine), False)
            if "account" in columns:     # own device, another account
                as_other = sql.SQL(", ").join(sql.Literal(ACCOUNTS[victim]) if c == "account" else sql.Identifier(c)
                                              for c in columns)
                must_fail(table, sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} {} LIMIT 1").format(
                    t, names, as_other, t, mine), False)
                must_fail(table, sql.SQL("UPDATE {} SET account = {} {}").format(
                    t, sql.Literal(ACCOUNTS[victim]), mine), True)
            must_fail(table, sql.SQL("UPDATE {} SET device = {} {}").format(t, sql.Literal(victim), mine), True)
            for column in columns:
                must_fail(table, sql.SQL("UPDATE {} SET {} = {} WHERE device = {}").format(
                    t, sql.Identifier(column), sql.Identifier(column), sql.Literal(victim)), True)
        for table in tables:
            t = sql.Identifier("public", table)
            keyed = "device" in _columns(admin, table)
            must_fail(table, sql.SQL("DELETE FROM {} WHERE device = {}").format(t, sql.Literal(victim)) if keyed
                      else sql.SQL("DELETE FROM {}").format(t), True)
            must_fail(table, sql.SQL("TRUNCATE {}").format(t), False)
        for table in tables:           # what the attacker ran: its own rows may go, no one else's
            if table in ("urchin_terms", "urchin_stats", "urchin_embeddings", "urchin_files", "urchin_chunks"):
                try:
                    conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier("public", table)))
                except psycopg.errors.InsufficientPrivilege:
                    pass                 # the reader: nothing at all
    return allowed


def _context(tmp_path: Path, name: str, url: str, query: str, strategy: str) -> list[dict[str, Any]]:
    env = {"URCHIN_HOME": str(tmp_path / name), "URCHIN_DATABASE_URL": url, "URCHIN_DEVICE_ID": name,
           "URCHIN_ACCOUNT_ID": ACCOUNTS[name], "URCHIN_NO_DAEMON": "1"}
    done = run_urchin("context", query, "--strategy", strategy, "--limit", "20", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["results"])


def _own_answers(tmp_path: Path, url: str, ids: list[str]) -> None:
    """The desktop's context, in every strategy, shows its own text under its own ids."""
    for strategy in ("keyword", "semantic", "hybrid"):
        found = {r["id"]: r for r in _context(tmp_path, "desktop", url, "quokka payments rollout", strategy)
                 if r.get("device") == "desktop" and r["kind"] == "note"}
        assert set(ids) <= set(found), strategy
        assert all(found[i]["content"].startswith("quokka decision") for i in ids), strategy
        assert all(found[i]["account"] == "bo" for i in ids), strategy


def _check_isolation(tmp_path: Path, admin: str, urls: dict[str, str], victim_ids: list[str]) -> None:
    before = _theirs(admin, "desktop")
    keyed = [t for t in before if "device" in _columns(admin, t)]
    partitions = {r[0] for r in _sql(admin, "SELECT relname FROM pg_class WHERE relispartition")}
    assert all(before[t][0] > 0 for t in keyed if t not in partitions), before   # rows in every device table
    assert {"urchin_chunks", "urchin_embeddings", "urchin_files", "urchin_terms", "urchin_stats",
            "urchin_cursors", "urchin_journal_heads"} <= set(keyed)
    allowed = _attack(admin, urls["laptop"], "laptop", "desktop")
    assert allowed == []
    if "reader" in urls:                                      # and the reader changes nothing at all
        assert _attack(admin, urls["reader"], "laptop", "desktop") == []
    assert _theirs(admin, "desktop") == before
    _own_answers(tmp_path, urls["desktop"], victim_ids)


def test_a_feeder_changes_nothing_of_another_devices_in_any_table(tmp_path: Path, team_db: str,
                                                                   feeders: dict[str, str]) -> None:
    theirs = _feed(tmp_path, "desktop", feeders["desktop"])
    spoof = _home(tmp_path / "spoof", "laptop", feeders["laptop"])    # the laptop's chunk with the desktop's id
    spoof.ingest([{"id": theirs[0], "content": "zanzibar spoof", "source": "claude", "kind": "note"}])
    spoof.index()
    spoof.close()
    _feed(tmp_path, "laptop", feeders["laptop"])
    laptop = _home(tmp_path, "laptop", feeders["laptop"])       # the laptop reads what team search shows
    seen = laptop.context(query="quokka payments rollout", limit=20).results
    assert sum(r["device"] == "desktop" and "quokka" in r["content"] for r in seen) >= 3
    laptop.close()
    _check_isolation(tmp_path, team_db, feeders, theirs)


def test_an_event_with_another_devices_id_is_another_row(tmp_path: Path, team_db: str,
                                                          feeders: dict[str, str]) -> None:
    desktop = _home(tmp_path, "desktop", feeders["desktop"])
    desktop.ingest([{"content": f"quokka decision {i} about the payments rollout", "workspace": "ws",
                     "source": "claude", "kind": "note"} for i in range(3)])
    real = desktop.tail(10)
    desktop.close()
    laptop = _home(tmp_path, "laptop", feeders["laptop"])     # same ids and times, fed first
    laptop.ingest([{"id": e.id, "timestamp": e.timestamp, "content": "quokka payments rollout forged by the laptop",
                    "source": "claude", "kind": "note", "workspace": "ws"} for e in real])
    laptop.index()
    laptop.close()
    desktop = _home(tmp_path, "desktop", feeders["desktop"])
    assert desktop.index().inserted == 3
    desktop.close()
    assert _sql(team_db, "SELECT device, count(*) FROM urchin_chunks GROUP BY 1 ORDER BY 1") == [
        ("desktop", 3), ("laptop", 3)]
    _own_answers(tmp_path, feeders["desktop"], [e.id for e in real])
    forged = _context(tmp_path, "desktop", feeders["desktop"], "forged by the laptop", "keyword")
    assert {(r["device"], r["account"]) for r in forged if "forged" in r["content"]} == {("laptop", "ana")}


def test_a_feeders_rows_carry_its_bound_account_whatever_the_events_say(tmp_path: Path, team_db: str,
                                                                        feeders: dict[str, str]) -> None:
    claims = Memory(Settings.resolve(tmp_path / "laptop", database_url=feeders["laptop"], device="laptop",
                                     account="bo"))           # the laptop's machine claims the desktop's account
    claims.ingest([{"content": "zanzibar note", "source": "claude", "kind": "note"}])
    claims.index()
    claims.close()
    assert _sql(team_db, "SELECT DISTINCT account FROM urchin_chunks") == [("ana",)]
    again = add_feeder(team_db, "laptop", account="ana-2")        # the owner rebinds it
    assert again["account"] == "ana-2" and again["password"] is None
    kept = add_feeder(team_db, "laptop")                            # not given: kept
    assert kept["account"] == "ana-2"


# ---- an existing database of the release before -----------------------------------------------
# an earlier release's code, under its module names (tests/fixtures/ is left alone by the renames)
_OLD_SETUP = (Path(__file__).parent / "fixtures" / "old_release" / "team_setup.py").read_text()


def urchin_package_at(commit: str, tmp_path: Path) -> Path:
    """A folder holding the `urchin` package of `commit`, from this repository's history (a migration
    test runs the code of an earlier release against the shared database)."""
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", commit + "^{commit}"],
                                                      capture_output=True).returncode != 0:
        pytest.skip(f"commit {commit} is not in this checkout's history")
    dest = tmp_path / f"urchin-{commit}"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "urchin"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def test_a_database_of_the_release_before_migrates_and_is_then_protected(tmp_path: Path, team_db: str) -> None:
    old = urchin_package_at(MAIN, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(old), "URCHIN_NO_DAEMON": "1"}
    done = subprocess.run([sys.executable, "-c", _OLD_SETUP, team_db, str(tmp_path), str(old)], env=env, cwd=old,
                          capture_output=True, text=True, timeout=120)      # cwd: `-c` puts it first on the path
    assert done.returncode == 0, done.stderr
    assert _sql(team_db, "SELECT max(version) FROM urchin_migrations") == [(5,)]
    before = {"chunks": _sql(team_db, "SELECT device, doc_type, account, count(*) FROM urchin_chunks "
                                      "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"),
              "content": _sql(team_db, "SELECT md5(string_agg(chunk_id || content, ',' ORDER BY chunk_id)) "
                                       "FROM urchin_chunks"),
              "df": _sql(team_db, "SELECT sum(df) FROM urchin_terms"),
              "files": _sql(team_db, "SELECT count(*) FROM urchin_files"),
              # a vector is kept when its chunk id is one device's (the file's is both machines')
              "vectors": _sql(team_db, "SELECT count(*) FILTER (WHERE (SELECT count(DISTINCT device) FROM "
                                       "urchin_chunks c WHERE c.chunk_id = e.chunk_id) = 1), count(*) "
                                       "FROM urchin_embeddings e")}
    assert before["vectors"] == [(6, 7)]
    assert before["files"] == [(1,)]             # one catalogue row for two machines' `project/NOTES.md`
    urls = {name: make_conninfo(team_db, user=feeder_role(name), password=f"{name}-pw") for name in ACCOUNTS}
    with pytest.raises(DatabaseError, match="urchin db setup"):   # binding an account needs the new schema
        add_feeder(team_db, "laptop", account="ana")

    PostgresIndex(team_db).status()               # the next connection with the rights migrates by itself
    assert _sql(team_db, "SELECT max(version) FROM urchin_migrations") == [(MIGRATIONS[-1][0],)]
    assert _sql(team_db, "SELECT device, doc_type, account, count(*) FROM urchin_chunks "
                         "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3") == before["chunks"]
    assert _sql(team_db, "SELECT md5(string_agg(chunk_id || content, ',' ORDER BY chunk_id)) "
                         "FROM urchin_chunks") == before["content"]
    assert _sql(team_db, "SELECT sum(df) FROM urchin_terms") == before["df"]
    assert _sql(team_db, "SELECT sum(value) FROM urchin_stats WHERE key = 'chunks'") == \
        _sql(team_db, "SELECT count(*) FROM urchin_chunks")
    assert _sql(team_db, "SELECT count(*), count(*) FILTER (WHERE device IN ('laptop', 'desktop')) "
                         "FROM urchin_embeddings") == [(6, 6)]
    assert _sql(team_db, "SELECT device FROM urchin_files") in ([("laptop",)], [("desktop",)])
    assert dict(_sql(team_db, "SELECT device, account FROM urchin_feeders")) == ACCOUNTS

    setup_roles(team_db)                          # the documented step after an upgrade: idempotent
    victim = [r[0] for r in _sql(team_db, "SELECT chunk_id FROM urchin_chunks WHERE device = 'desktop' "
                                          "AND doc_type = 'event'")]
    for name in ACCOUNTS:                         # both feed on with the new code (files: their own catalogue)
        home = _home(tmp_path, name, urls[name])
        home.ingest([{"content": f"{WORDS[name]} later note", "source": "claude", "kind": "note"}])
        home.index()
        home.index_files()
        home.close()
        _embed(urls[name], name)
    assert _sql(team_db, "SELECT device, count(*) FROM urchin_files GROUP BY 1 ORDER BY 1") == [
        ("desktop", 1), ("laptop", 1)]
    _check_isolation(tmp_path, team_db, urls, victim)


def test_a_feeder_role_used_for_another_device_says_which_device_it_feeds(tmp_path: Path,
                                                                          feeders: dict[str, str]) -> None:
    """The laptop's role on the desktop: not PostgreSQL's row-level-security text, but which device the
    role feeds and which this machine is, from the feed, the file walk and `urchin doctor`; nothing written."""
    desk = _home(tmp_path, "desktop", feeders["laptop"])
    desk.ingest([{"content": "quokka on the wrong role", "source": "manual"}])
    root = tmp_path / "desk-files"
    root.mkdir()
    (root / "A.md").write_text("# A\n\nquokka notes\n")
    desk.workspace_add(str(root))
    said = "this role feeds device laptop, not desktop"
    for run in (desk.index, desk.index_files):
        with pytest.raises(DatabaseError) as caught:
            run()
        assert said in caught.value.message and "row-level security" not in caught.value.message
    desk.close()
    assert _sql(feeders["reader"], "SELECT count(*) FROM urchin_chunks") == [(0,)]
    env = {"URCHIN_HOME": str(tmp_path / "desktop"), "URCHIN_DATABASE_URL": feeders["laptop"],
           "URCHIN_DEVICE_ID": "desktop", "URCHIN_ACCOUNT_ID": "bo"}
    doctor = run_urchin("doctor", "--json", env=env)
    [check] = [c for c in map(json.loads, doctor.stdout.splitlines()) if c["check"] == "database"]
    assert check["level"] == "fail" and said in check["detail"] and "laptop-pw" not in doctor.stdout
    right = run_urchin("doctor", "--json", env={**env, "URCHIN_DEVICE_ID": "laptop"})
    [check] = [c for c in map(json.loads, right.stdout.splitlines()) if c["check"] == "database"]
    assert check["level"] == "ok" and check["detail"].endswith("feeding device laptop)")


def test_team_md_sets_up_a_plain_postgresql_without_docker(team_db: str, tmp_path: Path) -> None:
    """TEAM.md's SQL for a plain server, as a superuser runs it in psql (names made unique: roles are
    cluster-wide), then `urchin db setup` as that administrator and a feeder role feeding its device."""
    import re
    import uuid

    text = (REPO / "contrib" / "team" / "TEAM.md").read_text()
    block = re.search(r"```sql\n(.*?)```", text, re.S).group(1)   # type: ignore[union-attr]
    suffix = uuid.uuid4().hex[:8]
    admin, db = f"urchin_admin_{suffix}", f"urchin_{suffix}"
    block = block.replace("urchin_admin", admin).replace("DATABASE urchin ", f"DATABASE {db} ")
    superuser = make_conninfo(team_db, dbname="postgres")
    conn = psycopg.connect(superuser, autocommit=True)
    try:
        for line in (ln for ln in block.splitlines() if ln.strip() and not ln.startswith("--")):
            if line.startswith("\\c "):
                conn.close()
                conn = psycopg.connect(make_conninfo(team_db, dbname=db), autocommit=True)
            else:
                conn.execute(line)
        admin_url = make_conninfo(team_db, dbname=db, user=admin, password="a long random secret")
        with psycopg.connect(superuser, autocommit=True) as su:   # other tests made the cluster's urchin_* roles:
            for role in ("urchin_owner", "urchin_reader", "urchin_feeder"):   # as if this admin had
                if su.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    su.execute(sql.SQL("GRANT {} TO {} WITH ADMIN OPTION").format(
                        sql.Identifier(role), sql.Identifier(admin)))
        made = setup_roles(admin_url)
        url = add_feeder(admin_url, f"laptop-{suffix}", "pw", "ana")["url"]
        home = Memory(Settings.resolve(tmp_path / "home", database_url=url, device=f"laptop-{suffix}"))
        home.ingest([{"content": "okapi plan on a plain server"}])
        assert home.index().events == 1 and made["owner"]["role"] == "urchin_owner"
        home.close()
    finally:
        conn.close()
        with psycopg.connect(superuser, autocommit=True) as su:
            su.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
            for role in (feeder_role(f"laptop-{suffix}"), admin):   # the feeder's membership is the admin's grant
                su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
