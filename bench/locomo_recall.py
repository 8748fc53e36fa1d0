"""`recall --prompt` on LoCoMo (dev split): each conversation a workspace, each question a prompt in a new
session, at the default 600-token budget.

    python bench/locomo_recall.py [--data PATH] [--cv] [--threshold T]

Prints the evidence hit rate (the share of a question's evidence turns among the cited items, averaged
over questions), the silence rate when each question is asked in every other conversation's workspace,
the silence rate on SILENCE (prompts about work no conversation touched), and the largest
len(text) / 4 / budget seen. `--cv`: leave-one-conversation-out cross-validation of `prompt.THRESHOLD`:
on four conversations pick the threshold (on the best score) with the best hit rate whose silence
stays >= CV_SILENCE, score the fifth with it, rotate.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import _default_data, load  # noqa: E402

from urchin.config import Settings  # noqa: E402
from urchin.facade import Memory  # noqa: E402
from urchin.recall import PROMPT_DAYS  # noqa: E402
from urchin.recall.frame import pack  # noqa: E402
from urchin.recall.policy import PROMPT_BUDGET  # noqa: E402
from urchin.recall.prompt import FLOOR, THRESHOLD, prompt_lines  # noqa: E402

CV_SILENCE = 0.97          # the silence a threshold must keep on the training folds (target 0.95, with margin)
GRID = [round(0.005 * i, 3) for i in range(2, 161)]
# Work no LoCoMo conversation touched: a coding agent's prompts in a workspace that never saw them.
SILENCE = [
    "Add OAuth2 login with PKCE to the Flask API", "Why does the Kubernetes ingress return 502 after deploy?",
    "Migrate the ORM models from SQLAlchemy 1.4 to 2.0", "Set up a GitHub Actions matrix for Python 3.11 and 3.12",
    "Write a Rust function that parses RFC 3339 timestamps", "Profile the webpack build and cut the bundle size",
    "Add a Prometheus histogram for request latency", "Fix the flaky pytest fixture that leaks a temp dir",
    "Convert the Dockerfile to a multi-stage build", "Explain the borrow checker error in src/parser.rs",
    "Rename the GraphQL resolver and update its schema", "Add pagination to the /v2/invoices endpoint",
    "Replace moment.js with date-fns across the frontend", "Tune PostgreSQL autovacuum for the events table",
    "Why is the Terraform plan trying to recreate the VPC?", "Write a bash script that rotates nginx logs",
    "Add type hints to the payment gateway client", "Debug the segfault in the C extension under valgrind",
    "Set up pre-commit with ruff and mypy", "Implement a rate limiter with Redis and a sliding window",
]


def _home(events: list[Any], tmp: Path) -> Memory:
    memory = Memory(Settings.resolve(str(tmp / "home")))
    items = [{"id": e.id, "timestamp": e.timestamp, "source": e.source, "kind": e.kind, "content": e.content,
              "workspace": e.workspace, "session": e.session} for e in events]
    for start in range(0, len(items), 2000):
        memory.ingest(items[start:start + 2000])
    return memory


def _ends(events: list[Any]) -> dict[str, datetime]:
    out: dict[str, int] = defaultdict(int)
    for e in events:
        out[e.workspace] = max(out[e.workspace], e.ts_ms)
    return {ws: datetime.fromtimestamp(ms / 1000, UTC) + timedelta(days=1) for ws, ms in out.items()}


def _scored(memory: Memory, text: str, ws: str, now: datetime) -> tuple[list[tuple[float, str]], int]:
    """Every candidate line over 0 (score, id) best first, and how many of them the budget holds."""
    reader = memory._recalling.reader()
    since = int(now.timestamp() * 1000) - PROMPT_DAYS * 86_400_000
    lines = list(prompt_lines(reader, text, ws, since, current=None, injected=(), excluded=(), threshold=FLOOR))
    _, kept = pack(lines, PROMPT_BUDGET, reader.redact)
    return [(line.score, line.id) for line in lines], len(kept)


def collect(memory: Memory, events: list[Any], questions: list[Any]) -> list[dict[str, Any]]:
    ends = _ends(events)
    spaces = sorted(ends)
    rows = []
    for q in questions:
        lines, fit = _scored(memory, q.text, q.workspace, ends[q.workspace])
        others = [(_scored(memory, q.text, ws, ends[ws])[0][:1] or [(0.0, "")])[0][0] for ws in spaces
                  if ws != q.workspace]
        rows.append({"ws": q.workspace, "evidence": set(q.evidence), "lines": lines, "fit": fit, "others": others})
    return rows


def measure(rows: list[dict[str, Any]], t: float) -> tuple[float, float]:
    """(hit rate, silence) with threshold `t` on the best score; the rest are kept over FLOOR as they fit."""
    hits, silent, asked = [], 0, 0
    for row in rows:
        top = row["lines"][0][0] if row["lines"] else 0.0
        over = [i for _, i in row["lines"]][:row["fit"]] if top >= t else []
        hits.append(len(row["evidence"] & set(over)) / len(row["evidence"]))
        silent += sum(1 for s in row["others"] if s < t)
        asked += len(row["others"])
    return statistics.fmean(hits), silent / max(asked, 1)


def pick(rows: list[dict[str, Any]]) -> float:
    """The threshold with the best hit rate whose silence holds CV_SILENCE (ties: the higher threshold)."""
    best = (-1.0, 0.0)
    for t in GRID:
        hit, silence = measure(rows, t)
        if silence >= CV_SILENCE and (hit, t) > best:
            best = (hit, t)
    return best[1] if best[0] >= 0 else GRID[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--cv", action="store_true")
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    args = parser.parse_args(argv)
    events, questions = load(args.data or _default_data())
    with tempfile.TemporaryDirectory(prefix="urchin-recall-bench-") as tmp:
        memory = _home(events, Path(tmp))
        rows = collect(memory, events, questions)
        if args.cv:
            folds = sorted({row["ws"] for row in rows})
            held: list[tuple[float, float, float]] = []
            for ws in folds:
                t = pick([r for r in rows if r["ws"] != ws])
                hit, silence = measure([r for r in rows if r["ws"] == ws], t)
                held.append((t, hit, silence))
                print(f"held out {ws}: threshold {t:.2f} -> hit rate {hit:.3f}, silence {silence:.3f}")
            print(f"CV (leave one conversation out): hit rate {statistics.fmean(h for _, h, _ in held):.3f}, "
                  f"silence {statistics.fmean(s for _, _, s in held):.3f}; threshold on all five: {pick(rows):.2f}")
        hit, silence = measure(rows, args.threshold)
        print(f"threshold {args.threshold:.2f} (simulated from scores): hit rate {hit:.3f}, silence {silence:.3f}")
        real_report(memory, events, questions, args.threshold)
        memory.close()


def real_report(memory: Memory, events: list[Any], questions: list[Any], threshold: float) -> None:
    """The real operation, end to end (framing, budget, redaction): hit rate, silence, budget, harder silence."""
    import urchin.recall.prompt as prompt_module

    prompt_module.THRESHOLD = threshold
    ends = _ends(events)
    spaces = sorted(ends)
    hits, silent, asked, worst = [], 0, 0, 0.0
    for q in questions:
        result = memory.recall(workspace=q.workspace, prompt=q.text, now=ends[q.workspace]).to_dict()
        worst = max(worst, len(result["text"]) / 4 / PROMPT_BUDGET)
        hits.append(len(set(q.evidence) & {i["id"] for i in result["items"]}) / len(q.evidence))
        other = spaces[(spaces.index(q.workspace) + 1) % len(spaces)]
        silent += not memory.recall(workspace=other, prompt=q.text, now=ends[other]).to_dict()["items"]
        asked += 1
    hard = sum(not memory.recall(workspace=ws, prompt=p, now=ends[ws]).to_dict()["items"]
               for ws in spaces for p in SILENCE)
    print(f"recall --prompt, {len(questions)} questions, budget {PROMPT_BUDGET}, threshold {threshold:.2f}: "
          f"hit rate {statistics.fmean(hits):.3f}; silence in the next conversation's workspace "
          f"{silent / asked:.3f}; harder silence set {hard / (len(SILENCE) * len(spaces)):.3f} "
          f"({len(SILENCE)} prompts x {len(spaces)} workspaces); largest len(text)/4/budget {worst:.3f}")


if __name__ == "__main__":
    main()
