"""MCP tools over workspace files and curated memories: ranged reads, overview, memories.

Each runner makes one `Memory` call and returns (text, structuredContent), like the core tools.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from urchin.contract.render import render_context, render_memories, render_memory, render_overview

if TYPE_CHECKING:
    from urchin.facade.api import Facade
    from urchin.params.sources import FetchParams, QuerySourceParams
    from urchin.params.workspace import CuratedMemoryParams, FileParams

__all__ = ["RUNNERS", "OUTPUT", "DOCS", "READ_ONLY"]

Reply = tuple[str, Mapping[str, object]]


def _get_file(memory: Facade, a: FileParams) -> Reply:
    window = memory.get_file(a)
    return window.render(), window.to_dict()


def _overview(memory: Facade, a: dict[str, Any]) -> Reply:
    info = memory.overview()
    return render_overview(info), info


def _list_memories(memory: Facade, a: dict[str, Any]) -> Reply:
    items = [m.summary() for m in memory.memory_list()]
    return render_memories(items), {"memories": items}


def _get_memory(memory: Facade, a: CuratedMemoryParams) -> Reply:
    result = memory.memory_get(a)
    return render_memory(result), result


def _query_source(memory: Facade, a: QuerySourceParams) -> Reply:
    result = memory.query_source(a).to_dict()
    return render_context(result), result


def _fetch_document(memory: Facade, a: FetchParams) -> Reply:
    doc = memory.fetch_source_document(a)
    return str(doc["content"]), doc      # every document carries its text


_RANGE_OUT = {"type": "object", "properties": {
    "path": {"type": "string"}, "fromLine": {"type": "integer"}, "toLine": {"type": "integer"},
    "totalLines": {"type": "integer"}, "totalLinesNote": {"type": "string"}, "truncated": {"type": "boolean"},
    "lines": {"type": "array", "items": {"type": "object", "properties": {
        "n": {"type": "integer"}, "text": {"type": "string"}}, "required": ["n", "text"]}}},
    "required": ["path", "fromLine", "toLine", "lines"]}        # totalLines: absent past the scan bound

OUTPUT: dict[str, dict[str, Any]] = {
    "get_file": _RANGE_OUT,
    "get_workspace_overview": {"type": "object", "properties": {"roots": {"type": "array"},
                                                               "memories": {"type": "array"}},
                               "required": ["roots", "memories"]},
    "list_memories": {"type": "object", "properties": {"memories": {"type": "array", "items": {
        "type": "object", "properties": {"slug": {"type": "string"}, "title": {"type": "string"},
                                         "useWhen": {"type": "string"}, "members": {"type": "integer"}},
        "required": ["slug", "title", "useWhen", "members"]}}}, "required": ["memories"]},
    "get_memory": {"type": "object", "properties": {
        "slug": {"type": "string"}, "members": {"type": "array"}, "coverage": {"type": "array"},
        "tokensUsed": {"type": "integer"}, "truncated": {"type": "boolean"}},
        "required": ["slug", "members", "coverage", "tokensUsed", "truncated"]},
    "query_source": {"type": "object", "properties": {
        "query": {"type": "string"}, "results": {"type": "array"}, "coverage": {"type": "object"},
        "truncated": {"type": "boolean"}, "tokensUsed": {"type": "integer"}},
        "required": ["query", "results", "coverage", "truncated", "tokensUsed"]},
    "fetch_source_document": {"type": "object", "properties": {
        "source": {"type": "string"}, "id": {"type": "string"}, "type": {"type": "string", "enum": ["event", "file"]},
        "content": {"type": "string"}, "upstream": {"type": "object"}, "contentHash": {"type": "string"},
        "version": {"type": "string", "enum": ["indexed", "live"]}},
        "required": ["source", "id", "type", "content"]},
}

DOCS: dict[str, tuple[str, str]] = {
    "get_file": ("Read lines of a workspace file", (
        "Read a range of lines of a file in a workspace root, with line numbers and the file's total line "
        "count (at most 2000 lines; a line over 4096 characters is cut, and past 64 MiB the count is left out "
        "with totalLinesNote). Search first (search_context or "
        "urchin_search) and read only the ranges the results point at; never read whole files. Paths "
        "outside the workspace roots (and '..') are refused, and so are ignored files and secret stores "
        "(.env, keys, credentials) unless the root opts in; secrets read as [REDACTED:type], line numbers kept.")),
    "get_workspace_overview": ("Workspace overview", (
        "Start here in a workspace you do not know: its roots, file and folder counts, largest folders, "
        "recently changed files, index state, connected sources and the curated memories available.")),
    "list_memories": ("List curated memories", (
        "Curated memories are complete, named sets (files, folders, saved searches) for known workflows "
        "such as a release checklist. Lists each slug, title, when to use it and its member count.")),
    "get_memory": ("Get a curated memory", (
        "Every member of a curated memory, with its current contents, within a token budget (4 characters "
        "per token). Use it when a task matches the memory's 'use when'. Members left out "
        "(missing, unreadable, over budget) are listed under coverage.")),
    "query_source": ("Search one source", (
        "Search one source only, ranked like search_context: a journal source (`claude`, `git`, ...) or one "
        "workspace root's files. Results carry citations; read file ranges with get_file.")),
    "fetch_source_document": ("Fetch one whole document", (
        "Return one whole document by its id: an event (source = its journal source) or a workspace file "
        "(source = the root's name, id = the path inside it). Prefer get_file ranges for long files; files "
        "outside the workspace roots, ignored files, secret stores (unless the root opts in) and files over "
        "4 MiB are refused; secrets read as [REDACTED:type]. A file the index holds comes from the index, "
        "at the version indexed (the one results cite), with its contentHash; mode live reads the file as it "
        "is now (a file the index does not hold is always read live; `version` says which). A collected "
        "event's `upstream` names the transcript lines it came from and whether they still hold what was "
        "indexed (status unchanged, changed or missing); pass a result's contentHash to insist on that version.")),
}

RUNNERS: dict[str, Callable[[Facade, Any], Reply]] = {
    "get_file": _get_file, "get_workspace_overview": _overview, "list_memories": _list_memories,
    "get_memory": _get_memory, "query_source": _query_source, "fetch_source_document": _fetch_document}
READ_ONLY = set(RUNNERS)
