"""Upgrading a home: a home and an index written by Urchin 0.1.0 (tests/fixtures/home-0.1.0, made by
its make_fixture.py from fbbfdfb's code) open, search and index with this code, which says so once;
a format newer than this code knows is refused, untouched (urchin/facade/upgrade.py, hybrid/pg_migrate.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import zlib
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess
from urchin.config import Settings
from urchin.errors import FormatError
from urchin.facade import upgrade
from urchin.facade.upgrade import FORMAT_FILE, FORMATS, open_home
from urchin.hybrid.schema import MIGRATIONS
from urchin.idindex import IdIndex
from urchin.journal import Journal

FIXTURE = Path(__file__).parent / "fixtures" / "home-0.1.0"
FORGOTTEN = "01900000-0000-7000-8000-000000000101"
SAID = "upgraded this home"
INDEX_SAID = "upgraded the index schema"
HOURS = ("--hours", "1000000")
LATEST = MIGRATIONS[-1][0]


def _install(home: Path) -> Path:
    """The fixture as it sat in its home: copied with the modes it had (git keeps none), and the views'
    marks of the journal file moved to the copy's inode, as an upgrade in place would find them."""
    shutil.copytree(FIXTURE / "home", home)
    for path in [home, *home.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    journal = home / "journal" / "events.jsonl"
    st = journal.stat()

    def moved(value: object) -> object:
        if isinstance(value, dict):
            if {"device", "inode", "head", "offset"} <= value.keys():
                value = {**value, "device": st.st_dev, "inode": st.st_ino}
            return {k: moved(v) for k, v in value.items()}
        return [moved(v) for v in value] if isinstance(value, list) else value

    for name in ("index/cosine/manifest.json", "journal/events.jsonl.stats"):
        path = home / name
        path.write_text(json.dumps(moved(json.loads(path.read_text()))))
    with open(home / "journal" / "events.jsonl.ids", "r+b") as ids:   # header: magic, covered, inode
        ids.seek(16)
        ids.write(struct.pack("<Q", st.st_ino))
    return home


def _tree(home: Path) -> dict[str, str]:
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*")) if p.is_file()}


@pytest.fixture
def old_home(urchin_home: Path) -> Path:
    return _install(urchin_home)


def test_the_fixture_is_small_and_holds_what_a_home_holds() -> None:
    size = sum(p.stat().st_size for p in FIXTURE.rglob("*") if p.is_file())
    assert size < 300_000
    home = FIXTURE / "home"
    for name in ("journal/events.jsonl", "journal/events.jsonl.forgotten", "journal/events.jsonl.ids",
                 "journal/events.jsonl.sidx/zones", "journal/events.jsonl.stats", "index/cosine/manifest.json",
                 "tokens.json", "memories/deploys.toml", "collectors/shell.json", "config.toml"):
        assert (home / name).is_file(), name
    assert not (home / FORMAT_FILE).exists()        # 0.1.0 wrote none
    assert not (home / "token").exists() and not (home / "pg").exists()
    assert "INSERT INTO public.urchin_migrations VALUES (5," in (FIXTURE / "index.sql").read_text()


def test_a_0_1_0_home_opens_and_searches_and_says_so_once(old_home: Path) -> None:
    cosine = old_home / "index" / "cosine"
    generation = [p for p in cosine.iterdir() if p.name.startswith("gen-")]
    narrowed = ("label_source.npy", "label_workspace.npy", "label_kind.npy")
    files = {p.name: p.stat().st_ino for p in generation[0].iterdir() if p.name not in narrowed}
    first = run_urchin("search", *HOURS, "refresh token race")
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("Fix the refresh token race") == 3
    assert first.stderr.count(SAID) == 1 and "from Urchin 0.1.0" in first.stderr, first.stderr
    assert json.loads((old_home / FORMAT_FILE).read_text())["formats"] == FORMATS
    assert oct((old_home / FORMAT_FILE).stat().st_mode & 0o777) == "0o600"

    semantic = run_urchin("semantic", *HOURS, "cache filled memory eviction", "--limit", "3", "--json")
    assert semantic.returncode == 0 and SAID not in semantic.stderr, semantic.stderr
    assert all("Redis eviction" in e["content"] for e in json.loads(semantic.stdout)["events"])
    assert "saved index not used" not in semantic.stderr     # 0.1.0's token-cosine view is read, not rebuilt:
    assert "token-cosine 2 -> 3: converted" in first.stderr     # converted (its label codes narrowed), every
    generation = [p for p in cosine.iterdir() if p.name.startswith("gen-")]     # other file linked as it was
    assert len(generation) == 1 and json.loads((cosine / "manifest.json").read_text())["format"] == 3
    assert {p.name: p.stat().st_ino for p in generation[0].iterdir() if p.name not in narrowed} == files
    assert {str(np.load(generation[0] / name).dtype) for name in narrowed} == {"int8"}

    # the forgotten event stays forgotten; what 0.1.0 kept beside the journal still works (in this process:
    # the first two calls above were the processes that opened the old home)
    assert call_urchin("get", FORGOTTEN).returncode == 1
    assert "vpn-legacy" not in call_urchin("search", *HOURS, "Forgettable").stdout
    assert "vpn-legacy" not in call_urchin("semantic", *HOURS, "old VPN gateway address").stdout
    assert "deploy" in call_urchin("memory", "show", "deploys").stdout
    assert "fixture-reader" in call_urchin("token", "list").stdout
    status = call_urchin("status", "--json")
    assert json.loads(status.stdout)["events"] == 40 and SAID not in status.stderr


def test_the_daemon_opens_a_0_1_0_home_and_says_so_once(old_home: Path) -> None:
    reader = (FIXTURE / "token.txt").read_text().strip()    # 0.1.0's scoped token, kept hashed in tokens.json
    for _run in range(2):
        daemon = DaemonProcess(old_home).start()
        try:
            with httpx.Client(base_url=daemon.url, headers={"authorization": f"Bearer {reader}"},
                              trust_env=False, timeout=30) as client:
                found = client.get("/search", params={"q": "kubectl rollout", "hours": 1000000}).json()
                assert len(found["events"]) == 3
                ranked = client.get("/semantic", params={"q": "load balancer replaced", "hours": 1000000}).json()
                assert "Terraform plan" in ranked["events"][0]["content"]
                gone = client.get("/search", params={"q": "vpn-legacy", "hours": 1000000}).json()
                assert gone["events"] == []
        finally:
            daemon.stop()
    assert daemon.log().count(SAID) == 1, daemon.log()


def test_a_0_1_0_index_migrates_and_keeps_answering(old_home: Path, pg_url: str) -> None:
    import psycopg

    dump = (FIXTURE / "index.sql").read_text().replace("@HOME@", str(old_home))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(dump)
    env = {"URCHIN_DATABASE_URL": pg_url}
    first = run_urchin("index", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(INDEX_SAID) == 1 and f"from migration 5 to {LATEST}" in first.stderr, first.stderr
    again = run_urchin("index", env=env)
    assert again.returncode == 0 and INDEX_SAID not in again.stderr and SAID not in again.stderr, again.stderr
    assert "indexed 0 events" in again.stdout       # 0.1.0's cursor still covers the journal: nothing fed twice
    context = run_urchin("context", "redis eviction policy", "--limit", "3", "--json", env=env)
    assert context.returncode == 0, context.stderr
    assert all("Redis eviction" in r["content"] for r in json.loads(context.stdout)["results"])
    gone = json.loads(call_urchin("context", "Forgettable old VPN gateway address", "--json", env=env).stdout)
    assert all(r["id"] != FORGOTTEN and "vpn-legacy" not in r["content"] for r in gone["results"])
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT max(version) FROM urchin_migrations").fetchone() == (LATEST,)
        assert conn.execute("SELECT count(*) FROM urchin_chunks").fetchone() == (40,)
        # issue 37: a single user's index loses 0.1.0's trigram index (the table's and its partition's)
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexdef LIKE '%gin_trgm_ops%'").fetchone() == (0,)
    new = call_urchin("ingest", "--source", "manual", "written after the upgrade", env=env)
    assert new.returncode == 0, new.stderr
    fed = run_urchin("index", env=env)
    assert "indexed 1 event" in fed.stdout, fed.stdout


@pytest.mark.parametrize("name", [*FORMATS, "a-structure-from-the-future"])
def test_a_newer_format_is_refused_untouched(old_home: Path, name: str) -> None:
    (old_home / FORMAT_FILE).write_text(json.dumps({"written_by": "9.0.0",
                                                    "formats": {**FORMATS, name: FORMATS.get(name, 0) + 1}}))
    before = _tree(old_home)
    with pytest.raises(FormatError) as refused:
        open_home(Settings.resolve(old_home))
    text = str(refused.value)
    assert str(old_home / FORMAT_FILE) in text and "Urchin 9.0.0" in text and name in text
    assert (f"format {FORMATS[name] + 1} (this Urchin knows {FORMATS[name]})" if name in FORMATS
            else "unknown to this Urchin") in text
    assert _tree(old_home) == before


def test_the_cli_and_the_daemon_refuse_a_newer_home(old_home: Path) -> None:
    (old_home / FORMAT_FILE).write_text(json.dumps({"written_by": "9.0.0", "formats": {**FORMATS, "journal": 2}}))
    before = _tree(old_home)
    for args in (("search", *HOURS, "refresh"), ("forget", "--yes", "01900000-0000-7000-8000-000000000001"),
                 ("serve", "--port", "0", "--no-index", "--no-collect")):
        done = call_urchin(*args) if args[0] == "forget" else run_urchin(*args, timeout=60)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "journal format 2 (this Urchin knows 1)" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _tree(old_home) == before


def test_an_older_derived_format_is_rebuilt_and_said_once(old_home: Path) -> None:
    settings = Settings.resolve(old_home)
    open_home(settings)                       # 0.1.0's: recorded
    (old_home / FORMAT_FILE).write_text(json.dumps({"written_by": "0.1.5",
                                                    "formats": {**FORMATS, "token-cosine": 1, "id-index": 1,
                                                                "block-index": 1}}))
    beside = old_home / "journal" / "events.jsonl.sidx-ursidx02"    # this format's, beside another version's
    beside.mkdir()
    (beside / "zones").write_bytes(b"URSIDX02")
    said = open_home(settings)
    assert said is not None and "from Urchin 0.1.5" in said
    assert f"token-cosine 1 -> {FORMATS['token-cosine']}: dropped, rebuilt" in said
    assert f"id-index 1 -> {FORMATS['id-index']}" in said
    assert not (old_home / "index" / "cosine").exists()
    assert not (old_home / "journal" / "events.jsonl.ids").exists()
    assert "block-index 1 -> 2: dropped" in said and not beside.exists()
    assert open_home(settings) is None        # once
    ranked = run_urchin("semantic", *HOURS, "cache filled memory eviction", "--limit", "1")
    assert "Redis eviction" in ranked.stdout and SAID not in ranked.stderr


def test_a_format_2_id_index_is_converted_with_its_entries_not_rebuilt(old_home: Path) -> None:
    """0.1.0 wrote the id index in format 2 (no CRC): the upgrade keeps its records and adds the CRC of
    the bytes it covers, so the first catch-up has nothing to rebuild; one naming another journal file
    is dropped and rebuilt, as before."""
    journal_path = old_home / "journal" / "events.jsonl"
    sidecar = journal_path.with_name("events.jsonl.ids")
    old = sidecar.read_bytes()
    assert old[:8] == b"URCHINI2"
    covered = struct.unpack_from("<Q", old, 8)[0]
    said = open_home(Settings.resolve(old_home))
    assert said is not None and "id-index 2 -> 3: converted, its entries kept" in said, said
    new = sidecar.read_bytes()
    assert new[:8] == b"URCHINI3" and new[32:] == old[24:]
    assert struct.unpack_from("<QQQ", new, 8) == (covered, journal_path.stat().st_ino,
                                                  zlib.crc32(journal_path.read_bytes()[:covered]))
    assert oct(sidecar.stat().st_mode & 0o777) == "0o600"
    index = IdIndex(Journal(journal_path))
    with index.journal.locked():
        assert index.catch_up() == "caught up"
    assert sidecar.read_bytes()[32:32 + len(old) - 24] == old[24:]
    assert run_urchin("search", *HOURS, "refresh token race").stdout.count("Fix the refresh token race") == 3

    (old_home / FORMAT_FILE).write_text(json.dumps({"written_by": "0.1.5", "formats": {**FORMATS, "id-index": 2}}))
    sidecar.write_bytes(old[:16] + struct.pack("<Q", journal_path.stat().st_ino + 1) + old[24:])   # another file's
    said = open_home(Settings.resolve(old_home))
    assert said is not None and "id-index 2 -> 3: dropped" in said, said
    assert not sidecar.exists()


def test_a_new_home_is_recorded_silently(urchin_home: Path) -> None:
    made = run_urchin("ingest", "first event of a new home")
    assert made.returncode == 0 and SAID not in made.stderr, made.stderr
    assert call_urchin("search", "first event").stderr == ""
    assert json.loads((urchin_home / FORMAT_FILE).read_text())["formats"] == FORMATS


def test_an_unreadable_format_file_is_named(old_home: Path) -> None:
    (old_home / FORMAT_FILE).write_text('{"formats": {"journal": "one"}}')
    done = run_urchin("search", *HOURS, "refresh")
    assert done.returncode == 1 and f"{old_home / FORMAT_FILE}: `formats` must map" in done.stderr, done.stderr


def test_every_format_number_is_its_structures_own_marker() -> None:
    """The numbers of format.json follow the markers each structure writes in its own files."""
    from urchin import idindex
    from urchin.search import assoc, blockstore, cosine_store, vectors

    assert FORMATS["token-cosine"] == cosine_store.FORMAT
    assert FORMATS["vectors"] == vectors.FORMAT
    assert FORMATS["associations"] == assoc._FORMAT
    assert idindex._MAGIC == b"URCHINI" + str(FORMATS["id-index"]).encode()
    assert blockstore.MAGIC == b"URSIDX" + f"{FORMATS['block-index']:02d}".encode()
    assert upgrade._LEGACY_FORMATS.keys() <= FORMATS.keys()
    derived = upgrade._derived(Settings.resolve("/nonexistent"))
    for name, number in FORMATS.items():        # a source's bump ships its migration
        if name not in derived:
            assert all((name, n) in upgrade._MIGRATIONS for n in range(1, number)), name


def test_a_newer_index_schema_is_refused_untouched(pg_url: str, urchin_home: Path) -> None:
    import psycopg

    env = {"URCHIN_DATABASE_URL": pg_url}
    assert call_urchin("ingest", "an event to index", env=env).returncode == 0
    assert run_urchin("index", env=env).returncode == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO urchin_migrations (version, name) VALUES (99, 'from a newer Urchin')")
    call_urchin("ingest", "another event", env=env)
    done = run_urchin("index", env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"schema migration 99, newer than this Urchin knows ({LATEST})" in done.stderr, done.stderr
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM urchin_chunks").fetchone() == (1,)
    assert os.environ.get("URCHIN_DATABASE_URL") is None
