"""bench/bench_scale.py stays runnable: the benches it reuses still export what it imports, its
options are checked, and its report shows every row of issue 37's table and every goal, each figure
beside its target with met or missed. (Running it, even at 2,000 events, costs ~12 s of CPU: the
lead runs it, `python bench/bench_scale.py --events 2000 --skip-feed --repeat 1`, after merging.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import bench_scale  # noqa: E402
import scale_paired  # noqa: E402
import scale_parts  # noqa: E402
from scale_report import ROWS, report  # noqa: E402


def _size(n: int, k: float, feed: bool) -> dict[str, Any]:
    """One size's figures as bench_scale records them, each `k` times a base value."""
    cells = {f"{q} | {h}": 10.0 * k for q in bench_scale.QUERIES for h in bench_scale.WINDOWS}
    hot = {"median": 10.0 * k, "worst": 30.0 * k, "worst_cell": ["the", 2160], "cells": cells}
    absent = {"median": 20.0 * k ** 0.2, "worst": 35.0 * k ** 0.2, "worst_cell": ["conection pool retry", 2160],
              "cells": {f"{q} | {h}": 20.0 * k for q in bench_scale.ABSENT_QUESTIONS for h in bench_scale.WINDOWS}}
    out: dict[str, Any] = {
        "events": n, "load_start": 1.0, "load_end": 1.5, "import": {"s": 2.0 * k, "cpu_s": 1.5 * k,
                                                                    "events_per_s": n / (2.0 * k)},
        "health_s": 1.0 * k, "restart_health_s": 0.5 * k, "first_semantic_s": 0.5 * k, "covered_s": 60.0 * k,
        "first_semantic_notes": ["12% not yet covered"], "first_search_s": 0.2, "semantic": hot, "search": hot,
        "semantic_absent": absent,
        "recent": {"24": 3.0, "168": 4.0, "2160": 5.0}, "context_http_ms": 40.0,
        "cli": {t: {"urchin_ms": 60.0, "urchin_cpu_ms": 50.0, "rg_ms": 50.0, "ratio": 1.2}
                for t in bench_scale.CLI_TERMS},
        "mcp_initialize": {"p50_ms": 200.0, "cpu_ms": 60.0}, "context_process": {"p50_ms": 140.0, "cpu_ms": 60.0},
        "rss_after_mb": 300.0 * k, "hwm_mb": 400.0 * k, "daemon_cpu_s": 30.0, "peak_rss_mb": 700.0 * k,
        "peak_pss_mb": 600.0 * k}
    if feed:
        ratios = {"median": 1.1, "worst": 1.4, "worst_cell": "the | 24", "within_1_5": 30, "cells": 30}
        out["feed"] = {"fed_at_start": "3% of the journal fed", "fed_at_end": "9% of the journal fed",
                       "busy_over_idle": {"search": ratios, "semantic": ratios}, "s": 150.0,
                       "events_per_s": 6500.0, "daemon_cpu_s": 90.0,
                       "done": True, "share": 1.0, "feed_cpu_s": 250.0, "cpu_us_per_event": 250.0,
                       "context_leg_ms": {"median": 35, "worst": 60},
                       "context_http_ms": 45.0, "context_process": {"p50_ms": 145.0, "cpu_ms": 60.0}}
    return out


def _results() -> dict[str, Any]:
    return {"tree": "/repo", "commit": "abc1234 subject", "repeat": 11, "started": "2026-12-05 06:00 UTC",
            "ended": "2026-12-05 06:40 UTC", "load_start": 1.0, "load_end": 2.0,
            "sizes": {1_000_000: _size(1_000_000, 1.0, True), 3_000_000: _size(3_000_000, 2.0, False)}}


