"""Memory's workspace part: roots, ranged reads of files, curated memories and the overview."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from urchin.config import Settings
from urchin.errors import UrchinError
from urchin.facade.events import JournalEvents
from urchin.facade.writing import WritePath
from urchin.search.query import check_hours, one_line

if TYPE_CHECKING:
    from urchin.collectors import CollectorStatus
    from urchin.hybrid.base import IndexState
    from urchin.jsontypes import JSONObject
    from urchin.params.workspace import CuratedMemoryParams, FileParams
    from urchin.workspace.access import FileAccess
    from urchin.workspace.curated import CuratedMemories, CuratedMemory, Member, MemoryContents, MemorySummary
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Roots

__all__ = ["Workspace", "IndexStatus", "Overview"]


class Overview(TypedDict):
    """`overview`: each root's files and recent changes, the curated memories, the journal's span, each
    source's last run, and the file index's state per root."""

    roots: list[JSONObject]
    memories: list[MemorySummary]
    journal: JSONObject
    sources: list[JSONObject]
    index: JSONObject


class IndexStatus(Protocol):
    """What the overview asks the hybrid index (`HybridIndex.status`)."""

    def status(self) -> IndexState: ...


class Workspace:
    """Workspace roots and what lives in them. Part of `Memory`, which passes the write path (its
    redactor) and the journal's events (a curated memory's query members)."""

    def __init__(self, settings: Settings, write: WritePath, events: JournalEvents) -> None:
        self._settings = settings
        self._write = write
        self._events = events

    def use(self, settings: Settings) -> None:
        """Settings read again (config.toml changed): workspace files read them per call."""
        self._settings = settings

    @property
    def roots(self) -> Roots:
        from urchin.workspace.roots import Roots

        return Roots(self._settings.home)

    @property
    def files(self) -> FileAccess:
        """The one reader of workspace files (resolve, check, open what was checked, redact)."""
        from urchin.workspace.access import file_access

        return file_access(self._settings, self.roots.list())

    def get_file(self, params: FileParams) -> FileRange:
        from urchin.workspace.reader import read_range

        return read_range(self.files, params)

    # ---- curated memories -----------------------------------------------------------------------
    def _store(self) -> CuratedMemories:
        from urchin.workspace.curated import CuratedMemories

        return CuratedMemories(self._settings.home, self._write.ingestor.redactor)

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
                      replace: bool = False) -> CuratedMemory:
        """Save a curated memory; a file or folder member must lie inside a root (it may not exist yet)."""
        files = self.files
        for member in members:   # a saved window must be one `search` accepts, or every read would fail
            if member.hours is not None:
                check_hours(member.hours)
        for i, member in enumerate(members):
            if member.type in ("file", "folder") and member.path:
                files.check_member(member.path, f"members[{i}].path")
        return self._store().create(slug, use_when, members, title, replace)

    def memory_list(self) -> list[CuratedMemory]:
        return self._store().list()

    def memory_get(self, params: CuratedMemoryParams) -> MemoryContents:
        from urchin.workspace.curated import gather

        return gather(self._store().get(params.slug), self.files, self._member_lines, params.token_budget)

    def _member_lines(self, member: Member) -> list[str]:
        """A query member's events, as lines."""
        from urchin.params.search import SearchParams

        # a saved window is held to the rule `memory create` holds it to (and its error), not search's
        hours = check_hours(member.hours or 24 * 365)
        result = self._events.search(SearchParams.of(member.query or "", hours=hours, limit=50, source=member.source),
                                     None)
        return [one_line(hit.event, width=2000) for hit in result.hits]

    def memory_delete(self, slug: str) -> CuratedMemory:
        """Delete a curated memory; returns what it held (NotFoundError when there is none)."""
        return self._store().delete(slug)

    def memory_edit(self, slug: str, *, use_when: str | None = None, members: list[Member] | None = None,
                    title: str | None = None) -> CuratedMemory:
        """Change a curated memory: what is given replaces what it held (members as a whole list); the rest stays."""
        old = self._store().get(slug)
        return self.memory_create(slug, old.use_when if use_when is None else use_when,
                                  list(old.members) if members is None else members,
                                  old.title if title is None else title, replace=True)

    # ---- the overview ---------------------------------------------------------------------------
    def overview(self, journal: JSONObject, sources: list[CollectorStatus], index: IndexStatus) -> Overview:
        """Where an agent new to a workspace starts: files, recent changes, sources, memories."""
        from urchin.workspace.overview import root_overview

        files = self.files
        return {
            "roots": [root_overview(root, files) for root in files.roots],
            "memories": [m.summary() for m in self.memory_list()],
            "journal": journal,
            "sources": [{"name": c["name"], "found": c.get("found"), "events": c.get("events", 0),
                         "lastRun": c.get("lastRun"), "lastError": c.get("lastError")} for c in sources],
            "index": self._file_index_state(files, index),
        }

    def _file_index_state(self, files: FileAccess, index: IndexStatus) -> dict[str, Any]:
        """Per root: files indexed, cataloged (over the size cap), pending (not yet seen), failed."""
        try:
            status = index.status()
        except (UrchinError, ImportError) as exc:
            return {"available": False, "reason": str(exc)}
        from urchin.workspace.overview import binary_file
        from urchin.workspace.roots import walk_files

        by_root = status.get("files", {})
        out: dict[str, Any] = {"available": True, "chunks": status.get("chunks"), "roots": {}}
        for root in files.roots:
            states = by_root.get(root.name, {})
            known = sum(states.values())
            on_disk = sum(1 for item in walk_files(root)             # binaries are never indexed
                          if not binary_file(files, root, item.rel))
            out["roots"][root.name] = {"indexed": states.get("indexed", 0), "cataloged": states.get("cataloged", 0),
                                       "failed": states.get("failed", 0), "pending": max(0, on_disk - known)}
        return out
