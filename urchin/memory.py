"""`Memory`: the one facade every front end calls (CLI, MCP tools, HTTP routes, hooks).

It owns the write path (`Ingestor`) and the read views, validates query parameters once, and
returns result objects the front ends only format. Construction does no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

from urchin.config import Settings
from urchin.ephemeral import EphemeralState
from urchin.errors import EmbedderError, JournalError, NotFoundError, QueryError, UrchinError, ValidationError
from urchin.event import Event
from urchin.journal import Journal
from urchin.search.query import (
    Filters,
    Hit,
    SearchResult,
    check_hours,
    check_limit,
    check_query,
    one_line,
    window_start_ms,
)
from urchin.search.substring import SubstringSearcher

if TYPE_CHECKING:
    # Imported where used: numpy and httpx cost ~0.3 s, the write path (redaction rules) ~15 ms and the
    # workspace modules ~8 ms, and a cold `urchin search` needs none of them.
    from urchin.ingest import Ingestor, IngestResult
    from urchin.redact import Finding
    from urchin.search.semantic import EmbeddingView, TokenCosineView
    from urchin.workspace.memories import Member, MemoryDef
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Root, Roots

if TYPE_CHECKING:
    from urchin.index.feeder import FeedReport
    from urchin.index.files import FileIndexReport
    from urchin.index.hybrid import ContextResult
    from urchin.index.service import IndexService

__all__ = ["Memory", "ImportReport", "HotView", "MAX_DOCUMENT_BYTES"]

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024     # fetch_source_document returns whole files up to this size

IMPORT_BATCH = 4096
_FOLLOW_CHUNK = 8 << 20


@runtime_checkable
class HotView(Protocol):
    """An in-memory view a long-lived process keeps current by following the journal.

    `feed` gets complete raw lines `(offset, bytes)` in file order and the offset they end at; it
    must be quick (queue slow work, like embeddings, to a thread of its own). `reset` drops
    everything when the journal was replaced or truncated; feeding then restarts at offset 0.
    """

    def feed(self, lines: Sequence[tuple[int, bytes]], next_offset: int) -> None: ...

    def reset(self) -> None: ...


@dataclass(slots=True)
class ImportReport:
    appended: int = 0
    duplicate: int = 0
    suppressed: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)
    indexed_events: int = 0
    index_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"appended": self.appended, "duplicate": self.duplicate, "suppressed": self.suppressed,
                "rejected": [{"line": n, "reason": r} for n, r in self.rejected],
                "index": {"events": self.indexed_events, "seconds": round(self.index_seconds, 2)}}


class Memory:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.journal = Journal(settings.journal_path, settings.durability)
        self._ingestor: Ingestor | None = None
        self.substring = SubstringSearcher(self.journal)
        self._index: IndexService | None = None
        self._cosine: TokenCosineView | None = None
        self._embedding: EmbeddingView | None = None
        self._views: list[HotView] = []
        self._view_offsets: list[int] = []
        self._hot = False
        self._followed = 0
        self._lines_followed = 0
        self._refresh_lock = threading.Lock()

    @classmethod
    def open(cls, home: str | None = None, **overrides: Any) -> Memory:
        return cls(Settings.resolve(home, **overrides))

    @property
    def ingestor(self) -> Ingestor:
        """The write path, built on first use (readers never pay for the redaction rules)."""
        if self._ingestor is None:
            from urchin.ingest import Ingestor

            self._ingestor = Ingestor(self.settings, self.journal)
        return self._ingestor

    # ---- writing ------------------------------------------------------------------------------
    def ingest(self, items: Iterable[Mapping[str, Any] | Event],
               defaults: Mapping[str, Any] | None = None) -> list[IngestResult]:
        return self.ingestor.ingest(items, defaults)

    def ingest_one(self, item: Mapping[str, Any] | Event, defaults: Mapping[str, Any] | None = None) -> IngestResult:
        return self.ingestor.ingest([item], defaults)[0]

    def prepare(self, item: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Event:
        """Validate, redact and stamp one item without writing; raises `ValidationError` naming the field."""
        return self.ingestor.prepare(item, defaults)

    def ingest_prepared(self, events: Sequence[Event]) -> list[IngestResult]:
        """Append events from `prepare` in one locked write and one fsync (the daemon's group commit)."""
        return self.ingestor.append_prepared(events)

    def import_lines(self, lines: Iterable[bytes | str],
                     on_progress: Callable[[int], None] | None = None) -> ImportReport:
        """Import JSONL; a bad line is reported with its number and never stops the rest."""
        self.ingestor.keep_ids_in_memory()
        report = ImportReport()
        batch: list[Mapping[str, Any]] = []
        numbers: list[int] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                report.rejected.append((number, f"not valid JSON: {exc}"))
                continue
            if not isinstance(record, dict):
                report.rejected.append((number, "event: must be a JSON object"))
                continue
            batch.append(record)
            numbers.append(number)
            if len(batch) >= IMPORT_BATCH:
                self._import_batch(batch, numbers, report, on_progress)
                batch, numbers = [], []
        self._import_batch(batch, numbers, report, on_progress)
        report.rejected.sort()
        if report.appended:
            # Index now, in one pass, rather than surprising the first search after a big import.
            caught = self.substring.catch_up()
            report.indexed_events, report.index_seconds = caught.events, caught.seconds
        return report

    def _import_batch(self, batch: list[Mapping[str, Any]], numbers: list[int], report: ImportReport,
                      on_progress: Callable[[int], None] | None) -> None:
        if not batch:
            return
        for number, result in zip(numbers, self.ingestor.ingest(batch)):
            if result.status == "appended":
                report.appended += 1
            elif result.status == "duplicate":
                report.duplicate += 1
            elif result.status == "suppressed":
                report.suppressed += 1
            else:
                report.rejected.append((number, result.reason or "rejected"))
        if on_progress:
            on_progress(len(batch))

    # ---- capture: collectors and hooks (the logic lives in urchin/collectors/) -----------------
    def collect(self, which: str = "all") -> list[Any]:
        """Run one collector, or `all` whose folders exist; a `CollectReport` each."""
        from urchin import collectors

        return collectors.run(which, self.settings, self.ingestor.ingest)

    def collectors_status(self) -> list[dict[str, Any]]:
        """Each collector: folders, found, events collected, last run, last error."""
        from urchin import collectors

        return collectors.status(self.settings)

    def hook(self, agent: str, payload: Mapping[str, Any], event: str | None = None) -> IngestResult | None:
        """Record one agent hook payload; None when the adapter found nothing worth keeping."""
        from urchin.collectors import adapt_hook
        from urchin.hooks import prepare_item

        item = adapt_hook(agent, payload, event)
        return None if item is None else self.ingest_one(prepare_item(item, self.settings.soft_cap_bytes))

    def install_hooks(self, target: str, *, path: str | None = None, dry_run: bool = False,
                      shell: str | None = None) -> Any:
        """Merge Urchin's hooks into an agent's (or shell's) config; an `InstallResult`."""
        from pathlib import Path

        from urchin.collectors.install import install

        return install(target, self.settings, path=Path(path).expanduser() if path else None, dry_run=dry_run,
                       shell=shell)

    # ---- reading ------------------------------------------------------------------------------
    def search(self, query: str, *, hours: float = 168, limit: int = 20, source: str | None = None,
               workspace: str | None = None, session: str | None = None, kind: str | None = None,
               now: datetime | None = None) -> SearchResult:
        """Literal, case-insensitive search over content; newest first."""
        query = check_query(query)
        since = window_start_ms(check_hours(hours), now)
        self._catch_up()
        events = self.substring.search(query, since_ms=since, limit=check_limit(limit),
                                       filters=Filters.of(source, workspace, session, kind))
        return SearchResult([Hit(e) for e in events], query, "substring")

    def semantic(self, query: str, *, hours: float = 168, limit: int = 10, source: str | None = None,
                 workspace: str | None = None, session: str | None = None, kind: str | None = None,
                 now: datetime | None = None) -> SearchResult:
        """Ranked search for what a query is about, best first, each hit with its score.

        Uses the embedder when one is configured; when it is down or misconfigured, falls back to
        token-cosine and says so in `mode` and `notes`. Scores of the two are never mixed.
        """
        query = check_query(query)
        since = window_start_ms(check_hours(hours), now)
        limit = check_limit(limit)
        filters = Filters.of(source, workspace, session, kind)
        from urchin.search.semantic import TokenCosineView

        mode, notes = TokenCosineView.mode, []
        if self.settings.embedder_url:
            try:
                view = self.embedding_view()
                hits, notes = view.search(query, since_ms=since, limit=limit, filters=filters)
                return SearchResult(hits, query, view.mode, notes)
            except EmbedderError as exc:
                mode = f"token-cosine (embedder unreachable: {exc.message})"
                notes = [f"embedder unreachable, fell back to token-cosine: {exc.message}"]
        hits = self.cosine_view().search(query, since_ms=since, limit=limit, filters=filters)
        return SearchResult(hits, query, mode, notes)

    def embedding_view(self) -> EmbeddingView:
        """The embedder's view; raises `EmbedderError` when the embedder is not configured fully."""
        if self._embedding is None:
            if not self.settings.embedder_model:
                raise EmbedderError("URCHIN_EMBEDDER_MODEL: must be set when URCHIN_EMBEDDER_URL is")
            from urchin.search.embedder import Embedder
            from urchin.search.semantic import EmbeddingView

            embedder = Embedder(self.settings.embedder_url or "", self.settings.embedder_model,
                                self.settings.embedder_api, timeout=self.settings.embedder_timeout_s)  # type: ignore[arg-type]
            self._embedding = EmbeddingView(self.journal, self.settings.home, embedder, self.locate)
        return self._embedding

    def embed(self, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Backfill the embedder's vector cache with every event it lacks."""
        if not self.settings.embedder_url:
            raise EmbedderError("no embedder configured: set URCHIN_EMBEDDER_URL and URCHIN_EMBEDDER_MODEL")
        view = self.embedding_view()
        added = view.catch_up(progress=progress)
        return {"embedded": added, "cached": len(view.cache()), "model": view.embedder.model,
                "fingerprint": view.embedder.fingerprint}

    def cosine_view(self) -> TokenCosineView:
        if self._cosine is None:
            from urchin.search.semantic import TokenCosineView

            self._cosine = TokenCosineView(self.journal, self.settings.index_dir / "cosine")
        return self._cosine

    def recent(self, *, hours: float = 24, limit: int = 20, source: str | None = None,
               workspace: str | None = None, session: str | None = None, kind: str | None = None,
               now: datetime | None = None) -> SearchResult:
        since = window_start_ms(check_hours(hours), now)
        self._catch_up()
        events = self.substring.search(None, since_ms=since, limit=check_limit(limit),
                                       filters=Filters.of(source, workspace, session, kind))
        return SearchResult([Hit(e) for e in events], None, "recent")

    def session_context(self, session: str, *, hours: float = 168, limit: int = 50,
                        now: datetime | None = None) -> SearchResult:
        """The session's latest events, oldest first."""
        if not isinstance(session, str) or not session.strip():
            raise QueryError("session", "must not be empty")
        since = window_start_ms(check_hours(hours), now)
        events = self.substring.search(None, since_ms=since, limit=check_limit(limit),
                                       filters=Filters.of(session=session), oldest_first=True)
        return SearchResult([Hit(e) for e in events], None, "session")

    def workspace_context(self, workspace: str, *, hours: float = 168, limit: int = 40,
                          now: datetime | None = None) -> SearchResult:
        if not isinstance(workspace, str) or not workspace.strip():
            raise QueryError("workspace", "must not be empty")
        return self.recent(hours=hours, limit=limit, workspace=workspace, now=now)

    def get(self, event_id: str) -> Event:
        if not isinstance(event_id, str) or not event_id.strip():
            raise QueryError("id", "must not be empty")
        event = self.locate(event_id)
        if event is None:
            raise NotFoundError(f"no event with id {event_id!r}")
        return event

    def locate(self, event_id: str) -> Event | None:
        """The event with this id: through the id sidecar, then the tail it does not cover yet."""
        ids = self.ingestor.ids
        offset = ids.lookup(event_id)
        if offset is not None:
            line = self.journal.read_line_at(offset)
            return Event.from_json(line) if line is not None else None
        needle = event_id.encode("utf-8")
        for _, line in self.journal.iter_lines(ids.covered()):
            if needle in line:
                event = Event.from_json(line)
                if event is not None and event.id == event_id:
                    return event
        return None

    def tail(self, n: int = 10) -> list[Event]:
        """The last `n` events in journal (arrival) order, oldest first."""
        n = check_limit(n, 100_000)
        out: list[Event] = []
        for _, line in self.journal.reverse_lines():
            event = Event.from_json(line)
            if event is not None:
                out.append(event)
                if len(out) >= n:
                    break
        out.reverse()
        return out

    def end_offset(self) -> int:
        """Where the journal ends now: the offset a follower starts from."""
        return self.journal.size()

    def follow(self, offset: int) -> tuple[list[Event], int]:
        """Events appended at or after `offset`, and the offset to continue from."""
        result = self.journal.read_from(offset)
        events = [e for e in (Event.from_json(line) for _, line in result.lines) if e is not None]
        return events, result.next_offset

    # ---- privacy ------------------------------------------------------------------------------
    def ephemeral(self, action: str = "status", minutes: float | None = None) -> EphemeralState:
        """Turn ephemeral mode on (`start`, optionally for `minutes`), off (`end`), or report it."""
        flag = self.ingestor.ephemeral
        if action in ("start", "on"):
            if minutes is not None and not (isinstance(minutes, (int, float)) and 0 < minutes <= 7 * 24 * 60):
                raise QueryError("minutes", f"must be a number from 1 to {7 * 24 * 60}, got {minutes!r}")
            return flag.start(minutes)
        if action in ("end", "off"):
            return flag.end()
        if action == "status":
            return flag.state()
        raise QueryError("action", f"must be start, end or status, got {action!r}")

    def redact_check(self, path: str) -> Iterator[Finding]:
        """What redaction would remove from a file, by type, line and column; values are masked."""
        try:
            handle = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise ValidationError("file", f"{path}: cannot read: {exc.strerror}") from None
        with handle:
            yield from self.ingestor.redactor.scan_lines(handle)

    def identity(self) -> dict[str, str]:
        """Who this machine's events are stamped with, and where each value came from."""
        return {"account": self.settings.account, "device": self.settings.device}

    # ---- workspace files and curated memories -------------------------------------------------
    @property
    def roots(self) -> Roots:
        from urchin.workspace.roots import Roots

        return Roots(self.settings.home)

    def workspace_add(self, path: str, name: str | None = None) -> Root:
        return self.roots.add(path, name)

    def workspace_remove(self, name: str) -> Root:
        return self.roots.remove(name)

    def workspace_list(self) -> list[Root]:
        return self.roots.list()

    def get_file(self, path: str, from_line: int = 1, max_lines: int = 200) -> FileRange:
        """A window of numbered lines of a workspace file; paths outside the roots are refused."""
        from urchin.workspace.reader import read_range

        return read_range(self.roots, path, from_line, max_lines)

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
                      replace: bool = False) -> MemoryDef:
        from urchin.workspace.memories import MemoryStore

        return MemoryStore(self.settings.home).create(slug, use_when, members, title, replace)

    def memory_list(self) -> list[MemoryDef]:
        from urchin.workspace.memories import MemoryStore

        return MemoryStore(self.settings.home).list()

    def memory_get(self, slug: str, token_budget: int = 8000) -> dict[str, Any]:
        """A curated memory with every member's current contents, and coverage notes."""
        from urchin.workspace.memories import MemoryStore, gather

        budget = check_limit(token_budget, 200_000) if token_budget != 8000 else token_budget
        definition = MemoryStore(self.settings.home).get(slug)

        def run_query(member: Member) -> list[str]:
            result = self.search(member.query or "", hours=member.hours or 24 * 365, limit=50, source=member.source)
            return [one_line(hit.event, width=2000) for hit in result.hits]

        return gather(definition, self.roots, run_query, budget)

    def overview(self) -> dict[str, Any]:
        """Where an agent new to a workspace starts: files, recent changes, sources, memories."""
        from urchin.workspace.overview import root_overview

        roots = self.roots.list()
        out: dict[str, Any] = {
            "roots": [root_overview(root) for root in roots],
            "memories": [m.summary() for m in self.memory_list()],
            "journal": {k: v for k, v in self.status().items() if k in ("events", "firstTimestamp", "lastTimestamp")},
            "sources": [{"name": c["name"], "found": c.get("found"), "events": c.get("events", 0),
                         "lastRun": c.get("lastRun"), "lastError": c.get("lastError")}
                        for c in self.collectors_status()],
        }
        out["index"] = self._file_index_state(roots)
        return out

    def _file_index_state(self, roots: list[Root]) -> dict[str, Any]:
        """Per root: files indexed, cataloged (over the size cap), pending (not yet seen), failed."""
        try:
            status = self.index_status()
        except (UrchinError, ImportError) as exc:
            return {"available": False, "reason": str(exc)}
        from urchin.workspace.roots import is_binary, walk_files

        files = status.get("files", {})
        out: dict[str, Any] = {"available": True, "chunks": status.get("chunks"), "roots": {}}
        for root in roots:
            states = files.get(root.name, {})
            known = sum(states.values())
            on_disk = sum(1 for item in walk_files(root) if not is_binary(item.path))  # binaries are never indexed
            out["roots"][root.name] = {"indexed": states.get("indexed", 0), "cataloged": states.get("cataloged", 0),
                                       "failed": states.get("failed", 0), "pending": max(0, on_disk - known)}
        return out

    def status(self) -> dict[str, Any]:
        stats = self.journal.stats()
        return {
            "journal": stats.path,
            "sizeBytes": stats.size_bytes,
            "events": stats.events,
            "firstTimestamp": stats.first_timestamp,
            "lastTimestamp": stats.last_timestamp,
            "invalidLines": stats.invalid_lines,
            "tornRecords": stats.torn_records,
            "ephemeral": self.ingestor.ephemeral.state().to_dict(),
            "substringIndex": self.substring.index_state(),
            "daemon": self._daemon_state(),
            "embedder": self._embedder_state(),
            "database": (("URCHIN_DATABASE_URL" if self.settings.database_url else f"embedded ({self.settings.pg_dir})")
                         + "; `urchin index --status` for the hybrid index"),
            "home": str(self.settings.home),
            "now": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    def _daemon_state(self) -> dict[str, Any] | None:
        """The daemon named in daemon.json, when its pid is alive (cheap: no connection)."""
        import os

        try:
            info = orjson.loads(self.settings.daemon_file.read_bytes())
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            return None
        return {"pid": info["pid"], "address": info.get("address"), "started": info.get("started")}

    def _embedder_state(self) -> dict[str, Any] | None:
        if not self.settings.embedder_url:
            return None
        out: dict[str, Any] = {"url": self.settings.embedder_url, "model": self.settings.embedder_model}
        if self._embedding is not None and self._embedding._cache is not None:
            out["embeddedEvents"] = len(self._embedding._cache)
        return out

    # ---- the Postgres hybrid index (extra `postgres`; the driver loads on first use) ----------
    @property
    def index_service(self) -> IndexService:
        if self._index is None:
            from urchin.index.service import IndexService

            self._index = IndexService(self.settings, self.journal)
        return self._index

    def context(self, params: Mapping[str, Any] | None = None, /, *, now: datetime | None = None,
                **kwargs: Any) -> ContextResult:
        """`search_context`: wire-named parameters as one mapping (MCP, HTTP), or snake_case keywords (CLI).

        Raises `QueryError` naming the bad field. The index first catches up with the journal when it
        is only a little behind; the coverage block says when it is not.
        """
        from urchin.index.params import ContextParams

        parsed = ContextParams.parse(params, now=now) if params is not None else ContextParams.build(now=now, **kwargs)
        return self.index_service.context(parsed, roots={r.name: r.path for r in self.workspace_list()})

    def index(self, rebuild: bool = False, follow: bool = False,
              on_progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> FeedReport:
        """Feed the journal into the index; `rebuild` empties it first; `follow` runs until `stop` is set."""
        return self.index_service.index(rebuild=rebuild, follow=follow, on_progress=on_progress, stop=stop)

    def query_source(self, source: str, query: str, limit: int = 10) -> ContextResult:
        """`search_context` on one source only: a journal source (claude, git, ...) or a workspace root's files."""
        if not isinstance(source, str) or not source.strip():
            raise QueryError("source", "must not be empty")
        source = source.strip()
        if any(r.name == source for r in self.workspace_list()):
            return self.context(query=query, limit=limit, sources=["files"], workspace=source)
        return self.context(query=query, limit=limit, sources=[source])

    def fetch_source_document(self, source: str, doc_id: str) -> dict[str, Any]:
        """One whole document: an event by id (of that source), or a file of a workspace root (its whole text).

        For a root, `doc_id` is the path inside it (or `<root>/<path>`; source `files` takes `<root>/<path>`).
        Paths that leave the root are refused; files over MAX_DOCUMENT_BYTES are refused (read ranges instead).
        """
        from urchin.workspace.roots import is_binary

        if not isinstance(source, str) or not source.strip():
            raise QueryError("source", "must not be empty")
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise QueryError("id", "must not be empty")
        source, doc_id = source.strip(), doc_id.strip()
        names = {r.name for r in self.workspace_list()}
        if source in names or source == "files":
            wanted = doc_id if source == "files" or doc_id.startswith(source + "/") else f"{source}/{doc_id}"
            root, rel = self.roots.resolve(wanted)
            if source != "files" and root.name != source:
                raise NotFoundError(f"no file {doc_id!r} in workspace root {source!r}")
            target = root.path / rel
            if not target.is_file():
                raise ValidationError("id", f"{doc_id!r} is not a file")
            if is_binary(target):
                raise ValidationError("id", f"{doc_id!r} is a binary file")
            stat = target.stat()
            if stat.st_size > MAX_DOCUMENT_BYTES:
                raise ValidationError("id", f"{doc_id!r} has {stat.st_size} bytes, more than {MAX_DOCUMENT_BYTES}: "
                                            "read ranges with get_file")
            text = target.read_text(encoding="utf-8", errors="replace")
            return {"source": root.name, "id": f"{root.name}/{rel}", "type": "file", "content": text,
                    "totalLines": len(text.splitlines()), "size": stat.st_size,
                    "updatedAt": datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(timespec="seconds")}
        event = self.get(doc_id)
        if event.source != source:
            raise NotFoundError(f"event {doc_id!r} is not from source {source!r} (it is from {event.source!r})")
        return {"source": source, "id": event.id, "type": "event", "content": event.content, "event": event.to_dict()}

    def index_files(self) -> FileIndexReport:
        """Index the workspace roots' files (changed ones re-chunked, vanished ones removed)."""
        return self.index_service.index_files(self.workspace_list())

    def index_status(self) -> dict[str, Any]:
        return self.index_service.status()

    def close(self) -> None:
        """Release the index connection and stop the embedded PostgreSQL this process started."""
        if self._index is not None:
            self._index.close()
            self._index = None

    # ---- hot views (long-lived processes: the daemon) ------------------------------------------
    def add_view(self, view: HotView) -> None:
        """Keep `view` current from the next `refresh` on; it is fed from offset 0 first."""
        with self._refresh_lock:
            self._views.append(view)
            self._view_offsets.append(0)

    def warm(self) -> None:
        """Switch to hot mode: ids in memory, every view fed to the journal's end, reads catch up first."""
        self.ingestor.keep_ids_in_memory()
        with self.journal.locked():  # load the id index now, not inside the first write's latency
            self.ingestor.ids.catch_up()
        # The substring block index follows the journal by itself; build what it lacks in the
        # background (about 15 s per million events) while everything else serves.
        threading.Thread(target=self.substring.catch_up, name="urchin-substring-index", daemon=True).start()
        self._refresh_views()
        # Created now, built by the follower's first refresh() in the background: a large journal
        # takes minutes to index, and the daemon should not wait for that to serve everything else.
        self.cosine_view()
        self._hot = True

    def refresh(self) -> int:
        """Bring every view up to the journal's end (whoever appended); returns the offset reached.

        Cheap when nothing changed (a `stat` or two). The daemon's follower calls it on every
        journal change and every half second; hot reads refresh the fed views first, so a client
        reads its own writes. The token-cosine view follows the journal by itself (its own lock).
        """
        end = self._refresh_views()
        if self._cosine is not None:
            self._cosine.catch_up()
        return end

    def save_views(self) -> bool:
        """Persist the views that keep a copy on disk (the token-cosine index); the daemon calls this
        at shutdown (catch-up also saves every so often by itself). False when nothing was written."""
        return self._cosine.save() if self._cosine is not None else False

    def _refresh_views(self) -> int:
        with self._refresh_lock:
            end = self.journal.size()
            if end < self._followed:  # replaced or truncated: every view starts over
                for view in self._views:
                    view.reset()
                self._view_offsets = [0] * len(self._views)
                self._followed = self._lines_followed = 0
            for index, view in enumerate(self._views):
                self._view_offsets[index] = self._feed(view.feed, self._view_offsets[index], end)
            self._count_to(end)
            return self._followed

    @property
    def followed(self) -> tuple[int, int]:
        """(offset, complete lines) that `refresh` has reached: the hot views' position."""
        return self._followed, self._lines_followed

    def _feed(self, feed: Callable[[Sequence[tuple[int, bytes]], int], None], offset: int, end: int) -> int:
        while offset < end:
            result = self.journal.read_from(offset, _FOLLOW_CHUNK)
            if result.next_offset == offset:
                break  # only a partial line is left: a writer is mid-append
            feed(result.lines, result.next_offset)
            offset = result.next_offset
        return offset

    def _count_to(self, end: int) -> None:
        """Advance `followed` over complete lines up to `end`, counting newlines (fast: no splitting)."""
        if self._followed >= end:
            return
        try:
            with self.journal.path.open("rb") as handle:
                handle.seek(self._followed)
                position = self._followed
                while position < end:
                    chunk = handle.read(min(_FOLLOW_CHUNK, end - position))
                    if not chunk:
                        break
                    last = chunk.rfind(b"\n")
                    if last >= 0:
                        self._lines_followed += chunk.count(b"\n")
                        self._followed = position + last + 1
                    position += len(chunk)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.journal.path}: cannot read: {exc.strerror}") from None

    def _catch_up(self) -> None:
        if self._hot:
            self._refresh_views()
