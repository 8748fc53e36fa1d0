"""One score on LoCoMo dev: choose the evidence weights by CV, fit the map to 0-1, print its precision.

    python bench/locomo_score.py [--data PATH] [--strategy hybrid|semantic|keyword] [--cv]

For every question the candidates `search_context` fuses (limit 10, as an agent asks) are captured
with their evidence (urchin.search.score.Evidence). Offline, over a grid of the weights' ratios,
each question's candidates are ordered by raw score and R@10 measured; `--cv` picks the ratios on
four conversations and scores the fifth (leave one conversation out), then fits the scale and bias
of the map (logistic regression of "is an evidence turn" on raw, again on four conversations) and
prints, for the held-out fifth, the precision of the top-10 results scoring at least 0.3 / 0.5 / 0.7.
Without --cv it prints the shipped scale's R@10 and precision (in-sample).

A question quoting a title that no evidence turn holds gets an empty answer whose
`coverage.unheldPhrases` suggests the unquoted query: the bench asks that, as an agent would.
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_hybrid import _default_data, learned, load, open_backend  # noqa: E402

import urchin.hybrid.fusion as fusion_module  # noqa: E402
import urchin.hybrid.search_context as hybrid_module  # noqa: E402
from urchin.hybrid.base import split_key  # noqa: E402
from urchin.params.context import ContextParams  # noqa: E402
from urchin.search import score as score_module  # noqa: E402

FEATURES = ("every", "share", "related", "rank", "dense")
GRID = {"share": (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0), "related": (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0), "rank": (4.0,)}
# `urchin semantic`: rank alone (the share and related parts lowered the concept sets, see
# urchin/search/score.py); pass --wide to search the hybrid's grid instead
TC_GRID = {"share": (0.0,), "related": (0.0,), "rank": (4.0,)}
THRESHOLDS = (0.3, 0.5, 0.7)
DENSE_GRID: tuple[float, ...] = ()   # set by --embedder-url: the embedder's cosine weight (rank = 4) searched


def capture(backend: Any, events: list[Any], questions: list[Any], strategy: str, model: Any,
            embedder: Any = None) -> list[dict[str, Any]]:
    """Per question: the fused candidates' ids and evidence, and the evidence ids."""
    spans: dict[str, tuple[int, int]] = {}
    for e in events:
        lo, hi = spans.get(e.workspace or "", (e.ts_ms, e.ts_ms))
        spans[e.workspace or ""] = (min(lo, e.ts_ms), max(hi, e.ts_ms))
    seen: list[list[dict[str, Any]]] = []
    real = fusion_module.score_candidates

    def spy(backend: Any, stats: Any, fused: list[dict[str, Any]], *rest: Any) -> None:
        real(backend, stats, fused, *rest)
        seen.append(list(fused))

    fusion_module.score_candidates = spy
    out = []
    try:
        for text, workspace, evidence in questions:
            lo, hi = spans[workspace]
            window = {"since": datetime.fromtimestamp(lo / 1000, UTC).isoformat(),
                      "until": datetime.fromtimestamp(hi / 1000 + 1, UTC).isoformat()}
            query = text
            for _ in range(2):
                seen.clear()
                params = ContextParams.build(query=query, strategy=strategy, workspace=workspace, limit=10, **window)
                result = hybrid_module.run_context(backend, params, embedder, assoc=model)
                unheld = result.coverage.get("unheldPhrases")
                if result.results or not unheld:
                    break
                query = unheld["suggestion"]      # what an agent re-asks (see the module doc)
            fused = seen[-1] if seen else []
            x = np.array([[float(getattr(f["evidence"], n)) for n in FEATURES] for f in fused]).reshape(-1, 5)
            # each leg's own view of each candidate (leg, origin, rank, raw score): the fusions of
            # bench/locomo_fusion.py re-fuse from these
            legs = [[(leg["leg"], leg["origin"], leg["rank"], leg["raw"]) for leg in f["legs"]] for f in fused]
            out.append({"conv": workspace, "evidence": set(evidence), "ids": [split_key(f["id"])[1] for f in fused],
                        "x": x, "fused": np.array([f["fused"] for f in fused]), "legs": legs, "query": query})
    finally:
        fusion_module.score_candidates = real
    return out


