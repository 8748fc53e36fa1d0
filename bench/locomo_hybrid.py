"""LoCoMo evidence recall of the Postgres index legs: `keyword`, `semantic`, `hybrid` (R@5, R@10, MRR).

    python bench/locomo_hybrid.py [--data PATH] [--k 60] [--full-text-weight 1] [--semantic-weight 1]
                                  [--tune conv-26,conv-30] [--cv]

`--cv`: leave-one-conversation-out cross-validation of the fusion constants in CV_GRID (k, the two
weights), the session-context constants in CONSTANT_GRID (the token-cosine leg's neighbour weight,
the turns on each side of each leg), and with an embedder `DENSE_SHARE`, the weight of its lists:
tuned on four conversations, scored on the fifth, rotated; printed beside the in-sample best. `--dense-share` overrides
`urchin.hybrid.leg_runs.DENSE_SHARE` for the whole run (a bench knob, not a product setting).

Events are built exactly as shared/data/locomo/README.md says, written to a journal, fed by the real
feeder into a fresh database (embedded PostgreSQL in a temp folder, or $URCHIN_BENCH_DATABASE_URL),
and queried through `run_context` with the conversation's workspace and time window as filters.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import urchin.hybrid.leg_runs as legs_module  # noqa: E402
from urchin.event import Event  # noqa: E402
from urchin.hybrid.feeder import Feeder  # noqa: E402
from urchin.hybrid.search_context import run_context  # noqa: E402
from urchin.journal import Journal  # noqa: E402
from urchin.params.context import ContextParams  # noqa: E402
from urchin.timestamps import format_timestamp  # noqa: E402

_EVIDENCE = re.compile(r"D\d+:\d+")
_DATA_REL = Path("shared/data/locomo/locomo-dev.json")
METHODS = ("keyword", "semantic", "hybrid")


def _default_data() -> Path:
    for parent in Path(__file__).resolve().parents[1:]:
        if (parent / _DATA_REL).is_file():
            return parent / _DATA_REL
    return Path("..") / _DATA_REL


def load(path: Path) -> tuple[list[Event], list[tuple[str, str, list[str]]]]:
    """Turns as events; questions of categories 1-4 with evidence as (text, workspace, evidence ids)."""
    events: list[Event] = []
    questions = []
    for conv in orjson.loads(path.read_bytes()):
        sample, dialogue = conv["sample_id"], conv["conversation"]
        n = 1
        while f"session_{n}" in dialogue:
            start = datetime.strptime(dialogue[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            for i, turn in enumerate(dialogue[f"session_{n}"]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                moment = start + timedelta(seconds=i)
                events.append(Event(id=f"{sample}:{turn['dia_id']}", timestamp=format_timestamp(moment),
                                    source=turn["speaker"].lower(), kind="conversation", content=text,
                                    workspace=sample, session=f"{sample}-s{n}",
                                    ts_ms=int(moment.timestamp() * 1000)))
            n += 1
        for qa in conv["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = [f"{sample}:{e}" for item in qa.get("evidence", [])
                        for e in re.split(r"[;, ]+", item) if _EVIDENCE.fullmatch(e)]
            if evidence:
                questions.append((qa["question"], sample, evidence))
    return events, questions


def open_backend(events: list[Event], folder: Path, url: str | None, embedder: Any = None) -> Any:
    from urchin.hybrid.postgres import PostgresIndex

    if url is None:
        from urchin.hybrid.embedded import EmbeddedPostgres

        server = EmbeddedPostgres(folder / "pg", relocate_as_root=False)
        backend = PostgresIndex(server.url)
    else:
        backend = PostgresIndex(url)
    backend.rebuild()
    journal = Journal(folder / "journal" / "events.jsonl", "never")   # not in `folder`: it gets 0700
    journal.append([e.to_json() for e in events])
    started = time.perf_counter()
    report = Feeder(backend, journal, "bench", embedder=embedder).run_once()
    print(f"fed {report.events} events in {time.perf_counter() - started:.1f} s")
    return backend


def measure(rank: Callable[[str, str], list[str]], questions: list[tuple[str, str, list[str]]]) -> dict[str, float]:
    totals: dict[str, list[float]] = defaultdict(list)
    for text, workspace, evidence_ids in questions:
        ranked = rank(text, workspace)
        evidence = set(evidence_ids)
        totals["R@5"].append(len(evidence & set(ranked[:5])) / len(evidence))
        totals["R@10"].append(len(evidence & set(ranked[:10])) / len(evidence))
        totals["MRR"].append(next((1 / (i + 1) for i, x in enumerate(ranked) if x in evidence), 0.0))
    return {k: sum(v) / len(v) for k, v in totals.items()}


def learned(events: list[Event]) -> Any:
    """The associations the daemon's token-cosine view learns from the same journal (the product passes
    its view's model to `run_context`); None with --no-associations."""
    if not LEARNED:
        return None
    from urchin.search import assoc
    from urchin.search.cosine import TokenCosineIndex

    index = TokenCosineIndex()
    index.add_many(events)
    return assoc.build(index)


