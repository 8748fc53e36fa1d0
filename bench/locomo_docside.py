"""Document-side expansion and the questions' speaker and date signals on LoCoMo dev (issue 32, round twenty).

    python bench/locomo_docside.py --cache /tmp/docside.pkl        # capture once (PostgreSQL), then analyse
    python bench/locomo_docside.py --cache /tmp/docside.pkl --legs x-prev1,x-sym05 [--no-priors]
    python bench/locomo_docside.py --cache /tmp/docside.pkl --legs "" --combine x-sym05   # a list + both priors

Query-side expansion (thesaurus, learned associations, feedback) was tried in rounds five to nineteen;
this tries the other side, with no model. Each turn is indexed (here, in memory, beside the product's
index) with the terms of its neighbouring turns in the same session, weighted by distance and by side
(the turn before a reply is the question it answers), and/or with its own strongest learned
associations (urchin.search.assoc over the same journal): D_i = d_i + sum_j a_j d_(i-j) + sum_j b_j
d_(i+j) + c x assoc(d_i). A question is scored against D as the token-cosine leg scores d (its own and
related words' weights tf x idf^2, pivoted length normalisation, a named source counting double), and
each variant's 60 best turns join `run_context` as an extra list of weight ~0 (`x-...` legs): the
product scores every candidate's evidence (every word, share, related, on the turn's own terms: the
expansion is no evidence), and the capture (bench/locomo_score.py's) keeps each leg's ranks.

Offline, a variant's list is fused at weight wx beside the shipped legs (RRF, k 20, keyword 1/8) with
the ratios share : related : rank 4 searched as round thirteen did; also the two priors the questions
carry: a question naming a speaker ("When did Caroline ...") lowers the `rank` of the other speakers'
turns by s_named, and a when-question lowers the `rank` of turns holding no time expression by s_time
(both inside `rank`, so the every-word tier holds). Leave one conversation out chooses every constant;
paired bootstrap against the token-cosine leg (the hybrid's lists without the keyword leg, ratios by
CV: round thirteen's 0.759) and the hybrid as shipped.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_fusion import DENSE_W, RANK_W, columns, cv, folds, paired  # noqa: E402
from locomo_hybrid import _default_data, learned, load, open_backend  # noqa: E402
from locomo_score import capture  # noqa: E402

import urchin.hybrid.leg_runs as leg_runs  # noqa: E402
from urchin.hybrid.base import LegHit, chunk_key, split_key  # noqa: E402
from urchin.hybrid.sparse import doc_vector, term_ids, tokens  # noqa: E402
from urchin.search import score as score_module  # noqa: E402
from urchin.search.websearch import parse  # noqa: E402

# name: (weights of the turns before, weights of the turns after, associations' weight c, own turn's weight,
# the session neighbours' smoothing of the scores as the token-cosine leg's (0.6 ** distance, 3 turns; 0: none))
VARIANTS: dict[str, tuple[tuple[float, ...], tuple[float, ...], float, float, float]] = {
    "x-own": ((), (), 0.0, 1.0, 0.0),                          # control: the turn alone, no smoothing
    "x-own-ctx": ((), (), 0.0, 1.0, 0.6),                      # control: about the token-cosine leg's own list
    "x-prev05": ((0.5,), (), 0.0, 1.0, 0.0),                   # the question a reply answers, at half
    "x-prev1": ((1.0,), (), 0.0, 1.0, 0.0),
    "x-prev15": ((1.5,), (), 0.0, 1.0, 0.0),
    "x-prev2": ((2.0,), (), 0.0, 1.0, 0.0),
    "x-prev1-025": ((1.0, 0.25), (), 0.0, 1.0, 0.0),
    "x-prev05-025": ((0.5, 0.25), (), 0.0, 1.0, 0.0),
    "x-sym05": ((0.5,), (0.5,), 0.0, 1.0, 0.0),
    "x-prev1-next05": ((1.0,), (0.5,), 0.0, 1.0, 0.0),
    "x-prev05-next025": ((0.5, 0.25), (0.25,), 0.0, 1.0, 0.0),
    "x-reply": ((1.0,), (), 0.0, 0.0, 0.0),                    # the reply scored by the turn before it alone
    "x-prev1-ctx": ((1.0,), (), 0.0, 1.0, 0.6),
    "x-prev2-ctx": ((2.0,), (), 0.0, 1.0, 0.6),
    "x-assoc05": ((), (), 0.5, 1.0, 0.0),                      # the turn's own strongest associations
    "x-assoc1": ((), (), 1.0, 1.0, 0.0),
    "x-prev05-assoc05": ((0.5,), (), 0.5, 1.0, 0.0),
    "x-prev1-assoc05": ((1.0,), (), 0.5, 1.0, 0.0),
}
CTX_TURNS = 3
DEPTH = 60
ASSOC_TERMS = 10
ASSOC_FLOOR = 0.3
PIVOT = leg_runs.PIVOT
TIME = re.compile(r"\b(yesterday|today|tonight|tomorrow|ago|last|next|recently|lately|earlier|soon|since|"
                  r"week|weeks|weekend|month|months|year|years|day|days|morning|evening|night|"
                  r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|"
                  r"june|july|august|september|october|november|december|\d{4}|\d{1,2}(st|nd|rd|th))\b", re.I)
WHEN = re.compile(r"^\s*(when|what (date|day|time|year|month)|how long ago|in which (year|month))\b", re.I)


class DocSide:
    """Per workspace: the expanded turn matrices of every variant over the workspace's terms."""

    def __init__(self, events: list[Any], model: Any) -> None:
        by_ws: dict[str, list[Any]] = {}
        for e in events:
            by_ws.setdefault(e.workspace, []).append(e)
        self.ws: dict[str, dict[str, Any]] = {}
        for ws, rows in by_ws.items():
            rows.sort(key=lambda e: e.ts_ms)
            vectors = [doc_vector(e.content) for e in rows]
            cols = {t: i for i, t in enumerate(sorted({t for v in vectors for t in v}))}
            base = np.zeros((len(rows), len(cols)), np.float32)
            for i, v in enumerate(vectors):
                for t, w in v.items():
                    base[i, cols[t]] = w
            extra = self._assoc(rows, cols, model)
            sessions = [e.session for e in rows]
            mats = {}
            for name, (before, after, c, own, ctx) in VARIANTS.items():
                m = own * base + c * extra
                for j, a in enumerate(before, 1):
                    same = np.array([i >= j and sessions[i - j] == sessions[i] for i in range(len(rows))])
                    m[j:][same[j:]] += a * base[:-j][same[j:]]
                for j, b in enumerate(after, 1):
                    same = np.array([i + j < len(rows) and sessions[i + j] == sessions[i] for i in range(len(rows))])
                    m[:-j][same[:-j]] += b * base[j:][same[:-j]]
                norms = np.linalg.norm(m, axis=1)
                mats[name] = (m, norms, ctx)
            self.ws[ws] = {"rows": rows, "cols": cols, "mats": mats, "sessions": np.array(sessions),
                           "sources": np.array([e.source for e in rows])}

    @staticmethod
    def _assoc(rows: list[Any], cols: dict[int, int], model: Any) -> np.ndarray:
        """Each turn's ASSOC_TERMS strongest associations (assoc.expand of its own words), at their similarity."""
        out = np.zeros((len(rows), len(cols)), np.float32)
        if model is None:
            return out
        for i, e in enumerate(rows):
            for term, sim in model.expand(set(tokens(e.content)), n=ASSOC_TERMS, floor=ASSOC_FLOOR):
                for t in term_ids([term]):
                    if t in cols:
                        out[i, cols[t]] = max(out[i, cols[t]], sim)
        return out

    def hits(self, name: str, ws: str, weights: dict[int, float], named: list[str], phrases: list[str]
             ) -> list[LegHit]:
        w = self.ws[ws]
        q = np.zeros(len(w["cols"]), np.float32)
        for t, v in weights.items():
            if t in w["cols"]:
                q[w["cols"][t]] = v
        m, norms, ctx = w["mats"][name]
        mean = float(norms.mean()) or 1.0
        scores = (m @ q) / ((1 - PIVOT) * mean + PIVOT * np.maximum(norms, 1e-9))
        if ctx > 0:     # own + each session neighbour's score x ctx ** distance, as with_context
            own, ses = scores.copy(), w["sessions"]
            for d in range(1, CTX_TURNS + 1):
                same = ses[d:] == ses[:-d]
                scores[d:] += np.where(same, ctx ** d * own[:-d], 0.0)
                scores[:-d] += np.where(same, ctx ** d * own[d:], 0.0)
        if named:
            scores = scores * np.where(np.isin(w["sources"], named), 2.0, 1.0)
        rows = w["rows"]
        if phrases:     # a quoted phrase is a requirement in every leg (issue 32 item 2)
            scores = scores * np.array([all(ph in e.content.lower() for ph in phrases) for e in rows])
        top = [i for i in np.argsort(-scores, kind="stable")[:DEPTH] if scores[i] > 0]
        return [LegHit(f"{rows[i].id}", float(scores[i]), "conversation", _moment(rows[i])) for i in top]


