"""Which fusion of the hybrid's legs gains over its best leg on conversations it was not tuned on?

    python bench/locomo_fusion.py --cache /tmp/hyb.pkl [--depths 60:60,100:100] [--families comb,comb^p]

The cache is `bench/locomo_score.py --cache` (each question's fused candidates with their evidence and
each leg's rank and own score; `--depth N` there captures the legs N deep, and `--depths` here cuts
each leg's list at a depth to see what a deeper or shallower leg would give). Offline, every candidate
is re-fused and re-scored by the one score's rule (urchin.search.score: the every-word tier, share,
related, rank), with `rank` (the ranker's agreement, 0-1) made by one of:

    rrf      weighted RRF over the best possible: (wk/(k+r_kw) + 1/(k+r_tc)) / ((wk+1)/(k+1))
    comb     CombSUM of the legs' own scores, each over the question's best in that leg (power p:
             comb ** p, which sharpens the gap between a leg's best match and the rest)
    mnz      CombMNZ: comb x the share of the legs that found it
    both     1 when both legs found it (agreement)

mixed convexly (their weights sum to 1), so `rank` stays a 0-1 number a calibrated map can read.
Leave one conversation out: the configuration (fusion, k, the keyword leg's weight, the ratios of
share : related : rank, each leg's depth) is chosen on four conversations and scored on the fifth.
Printed beside it, the same for each leg alone (its best-leg CV), and the candidates' recall ceiling
(R@10 were they ordered perfectly). Candidates a leg did not return can only be re-ordered here.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from urchin.search import score as score_module  # noqa: E402

SHIPPED = {"k": 20, "wk": 0.125, "share": 0.25, "related": 0.25}   # k; keyword 2 x KEYWORD_SHARE over 2
RANK_W = 4.0                           # rank's weight in the ratio grid (as bench/locomo_score.py)
DENSE_W = 4.0 * score_module.HYBRID.dense / score_module.HYBRID.rank   # its share of the tier, no embedder
RATIOS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)


class Pool:
    """Every question's candidates, concatenated (a missing leg: rank inf, score 0), for a vectorised R@10."""

    def __init__(self, qs: list[dict[str, Any]], kw_depth: int = 10**9, tc_depth: int = 10**9,
                 leg: str | None = None) -> None:
        cols: dict[str, list[Any]] = {n: [] for n in ("qid", "every", "share", "related", "kr", "tr", "kn", "tn",
                                                     "hit", "order")}
        self.conv, self.n_evidence = [], []
        for qid, q in enumerate(qs):
            self.conv.append(q["conv"])
            self.n_evidence.append(len(q["evidence"]))
            rows = []
            for i, legs in enumerate(q["legs"]):
                kr, kraw = _leg(legs, "keyword", kw_depth)
                tr, traw = _leg(legs, "semantic", tc_depth)
                if leg == "keyword":
                    tr, traw = np.inf, 0.0
                if leg == "semantic":
                    kr, kraw = np.inf, 0.0
                if np.isfinite(kr) or np.isfinite(tr):
                    rows.append((i, kr, tr, kraw, traw))
            kbest = max((r[3] for r in rows), default=0.0) or 1.0
            tbest = max((r[4] for r in rows), default=0.0) or 1.0
            order = {i: n for n, i in enumerate(sorted(range(len(q["ids"])), key=lambda i: q["ids"][i]))}
            for i, kr, tr, kraw, traw in rows:
                x = q["x"][i]
                for name, value in (("qid", qid), ("every", x[0] > 0), ("share", x[1]), ("related", x[2]),
                                    ("kr", kr), ("tr", tr), ("kn", kraw / kbest), ("tn", traw / tbest),
                                    ("hit", q["ids"][i] in q["evidence"]), ("order", order[i])):
                    cols[name].append(value)
        columns(self, cols, len(qs))

    def ceiling(self) -> np.ndarray:
        found = np.bincount(self.qid, weights=self.a["hit"], minlength=self.nq)
        return np.minimum(found, 10) / self.n_evidence

    def rank(self, c: dict[str, Any]) -> np.ndarray:
        """`rank` of the one score: a convex mix of rrf, comb, mnz and both (see the module doc)."""
        a = self.a
        k, wk, wt = c["k"], c["wk"], c.get("wt", 1.0)
        rrf = (wk / (k + a["kr"]) + wt / (k + a["tr"])) / ((wk + wt) / (k + 1.0))
        cw = c.get("cw", wk)            # the keyword leg's weight in comb (default: as in rrf)
        comb = (cw * a["kn"] + wt * a["tn"]) / (cw + wt)
        legs = np.isfinite(a["kr"]).astype(float) + np.isfinite(a["tr"])
        mnz = comb * legs / 2.0
        both = (legs == 2).astype(float)
        m, g, s = c.get("comb", 0.0), c.get("mnz", 0.0), c.get("both", 0.0)
        mixed = (1 - m - g - s) * rrf + m * comb + g * mnz + s * both
        return np.asarray(mixed ** c.get("power", 1.0))

    def raw(self, c: dict[str, Any], rank: np.ndarray | None = None) -> np.ndarray:
        scale = score_module.Scale("x", c["share"], c["related"], RANK_W, DENSE_W, 0.0)
        rank = self.rank(c) if rank is None else rank
        return np.asarray(scale.every * self.a["every"] + scale.share * self.a["share"]
                          + scale.related * self.a["related"] + scale.rank * rank)

    def top10(self, c: dict[str, Any]) -> np.ndarray:
        """A mask of each question's top 10 by raw (ties: rank, then id)."""
        rank = self.rank(c)
        raw = np.round(self.raw(c, rank), 12)
        order = np.lexsort((self.a["order"], -rank, -raw, self.qid))
        pos = np.arange(len(order)) - self.start[self.qid[order]]
        mask = np.zeros(len(order), dtype=bool)
        mask[order[pos < 10]] = True
        return mask

    def recall(self, c: dict[str, Any]) -> np.ndarray:
        top = self.top10(c)
        found = np.bincount(self.qid[top], weights=self.a["hit"][top], minlength=self.nq)
        return found / self.n_evidence


