"""Session-level evidence for the hybrid: does a turn's session's score, fused in, gain held out?

    python bench/locomo_session.py --cache /tmp/d60.pkl [--data PATH] [--depths 60:60,200:200]

The cache is `bench/locomo_score.py --cache` (each question's fused candidates with their evidence and
each leg's rank and own score). Offline, every session of the question's conversation gets a score
(0-1, over the question's best session), and a candidate's `rank` part (the fused RRF over the best
possible) becomes `(1 - lam) x rank + lam x session ** p`: still a 0-1 agreement inside the one score,
so the every-word tier holds (no session lifts a turn holding none of the words above one holding all).
The session scores tried:

    tc-sum     the token-cosine leg's own scores of the session's candidates, summed
    tc-max     ... their best
    tc-sqrt    ... summed, over the square root of the session's length (urchin semantic's session leg)
    rrf-sum    the candidates' fused RRF, summed
    cos        the question against the session's text as one document (tf x idf^2 . 1 + ln tf, pivoted
               length normalisation as the token-cosine leg, pivot 0.3 over the mean session norm)
    cos1       the same, plain cosine (pivot 1)
    bm25       BM25 of the session's text (k1 1.2, b 0.75; idf over every session of the split)
    cover      the share of the question's term weight (tf x idf^2) the session's text holds
    cover*tc   cover x tc-sum, a session holding the question's words where the leg found matches
    cand-cover cover over the session's candidates only (what the product's `held` read already knows)
    cover-wN   cover over the turn and its N neighbours each side (N 1, 2, 3), not the whole session
    cover-gated  cover, only for a turn holding some question or related word

Each is tried for the hybrid and for the token-cosine leg alone (its candidates only), the ratios
share : related : rank searched as bench/locomo_fusion.py does. Leave one conversation out chooses
(score, lam, p, ratios) on four conversations and scores the fifth; paired bootstrap (question by
question) against the token-cosine leg and the hybrid as shipped, and against each with the prior.
First it prints where the evidence the shipped top 10 misses sits (`headroom`). `--scores`,
`--lambdas`, `--powers` narrow or widen the grid (the whole grid takes ~30 min at load 20).
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_fusion import RANK_W, RATIOS, SHIPPED, _leg, cv, folds, paired  # noqa: E402
from locomo_hybrid import _default_data, load  # noqa: E402

from urchin.hybrid.base import split_key  # noqa: E402
from urchin.hybrid.leg_runs import PIVOT  # noqa: E402
from urchin.hybrid.sparse import query_vector, term_ids, tokens  # noqa: E402
from urchin.search import score as score_module  # noqa: E402
from urchin.search.websearch import parse  # noqa: E402

DENSE_W = 4.0 * score_module.HYBRID.dense / score_module.HYBRID.rank
SESSION_SCORES = ["tc-sum", "tc-max", "tc-sqrt", "rrf-sum", "cos", "cos1", "bm25", "cover", "cover*tc",
                  "cand-cover", "cover-w1", "cover-w2", "cover-w3", "cover-gated"]
LAMBDAS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5]
POWERS = [1.0, 2.0]


def session_of(event_id: str) -> str:
    """`conv-26:D3:5` -> `conv-26:D3`."""
    return event_id.rsplit(":", 1)[0]


class Text:
    """Every session's text as one document: term counts, norms, lengths, BM25 statistics."""

    def __init__(self, events: list[Any]) -> None:
        self.turn_terms: dict[str, Counter[int]] = {}
        self.sessions: dict[str, Counter[int]] = defaultdict(Counter)
        self.turns: dict[str, list[str]] = defaultdict(list)
        df: Counter[int] = Counter()
        for e in events:
            counts = term_ids(tokens(e.content))
            self.turn_terms[e.id] = counts
            df.update(counts.keys())
            self.sessions[session_of(e.id)].update(counts)
            self.turns[session_of(e.id)].append(e.id)
        self.df, self.n_docs = df, len(events)
        self.sdf: Counter[int] = Counter()
        for counts in self.sessions.values():
            self.sdf.update(counts.keys())
        self.n_sessions = len(self.sessions)
        self.weights = {s: {t: 1.0 + math.log(tf) for t, tf in c.items()} for s, c in self.sessions.items()}
        self.norm = {s: math.sqrt(sum(w * w for w in ws.values())) for s, ws in self.weights.items()}
        self.mean_norm = sum(self.norm.values()) / len(self.norm)
        self.length = {s: sum(c.values()) for s, c in self.sessions.items()}
        self.mean_length = sum(self.length.values()) / len(self.length)

    def own(self, query: str) -> dict[int, float]:
        return query_vector(parse(query).positive, self.df, self.n_docs)

    def window_cover(self, own: dict[int, float], turn: str, width: int) -> float:
        """The share of the question's term weight the turn and its `width` neighbours each side hold."""
        turns = self.turns[session_of(turn)]
        at = turns.index(turn)
        held = set().union(*(self.turn_terms[t].keys() for t in turns[max(0, at - width):at + width + 1]))
        return sum(w for t, w in own.items() if t in held) / (sum(own.values()) or 1.0)

    def scores(self, query: str, sessions: list[str]) -> dict[str, np.ndarray]:
        """Per text score, its value for each of `sessions` (raw, not normalised)."""
        own = query_vector(parse(query).positive, self.df, self.n_docs)
        qn = math.sqrt(sum(w * w for w in own.values())) or 1.0
        total = sum(own.values()) or 1.0
        out: dict[str, list[float]] = {"cos": [], "cos1": [], "bm25": [], "cover": []}
        for s in sessions:
            ws, counts = self.weights[s], self.sessions[s]
            dot = sum(w * ws.get(t, 0.0) for t, w in own.items())
            out["cos"].append(dot / (qn * ((1 - PIVOT) * self.mean_norm + PIVOT * self.norm[s])))
            out["cos1"].append(dot / (qn * self.norm[s]) if self.norm[s] else 0.0)
            bm = 0.0
            for t in own:
                tf = counts.get(t, 0)
                if tf:
                    sidf = math.log(1 + (self.n_sessions - self.sdf[t] + 0.5) / (self.sdf[t] + 0.5))
                    bm += sidf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.length[s] / self.mean_length))
            out["bm25"].append(bm)
            out["cover"].append(sum(w for t, w in own.items() if t in counts) / total)
        return {k: np.array(v) for k, v in out.items()}