def _moment(e: Any) -> Any:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(e.ts_ms / 1000, UTC)


def patch(doc: DocSide, ids: set[str]) -> None:
    """run_context's semantic lists gain one `x-...` list per variant, at a weight that changes nothing."""
    real = leg_runs.semantic_runs
    device: list[str] = []

    def key_of(event_id: str) -> str:
        return chunk_key(device[0], event_id)

    def runs(backend: Any, stats: Any, p: Any, flt: Any, depth: int, embedder: Any, skipped: list[str],
             assoc: Any = None) -> list[Any]:
        out = real(backend, stats, p, flt, depth, embedder, skipped, assoc)
        if not device:
            hit = next(h for r in out for h in r.hits)
            found, cid = split_key(hit.chunk_id)
            if cid not in ids:
                raise SystemExit(f"chunk {hit.chunk_id!r} is no event id: map the keys")
            device.append(found)
        if not any(r.hits for r in out):
            return out      # as the product: an empty answer, and a quoted title no turn holds re-asked unquoted
        sub = parse(p.query)
        phrases = [m.lower() for m in re.findall(r'"([^"]+)"', p.query)]
        weights, _, _ = leg_runs.query_weights(stats, sub.positive, backend)
        related = leg_runs.related_weights(stats, sub, weights, backend, assoc) if weights else {}
        for name in VARIANTS:
            run = leg_runs.LegRun(name, "query", p.query, 1e-9, "document-side expansion (bench)")
            run.hits = [LegHit(key_of(h.chunk_id), h.raw, h.kind, h.occurred_at)
                        for h in doc.hits(name, p.workspace, {**related, **weights}, stats.named, phrases)]
            out.append(run)
        return out

    leg_runs.semantic_runs = runs     # urchin/hybrid/search_context.py calls it through the module