def columns(pool: Any, cols: dict[str, list[Any]], nq: int) -> None:
    """A pool's arrays from its columns (one row a candidate, `qid` ascending) and its per-question lists."""
    pool.a = {n: np.array(v, dtype=float) for n, v in cols.items()}
    pool.qid = pool.a["qid"].astype(int)
    pool.nq = nq
    pool.n_evidence = np.array(pool.n_evidence, dtype=float)
    pool.conv = np.array(pool.conv)
    pool.start = np.searchsorted(pool.qid, np.arange(nq))


def _leg(legs: list[tuple[str, str, int, float]], name: str, depth: int) -> tuple[float, float]:
    """The candidate's rank and own score in the leg's question list (inf, 0 if absent or below depth)."""
    ranks = [(r, s) for leg, origin, r, s in legs if leg == name and origin == "query" and r <= depth]
    return min(ranks) if ranks else (np.inf, 0.0)


def ratios() -> list[dict[str, float]]:
    """share : related : rank 4, a related word never weighing more than the words typed (score.py)."""
    return [{"share": s, "related": r} for s, r in itertools.product(RATIOS, RATIOS) if r <= s]


def families() -> dict[str, list[dict[str, Any]]]:
    """The fusions searched, by family (every one times the ratios)."""
    out: dict[str, list[dict[str, Any]]] = {
        "rrf (shipped k, wk)": [{"k": 20, "wk": 0.125}],
        "rrf, k and wk": [{"k": k, "wk": wk} for k in (5, 10, 20, 40, 60)
                          for wk in (0.03, 0.0625, 0.125, 0.25, 0.5, 1.0)],
        "comb": [{"k": 20, "wk": wk, "comb": 1.0} for wk in (0.0, 0.03, 0.0625, 0.125, 0.25, 0.5, 1.0)],
        "mnz": [{"k": 20, "wk": wk, "mnz": 1.0} for wk in (0.0625, 0.125, 0.25, 0.5, 1.0)],
        "comb^p": [{"k": 20, "wk": wk, "comb": 1.0, "power": p} for wk in (0.0, 0.03, 0.0625, 0.125, 0.25)
                   for p in (1.5, 2.0, 3.0, 4.0)],
        "rrf + comb": [{"k": k, "wk": wk, "comb": m, "cw": cw} for k in (10, 20, 40) for wk in (0.0625, 0.125, 0.25)
                       for m in (0.25, 0.5, 0.75) for cw in (0.125, 0.25, 0.5, 1.0)],
        "rrf + both": [{"k": k, "wk": wk, "both": g} for k in (10, 20, 40) for wk in (0.0625, 0.125, 0.25)
                       for g in (0.05, 0.1, 0.2, 0.3)],
    }
    return {name: [{**f, **r} for f in fs for r in ratios()] for name, fs in out.items()}


def cv(scores: np.ndarray, conv: np.ndarray, configs: list[dict[str, Any]], show: bool = False) -> np.ndarray:
    """Leave one conversation out: per fold the config best on the other four; per-question held-out R@10."""
    held = np.zeros(scores.shape[1])
    for c in sorted(set(conv)):
        out = conv == c
        best = int(np.argmax(scores[:, ~out].mean(axis=1)))
        held[out] = scores[best, out]
        if show:
            print(f"    held out {c}: {configs[best]}  R@10 {held[out].mean():.3f} "
                  f"(in-sample on the other four {scores[best, ~out].mean():.3f})")
    return held


