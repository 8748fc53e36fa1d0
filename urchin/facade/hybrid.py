"""Memory's hybrid-index part: feeding the journal then the files, `search_context`, single sources.

The PostgreSQL driver loads on first use. "Index the journal, then the workspace files" is decided
here once (`update`), for the CLI and the daemon alike.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import NotFoundError, QueryError, ValidationError
from urchin.event import Event
from urchin.facade.events import JournalEvents
from urchin.facade.semantic import SemanticViews
from urchin.facade.workspace import Workspace
from urchin.journal import Journal
from urchin.params.context import ContextParams
from urchin.params.limits import FETCH_MODES
from urchin.timestamps import format_timestamp

if TYPE_CHECKING:
    from urchin.hybrid.base import IndexState
    from urchin.hybrid.feeder import FeedReport
    from urchin.hybrid.files import FileIndexReport
    from urchin.hybrid.pg_roles import FeederRole, RoleSetup
    from urchin.hybrid.search_context import ContextResult
    from urchin.hybrid.service import IndexService
    from urchin.jsontypes import JSONObject
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.search import SearchParams
    from urchin.params.sources import DocumentParams, FetchParams, QuerySourceParams
    from urchin.search.query import SearchResult
    from urchin.workspace.access import FileAccess

__all__ = ["HybridIndex", "IndexRun", "MAX_DOCUMENT_BYTES", "FETCH_MODES", "adopt_embedded", "stop_embedded"]

log = logging.getLogger("urchin.hybrid")

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024     # fetch_source_document returns whole files up to this size


def _file_type(doc_id: str) -> str:
    from urchin.hybrid.docsearch import file_type

    return file_type(doc_id)


@dataclass(slots=True)
class IndexRun:
    """One `urchin index`: the journal's feed, then (when roots exist and it is not following) the files."""

    feed: FeedReport
    files: FileIndexReport | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        out = {**self.feed.to_dict(), "seconds": round(self.seconds, 3)}
        if self.files is not None:
            out["files"] = self.files.to_dict()
        return out

    def render(self) -> str:
        feed, rate = self.feed, self.feed.events / self.seconds if self.seconds > 0 else 0.0
        lines = [f"indexed {feed.events} event{'s' if feed.events != 1 else ''} ({feed.inserted} new) in "
                 f"{self.seconds:.1f} s ({rate:,.0f}/s); cursor at byte {feed.offset}"
                 + (f"; {feed.retries} retries" if feed.retries else "")]
        if self.files is not None:
            f = self.files
            lines.append(f"workspace files: {f.indexed} indexed ({f.chunks} chunks), {f.unchanged} unchanged, "
                         f"{f.cataloged} cataloged (over the size cap), {f.failed} failed, {f.removed} removed")
        return "\n".join(lines)