def test_report_shows_every_row_with_its_growth_and_every_goal_against_its_target() -> None:
    text = report(_results(), as_json=False)
    lines = text.splitlines()
    for name, _, _ in ROWS:
        row = next(line for line in lines if line.startswith(f"| {name} |"))
        assert row.count("|") == 5, row            # 1M, 3M and the growth
    assert "| `/semantic` p50, median over 30 cells | 10.0 ms | 20.0 ms | 2.00x |" in lines
    goals = [line for line in lines if line.startswith("| ") and line.endswith(("| met |", "| **missed** |"))]
    assert len(goals) == 20 + 2 * len(bench_scale.CLI_TERMS)      # CLI vs rg at 1M and at 3M
    # questions with a word no event holds: a row of their own, with its growth, and their goals
    assert "| `/semantic` p50, a word no event holds, median over 12 cells | 20.0 ms | 23.0 ms | 1.15x |" in lines
    assert "| `/semantic` p50 with a word no event holds (median over cells) | 3M | 23.0 ms | <= 40.0 ms | met |" \
        in lines
    assert "| ... its growth | 3M/1M | 1.15x | <= 1.3x | met |" in lines
    assert "| `/semantic` p50 growth | 3M/1M | 2.00x | <= 1.3x | **missed** |" in lines
    assert "| PostgreSQL first feed, whole wall | 1M | 6,500/s | >= 6,000/s | met |" in lines
    assert "| daemon RSS after queries | 3M | 600 MB | <= 600 MB | met |" in lines


def _paired(k: float) -> dict[str, Any]:
    """A paired growth as bench_scale records it: each cell's 3M call `k` times its 1M call, 21 pairs."""
    rows = scale_paired.cells(bench_scale.QUERIES, bench_scale.ABSENT_QUESTIONS, bench_scale.WINDOWS)
    routes = {row: scale_paired.summarize({f"{q} | {h}": [[5.0, 5.0 * k]] * 21 for _, q, h in cells}, resamples=20)
              for row, cells in rows.items()}
    return {"sizes": [1_000_000, 3_000_000], "rounds": 21, "started": "06:40:00 UTC", "ended": "06:42:00 UTC",
            "load_start": 3.0, "load_end": 4.0, "measure_s": 60.0, "total_s": 95.0, "quiet_s": 2.0,
            "ready": [{"covered_s": 0.1, "quiet_s": 1.0}] * 2, "routes": routes, "rss_mb": [200.0, 260.0],
            "blocks": {row: {"small_ms": 5.0, "big_ms": 7.0, "of_medians": 1.4, "median": 1.35} for row in routes}}


def test_summarize_takes_the_median_of_paired_ratios_its_halves_and_an_interval() -> None:
    """A cell's ratio is the median of its pairs' ratios, not a ratio of two medians: a slow moment that
    hits both calls of a pair leaves it; the halves and the bootstrap interval show the spread."""
    slow = [[5.0, 6.0], [5.0, 6.5], [50.0, 65.0], [5.0, 7.0], [5.0, 7.5], [50.0, 75.0]]    # 1.2 1.3 1.3 1.4 1.5 1.5
    row = scale_paired.summarize({"a | 24": slow, "b | 24": [[2.0, 2.0]] * 6, "c | 24": [[1.0, 3.0]] * 6})
    assert row["cells"]["a | 24"]["ratio"] == 1.35 and row["worst_cell"] == "c | 24" and row["worst"] == 3.0
    assert row["median"] == 1.35 and row["halves"] == [1.3, 1.5]
    assert 1.0 <= row["interval"][0] <= 1.35 <= row["interval"][1] <= 1.5
    assert row["small_ms"] == 2.0 and row["big_ms"] == 3.0 and row["of_medians"] == 1.5 and row["pairs"] == 6


