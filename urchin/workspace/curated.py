"""Curated memories: named, complete sets for known workflows ("release checklist").

A memory is `$URCHIN_HOME/memories/<slug>.toml` (human-editable) with a title, `use_when`, and
members: a file, a whole folder, or a saved journal query. Reading one returns every member's
current contents within a token budget, with coverage notes for what was left out.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from urchin.errors import NotFoundError, ValidationError
from urchin.fileio import write_private
from urchin.redact import Redactor
from urchin.search.budget import TokenBudget
from urchin.timestamps import format_timestamp

if TYPE_CHECKING:
    from urchin.workspace.access import FileAccess, Located

__all__ = ["Member", "CuratedMemory", "CuratedMemories", "MemorySummary", "MemoryContents"]


class MemorySummary(TypedDict):
    """A curated memory in a list: what it is for and how many members it has."""

    slug: str
    title: str
    useWhen: str
    members: int


class MemoryContents(TypedDict):
    """`get_memory`: every member's current contents (`member`, `type`, `content`), and the coverage notes
    of members cut or unreadable (`member`, `status`, `reason`)."""

    slug: str
    title: str
    useWhen: str
    members: list[dict[str, Any]]
    coverage: list[dict[str, str]]
    tokensUsed: int
    truncated: bool

_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
MAX_MEMBER_BYTES = 1024 * 1024     # a file member larger than this is listed in coverage, not read


@dataclass(frozen=True, slots=True)
class Member:
    type: str  # file | folder | query
    path: str | None = None
    query: str | None = None
    source: str | None = None
    hours: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("type", self.type), ("path", self.path), ("query", self.query),
                                  ("source", self.source), ("hours", self.hours)) if v is not None}


@dataclass(frozen=True, slots=True)
class CuratedMemory:
    slug: str
    title: str
    use_when: str
    members: tuple[Member, ...] = ()
    created: str = ""
    path: Path | None = field(default=None, compare=False)

    def summary(self) -> MemorySummary:
        return {"slug": self.slug, "title": self.title, "useWhen": self.use_when, "members": len(self.members)}


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # JSON escapes are valid TOML basic-string escapes


class CuratedMemories:
    def __init__(self, home: Path, redactor: Redactor | None = None) -> None:
        self.folder = home / "memories"
        self.redactor = redactor or Redactor()

    def create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
               replace: bool = False) -> CuratedMemory:
        if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
            raise ValidationError("slug", "must be lowercase letters, digits and '-', starting with a letter or digit")
        if not isinstance(use_when, str) or not use_when.strip():
            raise ValidationError("useWhen", "must not be blank: say when an agent should read this memory")
        if not members:
            raise ValidationError("members", "needs at least one --file, --folder or --query")
        for i, member in enumerate(members):
            if member.type in ("file", "folder") and not member.path:
                raise ValidationError(f"members[{i}].path", "must not be empty")
            if member.type == "query" and not (member.query and member.query.strip()):
                raise ValidationError(f"members[{i}].query", "must not be empty")
            if member.type not in ("file", "folder", "query"):
                raise ValidationError(f"members[{i}].type", "must be file, folder or query")
        path = self.folder / f"{slug}.toml"
        if path.exists() and not replace:
            raise ValidationError("slug", f"a memory named {slug!r} exists already")
        definition = CuratedMemory(slug, title or slug.replace("-", " ").capitalize(), use_when.strip(), tuple(members),
                               format_timestamp(ms=False), path)
        definition = self._redacted(definition, refuse=True)
        write_private(path, self._render(definition).encode("utf-8"))
        return definition

    def list(self) -> list[CuratedMemory]:
        if not self.folder.is_dir():
            return []
        out = []
        for path in sorted(self.folder.glob("*.toml")):
            try:
                out.append(self._load(path))
            except ValidationError:
                continue
        return out

    def get(self, slug: str) -> CuratedMemory:
        if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
            raise ValidationError("slug", "must be lowercase letters, digits and '-'")
        path = self.folder / f"{slug}.toml"
        if not path.exists():
            raise NotFoundError(f"no memory named {slug!r}")
        return self._load(path)

    def delete(self, slug: str) -> CuratedMemory:
        """Remove a memory's file; returns what it held (NotFoundError when there is none)."""
        definition = self.get(slug)
        (self.folder / f"{slug}.toml").unlink(missing_ok=True)
        return definition

    def _load(self, path: Path) -> CuratedMemory:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValidationError("memory", f"{path}: cannot read: {exc}") from None
        members = []
        for raw in data.get("members", []):
            if isinstance(raw, dict) and raw.get("type") in ("file", "folder", "query"):
                hours = raw.get("hours")
                members.append(Member(raw["type"], raw.get("path"), raw.get("query"), raw.get("source"),
                                      float(hours) if isinstance(hours, (int, float)) else None))
        return self._redacted(CuratedMemory(str(data.get("slug", path.stem)), str(data.get("title", path.stem)),
                                        str(data.get("use_when", "")), tuple(members), str(data.get("created", "")),
                                        path))

    def _redacted(self, d: CuratedMemory, refuse: bool = False) -> CuratedMemory:
        """Every text field through the one redactor, before writing and when served. A name or a
        path that holds a secret is refused when written (a redacted locator would find nothing)."""
        def text(value: str) -> str:
            return self.redactor.redact_text(value)[0]

        def locator(value: str | None, field_name: str) -> str | None:
            if value is None or not self.redactor.spans(value):
                return value
            if refuse:
                raise ValidationError(field_name, "holds what looks like a secret; choose another")
            return text(value)

        locator(d.slug, "slug")
        members = tuple(Member(m.type, locator(m.path, f"members[{i}].path"), m.query and text(m.query),
                               m.source and text(m.source), m.hours) for i, m in enumerate(d.members))
        return CuratedMemory(text(d.slug), text(d.title), text(d.use_when), members, text(d.created), d.path)

    @staticmethod
    def _render(d: CuratedMemory) -> str:
        lines = [f"slug = {_toml_str(d.slug)}", f"title = {_toml_str(d.title)}",
                 f"use_when = {_toml_str(d.use_when)}", f"created = {_toml_str(d.created)}"]
        for member in d.members:
            lines += ["", "[[members]]"]
            for key, value in member.to_dict().items():
                lines.append(f"{key} = {value!r}" if isinstance(value, float) else f"{key} = {_toml_str(str(value))}")
        return "\n".join(lines) + "\n"