LEARNED = True
REASK = True      # re-ask the unquoted query an empty answer suggests (--no-reask: take the empty answer)


def ranker(backend: Any, events: list[Event], strategy: str, embedder: Any = None, model: Any = None,
           **weights: Any) -> Callable[[str, str], list[str]]:
    spans: dict[str, tuple[int, int]] = {}
    for e in events:
        lo, hi = spans.get(e.workspace or "", (e.ts_ms, e.ts_ms))
        spans[e.workspace or ""] = (min(lo, e.ts_ms), max(hi, e.ts_ms))

    def rank(question: str, workspace: str) -> list[str]:
        lo, hi = spans[workspace]
        window = {"since": datetime.fromtimestamp(lo / 1000, UTC).isoformat(),
                  "until": datetime.fromtimestamp(hi / 1000 + 1, UTC).isoformat()}
        params = ContextParams.build(query=question, strategy=strategy, workspace=workspace, limit=10, **window,
                                     **weights)
        result = run_context(backend, params, embedder, assoc=model)
        unheld = result.coverage.get("unheldPhrases")
        if not result.results and unheld and REASK:
            # a quoted title no turn holds gives an empty answer that suggests the unquoted query: an
            # agent asks that (4 dev questions quote such a title)
            params = ContextParams.build(query=unheld["suggestion"], strategy=strategy, workspace=workspace,
                                         limit=10, **window, **weights)
            result = run_context(backend, params, embedder, assoc=model)
        return [r["id"] for r in result.results]
    return rank


# k: every fold of every CV run so far picked 20 over 60 (RESULTS.md), so it is no longer searched
CV_GRID = {"k": (20,), "full_text_weight": (0.25, 0.5, 1.0, 1.5), "semantic_weight": (1.0,)}
# module constants searched with them (set on urchin.hybrid.leg_runs for each grid point)
# (the turns on each side, searched over {2, 3} until round four, are fixed at the choice of 5/5 and 4/5
# folds; the learned associations' weight in the token-cosine leg joined the search in round five)
CONSTANT_GRID = {"semantic_context": (0.5, 0.6), "semantic_turns": (3,), "keyword_turns": (2,),
                 "learned": (0.0, 0.1, 0.2, 0.3)}


def _set_constants(config: dict[str, Any]) -> None:
    legs_module.DENSE_SHARE = config["dense_share"]
    legs_module.CONTEXT["semantic"] = config["semantic_context"]
    legs_module.CONTEXT_TURNS = {"keyword": config["keyword_turns"], "semantic": config["semantic_turns"]}
    legs_module.LEARNED = config["learned"]
DENSE_GRID = (0.0, 0.25, 0.5, 1.0)     # DENSE_SHARE, searched only with an embedder


