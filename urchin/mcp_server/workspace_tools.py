"""MCP tools over workspace files and curated memories: ranged reads, overview, memories.

Each runner makes one `Memory` call and returns (text, structuredContent), like the core tools.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RUNNERS", "INPUT", "OUTPUT", "DOCS", "READ_ONLY"]

Reply = tuple[str, dict[str, Any]]


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


def _get_file(memory: Any, a: dict[str, Any]) -> Reply:
    window = memory.get_file(a["path"], int(a.get("fromLine", 1)), int(a.get("maxLines", 200)))
    return window.render(), window.to_dict()


def _overview(memory: Any, a: dict[str, Any]) -> Reply:
    info = memory.overview()
    lines = []
    for root in info["roots"]:
        lines.append(f"{root['name']} ({root['path']}): {root['files']} files, {root['folders']} folders")
        lines += [f"  {f['folder']}: {f['files']} files" for f in root["largestFolders"]]
        lines += [f"  changed {c['updatedAt']}: {c['path']}" for c in root["recentChanges"][:5]]
    if "index" in info:
        lines.append("index: " + ", ".join(f"{k}={v}" for k, v in info["index"].items()))
    for source in info.get("sources", []):
        lines.append(f"source {source['name']}: last run {source.get('lastRun')}")
    lines += [f"memory {m['slug']}: use when {m['useWhen']}" for m in info["memories"]]
    return "\n".join(lines), info


def _list_memories(memory: Any, a: dict[str, Any]) -> Reply:
    items = [m.summary() for m in memory.memory_list()]
    text = "\n".join(f"{m['slug']}: {m['title']} ({m['members']} members) — use when: {m['useWhen']}"
                     for m in items)
    return text, {"memories": items}


def _get_memory(memory: Any, a: dict[str, Any]) -> Reply:
    result = memory.memory_get(a["slug"], int(a.get("tokenBudget", 8000)))
    parts = [f"# {result['title']} — use when: {result['useWhen']}"]
    parts += [f"## {p['member']}\n{p['content']}" for p in result["members"]]
    parts += [f"[coverage] {c['member']}: {c['status']} ({c['reason']})" for c in result["coverage"]]
    return "\n\n".join(parts), result


def _query_source(memory: Any, a: dict[str, Any]) -> Reply:
    result = memory.query_source(a["source"], a["query"], int(a.get("limit", 10)))
    lines = [f"{r['citation']} ({r['score']:.3f})\n{r['content']}" for r in result.results]
    return "\n\n".join(lines) or "no results", result.to_dict()


def _fetch_document(memory: Any, a: dict[str, Any]) -> Reply:
    doc = memory.fetch_source_document(a["source"], a["id"], a.get("contentHash"))
    return doc["content"], doc


_PATH = {"type": "string", "minLength": 1,
         "description": "`<root name>/<path>`, or just `<path>` when only one workspace root holds it."}

INPUT: dict[str, dict[str, Any]] = {
    "get_file": _obj({
        "path": _PATH,
        "fromLine": {"type": "integer", "minimum": 1, "default": 1, "description": "First line (default 1)."},
        "maxLines": {"type": "integer", "minimum": 1, "maximum": 2000, "default": 200,
                     "description": "Lines to return (default 200, at most 2000)."},
    }, ("path",)),
    "get_workspace_overview": _obj({}),
    "list_memories": _obj({}),
    "get_memory": _obj({
        "slug": {"type": "string", "minLength": 1, "description": "The memory's slug, from list_memories."},
        "tokenBudget": {"type": "integer", "minimum": 1, "maximum": 200000, "default": 8000,
                        "description": "Most tokens to return, at 4 characters each (default 8000)."},
    }, ("slug",)),
    "query_source": _obj({
        "source": {"type": "string", "minLength": 1, "description": (
            "One source: a journal source such as `claude`, `git` or `shell`, or a workspace root's name "
            "(its files only).")},
        "query": {"type": "string", "minLength": 1, "maxLength": 4000,
                  "description": "What to look for (websearch syntax: \"phrases\", -excluded, or)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
                  "description": "Most results (default 10)."},
    }, ("source", "query")),
    "fetch_source_document": _obj({
        "source": {"type": "string", "minLength": 1, "description": (
            "The result's source: a journal source (then `id` is an event id), a workspace root's name "
            "(then `id` is a path inside it) or `files` (then `id` is `<root>/<path>`).")},
        "id": {"type": "string", "minLength": 1, "description": "The event id or file path to return whole."},
        "contentHash": {"type": "string", "minLength": 1, "description": (
            "A file result's location.contentHash: return the file only if it is still that version, else an "
            "error says it changed (default: the current version).")},
    }, ("source", "id")),
}

_RANGE_OUT = {"type": "object", "properties": {
    "path": {"type": "string"}, "fromLine": {"type": "integer"}, "toLine": {"type": "integer"},
    "totalLines": {"type": "integer"}, "truncated": {"type": "boolean"},
    "lines": {"type": "array", "items": {"type": "object", "properties": {
        "n": {"type": "integer"}, "text": {"type": "string"}}, "required": ["n", "text"]}}},
    "required": ["path", "fromLine", "toLine", "totalLines", "lines"]}

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
        "content": {"type": "string"}}, "required": ["source", "id", "type", "content"]},
}

DOCS: dict[str, tuple[str, str]] = {
    "get_file": ("Read lines of a workspace file", (
        "Read a range of lines of a file in a workspace root, with line numbers and the file's total line "
        "count (defaults: fromLine 1, maxLines 200, at most 2000). Search first (search_context or "
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
        "per token; default tokenBudget 8000). Use it when a task matches the memory's 'use when'. Members left out "
        "(missing, unreadable, over budget) are listed under coverage.")),
    "query_source": ("Search one source", (
        "Search one source only, ranked like search_context: a journal source (`claude`, `git`, ...) or one "
        "workspace root's files (default limit 10). Results carry citations; read file ranges with get_file.")),
    "fetch_source_document": ("Fetch one whole document", (
        "Return one whole document by its id: an event (source = its journal source) or a workspace file "
        "(source = the root's name, id = the path inside it). Prefer get_file ranges for long files; files "
        "outside the workspace roots, ignored files, secret stores (unless the root opts in) and files over "
        "4 MiB are refused; secrets read as [REDACTED:type].")),
}

RUNNERS = {"get_file": _get_file, "get_workspace_overview": _overview, "list_memories": _list_memories,
           "get_memory": _get_memory, "query_source": _query_source, "fetch_source_document": _fetch_document}
READ_ONLY = set(RUNNERS)
