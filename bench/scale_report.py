"""bench/bench_scale.py's report: issue 37's table (each size, growth largest/smallest) and its goals,
each figure beside its target with met or missed, as markdown ready for bench/RESULTS.md; or JSON."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import orjson

Size = dict[str, Any]


def report(results: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return orjson.dumps(results, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2).decode()
    sizes: dict[int, Size] = results["sizes"]
    lines = [f"scale bench: tree {results['tree']} ({results['commit']}), {results['started']} - {results['ended']}, "
             f"--repeat {results['repeat']}, load {results['load_start']:.1f} at the start, "
             f"{results['load_end']:.1f} at the end", ""]
    paired = results.get("paired") or {}
    if sizes:
        lines += _table(sizes)
        lines += ["", *_goals(sizes, paired), "", *_conditions(sizes)]
    if paired.get("routes"):
        lines += ["", *_paired(paired, sizes)]
    return "\n".join(lines)


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n:,}"


ROWS: tuple[tuple[str, Callable[[Size], float | None], str], ...] = (
    ("`/semantic` p50, median over 30 cells", lambda s: s["semantic"]["median"], "ms"),
    ("`/semantic` p50, worst cell", lambda s: s["semantic"]["worst"], "ms"),
    ("`/semantic` p50, a word no event holds, median over 12 cells",
     lambda s: s["semantic_absent"]["median"], "ms"),
    ("`/semantic` p50, a word no event holds, worst cell",
     lambda s: s["semantic_absent"]["worst"], "ms"),
    ("first `/semantic` after `urchin import`, fresh start", lambda s: s["first_semantic_s"], "s"),
    ("... whole journal covered (no partial note)", lambda s: s["covered_s"], "s"),
    ("daemon RSS after queries", lambda s: s["rss_after_mb"], "MB"),
    ("daemon peak RSS (VmHWM)", lambda s: s["hwm_mb"], "MB"),
    ("peak RSS, daemon + children, PostgreSQL excluded", lambda s: s["peak_rss_mb"], "MB"),
    ("... their PSS summed at that peak (shared pages counted once)", lambda s: s["peak_pss_mb"], "MB"),
    ("first start to `/health` (after the import)", lambda s: s["health_s"], "s"),
    ("restart to `/health` (views saved)", lambda s: s["restart_health_s"], "s"),
    ("`/search` p50, median over 30 cells", lambda s: s["search"]["median"], "ms"),
    ("`/search` p50, worst cell", lambda s: s["search"]["worst"], "ms"),
    ("first `/search` (hot view built)", lambda s: s["first_search_s"], "s"),
    ("`/recent` p50, worst of 24 h/168 h/90 d", lambda s: max(s["recent"].values()), "ms"),
    ("CLI `urchin search`, median of its 3 terms", lambda s: statistics.median(
        c["urchin_ms"] for c in s["cli"].values()), "ms"),
    ("`urchin import`", lambda s: s["import"]["events_per_s"], "ev/s"),
)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "ev/s":
        return f"{value:,.0f}/s"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def _get(get: Callable[[Size], float | None], size: Size) -> float | None:
    """A figure, or None when that run stopped before measuring it (its saved figures are partial)."""
    try:
        return get(size)
    except (KeyError, TypeError):
        return None


def _table(sizes: dict[int, Size]) -> list[str]:
    ns = sorted(sizes)
    head = f"| measure | {' | '.join(_label(n) for n in ns)} |" + (" growth |" if len(ns) > 1 else "")
    lines = [head, "|---" * (len(ns) + 1 + (len(ns) > 1)) + "|"]
    for name, get, unit in ROWS:
        values = [_get(get, sizes[n]) for n in ns]
        cells = " | ".join(_fmt(v, unit) for v in values)
        growth = ""
        if len(ns) > 1:
            a, b = values[0], values[-1]
            growth = f" {b / a:.2f}x |" if a and b is not None else " - |"
        lines.append(f"| {name} | {cells} |{growth}")
    return lines


def _goal(name: str, value: float | None, target: float, unit: str, at: str, higher: bool = False) -> str:
    bound = f"{target:.1f}x" if unit == "x" else _fmt(target, unit)
    if value is None:
        return f"| {name} | {at} | not measured | {'>=' if higher else '<='} {bound} | - |"
    met = value >= target if higher else value <= target
    shown = f"{value:.2f}x" if unit == "x" else _fmt(value, unit)
    return f"| {name} | {at} | {shown} | {'>=' if higher else '<='} {bound} | {'met' if met else '**missed**'} |"


def _goals(sizes: dict[int, Size], paired: dict[str, Any]) -> list[str]:
    ns = sorted(sizes)
    one = 1_000_000 if 1_000_000 in sizes else ns[0]     # the goals "at 1M"
    big, small = sizes[ns[-1]], sizes[one]
    at_big, at_one = _label(ns[-1]), _label(one)
    growth = f"{_label(ns[-1])}/{_label(ns[0])}"
    first = sizes[ns[0]]
    fed = [n for n, s in sizes.items() if "context_process" in s.get("feed", {})]   # a feed measured to its end
    feed = sizes[fed[0]]["feed"] if fed else None
    at_feed = _label(fed[0]) if fed else "-"

    def ratio(get: Callable[[Size], float]) -> float | None:
        return get(big) / get(first) if len(ns) > 1 else None

    rows = ["| goal | at | figure | target | |", "|---|---|---|---|---|",
            _goal("`/semantic` p50 (median over cells)", big["semantic"]["median"], 40, "ms", at_big),
            _goal("`/semantic` p50 growth", ratio(lambda s: s["semantic"]["median"]), 1.3, "x", growth),
            _goal("`/semantic` p50 with a word no event holds (median over cells)",
                  big["semantic_absent"]["median"] if "semantic_absent" in big else None, 40, "ms", at_big),
            _goal("... its growth", ratio(lambda s: s["semantic_absent"]["median"])
                  if all("semantic_absent" in s for s in (big, first)) else None, 1.3, "x", growth),
            _goal("`search_context` token-cosine leg p50 (median over queries)",
                  feed["context_leg_ms"]["median"] if feed else None, 40, "ms", at_feed),
            _goal("first `/semantic` after `urchin import` answers", big["first_semantic_s"], 1, "s", at_big),
            _goal("... the whole journal covered", big["covered_s"], 120, "s", at_big),
            _goal("daemon RSS after queries", big["rss_after_mb"], 600, "MB", at_big),
            _goal("daemon RSS growth", ratio(lambda s: s["rss_after_mb"]), 1.5, "x", growth),
            _goal("peak RSS, daemon + children (PostgreSQL excluded)",
                  max(s.get("peak_rss_mb", 0) for s in sizes.values()), 1024, "MB", "any"),
            _goal("`urchin mcp` initialize with a daemon, p50", big["mcp_initialize"]["p50_ms"], 300, "ms", at_big),
            _goal("`urchin context` whole process through the daemon (--no-index), p50",
                  small["context_process"]["p50_ms"], 150, "ms", at_one),
            _goal("... the same, the daemon with its fed PostgreSQL index",
                  feed["context_process"]["p50_ms"] if feed else None, 150, "ms", at_feed),
            _goal("PostgreSQL first feed, whole wall" + ("" if not feed or feed.get("done", True) else
                  f" (only {feed['share']:.0%} fed in {feed['s']:.0f} s: GIN build not included)"),
                  feed["events_per_s"] if feed else None, 6000, "ev/s", at_feed, higher=True),
            _goal("... its CPU per event, feeding child + PostgreSQL (6,000/s on 2 cores: <= 333 us)",
                  feed.get("cpu_us_per_event") if feed else None, 333, "us", at_feed),
            _goal("`/search` p50 during the feed / idle, worst cell",
                  feed["busy_over_idle"]["search"]["worst"] if feed else None, 1.5, "x", at_feed),
            _goal("`/semantic` p50 during the feed / idle, worst cell",
                  feed["busy_over_idle"]["semantic"]["worst"] if feed else None, 1.5, "x", at_feed),
            _goal("first start to `/health`", big["health_s"], 2, "s", at_big),
            _goal("`/search` p50 worst cell (design: <= 20 ms, flat)", big["search"]["worst"], 20, "ms", at_big),
            _goal("`/search` growth (flat: taken as <= 1.3x)", ratio(lambda s: s["search"]["median"]), 1.3, "x",
                  growth)]
    if paired.get("routes"):        # the same goals from calls alternating between the two daemons
        pair = f"{_label(paired['sizes'][1])}/{_label(paired['sizes'][0])} paired"
        rows += [_goal(f"{name}, paired: median of cell ratios", paired["routes"][row]["median"], 1.3, "x", pair)
                 for name, row in PAIRED_ROWS]
        rows.append(_goal("daemon RSS growth, paired: the same moment", paired["rss_mb"][1] / paired["rss_mb"][0],
                          1.5, "x", pair))
    for n in ns:
        if n != one and n != ns[-1]:
            continue
        for term, cli in sizes[n]["cli"].items():
            rows.append(_goal(f"CLI `urchin search {term!r}` / `rg -i -F -c`, median ratio of alternating runs",
                              cli["ratio"], 1.0, "x", _label(n)))
    if feed:
        busy = feed["busy_over_idle"]
        rows.append("")
        boosted = "feed boosted to normal priority (--feed-boost), not the daemon's SCHED_IDLE; "
        rows.append((boosted if feed.get("boosted") else "") +
                    f"feed: {feed['fed_at_start']} when the busy queries started, {feed['fed_at_end']} when they ended "
                    f"(they ran during its first part and slow it a little); cells within 1.5x: /search "
                    f"{busy['search']['within_1_5']}/{busy['search']['cells']}, /semantic "
                    f"{busy['semantic']['within_1_5']}/{busy['semantic']['cells']}; daemon CPU over the feed "
                    f"{feed['daemon_cpu_s']:.0f} s (PostgreSQL's not counted)")
        paired = feed.get("busy_over_paused")
        if paired:
            rows.append(f"the same cells, running over stopped (SIGSTOP) feed, {paired['search']['rounds']} rounds "
                        "in the same minutes: " + "; ".join(
                            f"/{r} median {paired[r]['median']:.2f}x, worst {paired[r]['worst']:.2f}x, "
                            f"{paired[r]['within_1_5']}/{paired[r]['cells']} within 1.5x"
                            for r in ("search", "semantic")))
    return rows


def _conditions(sizes: dict[int, Size]) -> list[str]:
    lines = []
    for n, s in sorted(sizes.items()):
        s = {"load_end": float("nan"), "daemon_cpu_s": float("nan"), **s}   # a partial run's figures
        cli = "; ".join(f"{t!r} urchin {c['urchin_ms']:.0f} ms (CPU {c['urchin_cpu_ms']:.0f}) vs rg "
                        + (f"{c['rg_ms']:.0f} ms" if c["rg_ms"] is not None else "-") for t, c in s["cli"].items())
        lines.append(f"- {_label(n)}: load {s['load_start']:.1f} -> {s['load_end']:.1f}; "
                     f"import {s['import']['s']:.1f} s (CPU {s['import']['cpu_s']:.1f} s); "
                     f"first daemon CPU {s['daemon_cpu_s']:.0f} s, its stop {s.get('stop_s', 0):.0f} s; worst cells "
                     f"/semantic {s['semantic']['worst_cell']}, /search {s['search']['worst_cell']}; "
                     f"/context over HTTP {s['context_http_ms']:.0f} ms; urchin mcp CPU "
                     f"{s['mcp_initialize']['cpu_ms']:.0f} ms, urchin context {s['context_process']['p50_ms']:.0f} ms "
                     f"(CPU {s['context_process']['cpu_ms']:.0f} ms); CLI: {cli}; first /semantic notes: "
                     f"{s['first_semantic_notes'][:2] or 'none'}")
    return lines


PAIRED_ROWS = (("`/semantic` p50 growth", "semantic"), ("... a word no event holds", "semantic_absent"),
               ("`/search` growth (flat)", "search"))


def _paired(paired: dict[str, Any], sizes: dict[int, Size]) -> list[str]:
    """The paired growth: per row, each side's median p50, the ratio of those (as the growth column), the
    median of the cells' paired ratios with its halves and bootstrap interval, and this run's sequential
    growth beside it where the run measured the sizes too."""
    small, big = paired["sizes"]
    a, b = _label(small), _label(big)
    ready = "; ".join(f"{_label(n)} covered {r['covered_s']:.1f} s, quiet {r['quiet_s']:.0f} s"
                      for n, r in zip(paired["sizes"], paired["ready"], strict=True))
    lines = [f"paired growth {b}/{a}: both daemons at once, each cell's calls alternating between them "
             f"({paired['rounds']} pairs a cell after one untimed call each, the side going first varied), "
             f"{paired['started']} - {paired['ended']}, load {paired['load_start']:.1f} -> {paired['load_end']:.1f}; "
             f"{paired['measure_s']:.0f} s of calls, {paired['total_s']:.0f} s with the starts and stops ({ready})", "",
             f"| row | {a} p50, median of cells | {b} ditto | ratio of those | **median of cell ratios** | "
             "first half / second half of the pairs | 90% bootstrap | worst cell | same daemons one after the other: "
             "ratio of medians / median of cell ratios | sequential growth, this run's rows |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    names = {"semantic": "`/semantic`", "semantic_absent": "`/semantic`, a word no event holds",
             "search": "`/search`"}
    for row, name in names.items():
        r = paired["routes"][row]
        seq = "-"
        if small in sizes and big in sizes and row in sizes[small] and row in sizes[big]:
            seq = f"{sizes[big][row]['median'] / sizes[small][row]['median']:.2f}x"
        block = paired.get("blocks", {}).get(row)
        control = f"{block['of_medians']:.2f}x / {block['median']:.2f}x" if block else "-"
        lines.append(f"| {name}, {len(r['cells'])} cells | {r['small_ms']:.1f} ms | {r['big_ms']:.1f} ms | "
                     f"{r['of_medians']:.2f}x | **{r['median']:.2f}x** | {r['halves'][0]:.2f}x / "
                     f"{r['halves'][1]:.2f}x | {r['interval'][0]:.2f}-{r['interval'][1]:.2f}x | "
                     f"{r['worst_cell']!r} {r['worst']:.2f}x | {control} | {seq} |")
    rss = paired["rss_mb"]
    lines.append(f"| daemon RSS after them and one `/context`, same moment | {rss[0]:,.0f} MB | {rss[1]:,.0f} MB | "
                 f"{rss[1] / rss[0]:.2f}x | | | | | | - |")
    return lines