class CachedEmbedder:
    """The query side of an embedder, memoised: the CV asks the same questions once per grid point."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache: dict[str, Any] = {}

    @property
    def fingerprint(self) -> str:
        return str(self.inner.fingerprint)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: list[str]) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.inner.embed(missing), strict=True))
        return np.array([self.cache[t] for t in texts])


def cross_validate(backend: Any, events: list[Event], questions: list[tuple[str, str, list[str]]],
                   embedder: Any = None) -> None:
    """Hybrid R@10, leave one conversation out over CV_GRID; per question, then chosen per fold."""
    configs: list[dict[str, Any]] = [{}]
    shares = tuple(sorted({*DENSE_GRID, legs_module.DENSE_SHARE})) if embedder is not None else ()
    grid = {**CV_GRID, **CONSTANT_GRID, "dense_share": shares or (legs_module.DENSE_SHARE,)}
    for name, values in grid.items():
        configs = [{**c, name: v} for c in configs for v in values]
    cached = CachedEmbedder(embedder) if embedder is not None else None
    model = learned(events)
    table = []
    shipped = {"dense_share": legs_module.DENSE_SHARE, "semantic_context": legs_module.CONTEXT["semantic"],
               "keyword_turns": legs_module.CONTEXT_TURNS["keyword"],
               "semantic_turns": legs_module.CONTEXT_TURNS["semantic"], "learned": legs_module.LEARNED}
    for config in configs:
        _set_constants(config)
        weights = {k: v for k, v in config.items() if k in CV_GRID}
        rank = ranker(backend, events, "hybrid", cached, model, **weights)
        table.append([len(set(ev) & set(rank(text, ws)[:10])) / len(set(ev)) for text, ws, ev in questions])
    _set_constants(shipped)
    scores = np.array(table)
    convs = np.array([q[1] for q in questions])
    held = np.zeros(len(questions))
    for conv in sorted(set(convs)):
        out = convs == conv
        best = int(np.argmax(scores[:, ~out].mean(axis=1)))
        held[out] = scores[best, out]
        print(f"  held out {conv}: tuned on the other four -> {configs[best]}  R@10 {held[out].mean():.3f}")
    best = int(np.argmax(scores.mean(axis=1)))
    k = ContextParams(query="x").k     # the shipped RRF constant
    defaults = {"k": k, "full_text_weight": 1.0, "semantic_weight": 1.0, **shipped}
    default = next((i for i, c in enumerate(configs) if c == defaults), best)
    print(f"hybrid R@10: CV {held.mean():.3f}   in-sample best {scores[best].mean():.3f} {configs[best]}   "
          f"defaults {scores[default].mean():.3f}")
    if embedder is not None:     # the dense share alone, the other constants at their defaults
        for share in shares:
            rows = [i for i, c in enumerate(configs) if c == {**defaults, "dense_share": share}]
            print(f"  defaults with dense_share {share}: R@10 {scores[rows[0]].mean():.3f}")
        for share in shares:   # CV over k and the weights with the dense share held fixed
            ids = [i for i, c in enumerate(configs) if c["dense_share"] == share]
            fixed = np.zeros(len(questions))
            for conv in sorted(set(convs)):
                out = convs == conv
                pick = ids[int(np.argmax(scores[ids][:, ~out].mean(axis=1)))]
                fixed[out] = scores[pick, out]
            print(f"  dense_share {share} fixed, k and weights chosen per fold: CV R@10 {fixed.mean():.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--database-url", default=None, help="default: a fresh embedded PostgreSQL in a temp folder")
    parser.add_argument("--embedder-url", default=None,
                        help="an OpenAI-compatible embedding server (e.g. scripts/test-embedder.sh start PORT): the "
                             "semantic leg uses its vectors instead of token-cosine")
    parser.add_argument("--embedder-model", default="all-MiniLM-L6-v2")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--full-text-weight", type=float, default=1.0)
    parser.add_argument("--semantic-weight", type=float, default=1.0)
    parser.add_argument("--method", action="append", choices=METHODS)
    parser.add_argument("--cv", action="store_true", help="leave-one-conversation-out CV of the fusion constants")
    parser.add_argument("--dense-share", type=float, default=None,
                        help="override urchin.hybrid.leg_runs.DENSE_SHARE (the embedder lists' weight) for this run")
    parser.add_argument("--no-associations", action="store_true",
                        help="the token-cosine leg without the associations learned from the journal")
    parser.add_argument("--split", default="conv-26,conv-30",
                        help="conversations reported apart from the rest (the rest are the check)")
    parser.add_argument("--no-reask", action="store_true",
                        help="take an empty answer to a quoted title as it is, instead of re-asking the unquoted "
                             "query its coverage.unheldPhrases suggests")
    args = parser.parse_args(argv)
    global LEARNED, REASK
    LEARNED = not args.no_associations
    REASK = not args.no_reask
    if args.dense_share is not None:
        legs_module.DENSE_SHARE = args.dense_share
        print(f"DENSE_SHARE {args.dense_share} (shipped: see urchin/hybrid/leg_runs.py)")
    events, questions = load(args.data or _default_data())
    print(f"{len(events)} events, {len(questions)} questions")
    with tempfile.TemporaryDirectory(prefix="urchin-locomo-") as tmp:
        embedder = None
        if args.embedder_url:
            from urchin.search.embedder import Embedder

            embedder = Embedder(args.embedder_url, args.embedder_model, "openai", timeout=60)
            print(f"semantic leg: embedder {args.embedder_model} at {args.embedder_url}")
        backend = open_backend(events, Path(tmp), args.database_url, embedder)
        weights = {"k": args.k, "full_text_weight": args.full_text_weight, "semantic_weight": args.semantic_weight}
        first = set(args.split.split(","))
        parts = {"all": questions, args.split: [q for q in questions if q[1] in first],
                 "rest": [q for q in questions if q[1] not in first]}
        model = learned(events)
        for method in args.method or METHODS:
            rank = ranker(backend, events, method, embedder, model, **weights)
            for label, subset in parts.items():
                started = time.perf_counter()
                mean = measure(rank, subset)
                per_query = (time.perf_counter() - started) / max(len(subset), 1) * 1000
                print(f"{method:<9} {label:<16} R@5 {mean['R@5']:.3f}  R@10 {mean['R@10']:.3f}  "
                      f"MRR {mean['MRR']:.3f}  ({len(subset)} questions, {per_query:.1f} ms/query)")
        if args.cv:
            cross_validate(backend, events, questions, embedder)
        backend.close()


if __name__ == "__main__":
    main()
