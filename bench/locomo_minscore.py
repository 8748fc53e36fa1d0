"""What `minScore` keeps on LoCoMo: for each threshold 0.1-0.9, the share of evidence kept and of
non-evidence dropped among the hybrid's top results (minScore 0, `--limit` deep).

    python bench/locomo_minscore.py [--data PATH] [--limit 10] [--database-url URL]

Same events, feeder and embedded PostgreSQL as bench/locomo_hybrid.py; every question runs once,
and each threshold is applied to the scores it returned (the score does not depend on minScore).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo_hybrid import _default_data, load, open_backend  # noqa: E402

from urchin.hybrid.search_context import run_context  # noqa: E402

THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 10))


def scored(backend: object, events: list, questions: list, limit: int) -> list[tuple[float, bool]]:
    """(score, is evidence) of every result of every question."""
    from datetime import UTC, datetime

    from urchin.params.context import ContextParams

    spans: dict[str, tuple[int, int]] = {}
    for e in events:
        lo, hi = spans.get(e.workspace or "", (e.ts_ms, e.ts_ms))
        spans[e.workspace or ""] = (min(lo, e.ts_ms), max(hi, e.ts_ms))
    out = []
    for text, workspace, evidence in questions:
        lo, hi = spans[workspace]
        params = ContextParams.build(query=text, workspace=workspace, limit=limit,
                                     since=datetime.fromtimestamp(lo / 1000, UTC).isoformat(),
                                     until=datetime.fromtimestamp(hi / 1000 + 1, UTC).isoformat())
        wanted = set(evidence)
        out += [(r["score"], r["id"] in wanted) for r in run_context(backend, params).results]  # type: ignore[arg-type]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--also", type=float, action="append", default=[],
                        help="more thresholds to print (e.g. --also 0.25)")
    args = parser.parse_args(argv)
    events, questions = load(args.data or _default_data())
    with tempfile.TemporaryDirectory(prefix="urchin-minscore-") as tmp:
        backend = open_backend(events, Path(tmp), args.database_url)
        rows = scored(backend, events, questions, args.limit)
        backend.close()
    evidence = [s for s, e in rows if e]
    other = [s for s, e in rows if not e]
    print(f"{len(questions)} questions, top {args.limit}: {len(evidence)} evidence results, {len(other)} others")
    print("| minScore | evidence kept | non-evidence dropped |")
    print("|---|---|---|")
    for t in sorted(set(THRESHOLDS) | set(args.also)):
        kept = sum(1 for s in evidence if s >= t) / max(len(evidence), 1)
        dropped = sum(1 for s in other if s < t) / max(len(other), 1)
        print(f"| {t:g} | {kept:.3f} | {dropped:.3f} |")


if __name__ == "__main__":
    main()
