"""The embedder's score on LoCoMo dev: what `urchin semantic` shows, raw cosine against calibrated.

    python bench/locomo_dense_score.py --embedder-url http://127.0.0.1:PORT [--model all-MiniLM-L6-v2]

Every dev turn is embedded as the product embeds an event (`event_text`), every question of
categories 1-4 as a query (`constraints`, `embed_query`); each question's top 10 in its own
conversation is what `urchin semantic --workspace` returns (the order is the cosine's; a per-query
map never changes it). For each result it keeps the raw cosine and its z-score against the query's
background (urchin.search.vectors.background: the cosines to a fixed sample of the cache).

Prints: the precision of results at >= 0.3 / 0.5 / 0.7 with the raw cosine as the score, and
evidence vs other cosines for broad and narrow questions (terciles of the background mean, a
label-free measure of how broad a question sits in the model's space); then a logistic map of
"is an evidence turn" on z, fitted by leave-one-conversation-out CV, with its held-out precision
table, and the map fitted on all five (the shipped constants of urchin.search.score.EMBEDDER).
`--second-model lsa`: the same map applied, unfitted, to a different embedding (a 256-dim LSA of
the turns' tf-idf): how far the z-score carries to a model it was not fitted on.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import _default_data, load  # noqa: E402

from urchin.search import score as score_module  # noqa: E402
from urchin.search.embedder import Embedder  # noqa: E402
from urchin.search.semantic import constraints  # noqa: E402
from urchin.search.terms import tokenize  # noqa: E402
from urchin.search.vectors import background, event_text  # noqa: E402

THRESHOLDS = (0.3, 0.5, 0.7)
LOW = (0.05, 0.1, 0.15)      # where a small model's calibrated scores actually sit on LoCoMo
LIMIT = 10


def _unit_rows(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


def capture(matrix: np.ndarray, queries: np.ndarray, events: list[Any], questions: list[Any]) -> list[dict[str, Any]]:
    """Per result of each question's top 10 in its workspace: question, conversation, cosine, z, label."""
    ws = np.array([e.workspace for e in events])
    ids = [e.id for e in events]
    rows: list[dict[str, Any]] = []
    for qi, (q, vec) in enumerate(zip(questions, queries, strict=True)):
        cos = matrix @ vec
        mean, spread = background(matrix, vec)
        inside = np.flatnonzero(ws == q.workspace)
        top = inside[np.argsort(-cos[inside], kind="stable")[:LIMIT]]
        evidence = set(q.evidence)
        for r in top:
            rows.append({"q": qi, "conv": q.workspace, "cos": float(cos[r]), "z": (float(cos[r]) - mean) / spread,
                         "bg": mean, "label": ids[r] in evidence})
    return rows


def precision(rows: list[dict[str, Any]], key: str,
              thresholds: tuple[float, ...] = THRESHOLDS) -> list[tuple[float, float, int]]:
    out = []
    for t in thresholds:
        kept = [r for r in rows if r[key] >= t]
        out.append((t, sum(r["label"] for r in kept) / len(kept) if kept else float("nan"), len(kept)))
    return out


def fit(xs: np.ndarray, ys: np.ndarray) -> tuple[float, float]:
    """Logistic regression of y on x (Newton steps): (slope, bias)."""
    a, b = 0.0, 0.0
    X = np.stack([xs, np.ones_like(xs)], axis=1)
    w = np.array([a, b])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        grad = X.T @ (ys - p)
        hess = (X * (p * (1 - p))[:, None]).T @ X + 1e-9 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w = w + step
        if np.abs(step).max() < 1e-9:
            break
    return float(w[0]), float(w[1])


def shown(rows: list[dict[str, Any]], slope: float, bias: float) -> None:
    for r in rows:
        r["shown"] = 1.0 / (1.0 + math.exp(-(slope * r["z"] + bias)))