class Pool:
    """Every question's candidates, concatenated, with their session's scores (see the module doc)."""

    def __init__(self, qs: list[dict[str, Any]], text: Text, leg: str | None = None,
                 kw_depth: int = 10**9, tc_depth: int = 10**9) -> None:
        cols: dict[str, list[Any]] = defaultdict(list)
        convs: list[str] = []
        n_evidence: list[int] = []
        for qid, q in enumerate(qs):
            convs.append(q["conv"])
            n_evidence.append(len(q["evidence"]))
            rows = []
            for i, legs in enumerate(q["legs"]):
                kr, _ = _leg(legs, "keyword", kw_depth)
                tr, traw = _leg(legs, "semantic", tc_depth)
                if leg == "semantic":
                    kr = np.inf
                if np.isfinite(kr) or np.isfinite(tr):
                    rows.append((i, kr, tr, traw))
            k, wk = SHIPPED["k"], (SHIPPED["wk"] if leg != "semantic" else 0.0)
            rrf = {i: (wk / (k + kr) + 1.0 / (k + tr)) / ((wk + 1.0) / (k + 1.0)) for i, kr, tr, _ in rows}
            sess = {i: session_of(q["ids"][i]) for i, *_ in rows}
            conv_sessions = sorted({s for s in text.sessions if s.startswith(q["conv"] + ":")})
            agg: dict[str, dict[str, float]] = {n: defaultdict(float) for n in ("tc-sum", "tc-max", "rrf-sum")}
            for i, _, _, traw in rows:
                s = sess[i]
                agg["tc-sum"][s] += traw
                agg["tc-max"][s] = max(agg["tc-max"][s], traw)
                agg["rrf-sum"][s] += rrf[i]
            agg["tc-sqrt"] = {s: v / math.sqrt(len(text.turns[s])) for s, v in agg["tc-sum"].items()}
            texts = text.scores(q["query"], conv_sessions)
            for name, values in texts.items():
                agg[name] = dict(zip(conv_sessions, values, strict=True))
            agg["cover*tc"] = {s: agg["cover"][s] * v for s, v in agg["tc-sum"].items()}
            own = text.own(q["query"])
            total = sum(own.values()) or 1.0
            held: dict[str, set[int]] = defaultdict(set)
            for i, *_ in rows:
                held[sess[i]].update(t for t in text.turn_terms[q["ids"][i]] if t in own)
            agg["cand-cover"] = {s: sum(own[t] for t in h) / total for s, h in held.items()}
            per_turn = {f"cover-w{w}": {i: text.window_cover(own, q["ids"][i], w) for i, *_ in rows}
                        for w in (1, 2, 3)}
            per_turn["cover-gated"] = {i: agg["cover"][sess[i]] if q["x"][i][1] > 0 or q["x"][i][2] > 0 else 0.0
                                       for i, *_ in rows}
            best = {n: max(v.values(), default=0.0) or 1.0 for n, v in agg.items()}
            best.update({n: 1.0 for n in per_turn})
            order = {i: n for n, i in enumerate(sorted(range(len(q["ids"])), key=lambda i: q["ids"][i]))}
            for i, *_ in rows:
                x = q["x"][i]
                cols["qid"].append(qid)
                cols["every"].append(x[0] > 0)
                cols["share"].append(x[1])
                cols["related"].append(x[2])
                cols["rrf"].append(rrf[i])
                cols["hit"].append(q["ids"][i] in q["evidence"])
                cols["order"].append(order[i])
                for n in SESSION_SCORES:
                    value = per_turn[n][i] if n in per_turn else agg[n].get(sess[i], 0.0)
                    cols[n].append(value / best[n])
        self.a = {n: np.array(v, dtype=float) for n, v in cols.items()}
        self.qid = self.a["qid"].astype(int)
        self.nq = len(qs)
        self.n_evidence = np.array(n_evidence, dtype=float)
        self.conv = np.array(convs)
        self.start = np.searchsorted(self.qid, np.arange(self.nq))

    def rank(self, c: dict[str, Any]) -> np.ndarray:
        lam = c.get("lam", 0.0)
        if lam == 0.0:
            return self.a["rrf"]
        return np.asarray((1 - lam) * self.a["rrf"] + lam * self.a[c["session"]] ** c.get("p", 1.0))

    def recall(self, c: dict[str, Any]) -> np.ndarray:
        scale = score_module.Scale("x", c["share"], c["related"], RANK_W, DENSE_W, 0.0)
        rank = self.rank(c)
        raw = np.round(scale.every * self.a["every"] + scale.share * self.a["share"]
                       + scale.related * self.a["related"] + scale.rank * rank, 12)
        order = np.lexsort((self.a["order"], -rank, -raw, self.qid))
        pos = np.arange(len(order)) - self.start[self.qid[order]]
        top = np.zeros(len(order), dtype=bool)
        top[order[pos < 10]] = True
        found = np.bincount(self.qid[top], weights=self.a["hit"][top], minlength=self.nq)
        return found / self.n_evidence


