# mypy: disable-error-code="attr-defined"
# (a mixin of `Memory`: the attributes and methods it uses are Memory's own)
"""Memory's Postgres hybrid index operations: feed, `search_context`, single sources (driver loads on first use)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import NotFoundError, QueryError, ValidationError
from urchin.journal import Journal

if TYPE_CHECKING:
    from urchin.index.feeder import FeedReport
    from urchin.index.files import FileIndexReport
    from urchin.index.hybrid import ContextResult
    from urchin.index.service import IndexService
    from urchin.search.substring import SubstringSearcher

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024     # fetch_source_document returns whole files up to this size


class IndexOps:
    """Mixed into `Memory`; uses its settings, journal and views."""

    settings: Settings
    journal: Journal
    substring: SubstringSearcher
    _index: IndexService | None

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
        return self.index_service.context(parsed, files=self.files)

    def document_search(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """textrawl's `search` (wire-named parameters) over the same hybrid query as `context`."""
        from urchin.index.docsearch import run_search

        curated = self.memory_list() if params.get("includeMemories") is True else []
        return run_search(self.context, curated, params)

    def index(self, rebuild: bool = False, follow: bool = False,
              on_progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> FeedReport:
        """Feed the journal into the index; `rebuild` empties it first; `follow` runs until `stop` is set."""
        return self.index_service.index(rebuild=rebuild, follow=follow, on_progress=on_progress, stop=stop)

    def query_source(self, source: str, query: str, limit: int = 10) -> ContextResult:
        """`search_context` on one source only: a journal source (claude, git, ...) or a workspace root's files.

        A root searches its indexed chunks and reads its cataloged (over-cap) files live, under the same
        byte budget as `mode: live`; an unknown source is an error listing the known ones.
        """
        if not isinstance(source, str) or not source.strip():
            raise QueryError("source", "must not be empty")
        source = source.strip()
        roots = [r.name for r in self.workspace_list()]
        if source in roots:
            return self.context(query=query, limit=limit, sources=["files"], workspace=source, mode="live")
        known = self.index_service.known_sources()
        if source not in known:
            names = sorted(set(known) | set(roots))
            raise QueryError("source", f"unknown source {source!r} (known: {', '.join(names) or 'none yet'})")
        return self.context(query=query, limit=limit, sources=[source])

    def fetch_source_document(self, source: str, doc_id: str, content_hash: str | None = None) -> dict[str, Any]:
        """One whole document: an event by id (of that source), or a file of a workspace root (its whole text).

        For a root, `doc_id` is the path inside it (or `<root>/<path>`; source `files` takes `<root>/<path>`).
        Paths that leave the root are refused; files over MAX_DOCUMENT_BYTES are refused (read ranges instead).
        `content_hash` (a file result's `location.contentHash`) asks for the version that was indexed: the
        file is returned only while its bytes still hash to it, else an error says it changed.
        """
        if not isinstance(source, str) or not source.strip():
            raise QueryError("source", "must not be empty")
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise QueryError("id", "must not be empty")
        source, doc_id = source.strip(), doc_id.strip()
        names = {r.name for r in self.workspace_list()}
        if source in names or source == "files":
            from urchin.workspace.access import check_relative

            check_relative(doc_id, "id")           # an absolute id stays absolute: refused, never re-rooted
            wanted = doc_id if source == "files" or doc_id.startswith(source + "/") else f"{source}/{doc_id}"
            files = self.files
            loc = files.locate(wanted, "id")
            if source != "files" and loc.root.name != source:
                raise NotFoundError(f"no file {doc_id!r} in workspace root {source!r}")
            if files.is_binary(loc):
                raise ValidationError("id", f"{doc_id!r} is a binary file")
            if loc.size > MAX_DOCUMENT_BYTES:
                raise ValidationError("id", f"{doc_id!r} has {loc.size} bytes, more than {MAX_DOCUMENT_BYTES}: "
                                            "read ranges with get_file")
            from urchin.index.files import hash_file

            data = files.read_bytes(loc, MAX_DOCUMENT_BYTES + 1)
            if len(data) > MAX_DOCUMENT_BYTES:
                raise ValidationError("id", f"{doc_id!r} grew past {MAX_DOCUMENT_BYTES} bytes: read ranges "
                                            "with get_file")
            digest = hash_file(data)
            if content_hash is not None and content_hash != digest:
                raise QueryError("contentHash", f"{loc.display!r} changed since it was indexed (indexed "
                                                f"{content_hash}, now {digest}): search again for its current text")
            text = files.text_of(data)
            return {"source": loc.root.name, "id": loc.display, "type": "file", "content": text,
                    "totalLines": len(text.splitlines()), "size": len(data), "contentHash": digest,
                    "updatedAt": datetime.fromtimestamp(loc.mtime, UTC).isoformat(timespec="seconds")}
        event = self.get(doc_id)
        if event.source != source:
            raise NotFoundError(f"event {doc_id!r} is not from source {source!r} (it is from {event.source!r})")
        return {"source": source, "id": event.id, "type": "event", "content": event.content, "event": event.to_dict()}

    def index_files(self) -> FileIndexReport:
        """Index the workspace roots' files (changed ones re-chunked, vanished ones removed)."""
        return self.index_service.index_files(self.files)

    def index_status(self) -> dict[str, Any]:
        return self.index_service.status()

    def close(self) -> None:
        """Release the index connection and stop the embedded PostgreSQL this process started."""
        if self._index is not None:
            self._index.close()
            self._index = None