class HybridIndex:
    """The PostgreSQL hybrid index as `Memory` uses it. Part of `Memory`, which passes the workspace
    (roots and files), the journal's events (documents by id) and the ranked views (the token-cosine
    view's learned associations, for its leg); `close()` releases it."""

    def __init__(self, settings: Settings, journal: Journal, workspace: Workspace, events: JournalEvents,
                 semantic: SemanticViews) -> None:
        self._settings = settings
        self._journal = journal
        self._workspace = workspace
        self._events = events
        self._semantic = semantic
        self._service: IndexService | None = None

    @property
    def service(self) -> IndexService:
        if self._service is None:
            from urchin.hybrid.service import IndexService

            self._service = IndexService(self._settings, self._journal)
        return self._service

    @property
    def opened(self) -> IndexService | None:
        """The service if this process opened it (status reads it without opening a database)."""
        return self._service

    def context(self, parsed: ContextParams) -> ContextResult:
        """`search_context` with parameters checked when they were built."""
        if parsed.source_ids:
            parsed = parsed.resolve_source_ids(self.service.known_sources(),
                                               [r.name for r in self._workspace.roots.list()])
        learned = self._semantic.cosine().associations() if parsed.strategy in ("hybrid", "semantic") else None
        return self.service.context(parsed, files=self._workspace.files, assoc=learned)

    def search_team(self, p: SearchParams, since_ms: int) -> SearchResult:
        """`search` with scope `team`: literal, over every device's events in the shared database."""
        from urchin.search.query import Hit, SearchResult

        events = self.service.search_team(p.query, since_ms, p.limit, {
            "source": p.source, "workspace": p.workspace, "session": p.session, "kind": p.kind})
        return SearchResult([Hit(e) for e in events], p.query, "team")   # literal, every device's

    def feed(self, rebuild: bool = False, follow: bool = False, on_progress: Callable[[int, int], None] | None = None,
             stop: threading.Event | None = None) -> FeedReport:
        """Feed the journal into the index; `rebuild` empties it first; `follow` runs until `stop` is set."""
        return self.service.index(rebuild=rebuild, follow=follow, on_progress=on_progress, stop=stop)

    def update(self, rebuild: bool = False, follow: bool = False,
               on_progress: Callable[[int, int], None] | None = None, stop: threading.Event | None = None) -> IndexRun:
        """`urchin index`: the journal first (it is what search_context mostly answers from), then (when not
        following and roots exist) the workspace files."""
        import time

        started = time.perf_counter()
        feed = self.feed(rebuild, follow, on_progress, stop)
        files = self.index_files() if not follow and self._workspace.roots.list() else None
        return IndexRun(feed, files, time.perf_counter() - started)

    @property
    def files(self) -> FileAccess:
        return self._workspace.files

    def index_files(self) -> FileIndexReport:
        """Index the workspace roots' files (changed ones re-chunked, vanished ones removed)."""
        return self.service.index_files(self._workspace.files)

    def status(self) -> IndexState:
        return self.service.status()

    def document_search(self, params: DocumentSearchParams, curated: list[Any]) -> JSONObject:
        """textrawl's `search` over the same hybrid query as `context` (each leg: `ContextParams` keywords)."""
        from urchin.hybrid.docsearch import run_search

        return run_search(lambda query: self.context(ContextParams.build(**query)), curated, params,
                          self.service.known_sources, self.service.session_heads)

    def query_source(self, params: QuerySourceParams) -> ContextResult:
        """`search_context` on one source only: a journal source (claude, git, ...) or a workspace root's files.

        A root searches its indexed chunks and reads its cataloged (over-cap) files live, under the same
        byte budget as `mode: live`; an unknown source is an error listing the known ones; `min_score` keeps
        the results scored at or above it.
        """
        source, query, limit, min_score = params.source, params.query, params.limit, params.min_score
        roots = [r.name for r in self._workspace.roots.list()]
        if source in roots:
            return self.context(ContextParams.build(query=query, limit=limit, sources=["files"], workspace=source,
                                                    mode="live", min_score=min_score))
        known = self.service.known_sources()
        if source not in known:
            names = sorted(set(known) | set(roots))
            raise QueryError("source", f"unknown source {source!r} (known: {', '.join(names) or 'none yet'})")
        return self.context(ContextParams.build(query=query, limit=limit, sources=[source], min_score=min_score))

    def fetch_source_document(self, params: FetchParams) -> JSONObject:
        """One whole document: an event by id (of that source), or a file of a workspace root (its whole text).

        For a root, `doc_id` is the path inside it (or `<root>/<path>`; source `files` takes `<root>/<path>`).
        A file the hybrid index holds comes from the index at the version indexed (`mode` "indexed", the
        default); one it does not hold, or any with `mode` "live", is read from disk: paths that leave the
        root are refused, files over MAX_DOCUMENT_BYTES too (read ranges instead). `content_hash` (a file
        result's `location.contentHash`) insists on that version. A collected event is the version indexed
        (the journal never changes); it carries `upstream` (its transcript lines, and whether they still
        hold it), and `content_hash` must then be its `location.upstream.contentHash`."""
        source, doc_id, content_hash, mode = params.source, params.id, params.content_hash, params.mode
        names = {r.name for r in self._workspace.roots.list()}
        if source in names or source == "files":
            indexed = self._indexed_file(source, doc_id, names)[0] if mode == "indexed" else None
            if indexed is None:
                return {**self._fetch_file(source, doc_id, content_hash), "version": "live"}
            if content_hash is not None and content_hash != indexed["contentHash"]:
                raise QueryError("contentHash", f"{indexed['id']!r} is indexed at content hash "
                                                f"{indexed['contentHash']}, not {content_hash}: search again for its "
                                                "current citation, or ask for mode live to read the file as it is now")
            return indexed
        event = self._events.get(doc_id)
        if event.source != source:
            raise NotFoundError(f"event {doc_id!r} is not from source {source!r} (it is from {event.source!r})")
        out: JSONObject = {"source": source, "id": event.id, "type": "event", "content": event.content,
                           "event": event.to_dict()}
        upstream = self._upstream(event, content_hash)
        if upstream is not None:
            out["upstream"] = upstream
        return out

    def _indexed_file(self, source: str, doc_id: str, roots: set[str]
                      ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The file as the index holds it and its chunks; None when the index holds none of it (or there
        is no index)."""
        from urchin.hybrid.documents import indexed_file
        from urchin.workspace.access import check_relative

        parts = check_relative(doc_id, "id")   # an absolute or escaping id is refused, never re-rooted
        if source != "files" and not (len(parts) > 1 and parts[0] == source):
            parts = [source, *parts]
        if len(parts) < 2 or parts[0] not in roots or not self._has_index():
            return None, []
        root, rel = parts[0], "/".join(parts[1:])
        catalog, chunks = self.service.document_chunks(f"{root}/{rel}")
        found = indexed_file(root, rel, catalog, chunks)
        if found is not None:
            # the file's bytes while they still hash to the version indexed are that version, exactly
            # (blank lines and the final newline included); else its chunks, put back at their lines, and
            # redacted again in case the rules grew since they were indexed
            exact = self._unchanged_text(f"{root}/{rel}", found["contentHash"])
            found["content"] = exact if exact is not None else self._workspace.files.redact(found["content"])
            found["totalLines"] = len(found["content"].splitlines())
        return found, chunks

    def _unchanged_text(self, wanted: str, digest: str | None) -> str | None:
        """The file's text (redacted) when its bytes on disk still hash to `digest`, else None."""
        from urchin.errors import UrchinError
        from urchin.hybrid.files import file_epoch, hash_file

        files = self._workspace.files
        try:
            loc = files.locate(wanted, "id")
            if loc.size > MAX_DOCUMENT_BYTES or files.is_binary(loc):
                return None
            data = files.read_bytes(loc, MAX_DOCUMENT_BYTES + 1)
        except (OSError, UrchinError):
            return None
        if digest is None or hash_file(data, file_epoch(files)) != digest:
            return None
        return files.text_of(data)

    def _has_index(self) -> bool:
        """Whether an index can hold anything: a database URL, or the embedded server's data exists (a
        fetch never creates an embedded PostgreSQL just to find it empty)."""
        return bool(self._settings.database_url) or self._settings.pg_dir.exists()

    def get_document(self, params: DocumentParams) -> JSONObject:
        """textrawl's `get_document`: a search result's document whole, at the version indexed: a
        workspace file (`<root>/<path>`) from the index's chunks, or an event from the journal."""
        from urchin.hybrid.documents import MAX_DOCUMENT_CHARS

        document_id, include_chunks = params.document_id, params.include_chunks
        doc, chunks = self._file_document(document_id)
        if doc is None:
            try:
                event = self._events.get(document_id)
            except NotFoundError:
                raise NotFoundError(f"Document not found: no document with ID {document_id!r} (a search result's "
                                    "documentId: an event id, or a workspace file <root>/<path> the index holds)"
                                    ) from None
            doc = {"id": event.id, "title": event.title or event.id, "sourceType": "note", "sourceUrl": None,
                   "content": event.content, "contentType": event.kind, "source": event.source,
                   "createdAt": event.timestamp, "updatedAt": event.timestamp,
                   "metadata": {k: v for k, v in (("workspace", event.workspace), ("session", event.session),
                                                  ("tags", list(event.tags))) if v}}
            chunks = [{"id": event.id, "index": 0, "content": event.content}]
        text = doc["content"]
        doc["truncated"] = len(text) > MAX_DOCUMENT_CHARS
        if doc["truncated"]:
            doc.update(content=text[:MAX_DOCUMENT_CHARS], fullLength=len(text))
        return {"document": doc, **({"chunks": chunks} if include_chunks else {})}

    def _file_document(self, document_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        roots = {r.name for r in self._workspace.roots.list()}
        root, _, rel = document_id.partition("/")
        if root not in roots or not rel:
            return None, []
        try:
            found, rows = self._indexed_file("files", document_id, roots)
        except ValidationError:
            return None, []
        if found is None:
            raise NotFoundError(f"Document not found: the index holds no text of {document_id!r} (not indexed yet, "
                                "or over the size cap): fetch_source_document with mode live reads it from disk")
        doc = {"id": found["id"], "title": found["id"].split("/", 1)[1], "sourceType": "file", "sourceUrl": None,
               "content": found["content"], "contentType": _file_type(found["id"]), "source": found["source"],
               "createdAt": found["updatedAt"], "updatedAt": found["updatedAt"], "contentHash": found["contentHash"],
               "metadata": {"root": found["source"], "totalLines": found["totalLines"],
                            **({"size": found["size"]} if "size" in found else {})}}
        chunks = [{"id": r["chunk_id"], "index": n, "content": r["content"], "startLine": r["start_line"],
                   "endLine": r["end_line"]} for n, r in enumerate(rows)]
        return doc, chunks

    def _upstream(self, event: Event, content_hash: str | None) -> dict[str, Any] | None:
        """A collected event's citation and whether its transcript still holds those lines. The event
        itself is the version indexed (the journal is immutable); `content_hash` must be its citation's."""
        from urchin import collectors
        from urchin.collectors.origin import TRANSCRIPT_SOURCES, origin_of, upstream_status
        from urchin.redact._idkey import IdKey

        origin = origin_of(event.meta)
        if origin is None:
            if content_hash is not None:
                raise QueryError("contentHash", f"event {event.id!r} has no upstream citation to compare with (it "
                                                "was not collected from a transcript): fetch it without contentHash")
            return None
        if content_hash is not None and content_hash != origin.hash:
            lines = f"{origin.path} lines {origin.first}-{origin.last}"
            raise QueryError("contentHash", f"event {event.id!r} was indexed from {lines} at content hash "
                                            f"{origin.hash}, not {content_hash}: that version changed (or the hash "
                                            "is another event's); search again for its current citation")
        folders = collectors.collector(event.source, self._settings).folders() \
            if event.source in TRANSCRIPT_SOURCES else []
        key = IdKey(self._settings.home).stored()
        status, reason = upstream_status(origin, folders, key) if key is not None else \
            ("unchecked", "this install has no key to check the hash with (it was made elsewhere)")
        return {**origin.location(), "status": status, **({"reason": reason} if reason else {})}

    def _fetch_file(self, source: str, doc_id: str, content_hash: str | None) -> dict[str, Any]:
        """A workspace file whole; with `content_hash` (a result's location.contentHash), only while its
        bytes still hash to it, else an error says it changed."""
        from urchin.hybrid.files import hash_file
        from urchin.workspace.access import check_relative

        check_relative(doc_id, "id")           # an absolute id stays absolute: refused, never re-rooted
        wanted = doc_id if source == "files" or doc_id.startswith(source + "/") else f"{source}/{doc_id}"
        files = self._workspace.files
        loc = files.locate(wanted, "id")
        if source != "files" and loc.root.name != source:
            raise NotFoundError(f"no file {doc_id!r} in workspace root {source!r}")
        if files.is_binary(loc):
            raise ValidationError("id", f"{doc_id!r} is a binary file")
        if loc.size > MAX_DOCUMENT_BYTES:
            raise ValidationError("id", f"{doc_id!r} has {loc.size} bytes, more than {MAX_DOCUMENT_BYTES}: "
                                        "read ranges with get_file")
        data = files.read_bytes(loc, MAX_DOCUMENT_BYTES + 1)
        if len(data) > MAX_DOCUMENT_BYTES:
            raise ValidationError("id", f"{doc_id!r} grew past {MAX_DOCUMENT_BYTES} bytes: read ranges with get_file")
        digest = hash_file(data)
        if content_hash is not None and content_hash != digest:
            raise QueryError("contentHash", f"{loc.display!r} changed since it was indexed (indexed "
                                            f"{content_hash}, now {digest}): search again for its current text")
        text = files.text_of(data)
        return {"source": loc.root.name, "id": loc.display, "type": "file", "content": text,
                "totalLines": len(text.splitlines()), "size": len(data), "contentHash": digest,
                "updatedAt": format_timestamp(datetime.fromtimestamp(loc.mtime, UTC), ms=False)}

    def db_setup(self, owner_password: str | None = None, reader_password: str | None = None) -> RoleSetup:
        """`urchin db setup`: the shared server's roles (owner, reader, feeder group); needs an admin URL."""
        return self.service.db_setup(owner_password, reader_password)

    def db_feeder(self, device: str, password: str | None = None, account: str | None = None) -> FeederRole:
        """`urchin db feeder DEVICE`: a role that may write only that device's rows, as `account`."""
        return self.service.db_feeder(device, password, account)

    def close(self) -> None:
        """Release the index connection and stop the embedded PostgreSQL this process started."""
        if self._service is not None:
            self._service.close()
            self._service = None


# ---- the embedded PostgreSQL across daemon lifetimes -----------------------------------------------
def adopt_embedded(settings: Settings, use: bool) -> None:
    """The embedded PostgreSQL a killed daemon left running is this daemon's now (held, so its stop
    stops it), or stopped when this daemon will not use it; as root, folders of removed homes go."""
    from urchin.hybrid import embedded, pgdata

    try:
        pid = embedded.adopt_or_stop(settings.pg_dir, use=use)
        if pid is not None:
            log.info("embedded PostgreSQL found running (pid %d): %s", pid, "adopted" if use else "stopped")
    except OSError as exc:
        log.warning("checking the embedded PostgreSQL's data failed: %s", exc)
    if os.name == "posix" and os.geteuid() == 0 and pgdata.ROOT_DATA.is_dir():
        # other homes' leftovers: swept beside the start, never before it (stopping a server can take
        # STOP_WAIT_S, and a folder another process is starting or removing is skipped, not waited on)
        threading.Thread(target=_sweep_orphans, name="urchin-pg-sweep", daemon=True).start()


def _sweep_orphans() -> None:
    from urchin.hybrid import embedded

    try:
        for orphan in embedded.remove_orphans(wait=False):
            log.info("removed %s: the PostgreSQL data of %s, whose home is gone", orphan.folder, orphan.link)
    except OSError as exc:
        log.warning("removing the PostgreSQL data of removed homes failed: %s", exc)


def stop_embedded(settings: Settings) -> None:
    from urchin.hybrid import embedded

    try:
        embedded.shutdown(settings.pg_dir)
    except OSError as exc:
        log.warning("stopping the embedded PostgreSQL failed: %s", exc)