def headroom(qs: list[dict[str, Any]], text: Text) -> None:
    """Where the evidence the shipped top 10 misses sits: among the candidates or not, in the session of
    a top-10 hit or not, in the session that holds most of the question's words (`cover`) or not."""
    counts: Counter[str] = Counter()
    for q in qs:
        raw = q["x"] @ np.array([1.0, 0.25, 0.25, 4.0, DENSE_W]) if len(q["x"]) else np.zeros(0)
        order = sorted(range(len(raw)), key=lambda i: (-raw[i], -q["fused"][i], q["ids"][i]))
        top = [q["ids"][i] for i in order[:10]]
        top_sessions = {session_of(t) for t in top}
        cands = set(q["ids"])
        sessions = sorted(s for s in text.sessions if s.startswith(q["conv"] + ":"))
        cover = dict(zip(sessions, text.scores(q["query"], sessions)["cover"], strict=True))
        best = max(cover.values(), default=0.0)
        for e in q["evidence"]:
            counts["evidence"] += 1
            if e in top:
                continue
            s = session_of(e)
            counts["missed"] += 1
            counts["missed, among the candidates"] += e in cands
            counts["missed, in a top-10 hit's session"] += s in top_sessions
            counts["missed, in a top-10 hit's session, among the candidates"] += s in top_sessions and e in cands
            counts["missed, in a best-cover session"] += best > 0 and cover.get(s, 0.0) == best
            counts["missed, in a best-cover session, among the candidates"] += (best > 0 and cover.get(s, 0.0) == best
                                                                              and e in cands)
            words = set(text.turn_terms.get(e, Counter())) & set(text.own(q["query"]))
            counts["missed, holding none of the question's words"] += not words
    print(f"evidence turns {counts['evidence']}, missed by the shipped top 10: {counts['missed']} "
          f"({counts['missed'] / counts['evidence']:.3f})")
    for key, n in counts.items():
        if key.startswith("missed,"):
            print(f"  {key}: {n / counts['missed']:.3f}")


