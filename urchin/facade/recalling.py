"""Memory's recall part: what an agent is told without asking (`urchin/recall/`), read from the views."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.event import Event
from urchin.facade.hot import HotViews
from urchin.facade.semantic import SemanticViews
from urchin.facade.workspace import Workspace
from urchin.facade.writing import WritePath
from urchin.search.query import Filters, Hit
from urchin.search.substring import SubstringSearcher

if TYPE_CHECKING:
    from urchin.params.recall import RecallParams
    from urchin.recall import RecallResult
    from urchin.recall.reader import Reader

__all__ = ["Recalling"]

Audit = Callable[[Mapping[str, Any]], None]


class Recalling:
    """The session-start digest and a prompt's relevant records. Part of `Memory`, which passes the views
    it reads (substring, hot, ranked), the workspace (curated memories) and the write path (the audit
    record, the redactor, ephemeral mode)."""

    def __init__(self, settings: Settings, substring: SubstringSearcher, hot: HotViews, semantic: SemanticViews,
                 workspace: Workspace, write: WritePath) -> None:
        self._settings = settings
        self._substring = substring
        self._hot = hot
        self._semantic = semantic
        self._workspace = workspace
        self._write = write

    def use(self, settings: Settings) -> None:
        """Settings read again (config.toml changed): `[recall]` applies from the next digest."""
        self._settings = settings

    def recall(self, p: RecallParams, now: datetime | None, audit: Audit | None) -> RecallResult:
        from urchin.recall import recall

        return recall(self.reader(audit), workspace=p.workspace, cwd=p.cwd, session=p.session, prompt=p.prompt,
                      budget=p.budget, now=now)

    def reader(self, audit: Audit | None = None) -> Reader:
        """What recall reads through; an audit record is written (or handed to `audit`)."""
        from urchin.recall.frame import remembered
        from urchin.recall.reader import Reader

        def recent(filters: Filters, since_ms: int, limit: int) -> list[Event]:
            if filters.session is not None:     # a session's own rows, not a scan of the window
                events = self._semantic.cosine().session_events(filters, since_ms, limit)
                if events is not None:
                    return events
            self._hot.catch_up()
            return self._substring.newest(filters, since_ms=since_ms, limit=limit)   # kept between digests

        def ranked(query: str, filters: Filters, since_ms: int, limit: int) -> Iterable[Hit]:
            return self._semantic.cosine().search_lazily(query, since_ms=since_ms, limit=limit, filters=filters)

        def record(item: Mapping[str, Any]) -> None:
            self._write.ingestor.ingest([item])

        return Reader(recent, ranked, lambda: [(m.slug, m.title, m.use_when) for m in self._workspace.memory_list()],
                      remembered(self._write.ingestor.redactor), audit or record,
                      lambda: self._write.ingestor.ephemeral.is_on(), self._settings.config)