def terciles(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Broad / middle / narrow questions by their background mean (label-free)."""
    bg = {r["q"]: r["bg"] for r in rows}
    cut_lo, cut_hi = np.quantile(list(bg.values()), [1 / 3, 2 / 3])
    out: dict[str, list[dict[str, Any]]] = {"broad": [], "middle": [], "narrow": []}
    for r in rows:
        name = "broad" if bg[r["q"]] >= cut_hi else "narrow" if bg[r["q"]] < cut_lo else "middle"
        out[name].append(r)
    return out


def table(title: str, rows: list[dict[str, Any]], key: str) -> None:
    parts = [f">= {t}: {p:.3f} ({n})" for t, p, n in precision(rows, key)]
    low = [f">= {t}: {p:.3f} ({n})" for t, p, n in precision(rows, key, LOW)]
    print(f"  {title:8s} " + "  ".join(parts) + "   |  " + "  ".join(low))
    if key != "cos":      # calibration: the mean score against the share that is evidence
        print(f"  {'':8s} mean score {np.mean([r[key] for r in rows]):.3f}, evidence rate "
              f"{np.mean([r['label'] for r in rows]):.3f}")


def report(rows: list[dict[str, Any]], name: str) -> None:
    groups = terciles(rows)
    print(f"\n[{name}] {len({r['q'] for r in rows})} questions, {len(rows)} results (top {LIMIT})")
    print("  cosine (mean) of evidence vs other results in the top 10, by question breadth:")
    for g, rs in groups.items():
        ev = [r["cos"] for r in rs if r["label"]]
        other = [r["cos"] for r in rs if not r["label"]]
        zev = [r["z"] for r in rs if r["label"]]
        zot = [r["z"] for r in rs if not r["label"]]
        print(f"    {g:7s} background {np.mean([r['bg'] for r in rs]):.3f}  cos evidence {np.mean(ev):.3f} "
              f"other {np.mean(other):.3f}   z evidence {np.mean(zev):.2f} other {np.mean(zot):.2f}")
    print("  precision, score = the raw cosine (as shipped):")
    table("all", rows, "cos")
    for g, rs in groups.items():
        table(g, rs, "cos")


def cv(rows: list[dict[str, Any]]) -> None:
    convs = sorted({r["conv"] for r in rows})
    held: list[dict[str, Any]] = []
    for c in convs:
        train = [r for r in rows if r["conv"] != c]
        slope, bias = fit(np.array([r["z"] for r in train]), np.array([float(r["label"]) for r in train]))
        test = [dict(r) for r in rows if r["conv"] == c]
        shown(test, slope, bias)
        print(f"  fold {c}: slope {slope:.4f} bias {bias:.4f}")
        held.extend(test)
    print("  precision, score = the map of z (leave-one-conversation-out, each fold held out):")
    table("all", held, "shown")
    for g, rs in terciles(held).items():
        table(g, rs, "shown")


def lsa(events: list[Any], questions: list[Any], dims: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """A cheap second 'model': tf-idf over the product's tokens, cut to `dims` by SVD."""
    vocab: dict[str, int] = {}
    docs = [Counter(tokenize(event_text(e))) for e in events]
    for d in docs:
        for t in d:
            vocab.setdefault(t, len(vocab))
    df = np.zeros(len(vocab))
    for d in docs:
        for t in d:
            df[vocab[t]] += 1
    idf = np.log((1 + len(docs)) / (1 + df)) + 1

    def vec(c: Counter[str]) -> np.ndarray:
        v = np.zeros(len(vocab))
        for t, n in c.items():
            if t in vocab:
                v[vocab[t]] = (1 + math.log(n)) * idf[vocab[t]]
        return v

    m = np.stack([vec(d) for d in docs])
    _, _, vt = np.linalg.svd(m, full_matrices=False)
    basis = vt[:dims].T
    qs = np.stack([vec(Counter(tokenize(constraints(q.text)[0]))) for q in questions])
    return _unit_rows(m @ basis), _unit_rows(qs @ basis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--embedder-url", default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--cache", type=Path, default=None, help="keep the vectors in this .npz file")
    parser.add_argument("--second-model", choices=("lsa",), default=None)
    args = parser.parse_args()
    events, questions = load(args.data or _default_data())
    cache = args.cache
    if cache is not None and cache.is_file():
        saved = np.load(cache)
        matrix, queries = saved["matrix"], saved["queries"]
    else:
        with Embedder(args.embedder_url, args.model, timeout=300.0, workers=1, batch_size=64) as embedder:
            matrix = _unit_rows(embedder.embed([event_text(e) for e in events]))
            queries = _unit_rows(embedder.embed([constraints(q.text)[0] for q in questions]))
        if cache is not None:
            np.savez(cache, matrix=matrix, queries=queries)
    rows = capture(matrix, queries, events, questions)
    report(rows, args.model)
    cv(rows)
    scale = score_module.EMBEDDER
    slope, bias = fit(np.array([r["z"] for r in rows]), np.array([float(r["label"]) for r in rows]))
    print(f"  fitted on all five: slope {slope:.4f} bias {bias:.4f}   shipped: "
          f"{scale.dense / score_module.Z_SPAN:.4f} x z, bias {scale.bias:.4f}")
    for r in rows:
        r["shipped"] = scale.score(score_module.Evidence(share=0.0, every=False, dense=score_module.z_unit(r["z"])))
    print("  precision, score = the shipped map (in-sample):")
    table("all", rows, "shipped")
    if args.second_model == "lsa":
        m2, q2 = lsa(events, questions)
        rows2 = capture(m2, q2, events, questions)
        report(rows2, "LSA-256 (tf-idf + SVD)")
        for r in rows2:
            r["shipped"] = scale.score(score_module.Evidence(share=0.0, every=False, dense=score_module.z_unit(r["z"])))
        print("  precision, score = the map fitted on MiniLM, applied as it is:")
        table("all", rows2, "shipped")
        for g, rs in terciles(rows2).items():
            table(g, rs, "shipped")
        cv(rows2)


if __name__ == "__main__":
    main()