def folds(held: np.ndarray, conv: np.ndarray) -> str:
    return " ".join(f"{held[conv == c].mean():.3f}" for c in sorted(set(conv)))


def paired(label: str, x: np.ndarray, y: np.ndarray) -> None:
    """x against y, question by question: the mean difference and its bootstrap 95% interval."""
    d = x - y
    rng = np.random.default_rng(0)
    boot = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
    print(f"  {label}: {x.mean():.4f} vs {y.mean():.4f}, {d.mean():+.4f} (95% {np.percentile(boot, 2.5):+.4f} .. "
          f"{np.percentile(boot, 97.5):+.4f}; questions better/worse {int((d > 0).sum())}/{int((d < 0).sum())})")


def compare(qs: list[dict[str, Any]], best: dict[str, Any]) -> None:
    """The in-sample best against the shipped hybrid and the token-cosine leg, shipped and ranked the same way."""
    kd, td = map(int, str(best.get("depth", "60:60")).split(":"))
    pool, leg = Pool(qs, kw_depth=kd, tc_depth=td), Pool(qs, kw_depth=kd, tc_depth=td, leg="semantic")
    x = pool.recall(best)
    print(f"in-sample best {best}, paired:")
    paired("against the hybrid as shipped", x, pool.recall(SHIPPED))
    paired("against the token-cosine leg as shipped", x, leg.recall({**SHIPPED, "wk": 0.0}))
    paired("against the token-cosine leg ranked the same way", x, leg.recall({**best, "wk": 0.0, "cw": 0.0}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--depths", default="60:60", help="kw:tc depth pairs to search, e.g. 20:60,40:60,60:60")
    parser.add_argument("--families", default=None, help="comma-separated names of `families()` (default: all)")
    args = parser.parse_args(argv)
    qs = pickle.loads(args.cache.read_bytes())
    if "legs" not in qs[0]:
        raise SystemExit(f"{args.cache}: no leg ranks captured (re-capture with this bench/locomo_score.py)")
    full = Pool(qs)
    conv = full.conv
    print(f"{full.nq} questions, {len(full.qid) / full.nq:.0f} candidates each; recall ceiling (R@10 if "
          f"ordered perfectly) {full.ceiling().mean():.3f}; folds {folds(full.ceiling(), conv)}")
    for leg in ("keyword", "semantic"):
        pool = Pool(qs, leg=leg)
        base = {"k": 20, "wk": 1.0 if leg == "keyword" else 0.0, "wt": 0.0 if leg == "keyword" else 1.0}
        configs = [{**base, **r} for r in ratios()]
        scores = np.array([pool.recall(c) for c in configs])
        shipped = pool.recall({**base, "share": 0.25, "related": 0.25})
        held = cv(scores, conv, configs)
        print(f"{leg} leg alone: ceiling {pool.ceiling().mean():.3f}; shipped ratios R@10 {shipped.mean():.3f} "
              f"(folds {folds(shipped, conv)}); ratios by CV {held.mean():.3f} (folds {folds(held, conv)})")
    shipped = full.recall(SHIPPED)
    print(f"hybrid as shipped: R@10 {shipped.mean():.3f} (folds {folds(shipped, conv)})")
    everything: list[dict[str, Any]] = []
    table: list[np.ndarray] = []
    for kd, td in [tuple(map(int, d.split(":"))) for d in args.depths.split(",")]:
        pool = Pool(qs, kw_depth=kd, tc_depth=td)
        print(f"depths keyword {kd}, token-cosine {td}: ceiling {pool.ceiling().mean():.3f}")
        for name, configs in families().items():
            if args.families and name.split(" ")[0] not in args.families.split(","):
                continue
            configs = [{**c, "depth": f"{kd}:{td}"} for c in configs]
            scores = np.array([pool.recall(c) for c in configs])
            held = cv(scores, conv, configs)
            best = int(np.argmax(scores.mean(axis=1)))
            print(f"  {name:<20} CV {held.mean():.3f} (folds {folds(held, conv)})   in-sample best "
                  f"{scores[best].mean():.3f} {configs[best]}")
            everything += configs
            table += list(scores)
    scores = np.array(table)
    print("the whole search, one choice per fold:")
    held = cv(scores, conv, everything, show=True)
    print(f"CV R@10 {held.mean():.3f} (folds {folds(held, conv)}); in-sample best "
          f"{scores.mean(axis=1).max():.3f} {everything[int(np.argmax(scores.mean(axis=1)))]}")
    compare(qs, everything[int(np.argmax(scores.mean(axis=1)))])


if __name__ == "__main__":
    main()
