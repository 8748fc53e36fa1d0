"""Pseudo-relevance feedback for the hybrid (`search_context`, no model): does it gain held out?

    python bench/locomo_prf.py --cache /tmp/prf/a.pkl [--grid 3,5,10:10,30:0.25,0.5,1]   # capture
    python bench/locomo_prf.py --analyse /tmp/prf/a.pkl [/tmp/prf/b.pkl ...]                # CV, paired

Capture (needs PostgreSQL; events and questions as bench/locomo_hybrid.py builds them): every LoCoMo
dev question is asked as shipped (pass 1, the re-ask of bench/locomo_score.py included); then, per
feedback configuration (k documents, n terms, weight), RM3-style: the first k results of pass 1 give
a term distribution (sum over the documents of their shown score share x tf / length, x idf), the
question's own words, its -words and words in more than RELATED_MAX_SHARE of the chunks left out;
its best n terms join the token-cosine leg's question vector as related words do (weight x the
term's share of the best x idf^2, the idf capped at the mean of the question's own), and that
expanded leg is run once more (pass 2: its candidates are picked by the expansion terms too, so it
can find turns neither leg ranked). The expanded list is captured beside the shipped lists with
every candidate's evidence (urchin.search.score.Evidence: the question's words and related words
only; feedback terms are no evidence).

Analysis (offline): the expanded list is fused as a third list at f x the token-cosine list's weight
(f 0 = as shipped), or in place of it ("replace"); every candidate re-scored by the shipped scale
(the every-word tier, share, related, rank = the fused RRF over the best possible). Leave one
conversation out chooses (k, n, weight, f); the held-out R@10 is paired with the shipped hybrid and
with the token-cosine leg (strategy semantic, with and without its own feedback) question by question.
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_fusion import folds, paired  # noqa: E402
from locomo_hybrid import _default_data, learned, load, open_backend  # noqa: E402

import urchin.hybrid.fusion as fusion_module  # noqa: E402
import urchin.hybrid.leg_runs as legs_module  # noqa: E402
import urchin.hybrid.search_context as hybrid_module  # noqa: E402
from urchin.hybrid.base import split_key  # noqa: E402
from urchin.hybrid.sparse import idf, term_ids, tokens  # noqa: E402
from urchin.params.context import ContextParams  # noqa: E402
from urchin.search import score as score_module  # noqa: E402
from urchin.search.terms import terms_of  # noqa: E402

FEATURES = ("every", "share", "related", "rank", "dense")
K = 20                                          # the shipped RRF k (ContextParams default)
LIST_WEIGHT = {"keyword": 2 * legs_module.KEYWORD_SHARE, "semantic": 2.0}   # the question's lists
FUSIONS = (0.0, 0.25, 0.5, 1.0, 2.0, "replace")


class Feedback:
    """The expansion terms of one question (pass 1's top k), made inside the leg (it knows df, the cap)."""

    def __init__(self, top: list[tuple[str, float]], k: int, n: int, weight: float) -> None:
        self.top, self.k, self.n, self.weight = top, k, n, weight

    def terms(self, stats: Any, sub: Any, own: dict[int, float], via: Any) -> dict[int, float]:
        docs = self.top[: self.k]
        total = sum(s for _, s in docs) or 1.0
        mass: Counter[int] = Counter()
        for text, s in docs:
            counts = term_ids(tokens(text))
            length = sum(counts.values()) or 1
            for t, tf in counts.items():
                mass[t] += s / total * tf / length
        excluded = {t for t in term_ids(terms_of(sub.excluded))}
        cands = [t for t in mass if t not in own and t not in excluded]
        if not cands:
            return {}
        df, n_docs = stats.get(cands, via)
        most = max(legs_module.RELATED_MAX_SHARE * n_docs, 50)
        scored = {t: mass[t] * idf(df[t], n_docs) for t in cands if 0 < df.get(t, 0) <= most}
        best = sorted(scored, key=lambda t: (-scored[t], t))[: self.n]
        if not best:
            return {}
        own_df, _ = stats.get(list(own), via)
        own_idf = [idf(own_df[t], n_docs) for t in own if t in own_df]
        cap = sum(own_idf) / len(own_idf) if own_idf else math.inf
        top = scored[best[0]]
        return {t: self.weight * scored[t] / top * min(idf(df[t], n_docs), cap) ** 2 for t in best}


def _windows(events: list[Any]) -> dict[str, dict[str, str]]:
    spans: dict[str, tuple[int, int]] = {}
    for e in events:
        lo, hi = spans.get(e.workspace or "", (e.ts_ms, e.ts_ms))
        spans[e.workspace or ""] = (min(lo, e.ts_ms), max(hi, e.ts_ms))
    return {w: {"since": datetime.fromtimestamp(lo / 1000, UTC).isoformat(),
                "until": datetime.fromtimestamp(hi / 1000 + 1, UTC).isoformat()} for w, (lo, hi) in spans.items()}


def _record(fused: list[dict[str, Any]], conv: str, evidence: set[str]) -> dict[str, Any]:
    x = np.array([[float(getattr(f["evidence"], n)) for n in FEATURES] for f in fused]).reshape(-1, 5)
    legs = [[(leg["leg"], leg["origin"], leg["rank"]) for leg in f["legs"]] for f in fused]
    return {"conv": conv, "evidence": evidence, "ids": [split_key(f["id"])[1] for f in fused], "x": x, "legs": legs}


def capture(backend: Any, events: list[Any], questions: list[Any], model: Any,
            configs: list[tuple[int, int, float]]) -> dict[str, Any]:
    """Pass 1 as shipped; pass 2 per config: the shipped lists (kept from pass 1) and the expanded one."""
    content = {e.id: e.content for e in events}
    windows = _windows(events)
    real_score, real_kw, real_sem, real_rel = (fusion_module.score_candidates, legs_module.keyword_runs,
                                               legs_module.semantic_runs, legs_module.related_weights)
    seen: dict[str, Any] = {}

    def spy_score(*args: Any) -> None:
        real_score(*args)
        seen["fused"] = list(args[2])

    def spy_kw(*args: Any) -> list[Any]:
        seen["kw"] = real_kw(*args)
        return seen["kw"]

    def spy_sem(*args: Any) -> list[Any]:
        seen["sem"] = real_sem(*args)
        return seen["sem"]

    out: dict[str, Any] = {"base": [], "configs": configs, "prf": {c: [] for c in configs}}
    fusion_module.score_candidates = spy_score
    try:
        for n, (text, workspace, evidence) in enumerate(questions):
            legs_module.keyword_runs, legs_module.semantic_runs = spy_kw, spy_sem
            query = text
            for _ in range(2):
                params = ContextParams.build(query=query, strategy="hybrid", workspace=workspace, limit=10,
                                             **windows[workspace])
                result = hybrid_module.run_context(backend, params, assoc=model)
                unheld = result.coverage.get("unheldPhrases")
                if result.results or not unheld:
                    break
                query = unheld["suggestion"]
            fused = seen.get("fused", []) if result.coverage["fusedCandidates"] else []
            out["base"].append(_record(fused, workspace, set(evidence)))
            top = [(content[split_key(f["id"])[1]], f["score"]) for f in fused[:10]]
            kw, sem = seen.get("kw", []), seen.get("sem", [])
            for cfg in configs:
                fb = Feedback(top, *cfg)

                def expanded(stats: Any, sub: Any, own: dict[int, float], via: Any = None, assoc: Any = None,
                             fb: Feedback = fb) -> dict[str, float]:
                    return {**fb.terms(stats, sub, own, via), **real_rel(stats, sub, own, via, assoc)}

                def sem2(*args: Any, sem: list[Any] = sem) -> list[Any]:
                    legs_module.related_weights = expanded
                    try:
                        extra = real_sem(*args)
                    finally:
                        legs_module.related_weights = real_rel
                    for run in extra:
                        run.origin, run.weight = "prf", 1.0
                    return [*sem, *extra]

                legs_module.keyword_runs, legs_module.semantic_runs = (lambda *a, kw=kw: kw), sem2
                seen.pop("fused", None)
                if top:
                    hybrid_module.run_context(backend, params, assoc=model)
                out["prf"][cfg].append(_record(seen.get("fused", []), workspace, set(evidence)))
            if n % 100 == 0:
                print(f"  {n} questions", flush=True)
    finally:
        fusion_module.score_candidates, legs_module.keyword_runs, legs_module.semantic_runs = (
            real_score, real_kw, real_sem)
        legs_module.related_weights = real_rel
    return out


def recall(q: dict[str, Any], weights: dict[tuple[str, str], float]) -> float:
    """R@10 of one question with its lists re-fused at `weights` ((leg, origin) -> weight), shipped scale."""
    return len(set(top10(q, weights)) & q["evidence"]) / len(q["evidence"])


def top10(q: dict[str, Any], weights: dict[tuple[str, str], float]) -> list[str]:
    if not q["ids"]:
        return []
    best = sum(weights.values()) / (K + 1)
    fused = np.array([sum(weights.get((leg, origin), 0.0) / (K + r) for leg, origin, r in legs)
                      for legs in q["legs"]])
    keep = fused > 0
    s = score_module.HYBRID
    rank = np.minimum(1.0, fused / best)
    raw = (s.every * (q["x"][:, 0] > 0) + s.share * q["x"][:, 1] + s.related * q["x"][:, 2] + s.rank * rank)
    raw = np.round(raw, 12)
    order = sorted(np.flatnonzero(keep), key=lambda i: (-raw[i], -fused[i], q["ids"][i]))[:10]
    return [q["ids"][i] for i in order]


def adjacency(base: list[dict[str, Any]]) -> None:
    """Where the evidence the shipped top 10 misses sits: among the candidates, in the session of a top-10
    hit, within 1-3 turns of a top-3 hit (what the session neighbours' smoothing already reaches)."""
    def turn(i: str) -> tuple[str, int]:
        session, _, n = i.rpartition(":")
        return session, int(n)

    missed = candidates = session = 0
    near = dict.fromkeys((1, 2, 3), 0)
    total = sum(len(q["evidence"]) for q in base)
    for q in base:
        top = top10(q, lists("hybrid", 0.0))
        for e in q["evidence"] - set(top):
            missed += 1
            candidates += e in q["ids"]
            s, t = turn(e)
            session += any(turn(h)[0] == s for h in top)
            gaps = [abs(t - turn(h)[1]) for h in top[:3] if turn(h)[0] == s]
            for d in near:
                near[d] += bool(gaps) and min(gaps) <= d
    print(f"evidence turns {total}, missed by the shipped top 10 {missed / total:.3f}; of those: among the "
          f"candidates {candidates / missed:.3f}, in the session of a top-10 hit {session / missed:.3f}, within "
          + "/".join(f"{near[d] / missed:.3f}" for d in near) + " turns (1/2/3) of a top-3 hit")


def lists(strategy: str, f: float | str) -> dict[tuple[str, str], float]:
    w = {("semantic", "query"): LIST_WEIGHT["semantic"]}
    if strategy == "hybrid":
        w[("keyword", "query")] = LIST_WEIGHT["keyword"]
    if f == "replace":
        w[("semantic", "prf")] = w.pop(("semantic", "query"))
    elif f:
        w[("semantic", "prf")] = float(f) * LIST_WEIGHT["semantic"]
    return w


def cv(scores: np.ndarray, conv: np.ndarray, labels: list[Any], show: bool = False) -> np.ndarray:
    held = np.zeros(scores.shape[1])
    for c in sorted(set(conv)):
        out = conv == c
        best = int(np.argmax(scores[:, ~out].mean(axis=1)))
        held[out] = scores[best, out]
        if show:
            print(f"    held out {c}: {labels[best]}  R@10 {held[out].mean():.3f}")
    return held


def analyse(paths: list[Path]) -> None:
    caps = [pickle.loads(p.read_bytes()) for p in paths]
    base = caps[0]["base"]
    conv = np.array([q["conv"] for q in base])
    runs: dict[tuple[int, int, float], list[dict[str, Any]]] = {}
    for cap in caps:
        runs.update(cap["prf"])
    print(f"{len(base)} questions, {len(runs)} feedback configurations")
    adjacency(base)
    for strategy in ("semantic", "hybrid"):
        shipped = np.array([recall(q, lists(strategy, 0.0)) for q in base])
        labels: list[Any] = [("shipped",)]
        table = [shipped]
        for cfg, qs in sorted(runs.items()):
            for f in FUSIONS[1:]:
                labels.append((*cfg, f))
                table.append(np.array([recall(q, lists(strategy, f)) for q in qs]))
        scores = np.array(table)
        ceiling = np.array([min(10, len(set(q["ids"]) & q["evidence"])) / len(q["evidence"]) for q in base])
        print(f"\n{strategy}: shipped R@10 {shipped.mean():.3f} (folds {folds(shipped, conv)}); "
              f"candidates' ceiling {ceiling.mean():.3f}")
        means = scores.mean(axis=1)
        for i in np.argsort(-means)[:8]:
            print(f"  in-sample {means[i]:.4f}  {labels[i]}")
        for f in FUSIONS[1:]:
            rows = [i for i, lab in enumerate(labels) if lab[-1] == f]
            held = cv(scores[[0, *rows]], conv, [labels[0], *[labels[i] for i in rows]])
            print(f"  fusion f={f}: CV {held.mean():.4f} (folds {folds(held, conv)})")
        print(f"  the whole search ({len(labels)} configurations incl. shipped), one choice per fold:")
        held = cv(scores, conv, labels, show=True)
        print(f"  CV R@10 {held.mean():.4f} (folds {folds(held, conv)})")
        paired("CV choice against shipped", held, shipped)
        best = int(np.argmax(means))
        paired(f"in-sample best {labels[best]} against shipped", scores[best], shipped)
        if strategy == "semantic":
            leg_shipped, leg_held = shipped, held
        else:
            paired("hybrid CV against the token-cosine leg as shipped", held, leg_shipped)
            paired("hybrid CV against the token-cosine leg with its own feedback by CV", held, leg_held)
    new = [len(set(q["ids"]) - set(b["ids"])) for qs in runs.values() for q, b in zip(qs, base, strict=True)]
    print(f"\nthe expanded list brings {np.mean(new):.1f} candidates a question that pass 1 did not have")
    for cfg, qs in sorted(runs.items()):        # what those candidates hold: the ceiling with them, the new evidence
        ceiling = np.mean([min(10, len(set(q["ids"]) & q["evidence"])) / len(q["evidence"]) for q in qs])
        fresh = np.mean([len((set(q["ids"]) - set(b["ids"])) & q["evidence"]) / len(q["evidence"])
                         for q, b in zip(qs, base, strict=True)])
        print(f"  {cfg}: candidates' ceiling with the expanded list {ceiling:.3f}, evidence only it found {fresh:.4f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--cache", type=Path, help="capture into this file")
    parser.add_argument("--grid", default="3,5,10:10,30:0.25,0.5,1",
                        help="feedback documents : terms : weight, each a comma list (their product is run)")
    parser.add_argument("--limit", type=int, default=None, help="capture: only the first N questions (a smoke run)")
    parser.add_argument("--analyse", type=Path, nargs="+", help="captures to analyse (the first's pass 1 is used)")
    args = parser.parse_args(argv)
    if args.analyse:
        analyse(args.analyse)
        return
    if args.cache is None:
        parser.error("--cache or --analyse is required")
    ks, ns, ws = (part.split(",") for part in args.grid.split(":"))
    configs = [(int(k), int(n), float(w)) for k, n, w in itertools.product(ks, ns, ws)]
    events, questions = load(args.data or _default_data())
    questions = questions[: args.limit]
    with tempfile.TemporaryDirectory(prefix="urchin-prf-") as tmp:
        backend = open_backend(events, Path(tmp), None)
        out = capture(backend, events, questions, learned(events), configs)
        backend.close()
    args.cache.write_bytes(pickle.dumps(out))


if __name__ == "__main__":
    main()
