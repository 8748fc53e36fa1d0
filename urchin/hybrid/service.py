"""`IndexService`: settings -> database (URCHIN_DATABASE_URL or the embedded server) -> feeder and query.

What `Memory` delegates to. Construction does no I/O and imports no driver; the first call that
needs the database opens it (starting the embedded server if that is the one configured).
"""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable
from datetime import UTC
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.dsn import scrub
from urchin.errors import DatabaseError, EmbedderError, IndexBusyError, UrchinError
from urchin.event import Event
from urchin.hybrid.base import Embedder
from urchin.hybrid.feeder import Feeder, FeedReport
from urchin.hybrid.search_context import ContextResult, run_context
from urchin.journal import Journal
from urchin.params.context import ContextParams
from urchin.timestamps import format_timestamp
from urchin.workspace.roots import DEFAULT_SIZE_CAP

if TYPE_CHECKING:
    from urchin.hybrid.base import IndexState, SkippedEvents
    from urchin.hybrid.files import FileIndexReport
    from urchin.hybrid.pg_roles import FeederRole, RoleSetup
    from urchin.search.assoc import Associations
    from urchin.workspace.access import FileAccess

__all__ = ["IndexService", "INLINE_CATCH_UP_BYTES"]


def _event(row: dict[str, Any]) -> Event | None:
    """An event row of the shared database as an `Event` (meta is not stored there)."""
    actor = {k: row[k] for k in ("account", "device") if row.get(k)}
    stamp = format_timestamp(row["occurred_at"])
    return Event.from_record({
        "id": row["chunk_id"], "timestamp": stamp,
        "source": row["source"], "kind": row["kind"], "content": row["content"], "workspace": row["workspace"],
        "session": row["session"], "title": row["title"], "tags": list(row["tags"] or []), "actor": actor or None})

INLINE_CATCH_UP_BYTES = 32 * 1024 * 1024   # a query feeds up to this much backlog itself; more needs `urchin index`
MAX_SKIPPED_IDS = 100_000                   # refused events remembered to count each once (more: counted each time)


