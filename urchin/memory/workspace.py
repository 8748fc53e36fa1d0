"""Memory's workspace part: roots, ranged reads of files, curated memories and the overview."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import UrchinError
from urchin.search.query import check_hours

if TYPE_CHECKING:
    from urchin.params.workspace import FileParams, MemoryParams
    from urchin.redact import Redactor
    from urchin.workspace.access import FileAccess
    from urchin.workspace.memories import Member, MemoryDef, MemoryStore
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Roots

__all__ = ["Workspace"]

class Workspace:
    """Workspace roots and what lives in them. Part of `Memory` (which passes the redactor and queries)."""

    def __init__(self, settings: Settings, redactor: Callable[[], Redactor]) -> None:
        self._settings = settings
        self._redactor = redactor

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
    def _store(self) -> MemoryStore:
        from urchin.workspace.memories import MemoryStore

        return MemoryStore(self._settings.home, self._redactor())

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None,
                      replace: bool) -> MemoryDef:
        files = self.files
        for member in members:   # a saved window must be one `search` accepts, or every read would fail
            if member.hours is not None:
                check_hours(member.hours)
        for i, member in enumerate(members):
            if member.type in ("file", "folder") and member.path:
                files.check_member(member.path, f"members[{i}].path")
        return self._store().create(slug, use_when, members, title, replace)

    def memory_list(self) -> list[MemoryDef]:
        return self._store().list()

    def memory_get(self, params: MemoryParams, run_query: Callable[[Member], list[str]]) -> dict[str, Any]:
        from urchin.workspace.memories import gather

        return gather(self._store().get(params.slug), self.files, run_query, params.token_budget)

    def memory_delete(self, slug: str) -> MemoryDef:
        """Remove a curated memory; its definition is returned (NotFoundError when there is none)."""
        return self._store().delete(slug)

    def memory_edit(self, slug: str, use_when: str | None, members: list[Member] | None,
                    title: str | None) -> MemoryDef:
        """Change what is given (when to use, title, the whole member list); the rest stays."""
        old = self._store().get(slug)
        return self.memory_create(slug, old.use_when if use_when is None else use_when,
                                  list(old.members) if members is None else members,
                                  old.title if title is None else title, replace=True)

    # ---- the overview ---------------------------------------------------------------------------
    def overview(self, journal: dict[str, Any], sources: list[dict[str, Any]],
                 index_status: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Where an agent new to a workspace starts: files, recent changes, sources, memories."""
        from urchin.workspace.overview import root_overview

        files = self.files
        return {
            "roots": [root_overview(root, files) for root in files.roots],
            "memories": [m.summary() for m in self.memory_list()],
            "journal": journal,
            "sources": [{"name": c["name"], "found": c.get("found"), "events": c.get("events", 0),
                         "lastRun": c.get("lastRun"), "lastError": c.get("lastError")} for c in sources],
            "index": self._file_index_state(files, index_status),
        }

    def _file_index_state(self, files: FileAccess, index_status: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Per root: files indexed, cataloged (over the size cap), pending (not yet seen), failed."""
        try:
            status = index_status()
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