def raw_of(q: dict[str, Any], w: dict[str, float]) -> np.ndarray:
    scale = score_module.Scale("x", w["share"], w["related"], w["rank"], w.get("dense", 0.0), 0.0)
    weights = np.array([scale.every, scale.share, scale.related, scale.rank, scale.dense])
    return np.asarray(q["x"] @ weights) if len(q["x"]) else np.zeros(0)


def top10(q: dict[str, Any], raw: np.ndarray) -> list[int]:
    order = sorted(range(len(raw)), key=lambda i: (-raw[i], -q["fused"][i], q["ids"][i]))
    return order[:10]


def recall(q: dict[str, Any], w: dict[str, float]) -> float:
    picked = {q["ids"][i] for i in top10(q, raw_of(q, w))}
    return len(picked & q["evidence"]) / len(q["evidence"])


def fit_map(qs: list[dict[str, Any]], w: dict[str, float]) -> tuple[float, float]:
    """Logistic regression of relevance on raw over each question's top 10: (scale, bias)."""
    xs, ys = [], []
    for q in qs:
        raw = raw_of(q, w)
        for i in top10(q, raw):
            xs.append(raw[i])
            ys.append(q["ids"][i] in q["evidence"])
    return _fit(np.array(xs), np.array(ys, dtype=float))


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    mu, sd = x.mean(), x.std() or 1.0
    z = (x - mu) / sd

    def loss(c: np.ndarray) -> float:
        t = c[0] * z + c[1]
        return float(np.sum(np.logaddexp(0, t) - y * t))

    c = np.zeros(2)
    for _ in range(100):                      # Newton's method with step halving, on standardised raw
        p = 1 / (1 + np.exp(-(c[0] * z + c[1])))
        g = np.array([np.sum((p - y) * z), np.sum(p - y)])
        s = p * (1 - p)
        h = np.array([[np.sum(s * z * z), np.sum(s * z)], [np.sum(s * z), np.sum(s)]]) + 1e-6 * np.eye(2)
        step, before = np.linalg.solve(h, g), loss(c)
        while loss(c - step) > before and np.abs(step).max() > 1e-12:
            step /= 2
        c = c - step
        if np.abs(step).max() < 1e-10:
            break
    return float(c[0] / sd), float(c[1] - c[0] * mu / sd)


