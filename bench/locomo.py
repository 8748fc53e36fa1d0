"""Evidence recall on LoCoMo (dev split): R@5, R@10 and MRR per retrieval method, as README says.

    python bench/locomo.py [--data PATH] [--method token-cosine ...] [--split conv-26,conv-30 ...] [--cv]

`--cv`: leave-one-conversation-out cross-validation of every token-cosine constant in GRID (session
context, context turns, association expansion, session leg, length-normalisation pivot, source prior): tune on
four conversations, score the fifth, rotate;
prints the CV figure next to the in-sample best and the shipped defaults.

Methods live in METHODS (name -> factory(events) -> rank(question, workspace) -> ranked ids), so an
embedder or hybrid method plugs in beside token-cosine and the two peers measured in the same run.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from urchin.event import Event  # noqa: E402
from urchin.search import assoc  # noqa: E402
from urchin.search.cosine import TokenCosineIndex  # noqa: E402
from urchin.search.cosine_settings import RankingSettings  # noqa: E402
from urchin.search.terms import tokenize  # noqa: E402
from urchin.timestamps import format_timestamp  # noqa: E402

Ranker = Callable[[str, str], list[str]]
_EVIDENCE = re.compile(r"D\d+:\d+")
_DATA_REL = Path("shared/data/locomo/locomo-dev.json")


def _default_data() -> Path:
    """`../shared/...` from the repo root; worktrees sit deeper, so look further up too."""
    for parent in Path(__file__).resolve().parents[1:]:
        if (parent / _DATA_REL).is_file():
            return parent / _DATA_REL
    return Path("..") / _DATA_REL


class Question:
    __slots__ = ("text", "workspace", "evidence", "category")

    def __init__(self, text: str, workspace: str, evidence: list[str], category: int) -> None:
        self.text, self.workspace, self.evidence, self.category = text, workspace, evidence, category


def load(path: Path) -> tuple[list[Event], list[Question]]:
    """Turns as events and questions of categories 1-4, exactly as the data set's README says."""
    events: list[Event] = []
    questions: list[Question] = []
    for conv in orjson.loads(path.read_bytes()):
        sample, dialogue = conv["sample_id"], conv["conversation"]
        n = 1
        while f"session_{n}" in dialogue:
            start = datetime.strptime(dialogue[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
            start = start.replace(tzinfo=UTC)
            for i, turn in enumerate(dialogue[f"session_{n}"]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                moment = start + timedelta(seconds=i)
                events.append(Event(
                    id=f"{sample}:{turn['dia_id']}", timestamp=format_timestamp(moment),
                    source=turn["speaker"].lower(), kind="conversation", content=text,
                    workspace=sample, session=f"{sample}-s{n}", ts_ms=int(moment.timestamp() * 1000)))
            n += 1
        for qa in conv["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = [f"{sample}:{e}" for item in qa.get("evidence", [])
                        for e in re.split(r"[;, ]+", item) if _EVIDENCE.fullmatch(e)]
            if evidence:
                questions.append(Question(qa["question"], sample, evidence, qa["category"]))
    return events, questions


# ---- methods ------------------------------------------------------------------------------
def _window(events: list[Event]) -> dict[str, tuple[int, int]]:
    spans: dict[str, tuple[int, int]] = {}
    for e in events:
        lo, hi = spans.get(e.workspace or "", (e.ts_ms, e.ts_ms))
        spans[e.workspace or ""] = (min(lo, e.ts_ms), max(hi, e.ts_ms))
    return spans


def token_cosine(events: list[Event], **params: float) -> Ranker:
    """The shipped index, with associations built the way the daemon builds them."""
    index = TokenCosineIndex(RankingSettings(**params))  # type: ignore[arg-type]
    index.add_many(events)
    if index.expand > 0:
        index.assoc = assoc.build(index)
    return _ranker(index, events)


def _ranker(index: TokenCosineIndex, events: list[Event]) -> Ranker:
    spans = _window(events)

    def rank(question: str, workspace: str) -> list[str]:
        since, until = spans[workspace]
        hits = index.search(question, workspace=workspace, since_ms=since, until_ms=until, limit=10)
        return [h.id for h in hits]
    return rank


def plain_cosine(events: list[Event]) -> Ranker:
    """The floor: the same index with no session context."""
    return token_cosine(events, context=0.0)


def _per_workspace(events: Iterable[Event]) -> dict[str, list[Event]]:
    groups: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        groups[e.workspace or ""].append(e)
    return groups


def bm25(events: list[Event], k1: float = 1.5, b: float = 0.75) -> Ranker:
    """Okapi BM25 over the turn's text and speaker, same tokeniser, fitted per conversation."""
    fitted = {}
    for ws, group in _per_workspace(events).items():
        docs = [Counter(tokenize(f"{e.content} {e.source}")) for e in group]
        df = Counter(t for d in docs for t in d)
        n, avg = len(docs), sum(sum(d.values()) for d in docs) / max(len(docs), 1)
        idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        fitted[ws] = (group, docs, idf, avg)

    def rank(question: str, workspace: str) -> list[str]:
        group, docs, idf, avg = fitted[workspace]
        q = [t for t in set(tokenize(question)) if t in idf]
        scored = []
        for e, d in zip(group, docs, strict=True):
            length = sum(d.values())
            s = sum(idf[t] * d[t] * (k1 + 1) / (d[t] + k1 * (1 - b + b * length / avg)) for t in q if t in d)
            if s > 0:
                scored.append((-s, -e.ts_ms, e.id))
        return [i for _, _, i in sorted(scored)[:10]]
    return rank


def set_cosine(events: list[Event]) -> Ranker:
    """The reference Urchin's method: cosine of token sets, no weights (lower-cased \\w+ words)."""
    groups = {ws: [(e, set(re.findall(r"\w+", e.content.lower()))) for e in g]
              for ws, g in _per_workspace(events).items()}

    def rank(question: str, workspace: str) -> list[str]:
        q = set(re.findall(r"\w+", question.lower()))
        scored = []
        for e, words in groups[workspace]:
            common = len(q & words)
            if common:
                scored.append((-common / math.sqrt(len(q) * len(words)), -e.ts_ms, e.id))
        return [i for _, _, i in sorted(scored)[:10]]
    return rank


METHODS: dict[str, Callable[[list[Event]], Ranker]] = {
    "token-cosine": token_cosine,
    "plain-cosine": plain_cosine,
    "bm25": bm25,
    "set-cosine": set_cosine,
}
PEERS = ("set-cosine", "bm25", "plain-cosine")


# ---- measuring ------------------------------------------------------------------------------
def measure(rank: Ranker, questions: list[Question]) -> tuple[dict[str, float], dict[str, float]]:
    totals: dict[str, list[float]] = defaultdict(list)
    per_conv: dict[str, list[float]] = defaultdict(list)
    for q in questions:
        ranked = rank(q.text, q.workspace)
        evidence = set(q.evidence)
        r10 = len(evidence & set(ranked[:10])) / len(evidence)
        totals["R@5"].append(len(evidence & set(ranked[:5])) / len(evidence))
        totals["R@10"].append(r10)
        totals["MRR"].append(next((1 / (i + 1) for i, x in enumerate(ranked) if x in evidence), 0.0))
        per_conv[q.workspace].append(r10)
    mean = {k: sum(v) / len(v) for k, v in totals.items()}
    return mean, {k: sum(v) / len(v) for k, v in per_conv.items()}


def split_check(events: list[Event], questions: list[Question], tune: set[str]) -> None:
    """Pick the context parameters on `tune` conversations only, then measure on the others."""
    known = {q.workspace for q in questions}
    # the table header prints bare numbers (26 30 41): accept them as well as `conv-26`
    tune = {name if name in known else f"conv-{name}" for name in tune}
    if not tune <= known or tune == known:
        raise SystemExit(f"--split: must name some but not all of {', '.join(sorted(known))}")
    tune_q = [q for q in questions if q.workspace in tune]
    held_q = [q for q in questions if q.workspace not in tune]
    best = max(((c, k) for c in (0.0, 0.3, 0.4, 0.5, 0.6, 0.7) for k in (1, 2, 3)),
               key=lambda p: measure(token_cosine(events, context=p[0], context_turns=p[1]), tune_q)[0]["R@10"])
    print(f"tuned on {','.join(sorted(tune))}: context={best[0]} context_turns={best[1]}; held-out "
          f"({len(held_q)} questions):")
    runs = {"tuned": lambda ev: token_cosine(ev, context=best[0], context_turns=best[1]),
            "default": token_cosine, "plain-cosine": plain_cosine, "bm25": bm25}
    for name, factory in runs.items():
        mean, _ = measure(factory(events), held_q)
        print(f"  {name:<13} R@5 {mean['R@5']:.3f}  R@10 {mean['R@10']:.3f}  MRR {mean['MRR']:.3f}")


GRID = {"context": (0.4, 0.5, 0.6), "context_turns": (2, 3), "expand": (0.0, 0.3), "session": (0.0, 1.0),
        "session_slots": (1, 2), "pivot": (1.0, 0.3, 0.2), "named_source": (0.0, 0.5, 1.0)}
_NEEDS = {"session_slots": "session"}  # meaningless when the other is 0


def _grid() -> list[dict[str, float]]:
    configs: list[dict[str, float]] = [{}]
    for name, values in GRID.items():
        configs = [{**c, name: v} for c in configs for v in values]
    return [c for c in configs if all(c[need] or c[name] == GRID[name][0] for name, need in _NEEDS.items())]


def per_question(rank: Ranker, questions: list[Question]) -> np.ndarray:
    """R@10 of each question."""
    out = []
    for q in questions:
        evidence = set(q.evidence)
        out.append(len(evidence & set(rank(q.text, q.workspace)[:10])) / len(evidence))
    return np.array(out)


def _loco(scores: np.ndarray, convs: np.ndarray, configs: list[dict[str, float]], show: bool) -> float:
    """Leave one conversation out over `scores` (configs x questions): the CV mean R@10."""
    held = np.zeros(scores.shape[1])
    for conv in sorted(set(convs)):
        out = convs == conv
        best = int(np.argmax(scores[:, ~out].mean(axis=1)))
        held[out] = scores[best, out]
        if show:
            print(f"  held out {conv}: tuned on the other four -> {configs[best]}  R@10 {held[out].mean():.3f}")
    return float(held.mean())


def cross_validate(events: list[Event], questions: list[Question]) -> None:
    """Leave one conversation out: pick the GRID point best on four, score it on the fifth."""
    index = TokenCosineIndex()
    index.add_many(events)
    index.assoc = assoc.build(index)
    configs = _grid()
    table = []
    started = time.perf_counter()
    for config in configs:
        index.settings = RankingSettings(**{**config, "context_turns": int(config["context_turns"])})  # type: ignore[arg-type]
        table.append(per_question(_ranker(index, events), questions))
    scores = np.array(table)  # configs x questions
    convs = np.array([q.workspace for q in questions])
    print(f"cross-validation over {len(configs)} configurations ({time.perf_counter() - started:.0f} s):")
    cv = _loco(scores, convs, configs, True)
    old = [i for i, c in enumerate(configs) if not c["expand"] and not c["session"] and c["pivot"] == 1.0
           and not c["named_source"]]
    cv_old = _loco(scores[old], convs, [configs[i] for i in old], False)
    shipped = RankingSettings()
    at = next(i for i, c in enumerate(configs) if all(
        getattr(shipped, k) == v for k, v in c.items() if k not in _NEEDS or c[_NEEDS[k]]))
    best = int(np.argmax(scores.mean(axis=1)))
    print(f"token-cosine R@10: CV {cv:.3f}   in-sample best {scores[best].mean():.3f} {configs[best]}\n"
          f"  shipped defaults (in-sample) {scores[at].mean():.3f} {configs[at]}\n"
          f"  context and turns only (the parameters before associations and sessions): CV {cv_old:.3f}, "
          f"in-sample best {scores[old].mean(axis=1).max():.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--method", action="append", choices=sorted(METHODS),
                        help="methods to measure (repeatable); the peers are always measured too")
    parser.add_argument("--split", metavar="CONVS", action="append",
                        help="comma-separated conversations to tune the context on; the rest are held out")
    parser.add_argument("--cv", action="store_true", help="leave-one-conversation-out cross-validation")
    args = parser.parse_args(argv)
    args.data = args.data or _default_data()
    events, questions = load(args.data)
    print(f"{len(events)} events, {len(questions)} questions (categories 1-4) from {args.data.name}")
    names = list(dict.fromkeys([*(args.method or ["token-cosine"]), *PEERS]))
    convs = sorted({q.workspace for q in questions})
    print(f"{'method':<14} {'R@5':>6} {'R@10':>6} {'MRR':>6}  {'build s':>7}  R@10 per conversation: "
          + " ".join(c.removeprefix("conv-") for c in convs))
    for name in names:
        started = time.perf_counter()
        rank = METHODS[name](events)
        built = time.perf_counter() - started
        mean, per = measure(rank, questions)
        print(f"{name:<14} {mean['R@5']:6.3f} {mean['R@10']:6.3f} {mean['MRR']:6.3f}  {built:7.2f}  "
              + " ".join(f"{per[c]:.3f}" for c in convs))
    for tune in args.split or []:
        split_check(events, questions, set(tune.split(",")))
    if args.cv:
        cross_validate(events, questions)


if __name__ == "__main__":
    main()
