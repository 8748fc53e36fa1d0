"""`search_context`: plan the legs, run them with the filters inside, fuse by weighted RRF, score.

The fusion finds the candidates: sum over the lists a result appears in of weight / (k + rank), times
the class weight (memories vs conversations), over the best possible with the weights in play (its
`rank`, 0-1). The list is then ordered by one score made of the evidence each candidate holds (see
urchin.search.score: every word, the share of the question's term weight, related words, that rank,
the embedder's cosine), and `minScore` filters on that same shown number. The legs' runs are
`leg_runs.py`'s, the fusion, scoring, result shapes and packing `fusion.py`'s; this module runs one
question through them and says what was searched (`coverage`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from urchin.hybrid import fusion, leg_runs
from urchin.hybrid.base import Embedder, Filter, IndexBackend
from urchin.hybrid.fusion import pack
from urchin.hybrid.leg_runs import KEYWORD_SHARE, LegRun
from urchin.hybrid.live import live_leg
from urchin.hybrid.sparse import term_ids, tokens
from urchin.params.context import ContextParams
from urchin.search.budget import CHARS_PER_TOKEN
from urchin.search.websearch import parse, split_websearch, unheld_phrases

if TYPE_CHECKING:
    from urchin.search.assoc import Associations
    from urchin.workspace.access import FileAccess

__all__ = ["ContextResult", "run_context", "split_websearch", "pack", "CHARS_PER_TOKEN", "candidates_for"]

COVERAGE_NOTE = "Coverage describes what was searched; it is not evidence."


def candidates_for(limit: int) -> int:
    """How deep each leg ranks: deep enough for RRF to see agreement below the top `limit`."""
    return min(400, max(60, 5 * limit))


@dataclass(slots=True)
class ContextResult:
    query: str
    results: list[dict[str, Any]]
    coverage: dict[str, Any]
    truncated: bool = False
    tokens_used: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The object the MCP tool returns as structuredContent (and `urchin context --json` prints)."""
        return {"query": self.query, "results": self.results, "coverage": self.coverage,
                "truncated": self.truncated, "tokensUsed": self.tokens_used}


def _filter(p: ContextParams) -> Filter:
    """The filters of every leg, the question's phrases and -exclusions among them (sub-queries inherit them)."""
    return Filter(sources=p.sources, kinds=p.kinds, workspace=p.workspace, session=p.session, tags=p.tags,
                  since=p.since, until=p.until, memories=p.include_memories, conversations=p.include_conversations,
                  devices=p.devices, accounts=p.accounts, constraint=parse(p.query).constraint, roots=p.roots)


def run_context(backend: IndexBackend, p: ContextParams, embedder: Embedder | None = None,
                index_info: dict[str, Any] | None = None, files: FileAccess | None = None,
                assoc: Associations | None = None) -> ContextResult:
    """The answer; "quoted phrases" are requirements in every leg and -words exclusions. When no
    candidate within the filters holds a phrase, the answer is empty and `coverage.unheldPhrases` says
    so and suggests the unquoted query: a phrase is never silently dropped (issue 32)."""
    result = _run_context(backend, p, embedder, index_info, files, assoc)
    # only when no candidate held the phrases at all (not when minScore or a cap dropped them)
    unheld = None if result.coverage["fusedCandidates"] else unheld_phrases(p.query, "result within the filters")
    if unheld is not None:
        result.coverage["unheldPhrases"] = unheld
    return result


def _run_context(backend: IndexBackend, p: ContextParams, embedder: Embedder | None,
                 index_info: dict[str, Any] | None, files: FileAccess | None,
                 assoc: Associations | None) -> ContextResult:
    flt, depth, skipped, stats = _filter(p), candidates_for(p.limit), [], leg_runs.Stats(backend)
    keyword = p.strategy in ("hybrid", "keyword") and p.full_text_weight > 0
    semantic = p.strategy in ("hybrid", "semantic") and p.semantic_weight > 0
    if not keyword and any(s.type == "lex" for s in p.searches):
        skipped.append(f"lex sub-queries skipped: strategy {p.strategy} runs no keyword leg")
    if not semantic and any(s.type in ("vec", "hyde") for s in p.searches):
        skipped.append(f"vec/hyde sub-queries skipped: strategy {p.strategy} runs no semantic leg")
    # every frequency the question reads, its words' and their related words', in one statement
    texts = [p.query, *(s.query for s in p.searches if semantic and s.type in ("vec", "hyde"))]
    stats.get(sorted({*(t for text in [p.query, *(s.query for s in p.searches)] for t in term_ids(tokens(text))),
                      *(t for text in texts for t in leg_runs.related_candidates(text, assoc))}))
    stats.named = leg_runs.named_sources(backend, p.query)
    runs: list[LegRun] = []
    if keyword and semantic:
        # the legs run at once, each on its own connection (the database works on two cores)
        with ThreadPoolExecutor(1) as pool:
            other = pool.submit(leg_runs.semantic_runs, backend.twin(), stats, p, flt, depth, embedder, skipped, assoc)
            runs += leg_runs.keyword_runs(backend, stats, p, flt, depth)
            runs += other.result()
    elif keyword:
        runs += leg_runs.keyword_runs(backend, stats, p, flt, depth)
    elif semantic:
        runs += leg_runs.semantic_runs(backend, stats, p, flt, depth, embedder, skipped, assoc)
    classes = ([p.memory_weight] if p.include_memories else []) + ([1.0] if p.include_conversations else [])
    # The live leg is left out of the best possible score: scores mean the same in both modes.
    best = max(classes) * sum(run.weight / (p.k + 1) for run in runs) if runs else 0.0
    live_rows: dict[str, dict[str, Any]] = {}
    live_cov: dict[str, Any] | None = None
    if p.mode == "live":
        live_hits, live_rows, live_cov = live_leg(backend, p, flt, files, depth)
        if live_hits is not None:
            runs.append(LegRun("live", "query", p.query, (p.full_text_weight or 1.0) * KEYWORD_SHARE,
                               "live read of cataloged files (any word, phrases and -words hold)", live_hits))
    fused = fusion.fuse(runs, p, best)
    fusion.score_candidates(backend, stats, fused, parse(p.query), live_rows, assoc)
    kept = fusion.cap_per_file([f for f in fused if f["score"] >= p.min_score], p.per_file_cap)[: p.limit]
    wanted = [f["id"] for f in kept if f["id"] not in live_rows]
    rows = {**(backend.fetch(wanted) if wanted else {}), **live_rows}
    results = [fusion.result_dict(rows[f["id"]], f, p.explain) for f in kept if f["id"] in rows]
    results, truncated, used = fusion.pack(results, p.token_budget)
    coverage: dict[str, Any] = {
        "strategy": p.strategy, "mode": p.mode, "legs": [r.to_dict() for r in runs], "k": p.k,
        "candidatesPerLeg": depth, "fusedCandidates": len(fused),
        "aboveMinScore": sum(1 for f in fused if f["score"] >= p.min_score), "perFileCap": p.per_file_cap,
        "filters": p.filters_dict(), "skipped": skipped, "bestPossibleScore": best,
        "tokenEstimate": f"{CHARS_PER_TOKEN} characters per token", "note": COVERAGE_NOTE,
    }
    warnings = backend.unmatched(flt) if (flt.sources or flt.kinds or flt.workspace) else []
    if warnings:
        coverage["warnings"] = warnings
    if live_cov is not None:
        coverage["live"] = live_cov
    if index_info:
        coverage["index"] = index_info
    return ContextResult(p.query, results, coverage, truncated, used)
