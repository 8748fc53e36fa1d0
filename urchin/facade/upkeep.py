"""Memory's upkeep part: a long-lived process (the daemon) switched to hot mode (`Memory.warm`), the
start-up work that then runs in the background, giving way to requests (`requests_first`), and the
follower's upkeep of the views (`refresh`, `release_pages`)."""

from __future__ import annotations

import logging
import threading
import time

from urchin import requests_first
from urchin.errors import UrchinError
from urchin.facade.forgetting import Forgetting
from urchin.facade.hot import HotViews
from urchin.facade.recalling import Recalling
from urchin.facade.semantic import SemanticViews
from urchin.facade.writing import WritePath
from urchin.journal import Journal
from urchin.requests_first import give_way, lower_thread_priority
from urchin.search.substring import SubstringSearcher

__all__ = ["Upkeep", "WARM_DAYS", "WARM_SCAN", "WARM_WORKSPACES"]

log = logging.getLogger("urchin.facade")

# After a daemon's start: the session-start digests of the workspaces in the newest WARM_SCAN events of
# the last WARM_DAYS days, at most WARM_WORKSPACES (each keeps up to 3 answers of the 64 the daemon keeps).
WARM_DAYS, WARM_SCAN, WARM_WORKSPACES = 7, 2000, 16


class Upkeep:
    """Hot mode, its background start-up work, the views' upkeep. Part of `Memory` (built on first use),
    which passes the parts it keeps: the write path (ids), forgetting, the views, recall (the digests)."""

    def __init__(self, journal: Journal, write: WritePath, forgetting: Forgetting, substring: SubstringSearcher,
                 hot: HotViews, semantic: SemanticViews, recalling: Recalling) -> None:
        self._journal = journal
        self._write = write
        self._forgetting = forgetting
        self._substring = substring
        self._hot = hot
        self._semantic = semantic
        self._recalling = recalling
        self._ids_loading: threading.Thread | None = None

    def warm(self) -> None:
        """Switch to hot mode: ids in memory, every view fed to the journal's end, reads catch up first."""
        self._write.ingestor.keep_ids_in_memory()
        self._forgetting.finish()
        # First what a first query waits for: the token-cosine view, made and opened (its saved index, or
        # the tail of the newest events) in a thread of its own, marked as a request; the rest of the
        # start-up work below gives way to it (`requests_first`), then follows.
        self._semantic.hot()
        # The id index is loaded now, not inside the first write's latency, but in a thread: it waits for
        # the journal's lock (an import may hold it) and grows with the journal, and the daemon serves
        # meanwhile (a write that comes first loads it itself, under the same lock).
        self._ids_loading = threading.Thread(target=self._load_ids, name="urchin-ids", daemon=True)
        self._ids_loading.start()
        # The substring block index follows the journal by itself; build what it lacks in the
        # background (about 15 s per million events) while everything else serves.
        threading.Thread(target=self._catch_up_substring, name="urchin-substring-index", daemon=True).start()
        self._hot.refresh()
        self._hot.hot = True
        threading.Thread(target=self._warm_digests, name="urchin-recall-warm", daemon=True).start()

    def loading(self) -> list[str]:
        """What a hot process is still loading in the background: `events` (the line count `followed`
        gives is so far a lower bound), `ids` (the id index: a write waits for it)."""
        loading = ["events"] if self._hot.counting else []
        if self._ids_loading is not None and self._ids_loading.is_alive():
            loading.append("ids")
        return loading

    def refresh(self) -> int:
        """Bring every view up to the journal's end (whoever appended); returns the offset reached.

        Cheap when nothing changed (a `stat` or two). The daemon's follower calls it on every
        journal change and every half second; hot reads refresh the fed views first, so a client
        reads its own writes. The token-cosine view follows the journal by itself (its own lock).
        """
        end = self._hot.refresh()
        self._semantic.refresh()
        return end

    def release_pages(self, idle_s: float) -> None:
        """The daemon's follower, now and then: views idle for `idle_s` drop the pages of their
        read-only maps (the block index's bits, the saved token-cosine postings and ids) from this
        process; the page cache keeps them, so the next query maps them again for a minor fault."""
        self._substring.index.release_pages(idle_s)
        self._semantic.release_pages(idle_s)

    def _catch_up_substring(self) -> None:
        give_way(requests_first.STARTUP_WAIT_S)
        self._substring.catch_up()

    def _warm_digests(self) -> None:
        """A daemon's first session-start digest of a workspace reads the workspace's latest events from
        the journal's blocks (~100 ms at 1M events: a hook's whole budget); every later one reads only
        what the journal gained since (`SubstringSearcher.newest` keeps the reads). So after a start,
        the workspaces active in the last week are digested once here, in the background at nice 10,
        giving way to requests: the first hook of each then starts warm. No session, so nothing is
        recorded; nothing is shown."""
        lower_thread_priority()
        give_way(requests_first.STARTUP_WAIT_S)
        try:
            since_ms = int(time.time() * 1000) - WARM_DAYS * 86_400_000
            latest = self._substring.search(None, since_ms=since_ms, limit=WARM_SCAN)
            workspaces = dict.fromkeys(event.workspace for event in latest if event.workspace)
            from urchin.params.recall import RecallParams

            for workspace in list(workspaces)[:WARM_WORKSPACES]:
                give_way(5.0)
                self._recalling.recall(RecallParams(workspace=workspace), None, None)
        except Exception as exc:  # noqa: BLE001 - a warm-up only saves the first hooks some time
            log.warning("warming the session-start digests failed: %s", exc)

    def _load_ids(self) -> None:
        give_way(requests_first.STARTUP_WAIT_S)   # after what a first query waits for (`warm`)
        try:
            started = time.perf_counter()
            with self._journal.locked():
                done = self._write.ingestor.ids.catch_up()
            if done != "caught up":     # "kept": another file with the journal's bytes (a copied home)
                log.info("id index %s in %.2fs", done, time.perf_counter() - started)
        except UrchinError as exc:      # the next write tries again, and says why
            log.warning("loading the id index failed: %s", exc.message)
