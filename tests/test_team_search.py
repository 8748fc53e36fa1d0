"""Team literal search on a shared PostgreSQL (`search --team`, the trigram index it needs, narrowing by
device); moved from tests/test_team.py, on the same `team_server`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import team_helpers
from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.team_helpers import _events, _home, _plan, _sql, _trigram_indexes
from urchin.hybrid.pg_roles import add_feeder, setup_roles

roles = team_helpers.roles    # the fixture (tests/team_helpers.py)


def test_search_team_finds_other_devices_events_literally_newest_first(tmp_path: Path, team_db: str) -> None:
    from urchin.mcp_server.tools import run_tool

    setup_roles(team_db)                      # a shared database, set up as contrib/team/TEAM.md says
    laptop, desktop = _home(tmp_path, "laptop", team_db), _home(tmp_path, "desktop", team_db)
    desktop.ingest([{"content": f"Quokka 50%_off deal {i}", "timestamp": f"2026-11-30T10:0{i}:00Z",
                     "workspace": "shop"} for i in range(4)])
    desktop.ingest([{"content": "quokka 50 off without the literal", "workspace": "shop"}])
    desktop.index()
    laptop.ingest(_events(2, "zanzibar"))
    try:
        found = laptop.search("QUOKKA 50%_OFF", scope="team", hours=24 * 365 * 10)
        assert [h.event.content for h in found.hits] == [f"Quokka 50%_off deal {i}" for i in (3, 2, 1, 0)]
        assert {h.event.actor["device"] for h in found.hits} == {"desktop"}          # type: ignore[index]
        assert len(laptop.search("quokka", scope="team", limit=2, hours=24 * 365 * 10).hits) == 2
        assert laptop.search("quokka 50%_off", scope="team", hours=1).hits == []          # window applies
        assert laptop.search("quokka", scope="local", hours=24 * 365 * 10).hits == []     # not in this journal
        own = laptop.search("zanzibar", scope="team")                                     # own feed caught up
        assert len(own.hits) == 2
        tool = run_tool(laptop, "urchin_search", {"query": "quokka 50%_off", "scope": "team", "hours": 87600})
        assert not tool.is_error and len(tool.structured_content["events"]) == 4   # type: ignore[index]
    finally:
        laptop.close()
        desktop.close()
    assert _sql(team_db, "SELECT indexdef LIKE '%%gin_trgm_ops%%' FROM pg_indexes "
                         "WHERE indexname = 'urchin_chunks_trgm'") == [(True,)]


def test_db_setup_builds_the_trigram_index_a_single_users_index_lacks(tmp_path: Path, team_db: str) -> None:
    # issue 37: only a database set up for a team (`urchin db setup`) keeps the trigram index
    home = _home(tmp_path, "laptop", team_db)
    home.ingest(_events(3, "quokka"))
    home.index()
    home.close()
    assert _trigram_indexes(team_db) == 0                        # fed as one user: no trigram index
    setup_roles(team_db)
    assert _trigram_indexes(team_db) == 3                        # the table's, its month's and the default's
    assert "Index Cond: (content ~~* '%kka ev%'" in _plan(team_db, "SELECT chunk_id FROM urchin_chunks "
                                                                 "WHERE content ILIKE '%kka ev%'")   # served by it
    desktop = _home(tmp_path, "desktop", add_feeder(team_db, "desktop", "desktop-pw")["url"])
    desktop.ingest([{"content": "a Zeppelin-Quokka sighting", "workspace": "ws"}])
    desktop.index()                                               # a feeder's backfill keeps it: it cannot drop it
    found = desktop.search("zeppelin-quok", scope="team", hours=24 * 365 * 30)
    assert [h.event.content for h in found.hits] == ["a Zeppelin-Quokka sighting"]
    assert len(desktop.search("QUOKKA EVENT", scope="team", hours=24 * 365 * 30).hits) == 3
    desktop.close()
    setup_roles(team_db)                                          # idempotent
    assert _trigram_indexes(team_db) == 3


def test_the_owners_backfill_on_a_team_database_builds_the_trigram_index_again(tmp_path: Path,
                                                                              roles: dict[str, Any]) -> None:
    from urchin.hybrid.feeder import Feeder
    from urchin.hybrid.postgres import PostgresIndex

    home = _home(tmp_path, "laptop", roles["owner"])
    home.ingest(_events(30, "quokka"))
    backend = PostgresIndex(roles["owner"])
    report = Feeder(backend, home.journal, "laptop", batch_bytes=2048, bulk_bytes=1).run_once()
    assert report.inserted == 30 and _trigram_indexes(roles["owner"]) == 3   # dropped for the backfill, built again
    backend.close()
    home.close()


def test_search_team_cli_keeps_the_local_contract(tmp_path: Path, team_db: str) -> None:
    desktop = _home(tmp_path, "desktop", team_db)
    desktop.ingest(_events(3, "quokka"))
    desktop.index()
    desktop.close()
    env = {"URCHIN_HOME": str(tmp_path / "laptop"), "URCHIN_DATABASE_URL": team_db, "URCHIN_DEVICE_ID": "laptop"}
    found = run_urchin("search", "QUOKKA event", "--team", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert found.stdout.count('"device":"desktop"') == 3
    lines = call_urchin("search", "QUOKKA event", "--team", env=env).stdout.splitlines()   # each names its device
    assert len(lines) == 3 and all("] claude on desktop — " in line for line in lines), lines
    for args in (("",), ("x", "--hours", "0"), ("x", "--limit", "0"), ("x", "--limit", "5000")):
        local, team = call_urchin("search", *args, env=env), call_urchin("search", *args, "--team", env=env)
        assert (local.returncode, local.stderr) == (team.returncode, team.stderr) and local.returncode != 0


def test_search_context_tool_and_http_narrow_by_device(tmp_path: Path, team_db: str) -> None:
    from urchin.mcp_server.tools import run_tool

    laptop, desktop = _home(tmp_path, "laptop", team_db), _home(tmp_path, "desktop", team_db)
    laptop.ingest(_events(2, "zanzibar"))
    desktop.ingest(_events(3, "quokka"))
    desktop.index()
    try:
        every = run_tool(laptop, "search_context", {"query": "payments rollout", "limit": 20})
        assert {r["device"] for r in every.structured_content["results"]} == {"laptop", "desktop"}  # type: ignore[index]
        one = run_tool(laptop, "search_context", {"query": "payments rollout", "devices": ["desktop"]})
        assert {r["device"] for r in one.structured_content["results"]} == {"desktop"}  # type: ignore[index]
        bad = run_tool(laptop, "search_context", {"query": "x", "devices": [""]})
        assert bad.is_error and "devices[0]" in bad.content[0].text  # type: ignore[union-attr]
    finally:
        laptop.close()
        desktop.close()