def test_report_shows_the_paired_growth_beside_the_sequential_one() -> None:
    results = {**_results(), "paired": _paired(1.2)}
    lines = report(results, as_json=False).splitlines()
    assert "| `/semantic` p50 growth, paired: median of cell ratios | 3M/1M paired | 1.20x | <= 1.3x | met |" in lines
    assert "| daemon RSS growth, paired: the same moment | 3M/1M paired | 1.30x | <= 1.5x | met |" in lines
    row = next(line for line in lines if line.startswith("| `/semantic`, 30 cells |"))
    assert row == ("| `/semantic`, 30 cells | 5.0 ms | 6.0 ms | 1.20x | **1.20x** | 1.20x / 1.20x | 1.20-1.20x | "
                   "'Zanzibar-Quokka | 24' 1.20x | 1.40x / 1.35x | 2.00x |")   # the control, the sequential rows
    assert any(line.startswith("| `/semantic`, a word no event holds, 12 cells |") for line in lines)
    # a paired-only run: its table alone; merged with an earlier run of the sizes, both
    alone = report({**_results(), "sizes": {}, "paired": _paired(1.5)}, as_json=False)
    assert "| `/search`, 30 cells | 5.0 ms | 7.5 ms | 1.50x | **1.50x** |" in alone and "| goal |" not in alone
    merged = bench_scale.merge([_results(), {**_results(), "sizes": {}, "paired": _paired(1.5)}])
    assert "| `/search`, 30 cells | 5.0 ms | 7.5 ms | 1.50x | **1.50x** |" in report(merged, as_json=False)


def test_report_of_one_size_without_a_feed_says_what_was_not_measured() -> None:
    results = _results()
    results["sizes"] = {2000: _size(2000, 1.0, False)}
    text = report(results, as_json=False)
    assert "| PostgreSQL first feed, whole wall | - | not measured | >= 6,000/s | - |" in text
    assert "growth" not in text.splitlines()[2]
    assert orjson.loads(report(results, as_json=True))["sizes"]["2000"]["events"] == 2000


def test_bad_options_are_named() -> None:
    for argv, message in ((["--events", "5"], "--events"), (["--repeat", "0"], "--repeat"),
                          (["--tree", "/"], "--tree /: no urchin package")):
        run = subprocess.run([sys.executable, str(BENCH / "bench_scale.py"), *argv], capture_output=True, text=True)
        assert run.returncode == 2 and message in run.stderr, run.stderr


def test_paired_only_needs_two_sizes_and_their_kept_homes(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    parser = bench_scale._parser()
    for argv, message in ((["--events", "1000", "--paired-only"], "--paired-only: two sizes"),
                          (["--events", "1000,3000", "--paired-only", "--workdir", str(tmp_path)],
                           f"--paired-only: no home with a journal at {tmp_path}/run-1000/home")):
        with pytest.raises(SystemExit):
            bench_scale._sizes(parser.parse_args(argv), parser)
        assert message in capsys.readouterr().err
    for n in (1000, 3000):          # homes a run with --keep-homes left
        (tmp_path / f"run-{n}" / "home" / "journal").mkdir(parents=True)
        (tmp_path / f"run-{n}" / "home" / "journal" / "events.jsonl").touch()
    argv = ["--events", "3000,1000,2000", "--paired-only", "--workdir", str(tmp_path)]
    assert bench_scale._sizes(parser.parse_args(argv), parser) == [1000, 2000, 3000]


def test_the_memory_sampler_sums_the_pss_beside_the_rss_where_a_fork_shares_pages() -> None:
    """A forked child's pages shared with its parent count twice in the RSS sum (the goal's figure), once
    in the PSS sum read at that peak: 64 MB touched, then a fork that only sleeps."""
    code = ("import os, sys, time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
            "if os.fork() == 0:\n    time.sleep(3); os._exit(0)\nprint('forked', flush=True); time.sleep(3)")
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        memory = scale_parts.Memory()
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "forked\n"
            memory.watch(proc.pid)
            deadline = time.monotonic() + 2
            while memory.peak < 128 << 20 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            memory.close()
            proc.kill()
    assert memory.peak >= 128 << 20
    assert memory.peak - memory.peak_pss >= 56 << 20        # the shared 64 MB, once more