# ---- offline ------------------------------------------------------------------------------------------

class Pool:
    """Every question's candidates (as bench/locomo_fusion.Pool) with an extra list's rank and two priors."""

    def __init__(self, qs: list[dict[str, Any]], extra: str | None, meta: dict[str, tuple[str, bool]],
                 speakers: dict[str, list[str]], kw: bool = True) -> None:
        cols: dict[str, list[Any]] = {n: [] for n in ("qid", "every", "share", "related", "kr", "tr", "xr", "hit",
                                                     "order", "other", "notime")}
        self.conv, self.n_evidence = [], []
        for qid, q in enumerate(qs):
            self.conv.append(q["conv"])
            self.n_evidence.append(len(q["evidence"]))
            words = set(tokens(q["query"]))
            named = [s for s in speakers[q["conv"]] if s in words]
            when = bool(WHEN.search(q["query"]))
            order = {i: n for n, i in enumerate(sorted(range(len(q["ids"])), key=lambda i: q["ids"][i]))}
            for i, legs in enumerate(q["legs"]):
                kr = _rank(legs, "keyword") if kw else np.inf
                tr = _rank(legs, "semantic")
                xr = _rank(legs, extra) if extra else np.inf
                if not (np.isfinite(kr) or np.isfinite(tr) or np.isfinite(xr)):
                    continue
                x, cid = q["x"][i], q["ids"][i]
                source, timed = meta[cid]
                for name, value in (("qid", qid), ("every", x[0] > 0), ("share", x[1]), ("related", x[2]),
                                    ("kr", kr), ("tr", tr), ("xr", xr), ("hit", cid in q["evidence"]),
                                    ("order", order[i]), ("other", bool(named) and source not in named),
                                    ("notime", when and not timed)):
                    cols[name].append(value)
        columns(self, cols, len(qs))

    def recall(self, c: dict[str, float]) -> np.ndarray:
        a, k = self.a, 20.0
        wk, wt, wx = c["wk"], c["wt"], c["wx"]
        live = (np.isfinite(a["kr"]) & (wk > 0)) | (np.isfinite(a["tr"]) & (wt > 0)) | (np.isfinite(a["xr"]) & (wx > 0))
        rank = (wk / (k + a["kr"]) + wt / (k + a["tr"]) + wx / (k + a["xr"])) / ((wk + wt + wx) / (k + 1.0))
        rank = rank * (1 - c["sn"] * a["other"]) * (1 - c["st"] * a["notime"])
        scale = score_module.Scale("x", c["share"], c["related"], RANK_W, DENSE_W, 0.0)
        raw = scale.every * a["every"] + scale.share * a["share"] + scale.related * a["related"] + scale.rank * rank
        raw = np.where(live, np.round(raw, 12), -np.inf)
        order = np.lexsort((a["order"], -rank, -raw, self.qid))
        pos = np.arange(len(order)) - self.start[self.qid[order]]
        top = np.zeros(len(order), dtype=bool)
        top[order[pos < 10]] = True
        top &= live
        return np.bincount(self.qid[top], weights=a["hit"][top], minlength=self.nq) / self.n_evidence

    def ceiling(self, wx: bool) -> float:
        a = self.a
        live = np.isfinite(a["kr"]) | np.isfinite(a["tr"]) | (np.isfinite(a["xr"]) & wx)
        found = np.bincount(self.qid[live], weights=a["hit"][live], minlength=self.nq)
        return float((np.minimum(found, 10) / self.n_evidence).mean())