def configs(with_session: bool) -> list[dict[str, Any]]:
    ratios = [{"share": s, "related": r} for s, r in itertools.product(RATIOS, RATIOS) if r <= s]
    out: list[dict[str, Any]] = [{"lam": 0.0, **r} for r in ratios]
    if with_session:
        out += [{"session": n, "lam": lam, "p": p, **r} for n in SESSION_SCORES for lam in LAMBDAS[1:]
                for p in POWERS for r in ratios]
    return out


def search(pool: Pool, space: list[dict[str, Any]], label: str, show: bool = False
           ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    scores = np.array([pool.recall(c) for c in space])
    held = cv(scores, pool.conv, space, show=show)
    best = int(np.argmax(scores.mean(axis=1)))
    print(f"{label}: CV {held.mean():.4f} (folds {folds(held, pool.conv)}); in-sample best "
          f"{scores[best].mean():.4f} {space[best]}")
    return held, scores[best], space[best]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--depths", default="60:60")
    parser.add_argument("--scores", default=None, help="comma-separated session scores to search (default: all)")
    parser.add_argument("--lambdas", default=None, help="comma-separated lam values (0 is always in)")
    parser.add_argument("--powers", default=None, help="comma-separated powers p")
    args = parser.parse_args(argv)
    if args.scores:
        SESSION_SCORES[:] = args.scores.split(",")
    if args.lambdas:
        LAMBDAS[:] = [0.0, *map(float, args.lambdas.split(","))]
    if args.powers:
        POWERS[:] = list(map(float, args.powers.split(",")))
    qs = pickle.loads(args.cache.read_bytes())
    for q in qs:
        q["ids"] = [split_key(i)[1] if ":" in i[:4] else i for i in q["ids"]]
    events, _ = load(args.data or _default_data())
    text = Text(events)
    headroom(qs, text)
    for kd, td in [tuple(map(int, d.split(":"))) for d in args.depths.split(",")]:
        print(f"== depths keyword {kd}, token-cosine {td}")
        hybrid, tc = Pool(qs, text, kw_depth=kd, tc_depth=td), Pool(qs, text, leg="semantic", tc_depth=td)
        shipped_h = hybrid.recall({**SHIPPED, "lam": 0.0})
        shipped_t = tc.recall({**SHIPPED, "lam": 0.0})
        print(f"hybrid as shipped {shipped_h.mean():.4f} (folds {folds(shipped_h, hybrid.conv)}); token-cosine leg "
              f"as shipped {shipped_t.mean():.4f} (folds {folds(shipped_t, tc.conv)})")
        t0, _, _ = search(tc, configs(False), "token-cosine leg, ratios by CV")
        h0, _, _ = search(hybrid, configs(False), "hybrid, ratios by CV")
        for name in SESSION_SCORES:
            space = [c for c in configs(True) if c.get("session") in (None, name)]
            search(hybrid, space, f"  hybrid + {name}")
        t1, _, tbest = search(tc, configs(True), "token-cosine leg + a session score, the whole search", show=True)
        h1, hin, hbest = search(hybrid, configs(True), "hybrid + a session score, the whole search", show=True)
        print("paired, held out (CV choice per fold):")
        paired("hybrid+session vs token-cosine leg as shipped", h1, shipped_t)
        paired("hybrid+session vs token-cosine leg, ratios by CV", h1, t0)
        paired("hybrid+session vs hybrid as shipped", h1, shipped_h)
        paired("hybrid+session vs hybrid, ratios by CV", h1, h0)
        paired("hybrid+session vs token-cosine leg + session (CV)", h1, t1)
        paired("token-cosine+session vs token-cosine leg as shipped", t1, shipped_t)
        print("paired, in-sample best:")
        paired(f"hybrid {hbest} vs hybrid as shipped", hin, shipped_h)
        paired("  vs token-cosine leg ranked the same way", hin, tc.recall(hbest))


if __name__ == "__main__":
    main()