def gather(definition: CuratedMemory, files: FileAccess, run_query: Any, token_budget: int) -> MemoryContents:
    """Every member's current contents, best effort within `token_budget` tokens (4 chars each).

    Files are read through `files` (checked and redacted); `run_query(member)` returns the text lines
    of a query member's events. Members that cannot be read are listed in `coverage`, never dropped.
    """
    from urchin.workspace.roots import walk_files

    budget = TokenBudget(token_budget)
    parts: list[dict[str, Any]] = []
    coverage: list[dict[str, str]] = []

    def add(label: str, text: str, kind: str) -> None:
        head = budget.take(text)
        if text and not head:
            coverage.append({"member": label, "status": "excluded", "reason": "token budget spent"})
            return
        if head is not text:
            coverage.append({"member": label, "status": "truncated", "reason": "token budget"})
        parts.append({"member": label, "type": kind, "content": head})

    def add_file(loc: Located) -> None:
        if files.is_binary(loc):
            coverage.append({"member": loc.display, "status": "excluded", "reason": "binary file"})
        elif loc.size > MAX_MEMBER_BYTES:      # every read is bounded: a member is read whole or not at all
            coverage.append({"member": loc.display, "status": "excluded",
                             "reason": f"over {MAX_MEMBER_BYTES} bytes: read it in ranges with get_file"})
        else:
            add(loc.display, files.read_text(loc, MAX_MEMBER_BYTES), "file")

    for member in definition.members:
        label = member.path or member.query or "?"
        try:
            if member.type == "query":
                add(f"query:{member.query}", "\n".join(run_query(member)), "query")
            elif member.type == "file":
                add_file(files.locate(member.path or ""))
            else:
                root, rel = files.locate_folder(member.path or "")
                prefix = rel.rstrip("/") + "/"
                for item in walk_files(root):
                    if rel == "" or item.rel.startswith(prefix):
                        try:
                            add_file(files.locate_in(root, item.rel))
                        except (NotFoundError, ValidationError) as exc:
                            coverage.append({"member": item.display, "status": "unreadable", "reason": str(exc)})
        except (NotFoundError, ValidationError) as exc:
            coverage.append({"member": label, "status": "unreadable", "reason": str(exc)})
        except OSError as exc:
            coverage.append({"member": label, "status": "unreadable", "reason": exc.strerror or str(exc)})
    return {"slug": definition.slug, "title": definition.title, "useWhen": definition.use_when,
            "members": parts, "coverage": coverage, "tokensUsed": budget.used,
            "truncated": any(c["status"] in ("truncated", "excluded") and "budget" in c["reason"] for c in coverage)}