def _rank(legs: list[tuple[str, str, int, float]], name: str) -> float:
    ranks = [r for leg, origin, r, _ in legs if leg == name and origin == "query"]
    return float(min(ranks)) if ranks else np.inf


RATIOS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)


def configs(wk: tuple[float, ...], wx: tuple[float, ...], sn: tuple[float, ...], st: tuple[float, ...]
            ) -> list[dict[str, float]]:
    return [{"wk": k, "wt": 1.0, "wx": x, "sn": n, "st": t, "share": s, "related": r}
            for k, x, n, t, (s, r) in itertools.product(wk, wx, sn, st, itertools.product(RATIOS, RATIOS)) if r <= s]


def search(label: str, pool: Pool, grid: list[dict[str, float]]) -> np.ndarray:
    scores = np.array([pool.recall(c) for c in grid])
    held = cv(scores, pool.conv, grid)
    best = int(np.argmax(scores.mean(axis=1)))
    chosen = []
    for c in sorted(set(pool.conv)):
        out = pool.conv == c
        g = grid[int(np.argmax(scores[:, ~out].mean(axis=1)))]
        chosen.append(f"wx {g['wx']} sn {g['sn']} st {g['st']} {g['share']}:{g['related']}")
    print(f"{label:<44} CV {held.mean():.4f} (folds {folds(held, pool.conv)})  in-sample {scores[best].mean():.4f} "
          f"{ {k: v for k, v in grid[best].items() if k != 'wt'} }")
    print(f"{'':<44} folds chose: " + " | ".join(chosen))
    return held


