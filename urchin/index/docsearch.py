"""textrawl's `search` tool (seed 003) over the one hybrid query (`run_context` via `Memory.context`).

Documents are workspace file chunks and journal events (not memories); memories are curated
memories and events written with `urchin_remember`; conversations are agent sessions (a result is the
session with its best turns). Document-only answers `{query, totalResults, results}`; with memories or
conversations, `{query, counts, results:[{type, score, data}]}` fused by weighted score.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from urchin.checks import check_bool, unknown_parameter
from urchin.errors import QueryError, ValidationError
from urchin.event import check_label
from urchin.index.base import MEMORY_KINDS
from urchin.index.files import FILE_KIND
from urchin.index.params import MAX_CONTEXT_LIMIT, ContextParams
from urchin.index.sparse import term_ids, tokens
from urchin.search.websearch import parse, unheld_phrases

__all__ = ["SearchParams", "run_search", "NAMES", "DEFAULTS", "file_type"]

NAMES = ("query", "limit", "fullTextWeight", "semanticWeight", "tags", "sourceType", "minScore",
         "includeMemories", "includeConversations", "memoryWeight")
FILE_TYPES = ("file", "markdown", "code")
_MARKDOWN = (".md", ".markdown", ".mdx", ".rst", ".txt")
TURNS_PER_CONVERSATION = 3

ContextFn = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class SearchParams:
    """Validated; the contract's `document_search` declares the same names and defaults (tests/test_contract.py)."""

    context: ContextParams          # the shared validation: query, limit, weights, tags, minScore
    source_type: str | None = None
    include_memories: bool = False
    include_conversations: bool = False

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> SearchParams:
        if not isinstance(data, Mapping):
            raise QueryError("params", "must be an object")
        unknown = [k for k in data if k not in NAMES]
        if unknown:
            raise unknown_parameter(unknown[0], NAMES)
        source_type = data.get("sourceType")
        if source_type is not None:
            try:
                source_type = check_label(source_type, "sourceType")
            except ValidationError as exc:
                raise QueryError("sourceType", f"{exc.rule}: an event kind, or file, markdown or code") from None
        memories = check_bool(data.get("includeMemories", DEFAULTS["include_memories"]), "includeMemories")
        conversations = check_bool(data.get("includeConversations", DEFAULTS["include_conversations"]),
                                   "includeConversations")
        shared = {k: data[k] for k in ("query", "limit", "fullTextWeight", "semanticWeight", "tags", "minScore",
                                       "memoryWeight") if data.get(k) is not None}
        return cls(ContextParams.parse(shared), source_type or None,
                   memories, conversations)


DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(SearchParams) if f.name != "context"}


def file_type(path: str | None) -> str:
    return "markdown" if (path or "").lower().endswith(_MARKDOWN) else "code"


def _source_type(result: Mapping[str, Any]) -> str:
    if result.get("kind") == FILE_KIND:
        return file_type(result.get("location", {}).get("path"))
    return str(result.get("kind"))


def _wants(source_type: str | None, result: Mapping[str, Any]) -> bool:
    if source_type in (None, "file"):
        return source_type is None or result.get("kind") == FILE_KIND
    return _source_type(result) == source_type


def _base(p: SearchParams, limit: int) -> dict[str, Any]:
    c = p.context
    out: dict[str, Any] = {"query": c.query, "limit": limit, "fullTextWeight": c.full_text_weight,
                           "semanticWeight": c.semantic_weight, "minScore": c.min_score}
    if c.tags:
        out["tags"] = list(c.tags)
    return out


def _documents(context: ContextFn, p: SearchParams) -> list[dict[str, Any]]:
    query = _base(p, MAX_CONTEXT_LIMIT if p.source_type in ("markdown", "code") else p.context.limit)
    if p.source_type in FILE_TYPES:
        query["kinds"] = [FILE_KIND]
    elif p.source_type:
        query["kinds"] = [p.source_type]
    query["includeMemories"] = False          # documents are never memories (those are their own class)
    if p.source_type in MEMORY_KINDS:
        return []
    rows = [r for r in context(query).results if _wants(p.source_type, r)]
    return [_document(r) for r in rows[: p.context.limit]]


