"""Fusion of the legs' lists and what is answered: weighted RRF over the lists (with the class
weight), every candidate scored by the evidence it holds (urchin.search.score.HYBRID) and ordered by
that score, at most so many passages of one file, each result's dict with its citation, and packing
into a token budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from urchin.hybrid import leg_runs
from urchin.hybrid.base import MEMORY_KINDS, IndexBackend
from urchin.hybrid.files import FILE_KIND
from urchin.hybrid.leg_runs import LegRun, Stats
from urchin.hybrid.sparse import term_ids, tokens
from urchin.params.context import ContextParams
from urchin.search.budget import TokenBudget
from urchin.search.score import HYBRID, Evidence, shown
from urchin.search.websearch import WebQuery
from urchin.timestamps import format_timestamp

if TYPE_CHECKING:
    from urchin.search.assoc import Associations

__all__ = ["fuse", "cap_per_file", "score_candidates", "result_dict", "pack"]


def fuse(runs: Sequence[LegRun], p: ContextParams, best: float) -> list[dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for run in runs:
        for rank, hit in enumerate(run.hits, 1):
            entry = table.setdefault(hit.chunk_id, {"id": hit.chunk_id, "kind": hit.kind, "at": hit.occurred_at,
                                                    "score": 0.0, "legs": []})
            contribution = run.weight / (p.k + rank)
            entry["score"] += contribution
            leg = {"leg": run.leg, "origin": run.origin, "rank": rank, "raw": round(hit.raw, 6),
                   "weight": run.weight, "contribution": contribution}
            if run.method.startswith("embeddings"):
                leg["dense"] = True
            entry["legs"].append(leg)
    for entry in table.values():
        entry["classWeight"] = p.memory_weight if entry["kind"] in MEMORY_KINDS else 1.0
        entry["fused"] = entry["score"] * entry["classWeight"]
        entry["rank"] = min(1.0, entry["fused"] / best) if best > 0 else 0.0
    return list(table.values())


def cap_per_file(fused: list[dict[str, Any]], cap: int) -> list[dict[str, Any]]:
    """At most `cap` passages of one workspace file, best first (events are not capped)."""
    seen: dict[str, int] = {}
    out = []
    for entry in fused:
        if entry["kind"] == FILE_KIND:
            doc = entry["id"].rsplit("#", 1)[0]
            seen[doc] = seen.get(doc, 0) + 1
            if seen[doc] > cap:
                continue
        out.append(entry)
    return out


def _groups(query: WebQuery) -> list[list[frozenset[int]]]:
    """The question's word groups as term sets: a result holds every word when, in each group, it
    holds all the terms of one alternative (stop words are no terms; a group of only those is no group)."""
    out = []
    for group in query.groups:
        alternatives = [frozenset(term_ids(tokens(alt))) for alt in group]
        if any(alternatives):
            out.append([a for a in alternatives if a])
    return out


def score_candidates(backend: IndexBackend, stats: Stats, fused: list[dict[str, Any]], query: WebQuery,
           live_rows: dict[str, dict[str, Any]], assoc: Associations | None) -> None:
    """Give every fused candidate its evidence, raw score and shown score (urchin.search.score.HYBRID),
    and order the candidates by it: the score is what the list is sorted by. A candidate's terms are
    read from the index (a live row's from its text): which of the question's and related words it holds."""
    if not fused:
        return
    weights, _, _ = leg_runs.query_weights(stats, query.positive)
    related = leg_runs.related_weights(stats, query, weights, backend, assoc) if weights else {}
    groups = _groups(query)
    wanted = sorted({*weights, *related, *(t for g in groups for alt in g for t in alt)})
    stored = [f["id"] for f in fused if f["id"] not in live_rows]
    held = backend.held(stored, wanted) if wanted and stored else {}
    for key, row in live_rows.items():
        held[key] = set(term_ids(tokens(row["content"]))) & set(wanted)
    own, near = sum(weights.values()), sum(related.values())
    for f in fused:
        has = held.get(f["id"], set())
        dense = max((leg["raw"] for leg in f["legs"] if leg.get("dense")), default=0.0)
        f["evidence"] = evidence = Evidence(
            share=sum(w for t, w in weights.items() if t in has) / own if own > 0 else 0.0,
            every=bool(groups) and all(any(alt <= has for alt in g) for g in groups),
            related=sum(w for t, w in related.items() if t in has) / near if near > 0 else 0.0,
            rank=f["rank"], dense=dense)
        f["raw"] = HYBRID.raw(evidence)
        f["score"] = shown(f["raw"])
    fused.sort(key=lambda e: (-e["raw"], -e["fused"], -_ts(e["at"]), e["id"]))


def _ts(moment: datetime) -> float:
    return moment.timestamp()


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else format_timestamp(moment)


def result_dict(row: dict[str, Any], fused: dict[str, Any], explain: bool) -> dict[str, Any]:
    if row["doc_type"] == "file":
        citation = f"{row['doc_id']}#L{row['start_line']}-L{row['end_line']}"
        location: dict[str, Any] = {"path": row["doc_id"], "startLine": row["start_line"],
                                    "endLine": row["end_line"], "headingPath": list(row["heading_path"] or []),
                                    "contentHash": row.get("content_hash")}
    else:
        citation = f"urchin://events/{row['doc_id']}"
        location = {"journalOffset": row["journal_offset"]}
        if row.get("path") and row.get("content_hash"):     # a collected event: the transcript lines it came from
            location["upstream"] = {"path": row["path"], "startLine": row["start_line"],
                                    "endLine": row["end_line"], "contentHash": row["content_hash"]}
    out: dict[str, Any] = {
        "id": row["chunk_id"], "content": row["content"], "score": fused["score"],
        "citation": citation, "source": row["source"], "kind": row["kind"], "workspace": row["workspace"],
        "session": row["session"], "title": row["title"], "tags": list(row["tags"] or []),
        "updatedAt": _iso(row["occurred_at"]), "location": location,
    }
    if row.get("device") is not None:       # team: the machine whose journal fed it
        out["device"] = row["device"]
    if row.get("account") is not None:
        out["account"] = row["account"]
    if row["doc_type"] == "file":
        out["folder"] = row["doc_id"].rsplit("/", 1)[0] if "/" in row["path"] else row["workspace"]
    if row.get("live"):
        out["live"] = True
    if explain:
        # rank = fused / bestPossibleScore (coverage), fused = the legs' contributions x classWeight
        out["explain"] = {"legs": fused["legs"], "classWeight": fused["classWeight"], "fused": fused["fused"],
                          "rank": fused["rank"], **HYBRID.explain(fused["evidence"])}
    return out


def pack(results: list[dict[str, Any]], budget: int | None) -> tuple[list[dict[str, Any]], bool, int]:
    """Best first until the budget; the one that overflows is cut at a line boundary, the rest dropped."""
    tokens = TokenBudget(budget)
    out: list[dict[str, Any]] = []
    for result in results:
        text = tokens.take(result["content"])
        if text:
            out.append(result if text is result["content"] else {**result, "content": text, "cut": True})
        if tokens.cut:
            break
    return out, tokens.cut, tokens.used