def _database_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Driver errors leave the index as `DatabaseError` naming the database, never as a traceback."""

    @functools.wraps(method)
    def wrapper(self: IndexService, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except UrchinError:
            raise
        except Exception as exc:
            if type(exc).__module__.split(".")[0] != "psycopg":
                raise
            where = ("URCHIN_DATABASE_URL" if self.settings.database_url
                     else f"the embedded PostgreSQL ({self.settings.pg_dir})")
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DatabaseError(f"database: {where} failed: {scrub(first, self.settings.database_url)}") from None

    return wrapper


class IndexService:
    def __init__(self, settings: Settings, journal: Journal, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.journal = journal
        if embedder is None and settings.embedder_url and settings.embedder_model:
            from urchin.search.embedder import configured_embedder  # httpx and numpy load only then

            embedder = configured_embedder(settings)
        self.embedder = embedder
        self._backend: Any = None
        self._embedded: Any = None
        self._lock = threading.RLock()
        self._forget_synced: object = None  # the forget log's state this process last applied
        self.skipped = 0                                    # events the database refused, in this process
        self._skipped_ids: set[str] = set()                 # ... each counted once (bounded: MAX_SKIPPED_IDS)
        self._skips: collections.deque[dict[str, str]] = collections.deque(maxlen=10)
        self.skip_listeners: list[Callable[[str, str], None]] = []   # the daemon's index process reports them
        self.niceness = 0      # > 0: the embedded server serves this process's connections at this nice value
        self.give_way: Callable[[], object] | None = None   # a background feed's pause for queries (Feeder)
        self.asked: Callable[[float], bool] | None = None     # ... and whether they came lately (its batches)

    # ---- wiring -------------------------------------------------------------------------------
    @property
    def backend(self) -> Any:
        """The connection queries use (serialised by the service lock)."""
        with self._lock:
            if self._backend is None:
                self._backend = self._open_backend()
            return self._backend

    def _open_backend(self) -> Any:
        from urchin.hybrid.postgres import PostgresIndex  # psycopg loads here, never at import

        if self.settings.database_url:
            return PostgresIndex(self.settings.database_url)
        # The embedded server's processes are this machine's: those serving a background process's
        # connections (the daemon's index process sets `niceness`) run at its lower CPU priority too.
        return PostgresIndex(self._embedded_server().url, niceness=self.niceness or None, owned=True)

    def _embedded_server(self) -> Any:
        if self._embedded is None:
            from urchin.hybrid.embedded import EmbeddedPostgres

            # A process at a lowered priority never starts the server: it and every backend would inherit it.
            self._embedded = EmbeddedPostgres(self.settings.pg_dir, start=not self.niceness)
        return self._embedded

    def server_stopped(self) -> bool:
        """Whether the embedded server this service started or adopted is no longer running (it crashed,
        or was stopped from outside); False with a database URL."""
        if self.settings.database_url or self._embedded is None:
            return False
        from urchin.hybrid.embedded import running_pid

        return running_pid(self.settings.pg_dir) is None

    def start_server(self) -> None:
        """Start (or adopt) the embedded server now, at this thread's priority; nothing with a database URL."""
        if not self.settings.database_url:
            self._embedded_server().url()

    def feeder(self, retry_for: float | None = 60.0, backend: Any = None, wait: bool = True) -> Feeder:
        self._check_role(backend or self.backend)
        return Feeder(backend or self.backend, self.journal, self.settings.device, embedder=self.embedder,
                      retry_for=retry_for, on_skip=self.record_skip, wait=wait, vectors_home=self.settings.home,
                      give_way=self.give_way if wait else None, asked=self.asked)

    def _check_role(self, backend: Any) -> None:
        """A feeder role bound to another device: say so before the database refuses a row."""
        from urchin.hybrid.pg_roles import wrong_device

        bound = backend.bound
        problem = wrong_device(bound[0] if bound else None, self.settings.device)
        if problem:
            raise DatabaseError(f"database: {problem}")

    def record_skip(self, event_id: str, reason: str) -> None:
        """A row the database refused (this process's feed, or the daemon's index process), counted once
        per event: two feeds meeting the same refused row (the daemon's index process and an in-process
        catch-up, or a feed re-run after a cursor race) skip it twice but it is one event."""
        if event_id in self._skipped_ids:
            return
        if len(self._skipped_ids) < MAX_SKIPPED_IDS:
            self._skipped_ids.add(event_id)
        self.skipped += 1
        self._skips.append({"id": event_id[:80], "reason": reason})
        for listener in self.skip_listeners:
            listener(event_id, reason)

    # ---- operations ---------------------------------------------------------------------------
    @_database_errors
    def index(self, rebuild: bool = False, follow: bool = False, on_progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> FeedReport:
        """Feed the journal into the index (after emptying it with `rebuild`); `follow` keeps going until `stop`.

        The feed runs on a connection of its own, so a daemon thread feeding never shares a
        transaction with the queries served beside it.
        """
        with self._lock:
            own = self._open_backend()
        try:
            if rebuild:
                own.rebuild()
            feeder = self.feeder(retry_for=None if follow else 60.0, backend=own)
            report = feeder.run_once(on_progress, stop)
            if follow:
                feeder.follow(stop or threading.Event(), on_progress=on_progress)
            return report
        finally:
            own.close()

    @_database_errors
    def index_files(self, files: FileAccess, size_cap: int = DEFAULT_SIZE_CAP) -> FileIndexReport:
        """Bring the workspace files into the index (unchanged files skipped), then embed what is new."""
        from urchin.hybrid.files import index_roots

        with self._lock:
            self._check_role(self.backend)
            report = index_roots(self.backend, files, size_cap)
            if self.embedder is not None and report.chunks:
                feed = FeedReport()
                try:
                    self.feeder().embed_pending(feed)
                except EmbedderError:       # rows stay pending; the next run embeds them
                    pass
            return report

    @_database_errors
    def context(self, params: ContextParams, catch_up: bool = True, files: FileAccess | None = None,
                assoc: Associations | None = None) -> ContextResult:
        with self._lock:
            backend = self.backend
            self._sync_forgotten()  # a forgotten event leaves the answers at once
            behind = self._catch_up() if catch_up else (
                self.journal.size() - backend.cursor(self.settings.device, str(self.journal.path)))
            info: dict[str, Any] = {"behindJournalBytes": max(0, behind)}
            if behind > 0:
                info["note"] = "the index is behind the journal; run `urchin index` (the daemon feeds it continuously)"
            return run_context(backend, params, self.embedder, info, files, assoc)

    @_database_errors
    def search_team(self, query: str, since_ms: int, limit: int, filters: dict[str, str | None]) -> list[Event]:
        """Literal, case-insensitive search over every device's events in the shared database, newest
        first (the journal's own feed is caught up first, as for `context`). Each event's `actor.device`
        is the machine that fed it."""
        from datetime import datetime

        with self._lock:
            self._sync_forgotten()
            self._catch_up()
            since = datetime.fromtimestamp(since_ms / 1000, UTC)
            rows = self.backend.literal(query.replace("\x00", "\ufffd"), since, limit, filters)
        events = []
        folded = query.casefold()
        for row in rows:
            event = _event(row)
            if event is not None and folded in event.content.casefold():
                events.append(event)
        return events

    def _catch_up(self) -> int:
        """Feed a small backlog inline; returns the bytes still behind. A query never waits behind
        another feeder's locks (the daemon's index process, at the lowest priority, may hold them for
        long on a busy machine): when one is in the way it answers from the index as it is."""
        key = str(self.journal.path)
        cursor = self.backend.cursor(self.settings.device, key)
        if 0 < self.journal.size() - cursor <= INLINE_CATCH_UP_BYTES:
            try:
                cursor = self.feeder(wait=False).run_once().offset
            except IndexBusyError:
                cursor = self.backend.cursor(self.settings.device, key)
        return self.journal.size() - cursor

    @_database_errors
    def sync_forgotten(self) -> int:
        """Delete rows of forgotten events now, and carry the cursor over a compaction (see Feeder)."""
        with self._lock:
            return self._sync_forgotten()

    def _sync_forgotten(self) -> int:
        feeder = self.feeder(retry_for=10.0)
        seen = feeder.forgotten.state().key
        if seen is None or seen == self._forget_synced:
            return 0  # nothing forgotten, or nothing new since this process last synced
        deleted = int(feeder.sync_forgotten())
        self._forget_synced = seen
        return deleted

    @_database_errors
    def purge(self) -> bool:
        """VACUUM FULL what forgets deleted, on Urchin's own server; False on a shared database, whose
        owner does it (a feeder may not: contrib/team/TEAM.md)."""
        if self.settings.database_url:
            return False
        with self._lock:
            self.backend.purge()
        return True

    @_database_errors
    def known_sources(self) -> list[str]:
        """The sources the index holds (after catching up with the journal a little, as `context` does)."""
        with self._lock:
            self._catch_up()
            return self.backend.known_sources()

    @_database_errors
    def session_heads(self, sessions: list[str]) -> dict[str, dict[str, Any]]:
        """Sessions' titles, first prompts and last times (textrawl's conversation results)."""
        with self._lock:
            return dict(self.backend.session_heads(sessions))

    @_database_errors
    def document_chunks(self, doc_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """A workspace file as indexed: its catalog row and its chunks in line order."""
        with self._lock:
            catalog, chunks = self.backend.document_chunks(doc_id)
            return catalog, chunks

    @_database_errors
    def status(self) -> IndexState:
        with self._lock:
            out = self.backend.status(self.embedder.fingerprint if self.embedder else None)
            shared = "shared, from URCHIN_DATABASE_URL (`urchin doctor` checks it)"
            out["database"] = shared if self.settings.database_url else f"embedded ({self.settings.pg_dir})"
            cursor = self.backend.cursor(self.settings.device, str(self.journal.path))
            out["behindJournalBytes"] = max(0, self.journal.size() - cursor)
            skipped = self.skipped_events()
            if skipped:
                out["skippedEvents"] = skipped
            return out

    def skipped_events(self) -> SkippedEvents | None:
        """Rows the database refused (skipped, the cursor moved on) in this process: count and the last few."""
        return {"count": self.skipped, "last": list(self._skips)} if self.skipped else None

    # ---- least privilege on a shared server (`urchin db`) --------------------------------------
    def _admin_url(self) -> str:
        if not self.settings.database_url:
            raise DatabaseError("urchin db: set URCHIN_DATABASE_URL to the shared server's administrator URL "
                              "(roles are for a shared PostgreSQL, not the embedded one)")
        return self.settings.database_url

    @_database_errors
    def db_setup(self, owner_password: str | None = None, reader_password: str | None = None) -> RoleSetup:
        """Owner, reader and feeder-group roles; tables handed to the owner and migrated as it; grants."""
        from urchin.hybrid.pg_roles import setup_roles

        return setup_roles(self._admin_url(), owner_password, reader_password)

    @_database_errors
    def db_feeder(self, device: str, password: str | None = None, account: str | None = None) -> FeederRole:
        """A login role that may write only `device`'s rows (row-level security)."""
        from urchin.hybrid.pg_roles import add_feeder

        return add_feeder(self._admin_url(), device, password, account)

    def close(self) -> None:
        with self._lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None
            if self._embedded is not None:
                self._embedded.stop()
                self._embedded = None
