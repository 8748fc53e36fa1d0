"""Concept queries: success@10 when the answer shares no word with the question (bench/concepts/).

    python bench/concepts.py [--embedder-url URL] [--embedder-model all-MiniLM-L6-v2] [--hybrid]

The journal (`bench/concepts/events.jsonl`, built by `make.py`) holds five projects' sessions; each
question has one answer event. Every method searches the whole journal (no workspace filter).
Reported per split: "dev" (developed on) and "test" (held out: not looked at while tuning).
`--hybrid` adds the product path: the events fed into a fresh embedded PostgreSQL and ranked by
`run_context` (strategy hybrid, limit 10), without a model and, given `--embedder-url`, with it.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "concepts"))

from make import build, questions  # noqa: E402

from urchin.event import Event  # noqa: E402
from urchin.search import assoc  # noqa: E402
from urchin.search.cosine import TokenCosineIndex  # noqa: E402
from urchin.search.cosine import event_terms as _terms  # noqa: E402
from urchin.search.cosine_settings import RankingSettings  # noqa: E402
from urchin.search.terms import tokenize  # noqa: E402

Ranker = Callable[[str], list[str]]


def bm25(events: list[Event], k1: float = 1.5, b: float = 0.75) -> Ranker:
    docs = [Counter(_terms(e)) for e in events]
    df = Counter(t for d in docs for t in d)
    n, avg = len(docs), sum(sum(d.values()) for d in docs) / len(docs)
    idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def rank(question: str) -> list[str]:
        q = [t for t in set(tokenize(question)) if t in idf]
        scored = []
        for e, d in zip(events, docs, strict=True):
            length = sum(d.values())
            s = sum(idf[t] * d[t] * (k1 + 1) / (d[t] + k1 * (1 - b + b * length / avg)) for t in q if t in d)
            if s > 0:
                scored.append((-s, e.id))
        return [i for _, i in sorted(scored)[:10]]
    return rank


def token_cosine(events: list[Event], with_assoc: bool, **params: float) -> Ranker:
    index = TokenCosineIndex(RankingSettings(**params))  # type: ignore[arg-type]
    index.add_many(events)
    if with_assoc:
        index.assoc = assoc.build(index)
    else:
        index.settings = replace(index.settings, expand=0.0)
    return lambda q: [h.id for h in index.search(q, limit=10)]


def embedder_ranker(events: list[Event], url: str, model: str) -> Ranker:
    from urchin.search.embedder import Embedder

    embedder = Embedder(url, model, "openai", timeout=60)
    matrix = np.array(embedder.embed([e.content for e in events]), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)

    def rank(question: str) -> list[str]:
        v = np.array(embedder.embed_query(question), dtype=np.float32)
        order = np.argsort(-(matrix @ (v / np.linalg.norm(v))))[:10]
        return [events[i].id for i in order]
    return rank


def hybrid_ranker(backend: Any, embedder: Any, dense_share: float | None = None, learned: Any = None) -> Ranker:
    import urchin.hybrid.leg_runs as leg_runs
    import urchin.hybrid.search_context as hybrid
    from urchin.params.context import ContextParams

    def rank(question: str) -> list[str]:
        shipped = leg_runs.DENSE_SHARE
        leg_runs.DENSE_SHARE = shipped if dense_share is None else dense_share
        try:
            params = ContextParams.build(query=question, strategy="hybrid", limit=10)
            return [r["id"] for r in hybrid.run_context(backend, params, embedder, assoc=learned).results]
        finally:
            leg_runs.DENSE_SHARE = shipped
    return rank


def success(rank: Ranker, answers: dict[str, str], split: str, which: str = "main") -> tuple[float, int]:
    picked = [(key, q) for key, q, s in questions(which) if s == split or split == "all"]
    hits = sum(answers[key] in rank(q) for key, q in picked)
    return hits / len(picked), len(picked)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder-url", default=None)
    parser.add_argument("--embedder-model", default="all-MiniLM-L6-v2")
    parser.add_argument("--hybrid", action="store_true",
                        help="also rank through run_context over a fresh embedded PostgreSQL (with and without the "
                             "embedder)")
    parser.add_argument("--dense-share", type=float, action="append", default=[],
                        help="with --hybrid and an embedder: also rank with urchin.hybrid.leg_runs.DENSE_SHARE set to "
                             "this (repeatable; a bench knob)")
    parser.add_argument("--set", choices=("main", "unseen", "unseen2"), default="main",
                        help="unseen, unseen2: sets written by other authors, who saw neither the search code nor "
                             "the thesaurus nor the other sets' questions (one split each, named as the set)")
    args = parser.parse_args(argv)
    events, answers = build(args.set)
    print(f"{args.set} set: {len(events)} events, {len(questions(args.set))} questions; success@10 (share of "
          "questions whose answer is in the top 10)")
    splits = ("dev", "test", "all") if args.set == "main" else (args.set,)
    methods: dict[str, Ranker] = {
        "bm25": bm25(events),
        "token-cosine before (context only)": token_cosine(events, False, context_turns=2, session=0.0, kind=0.0,
                                                          related=0.0, pivot=1.0, memory=0.0),
        "token-cosine round 2": token_cosine(events, True, related=0.0, pivot=1.0, session_slots=2, memory=0.0),
        "token-cosine (no memory prior)": token_cosine(events, True, memory=0.0),
        "token-cosine (no thesaurus)": token_cosine(events, True, related=0.0),
        "token-cosine (no associations)": token_cosine(events, False),
        "token-cosine": token_cosine(events, True),
    }
    if args.embedder_url:
        methods[f"embedder {args.embedder_model}"] = embedder_ranker(events, args.embedder_url, args.embedder_model)
    with tempfile.TemporaryDirectory(prefix="urchin-concepts-") as tmp:
        backend = None
        if args.hybrid:
            from locomo_hybrid import open_backend

            embedder = None
            if args.embedder_url:
                from urchin.search.embedder import Embedder

                embedder = Embedder(args.embedder_url, args.embedder_model, "openai", timeout=60)
            backend = open_backend(events, Path(tmp), None, embedder)
            # the associations the daemon's token-cosine view learns from the same journal
            index = TokenCosineIndex()
            index.add_many(events)
            learned = assoc.build(index)
            methods["hybrid (Postgres, no model, no associations)"] = hybrid_ranker(backend, None)
            methods["hybrid (Postgres, no model)"] = hybrid_ranker(backend, None, learned=learned)
            if embedder is not None:
                methods[f"hybrid (Postgres, + {args.embedder_model})"] = hybrid_ranker(backend, embedder,
                                                                                        learned=learned)
                for share in args.dense_share:
                    methods[f"  same, dense share {share}"] = hybrid_ranker(backend, embedder, share, learned)
        print(f"{'method':<40} " + " ".join(f"{s:>6}" for s in splits))
        for name, rank in methods.items():
            cells = [success(rank, answers, split, args.set)[0] for split in splits]
            print(f"{name:<40} " + " ".join(f"{c:6.3f}" for c in cells))
        if backend is not None:
            backend.close()


if __name__ == "__main__":
    main()
