# mypy: disable-error-code="attr-defined"
# (a mixin of `Memory`: the attributes and methods it uses are Memory's own)
"""Memory's workspace operations: roots, ranged reads, curated memories and the overview."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import UrchinError
from urchin.journal import Journal
from urchin.search.query import check_hours, check_limit, one_line

if TYPE_CHECKING:
    from urchin.search.substring import SubstringSearcher
    from urchin.workspace.access import FileAccess
    from urchin.workspace.memories import Member, MemoryDef
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Root, Roots


class WorkspaceOps:
    """Mixed into `Memory`; uses its settings, journal and views."""

    settings: Settings
    journal: Journal
    substring: SubstringSearcher

    # ---- workspace files and curated memories -------------------------------------------------
    @property
    def roots(self) -> Roots:
        from urchin.workspace.roots import Roots

        return Roots(self.settings.home)

    @property
    def files(self) -> FileAccess:
        """The one reader of workspace files (resolve, check, open what was checked, redact)."""
        from urchin.workspace.access import file_access

        return file_access(self.settings, self.roots.list())

    def workspace_add(self, path: str, name: str | None = None, allow_secret_files: bool = False) -> Root:
        return self.roots.add(path, name, allow_secret_files)

    def workspace_remove(self, name: str) -> Root:
        return self.roots.remove(name)

    def workspace_list(self) -> list[Root]:
        return self.roots.list()

    def get_file(self, path: str, from_line: int = 1, max_lines: int = 200) -> FileRange:
        """A window of numbered lines of a workspace file; paths outside the roots are refused."""
        from urchin.workspace.reader import read_range

        return read_range(self.files, path, from_line, max_lines)

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
                      replace: bool = False) -> MemoryDef:
        """Save a curated memory; a file or folder member must lie inside a root (it may not exist yet)."""
        from urchin.workspace.memories import MemoryStore

        files = self.files
        for member in members:   # a saved window must be one `search` accepts, or every read would fail
            if member.hours is not None:
                check_hours(member.hours)
        for i, member in enumerate(members):
            if member.type in ("file", "folder") and member.path:
                files.check_member(member.path, f"members[{i}].path")
        return MemoryStore(self.settings.home, self.ingestor.redactor).create(slug, use_when, members, title, replace)

    def memory_list(self) -> list[MemoryDef]:
        from urchin.workspace.memories import MemoryStore

        return MemoryStore(self.settings.home, self.ingestor.redactor).list()

    def memory_get(self, slug: str, token_budget: int = 8000) -> dict[str, Any]:
        """A curated memory with every member's current contents, and coverage notes."""
        from urchin.workspace.memories import MemoryStore, gather

        budget = check_limit(token_budget, 200_000) if token_budget != 8000 else token_budget
        definition = MemoryStore(self.settings.home, self.ingestor.redactor).get(slug)

        def run_query(member: Member) -> list[str]:
            result = self.search(member.query or "", hours=member.hours or 24 * 365, limit=50, source=member.source)
            return [one_line(hit.event, width=2000) for hit in result.hits]

        return gather(definition, self.files, run_query, budget)

    def overview(self) -> dict[str, Any]:
        """Where an agent new to a workspace starts: files, recent changes, sources, memories."""
        from urchin.workspace.overview import root_overview

        files = self.files
        roots = files.roots
        out: dict[str, Any] = {
            "roots": [root_overview(root, files) for root in roots],
            "memories": [m.summary() for m in self.memory_list()],
            "journal": {k: v for k, v in self.status().items() if k in ("events", "firstTimestamp", "lastTimestamp")},
            "sources": [{"name": c["name"], "found": c.get("found"), "events": c.get("events", 0),
                         "lastRun": c.get("lastRun"), "lastError": c.get("lastError")}
                        for c in self.collectors_status()],
        }
        out["index"] = self._file_index_state(files)
        return out

    def _file_index_state(self, files: FileAccess) -> dict[str, Any]:
        """Per root: files indexed, cataloged (over the size cap), pending (not yet seen), failed."""
        try:
            status = self.index_status()
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
