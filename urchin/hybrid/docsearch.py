"""textrawl's `search` tool (seed 003): its parameters, its fusion and its shapes, over the hybrid legs.

Each leg (full text; semantic: token-cosine, plus the embedder's vectors when one is set) ranks its
candidates within the filters; the seed's fusion then scores a result
`fullTextWeight / (k + fts_rank) + semanticWeight / (k + semantic_rank)` with k = 60 and the caller's
weights as they are, and the score shown is that value over the best possible one (rank 1 in every leg
that runs): relative, as the seed cautions, and the order of the list. Documents are workspace file
chunks and journal events (not memories); memories are remembered decisions and curated memories;
conversations are sessions, one result per session whose events answer the query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from urchin.hybrid.base import MEMORY_KINDS
from urchin.hybrid.files import FILE_KIND, FILES_SOURCE
from urchin.hybrid.sparse import term_ids, tokens
from urchin.params.documents import DocumentSearchParams
from urchin.params.limits import DOCUMENT_CONTENT_TYPES as CONTENT_TYPES
from urchin.params.limits import DOCUMENT_FILE_TYPES as FILE_TYPES
from urchin.params.limits import DOCUMENT_SEARCH_BOUNDS as BOUNDS
from urchin.params.limits import DOCUMENT_SEARCH_DEFAULTS as DEFAULTS
from urchin.params.limits import DOCUMENT_SEARCH_NAMES as NAMES
from urchin.params.limits import DOCUMENT_SOURCE_TYPES as SOURCE_TYPES
from urchin.params.limits import MAX_CONTEXT_LIMIT
from urchin.search.websearch import parse, unheld_phrases

__all__ = ["run_search", "NAMES", "DEFAULTS", "BOUNDS", "file_type", "SOURCE_TYPES",
           "CONTENT_TYPES", "K", "SNIPPET_CHARS"]

K = 60                           # the seed's RRF constant ("standard"): not a parameter of this tool
SNIPPET_CHARS = 500              # a result's content, as the seed's output schema cuts it
_MARKDOWN = (".md", ".markdown", ".mdx", ".rst", ".txt")
TURNS_PER_CONVERSATION = 3
LEG_DEPTH = MAX_CONTEXT_LIMIT    # each leg's list: the candidates the fusion sees

ContextFn = Callable[[Mapping[str, Any]], Any]
SessionsFn = Callable[[Sequence[str]], Mapping[str, Mapping[str, Any]]]


def file_type(path: str | None) -> str:
    return "markdown" if (path or "").lower().endswith(_MARKDOWN) else "code"


def content_type(result: Mapping[str, Any]) -> str:
    if result.get("kind") == FILE_KIND:
        return file_type(result.get("location", {}).get("path"))
    return str(result.get("kind"))


def _source_type(result: Mapping[str, Any]) -> str:
    return "file" if result.get("kind") == FILE_KIND else "note"


# ---- the legs and the seed's fusion ------------------------------------------------------------
def _legs(context: ContextFn, p: DocumentSearchParams, scope: Mapping[str, Any],
          keep: Callable[[Mapping[str, Any]], bool] = lambda r: True) -> list[tuple[float, list[dict[str, Any]]]]:
    """Each leg that runs (weight over 0) as (weight, its results best first, within `scope`'s filters)."""
    out = []
    for strategy, weight in (("keyword", p.full_text_weight), ("semantic", p.semantic_weight)):
        if weight > 0:
            query = {"query": p.query, "strategy": strategy, "limit": LEG_DEPTH, "per_file_cap": LEG_DEPTH, **scope}
            if p.tags:
                query["tags"] = list(p.tags)
            out.append((weight, [r for r in context(query).results if keep(r)]))
    return out


def fuse(legs: Sequence[tuple[float, Sequence[Any]]]) -> dict[Any, float]:
    """The seed's RRF: sum over the legs holding an item of weight / (K + its 1-based rank there)."""
    score: dict[Any, float] = {}
    for weight, ranked in legs:
        for rank, item in enumerate(ranked, 1):
            score[item] = score.get(item, 0.0) + weight / (K + rank)
    return score


def best_possible(p: DocumentSearchParams) -> float:
    """What a result ranked first in every leg that runs scores: the 1.0 of the shown score."""
    return (p.full_text_weight + p.semantic_weight) / (K + 1)


def _key(r: Mapping[str, Any]) -> tuple[str, str]:
    return (r.get("device") or "", r["id"])


def _ranked(legs: Sequence[tuple[float, Sequence[Mapping[str, Any]]]]) -> list[tuple[float, Mapping[str, Any]]]:
    """(raw RRF, row) of every row any leg holds."""
    rows = {_key(r): r for _, ranked in legs for r in ranked}
    raw = fuse([(w, [_key(r) for r in ranked]) for w, ranked in legs])
    return [(raw[key], row) for key, row in rows.items()]


def _snippet(text: str) -> dict[str, Any]:
    return {"content": text[:SNIPPET_CHARS], **_cut(text)}


def _cut(text: str) -> dict[str, Any]:
    return {"contentTruncated": True} if len(text) > SNIPPET_CHARS else {}


# ---- documents ---------------------------------------------------------------------------------
def _document_scope(p: DocumentSearchParams, event_sources: Callable[[], list[str]]) -> dict[str, Any] | None:
    """The filters of the document legs (None: nothing can match, e.g. a note that is markdown)."""
    scope: dict[str, Any] = {"include_memories": False}     # documents are never memories (their own class)
    wants_file = p.source_type == "file" or p.content_type in FILE_TYPES
    if p.content_type in MEMORY_KINDS or (p.source_type == "note" and p.content_type in FILE_TYPES):
        return None
    if wants_file:
        scope["kinds"] = [FILE_KIND]
    elif p.content_type:
        scope["kinds"] = [p.content_type]
    if p.source_type == "note" and not p.content_type:
        sources = [s for s in event_sources() if s != FILES_SOURCE]
        if not sources:
            return None
        scope["sources"] = sources
    return scope


def _documents(context: ContextFn, p: DocumentSearchParams, event_sources: Callable[[], list[str]]
               ) -> list[tuple[float, dict[str, Any]]]:
    scope = _document_scope(p, event_sources)
    if scope is None:
        return []
    wanted = p.content_type
    legs = _legs(context, p, scope, lambda r: wanted is None or content_type(r) == wanted)
    return [(raw, _document(r)) for raw, r in _ranked(legs)]


def _document(r: Mapping[str, Any]) -> dict[str, Any]:
    loc = r.get("location", {})
    doc_id = loc.get("path") if r.get("kind") == FILE_KIND else r["id"]
    return {"documentId": doc_id, "documentTitle": r.get("title") or doc_id, "sourceType": _source_type(r),
            "tags": r.get("tags", []), "chunkId": r["id"], "content": r["content"][:SNIPPET_CHARS], "score": 0.0,
            **_cut(r["content"]), "contentType": content_type(r), "source": r.get("source"),
            "workspace": r.get("workspace"), "citation": r.get("citation"), "updatedAt": r.get("updatedAt")}


def _document_data(d: Mapping[str, Any]) -> dict[str, Any]:
    """A document in the cross-source shape: the seed's {id, title, content}, then Urchin's fields."""
    rest = {k: v for k, v in d.items() if k not in ("documentId", "documentTitle", "content", "score")}
    return {"id": d["documentId"], "title": d["documentTitle"], "content": d["content"], **rest}


# ---- memories ----------------------------------------------------------------------------------
def _memories(context: ContextFn, curated: Sequence[Any], p: DocumentSearchParams
              ) -> list[tuple[float, dict[str, Any]]]:
    legs = _legs(context, p, {"include_memories": True, "include_conversations": False, "memory_weight": 1.0})
    out = [(raw, {"entityName": r.get("title") or r.get("workspace") or r.get("source"), "content": r["content"],
                  "entityType": r.get("kind"), "memoryId": r["id"], "kind": "event", "tags": r.get("tags", []),
                  "source": r.get("source"), "citation": r.get("citation"), "updatedAt": r.get("updatedAt")})
           for raw, r in _ranked(legs)]
    if p.full_text_weight > 0 and not p.tags:     # curated memories carry no tags
        ranked = _curated(curated, p.query)
        out += [(p.full_text_weight / (K + rank), {
            "entityName": d.title, "content": d.use_when, "entityType": "curated", "memoryId": d.slug,
            "kind": "curated", "tags": [], "citation": f"urchin://memories/{d.slug}"})
            for rank, d in enumerate(ranked, 1)]
    return out


def _curated(curated: Sequence[Any], query: str) -> list[Any]:
    """Curated memories holding the query's words (its title, use-when and slug), most of them first:
    their full-text rank (they have no vectors, so no semantic rank). Phrases must occur, -words not."""
    wanted = parse(query)
    terms = set(term_ids(tokens(wanted.positive)))
    excluded = set(term_ids(t for w in wanted.excluded for t in tokens(w)))
    held: list[tuple[float, str, Any]] = []
    for d in curated:
        text = f"{d.title} {d.use_when} {d.slug}"
        have = set(term_ids(tokens(text)))
        flat = " ".join(text.lower().split())
        if not terms or excluded & have or not all(" ".join(ph.lower().split()) in flat for ph in wanted.phrases) \
                or any(" ".join(ph.lower().split()) in flat for ph in wanted.excluded_phrases):
            continue
        share = len(terms & have) / len(terms)
        if share > 0:
            held.append((-share, d.slug, d))
    return [d for _, _, d in sorted(held, key=lambda x: (x[0], x[1]))]


# ---- conversations -----------------------------------------------------------------------------
def _conversations(context: ContextFn, p: DocumentSearchParams, sessions: SessionsFn,
                   event_sources: Callable[[], list[str]]) -> list[tuple[float, dict[str, Any]]]:
    """A session is ranked in each leg where its best event is (the leg's list read session by session),
    so one session is one result, whatever kind its events are (a decision included)."""
    sources = [s for s in event_sources() if s != FILES_SOURCE]     # file chunks have no session
    if not sources:
        return []
    scope = {"include_memories": True, "include_conversations": True, "memory_weight": 1.0, "sources": sources}
    legs = _legs(context, p, scope, lambda r: r.get("kind") != FILE_KIND and bool(r.get("session")))
    turns: dict[str, list[Mapping[str, Any]]] = {}
    for _, ranked in legs:
        for r in ranked:
            seen = turns.setdefault(r["session"], [])
            if len(seen) < TURNS_PER_CONVERSATION and all(t["id"] != r["id"] for t in seen):
                seen.append(r)
    raw = fuse([(w, list(dict.fromkeys(r["session"] for r in ranked))) for w, ranked in legs])
    heads = sessions(list(raw)) if raw else {}
    out = []
    for key, value in raw.items():
        head, first = heads.get(key, {}), turns[key][0]
        title = head.get("title") or _clip(head.get("firstPrompt")) or key
        out.append((value, {"sessionKey": key, "title": title, "sessionId": key, "source": first.get("source"),
                            "workspace": first.get("workspace"), "updatedAt": head.get("updatedAt"),
                            "turns": [{"id": t["id"], "kind": t.get("kind"), **_snippet(t["content"]),
                                       "citation": t.get("citation"), "updatedAt": t.get("updatedAt")}
                                      for t in turns[key]]}))
    return out


def _clip(text: str | None, most: int = 80) -> str | None:
    if not text:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[: most - 1] + "…"


# ---- the answer --------------------------------------------------------------------------------
def _order(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Best score first; equal scores newer first, then by id: the score is what the list is sorted by."""
    items.sort(key=lambda x: str(x.get("chunkId") or x.get("data", {}).get("id") or ""))
    items.sort(key=lambda x: x.get("updatedAt") or "", reverse=True)
    items.sort(key=lambda x: -x["score"])
    return items


def run_search(context: ContextFn, curated: Sequence[Any], p: DocumentSearchParams,
               event_sources: Callable[[], list[str]] = lambda: [],
               sessions: SessionsFn = lambda keys: {}) -> dict[str, Any]:
    """textrawl's `search`: `context` runs one search_context query (`ContextParams` keywords), `curated`
    are the curated memories, `event_sources` the journal sources the index holds, `sessions` session
    titles; `p` were checked when built."""
    best = best_possible(p)
    if not p.include_memories and not p.include_conversations:
        docs = [{**d, "score": round(raw / best, 4)} for raw, d in _documents(context, p, event_sources)]
        docs = _order([d for d in docs if d["score"] >= p.min_score])[: p.limit]
        return _noted({"query": p.query, "totalResults": len(docs), "results": docs})
    classes = [(1.0, "document", [(raw, _document_data(d)) for raw, d in _documents(context, p, event_sources)])]
    if p.include_memories:
        classes.append((p.memory_weight, "memory", _memories(context, curated, p)))
    if p.include_conversations:
        classes.append((p.conversation_weight, "conversation", _conversations(context, p, sessions, event_sources)))
    best *= max(weight for weight, _, _ in classes)
    mixed: list[dict[str, Any]] = [
        {"type": kind, "score": round(weight * raw / best, 4), "data": item, "updatedAt": item.get("updatedAt")}
        for weight, kind, items in classes for raw, item in items]
    mixed = _order([m for m in mixed if m["score"] >= p.min_score])[: p.limit]
    counts = {name: sum(1 for m in mixed if m["type"] == kind)
              for name, kind in (("documents", "document"), ("memories", "memory"), ("conversations", "conversation"))}
    results = [{k: v for k, v in m.items() if k != "updatedAt"} for m in mixed]
    return _noted({"query": p.query, "counts": counts, "results": results, "totalResults": len(results)})


def _noted(out: dict[str, Any]) -> dict[str, Any]:
    """An empty answer to a query with "phrases" says so in `notes` (after the seed's fields) and
    suggests the unquoted query: a phrase is a requirement, never silently dropped."""
    unheld = None if out["results"] else unheld_phrases(out["query"], "result within the filters")
    return {**out, "notes": [unheld["note"]]} if unheld else out