def fit_xy(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    return _fit(x, y)


def precision(qs: list[dict[str, Any]], w: dict[str, float], a: float, b: float) -> dict[float, tuple[int, int]]:
    out = {t: [0, 0] for t in THRESHOLDS}
    for q in qs:
        raw = raw_of(q, w)
        for i in top10(q, raw):
            shown = score_module.shown(a * raw[i] + b)
            for t in THRESHOLDS:
                if shown >= t:
                    out[t][0] += 1
                    out[t][1] += q["ids"][i] in q["evidence"]
    return {t: (n, hit) for t, (n, hit) in out.items()}


def table(label: str, counts: dict[float, tuple[int, int]], questions: int) -> None:
    cells = "  ".join(f">= {t}: {hit / n if n else float('nan'):.3f} ({n / questions:.2f}/question)"
                      for t, (n, hit) in counts.items())
    print(f"{label}: precision {cells}")


def grid(space: dict[str, tuple[float, ...]] | None = None) -> list[dict[str, float]]:
    space = space or GRID
    names = list(space)
    # without an embedder only its share of the tier, at the shipped ratio to rank; with one (--embedder-url),
    # DENSE_GRID's ratios to rank 4 are searched too
    dense = {"dense": 4.0 * score_module.HYBRID.dense / score_module.HYBRID.rank}
    if DENSE_GRID:
        return [{**dict(zip(names, values[:-1], strict=True)), "dense": values[-1]}
                for values in itertools.product(*space.values(), DENSE_GRID) if values[1] <= values[0]]
    # a related word never weighs more than the words typed (on LoCoMo related 3 : share 0.5 scored 0.767
    # in-sample, but put a turn holding "deploy" above one holding the "rollback" that was asked)
    return [{**dict(zip(names, values, strict=True)), **dense} for values in itertools.product(*space.values())
            if values[1] <= values[0]]


def cross_validate(qs: list[dict[str, Any]]) -> None:
    configs = grid()
    scores = np.array([[recall(q, w) for q in qs] for w in configs])
    convs = np.array([q["conv"] for q in qs])
    held = np.zeros(len(qs))
    counts = {t: (0, 0) for t in THRESHOLDS}
    for conv in sorted(set(convs)):
        out = convs == conv
        best = int(np.argmax(scores[:, ~out].mean(axis=1)))
        held[out] = scores[best, out]
        train = [q for q, o in zip(qs, out, strict=True) if not o]
        test = [q for q, o in zip(qs, out, strict=True) if o]
        a, b = fit_map(train, configs[best])
        fold = precision(test, configs[best], a, b)
        counts = {t: (counts[t][0] + fold[t][0], counts[t][1] + fold[t][1]) for t in THRESHOLDS}
        print(f"  held out {conv}: {configs[best]}, map {a:.3f} x raw {b:+.3f}: R@10 {held[out].mean():.3f}")
    best = int(np.argmax(scores.mean(axis=1)))
    a, b = fit_map(qs, configs[best])
    print(f"R@10: CV {held.mean():.3f}   in-sample best {scores[best].mean():.3f} {configs[best]}, "
          f"map fitted on all: {a:.4f} x raw {b:+.4f}")
    table("CV (held-out conversation, its own fold's map)", counts, len(qs))


def shipped(qs: list[dict[str, Any]], scale: Any) -> None:
    w = {"share": scale.share, "related": scale.related, "rank": scale.rank, "dense": scale.dense}
    r = np.mean([recall(q, w) for q in qs])
    print(f"shipped scale {scale}: R@10 {r:.3f}")
    table("shipped, in-sample", precision(qs, w, 1.0, scale.bias), len(qs))
    counts = {t: (0, 0) for t in THRESHOLDS}
    for conv in sorted({q["conv"] for q in qs}):     # the shipped ratios, the map fitted without the fold
        a, b = fit_map([q for q in qs if q["conv"] != conv], w)
        fold = precision([q for q in qs if q["conv"] == conv], w, a, b)
        counts = {t: (counts[t][0] + fold[t][0], counts[t][1] + fold[t][1]) for t in THRESHOLDS}
    table("shipped ratios, map by CV (held-out conversation)", counts, len(qs))


class _Unrounded(score_module.Scale):
    """The bench's scale: scores are the raw sum itself (no bias, no map), to fit the map on."""

    def shown_raw(self, unbiased: float) -> float:
        return unbiased


def token_cosine(data: Path, configs: list[dict[str, float]]) -> list[dict[str, Any]]:
    """`urchin semantic`'s ranking (the in-memory token-cosine index, associations as the daemon builds
    them) per config: each question's top 10 as (ids, raw) for every config."""
    import locomo

    import urchin.search.cosine as cosine_module

    events, questions = locomo.load(data)
    index = cosine_module.TokenCosineIndex()
    index.add_many(events)
    index.assoc = locomo.assoc.build(index)
    spans = locomo._window(events)
    shipped = cosine_module.TOKEN_COSINE
    out = [{"conv": q.workspace, "evidence": set(q.evidence), "runs": []} for q in questions]
    try:
        for w in configs:
            cosine_module.TOKEN_COSINE = _Unrounded("x", w["share"], w["related"], w["rank"], 0.0, 0.0)
            for q, row in zip(questions, out, strict=True):
                since, until = spans[q.workspace]
                hits = index.search(q.text, workspace=q.workspace, since_ms=since, until_ms=until, limit=10)
                row["runs"].append(([h.id for h in hits], np.array([h.score for h in hits])))
    finally:
        cosine_module.TOKEN_COSINE = shipped
    return out


def token_cosine_cv(data: Path, wide: bool) -> None:
    configs = grid(None if wide else TC_GRID)
    qs = token_cosine(data, configs)
    scores = np.array([[len(set(q["runs"][i][0]) & q["evidence"]) / len(q["evidence"]) for q in qs]
                       for i in range(len(configs))])
    convs = np.array([q["conv"] for q in qs])
    held = np.zeros(len(qs))
    counts = {t: [0, 0] for t in THRESHOLDS}

    def pairs(rows: list[dict[str, Any]], i: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.concatenate([r["runs"][i][1] for r in rows])
        y = np.array([e in r["evidence"] for r in rows for e in r["runs"][i][0]], dtype=float)
        return x, y

    for conv in sorted(set(convs)):
        out = convs == conv
        best = int(np.argmax(scores[:, ~out].mean(axis=1)))
        held[out] = scores[best, out]
        a, b = fit_xy(*pairs([q for q, o in zip(qs, out, strict=True) if not o], best))
        x, y = pairs([q for q, o in zip(qs, out, strict=True) if o], best)
        for t in THRESHOLDS:
            above = np.array([score_module.shown(a * v + b) >= t for v in x], dtype=bool)
            counts[t][0] += int(above.sum())
            counts[t][1] += int(y[above].sum())
        print(f"  held out {conv}: {configs[best]}, map {a:.3f} x raw {b:+.3f}: R@10 {held[out].mean():.3f}")
    best = int(np.argmax(scores.mean(axis=1)))
    a, b = fit_xy(*pairs(qs, best))
    print(f"token-cosine R@10: CV {held.mean():.3f}   in-sample best {scores[best].mean():.3f} {configs[best]}, "
          f"map fitted on all: {a:.4f} x raw {b:+.4f}")
    table("CV (held-out conversation, its own fold's map)", {t: (n, h) for t, (n, h) in counts.items()}, len(qs))
    ts = score_module.TOKEN_COSINE
    now = {"share": ts.share, "related": ts.related, "rank": ts.rank}
    shipped = token_cosine(data, [now])
    r = np.mean([len(set(q["runs"][0][0]) & q["evidence"]) / len(q["evidence"]) for q in shipped])
    x, y = pairs(shipped, 0)
    cells = {t: (int((x + ts.bias >= math.log(t / (1 - t))).sum()),
                 int(y[x + ts.bias >= math.log(t / (1 - t))].sum())) for t in THRESHOLDS}
    print(f"shipped {ts}: R@10 {r:.3f}")
    table("shipped, in-sample", cells, len(shipped))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--strategy", default="hybrid", choices=("hybrid", "semantic", "keyword", "token-cosine"),
                        help="token-cosine: `urchin semantic`'s in-memory ranking (always with --cv)")
    parser.add_argument("--cv", action="store_true")
    parser.add_argument("--wide", action="store_true", help="token-cosine: search the hybrid's grid of ratios")
    parser.add_argument("--cache", type=Path, default=None, help="keep the captured candidates in this file")
    parser.add_argument("--depth", type=int, default=None,
                        help="capture: each leg's candidates (default: the product's, candidates_for(10))")
    parser.add_argument("--embedder-url", default=None, help="an OpenAI-compatible embedding server: the hybrid with "
                        "its dense lists (all-MiniLM-L6-v2), and the dense weight searched by --cv")
    args = parser.parse_args(argv)
    embedder = None
    if args.embedder_url:
        from urchin.search.embedder import Embedder

        global DENSE_GRID
        DENSE_GRID = (0.0, 0.5, 1.0, 2.0, 4.0)
        embedder = Embedder(args.embedder_url, "all-MiniLM-L6-v2", "openai", timeout=300, workers=1, batch_size=64)
    if args.depth is not None:
        hybrid_module.candidates_for = lambda limit: args.depth
    if args.strategy == "token-cosine":
        token_cosine_cv(args.data or _default_data(), args.wide)
        return
    if args.cache is not None and args.cache.is_file():
        qs = pickle.loads(args.cache.read_bytes())
        for q in qs:
            q["ids"] = [split_key(i)[1] if ":" in i[:4] else i for i in q["ids"]]
    else:
        events, questions = load(args.data or _default_data())
        with tempfile.TemporaryDirectory(prefix="urchin-score-") as tmp:
            backend = open_backend(events, Path(tmp), None, embedder)
            qs = capture(backend, events, questions, args.strategy, learned(events), embedder)
            backend.close()
        if args.cache is not None:
            args.cache.write_bytes(pickle.dumps(qs))
    print(f"{len(qs)} questions, {sum(len(q['ids']) for q in qs) / len(qs):.0f} candidates each ({args.strategy})")
    shipped(qs, score_module.HYBRID)
    if args.cv:
        cross_validate(qs)


if __name__ == "__main__":
    main()