def analyse(qs: list[dict[str, Any]], events: list[Any], legs: list[str], priors: bool,
            combine: Sequence[str] = ()) -> None:
    meta = {e.id: (e.source, bool(TIME.search(e.content))) for e in events}
    speakers: dict[str, list[str]] = {}
    for e in events:
        if e.source not in speakers.setdefault(e.workspace, []):
            speakers[e.workspace].append(e.source)
    nq = len(qs)
    when = sum(bool(WHEN.search(q["query"])) for q in qs)
    naming = sum(any(s in set(tokens(q["query"])) for s in speakers[q["conv"]]) for q in qs)
    print(f"{nq} questions; {when} when-questions, {naming} naming a speaker")
    shipped = {"wk": 0.125, "wt": 1.0, "wx": 0.0, "sn": 0.0, "st": 0.0, "share": 0.25, "related": 0.25}
    base = Pool(qs, None, meta, speakers)
    leg = Pool(qs, None, meta, speakers, kw=False)
    hyb_shipped = base.recall(shipped)
    tc_shipped = leg.recall({**shipped, "wk": 0.0})
    print(f"hybrid as shipped R@10 {hyb_shipped.mean():.4f} (folds {folds(hyb_shipped, base.conv)}); "
          f"token-cosine leg as shipped {tc_shipped.mean():.4f}; ceiling {base.ceiling(False):.3f}")
    tc_cv = search("token-cosine leg, ratios by CV", leg, configs((0.0,), (0.0,), (0.0,), (0.0,)))
    hyb_cv = search("hybrid, ratios by CV", base, configs((0.125,), (0.0,), (0.0,), (0.0,)))
    results: dict[str, np.ndarray] = {}
    if priors:
        ps = (0.0, 0.25, 0.5, 0.75, 1.0)
        results["tc+speaker"] = search("token-cosine leg + speaker prior", leg, configs((0.0,), (0.0,), ps, (0.0,)))
        results["tc+time"] = search("token-cosine leg + time prior", leg, configs((0.0,), (0.0,), (0.0,), ps))
        results["hyb+speaker"] = search("hybrid + speaker prior", base, configs((0.125,), (0.0,), ps, (0.0,)))
        results["hyb+time"] = search("hybrid + time prior", base, configs((0.125,), (0.0,), (0.0,), ps))
        results["hyb+both"] = search("hybrid + speaker + time", base, configs((0.125,), (0.0,), ps, ps))
        results["tc+both"] = search("token-cosine leg + speaker + time", leg, configs((0.0,), (0.0,), ps, ps))
    wxs = (0.0, 0.0625, 0.125, 0.25, 0.5, 1.0, 2.0)
    for name in legs:
        pool = Pool(qs, name, meta, speakers)
        tcx = Pool(qs, name, meta, speakers, kw=False)
        alone = search(f"{name} alone", pool, [{**c, "wt": 0.0} for c in configs((0.0,), (1.0,), (0.0,), (0.0,))])
        results[f"{name} alone"] = alone
        print(f"{'':<44} ceiling with it {pool.ceiling(True):.3f}")
        results[f"tc+{name}"] = search(f"token-cosine leg + {name}", tcx, configs((0.0,), wxs, (0.0,), (0.0,)))
        results[f"hyb+{name}"] = search(f"hybrid + {name}", pool, configs((0.125,), wxs, (0.0,), (0.0,)))
    stacked: list[np.ndarray] = []
    labels: list[tuple[str, dict[str, float]]] = []
    for name in combine:
        pool = Pool(qs, name, meta, speakers)
        ps = (0.0, 0.25, 0.5)
        grid = configs((0.125,), (0.0, 0.0625, 0.125, 0.25), ps, ps)
        scores = np.array([pool.recall(c) for c in grid])
        held = cv(scores, pool.conv, grid)
        best = int(np.argmax(scores.mean(axis=1)))
        print(f"hybrid + {name} + speaker + time: CV {held.mean():.4f} (folds {folds(held, pool.conv)})  "
              f"in-sample {scores[best].mean():.4f} {grid[best]}")
        results[f"hyb+{name}+priors"] = held
        stacked += list(scores)
        labels += [(name, c) for c in grid]
    if len(combine) > 1:    # the list chosen per fold too: the honest CV of the whole search
        scores = np.array(stacked)
        held = cv(scores, base.conv, labels, show=True)
        print(f"the whole search over {len(combine)} lists, both priors and the ratios ({len(labels)}): "
              f"CV {held.mean():.4f} (folds {folds(held, base.conv)}); in-sample best "
              f"{scores.mean(axis=1).max():.4f} {labels[int(np.argmax(scores.mean(axis=1)))]}")
        results["whole search"] = held
    print("paired (bootstrap 95%, CV figures):")
    for label, held in results.items():
        paired(f"{label} vs token-cosine leg (CV)", held, tc_cv)
        paired(f"{label} vs hybrid as shipped", held, hyb_shipped)
    paired("hybrid ratios by CV vs token-cosine leg (CV)", hyb_cv, tc_cv)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--legs", default=",".join(VARIANTS))
    parser.add_argument("--no-priors", action="store_true")
    parser.add_argument("--combine", default="", help="legs searched with both priors at once (the whole search)")
    args = parser.parse_args(argv)
    events, questions = load(args.data or _default_data())
    if args.cache.is_file():
        qs = pickle.loads(args.cache.read_bytes())
    else:
        model = learned(events)
        doc = DocSide(events, model)
        print("document-side matrices built")
        with tempfile.TemporaryDirectory(prefix="urchin-docside-") as tmp:
            backend = open_backend(events, Path(tmp), None)
            patch(doc, {e.id for e in events})
            qs = capture(backend, events, questions, "hybrid", model)
            backend.close()
        args.cache.write_bytes(pickle.dumps(qs))
    analyse(qs, events, [n for n in args.legs.split(",") if n], not args.no_priors,
            [n for n in args.combine.split(",") if n])


if __name__ == "__main__":
    main()
