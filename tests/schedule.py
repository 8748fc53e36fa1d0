"""The order `make test` hands modules to its two xdist workers (`--dist loadscope`): longest first.

xdist gives a worker the next module once it has two tests left, in the order of their number of
tests. A long module with few tests (a lifecycle, the wheel, a property) could then start last and
run alone while the other worker has nothing left. Longest first (LPT) ends the two workers about
one short module apart. SECONDS is each module's wall time (a two-worker run, URCHIN_TEST_CPU=1's
table); a module not in it is estimated from its number of tests. Stale figures only make the order
worse, never a test different: every module still runs whole, on one worker.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

_PER_TEST_S = 0.1   # a module not in SECONDS (the 64 modules under 4 s averaged 0.09 s a test)
# 2026-12-06 13:19-13:57 (s18-suite), c491790, URCHIN_TEST_CPU=1 at load ~12, each module's wall
# divided by 5.1 (that run's 2,213 s a worker against a quiet run's 434 s): the 67 modules of >= 4 s.
SECONDS: dict[str, float] = {
    "test_daemon_postgres_lifecycle": 56, "test_cosine_build": 31, "test_properties": 26, "test_fastclient": 21,
    "test_mcp_stdio_wire": 21, "test_trust_attack": 21, "test_mcp_relay": 20, "test_dist": 20,
    "test_config_reload": 19, "test_team": 19, "test_trust_files_secrets": 18, "test_config": 18,
    "test_privacy_capture": 17, "test_forget": 17, "test_cosine_prune": 16, "test_mcp_http": 15,
    "test_daemon_api": 15, "test_team_rls": 15, "test_parity": 13, "test_cosine_store": 13,
    "test_daemon_lifecycle": 12, "test_mcp_inspector": 12, "test_upgrade": 11, "test_index_cli": 11,
    "test_hostile_input": 11, "test_privacy": 11, "test_mcp_daemon": 10, "test_hook_token": 10, "test_cosine": 10,
    "test_fastcalls": 9, "test_substring": 9, "test_hook_recall": 9, "test_daemon_background": 9,
    "test_mcp_server": 9, "test_hybrid_context": 9, "test_api_tokens": 9, "test_team_stats": 9, "test_cli": 8,
    "test_backup": 8, "test_doctor": 8, "test_cosine_extract": 8, "test_proof": 8, "test_hybrid_files": 8,
    "test_journal": 8, "test_viewer": 8, "test_blockstore": 8, "test_sources_edges": 7, "test_team_search": 7,
    "test_query_language": 7, "test_pg_vacuum": 7, "test_score_property": 7, "test_citations": 6, "test_hooks": 6,
    "test_daemon_workspace": 6, "test_hybrid_feed": 6, "test_daemon_client": 6, "test_daemon_http": 6,
    "test_copied_home": 6, "test_scopes_dispatch": 6, "test_hook_fast": 6, "test_embedder_score": 6,
    "test_import_parallel": 5, "test_redact": 5, "test_cosine_sparse": 5, "test_daemon_sse": 5,
    "test_ingest_as_given": 4, "test_recall_access": 4,
}


def cost(scope: str, tests: int) -> float:
    """A work unit's (a module's) estimated wall seconds."""
    name = scope.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return SECONDS.get(name, _PER_TEST_S * tests)


class LongestFirst(LoadScopeScheduling):
    """LoadScopeScheduling with its queue of modules sorted by `cost`, longest first."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._sorted = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._sorted:    # the queue is whole at the first assignment (`schedule`)
            units = sorted(self.workqueue.items(), key=lambda unit: -cost(unit[0], len(unit[1])))
            self.workqueue.clear()
            self.workqueue.update(units)
            self._sorted = True
        super()._assign_work_unit(node)