def _document(r: Mapping[str, Any]) -> dict[str, Any]:
    loc = r.get("location", {})
    doc_id = loc.get("path") if r.get("kind") == FILE_KIND else r["id"]
    return {"documentId": doc_id, "documentTitle": r.get("title") or doc_id, "sourceType": _source_type(r),
            "source": r.get("source"), "tags": r.get("tags", []), "chunkId": r["id"], "content": r["content"],
            "score": r["score"], "citation": r.get("citation")}


def _memories(context: ContextFn, curated: Sequence[Any], p: SearchParams) -> list[dict[str, Any]]:
    query = {**_base(p, p.context.limit), "includeConversations": False, "memoryWeight": 1.0}
    out = [{"memoryId": r["id"], "kind": "event", "title": r.get("title"), "content": r["content"],
            "tags": r.get("tags", []), "score": r["score"], "citation": r.get("citation")}
           for r in context(query).results]
    wanted = parse(p.context.query)     # the same language: phrases must occur, -words must not
    terms = set(term_ids(tokens(wanted.positive)))
    excluded = set(term_ids(t for w in wanted.excluded for t in tokens(w)))
    for d in curated:
        text = f"{d.title} {d.use_when} {d.slug}"
        held = set(term_ids(tokens(text)))
        flat = " ".join(text.lower().split())
        if not terms or excluded & held or not all(" ".join(ph.lower().split()) in flat for ph in wanted.phrases) \
                or any(" ".join(ph.lower().split()) in flat for ph in wanted.excluded_phrases):
            continue
        score = len(terms & held) / len(terms)
        if score > 0 and score >= p.context.min_score and not p.context.tags:
            out.append({"memoryId": d.slug, "kind": "curated", "title": d.title, "content": d.use_when,
                        "tags": [], "score": round(score, 4), "citation": f"urchin://memories/{d.slug}"})
    out.sort(key=lambda m: (-m["score"], m["memoryId"]))
    return out[: p.context.limit]


def _conversations(context: ContextFn, p: SearchParams) -> list[dict[str, Any]]:
    query = {**_base(p, MAX_CONTEXT_LIMIT), "includeMemories": False}
    sessions: dict[str, dict[str, Any]] = {}
    for r in context(query).results:
        if r.get("kind") == FILE_KIND or not r.get("session"):
            continue
        s = sessions.setdefault(r["session"], {"sessionKey": r["session"], "title": r.get("title") or r["session"],
                                               "source": r.get("source"), "workspace": r.get("workspace"),
                                               "score": r["score"], "turns": []})
        if len(s["turns"]) < TURNS_PER_CONVERSATION:
            s["turns"].append({"id": r["id"], "content": r["content"], "score": r["score"],
                               "citation": r.get("citation"), "updatedAt": r.get("updatedAt")})
    return list(sessions.values())[: p.context.limit]


def run_search(context: ContextFn, curated: Sequence[Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """textrawl's `search`: `context` runs one search_context query (wire names), `curated` the memories."""
    p = SearchParams.parse(data)
    documents = _documents(context, p)
    if not p.include_memories and not p.include_conversations:
        return _noted({"query": p.context.query, "totalResults": len(documents), "results": documents})
    memories = _memories(context, curated, p) if p.include_memories else []
    conversations = _conversations(context, p) if p.include_conversations else []
    weight = p.context.memory_weight
    mixed = ([{"type": "document", "score": d["score"], "data": d} for d in documents]
             + [{"type": "memory", "score": round(m["score"] * weight, 4), "data": m} for m in memories]
             + [{"type": "conversation", "score": c["score"], "data": c} for c in conversations])
    mixed.sort(key=lambda x: -x["score"])
    return _noted({"query": p.context.query,
                   "counts": {"documents": len(documents), "memories": len(memories),
                              "conversations": len(conversations)},
                   "results": mixed[: p.context.limit]})


def _noted(out: dict[str, Any]) -> dict[str, Any]:
    """An empty answer to a query with "phrases" says so in `notes` (after the seed's fields) and
    suggests the unquoted query: a phrase is a requirement, never silently dropped."""
    unheld = None if out["results"] else unheld_phrases(out["query"], "result within the filters")
    return {**out, "notes": [unheld["note"]]} if unheld else out
