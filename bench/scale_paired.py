"""bench/bench_scale.py's paired growth: two daemons (the smallest and the largest size) running at once,
each cell's calls alternating between them (A B, B A, ... the first one varied by round and cell), so a
cell's largest/smallest ratio is the median of ratios of calls made milliseconds apart: load on a shared
machine meets both sides alike, which a ratio of two sizes measured minutes apart does not.

Per route: each cell's p50 on each side, its median paired ratio, the median over cells (the figure), the
same from the first and from the second half of each cell's pairs, and a bootstrap interval (pairs
resampled within each cell) so a reader sees how much of the ratio is noise. Then a control on the same
daemons (`measure_blocks`): each side alone, one after the other."""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import scale_parts as sp

BOOTSTRAP = 1000        # resamples for the interval; ~0.5 s of CPU for 72 cells of 21 pairs
INTERVAL = (0.05, 0.95)


def cells(queries: tuple[str, ...], absent: tuple[str, ...], windows: tuple[int, ...]
          ) -> dict[str, list[tuple[str, str, int]]]:
    """The paired rows: (route, query, hours) of bench_hot_search's cells and of the absent-word row."""
    return {"semantic": [("/semantic", q, h) for q in queries for h in windows],
            "semantic_absent": [("/semantic", q, h) for q in absent for h in windows],
            "search": [("/search", q, h) for q in queries for h in windows]}


def ready(home: Path, pid: int) -> dict[str, float]:
    """Seconds until a whole-journal `/semantic` on `home`'s daemon no longer says it is partial (its views
    were saved by an earlier daemon's stop), then until it and its children go quiet."""
    started = time.perf_counter()
    with sp.client(home) as c:
        params: dict[str, str | int] = {"query": sp.FIRST_QUESTION, "hours": 2160, "limit": 20}
        while time.perf_counter() - started < 1800:
            answer = c.get("/semantic", params=params)
            answer.raise_for_status()
            if not any(sp.PARTIAL.search(str(note)) for note in answer.json().get("notes") or []):
                break
            time.sleep(1)
        covered = time.perf_counter() - started
        c.get("/search", params={"query": "warm", "hours": 1e6}).raise_for_status()
    return {"covered_s": covered, "quiet_s": sp.wait_quiet(pid)}


def measure_pairs(homes: tuple[Path, Path], rows: dict[str, list[tuple[str, str, int]]], rounds: int
                  ) -> dict[str, Any]:
    """Each cell: one untimed call on each side (as bench_hot_search's hits call), then `rounds` pairs,
    the side going first alternating by round and by cell. Calls stay one at a time: the two daemons never
    answer at once, so they compete only with the machine's other work, which meets both."""
    out: dict[str, Any] = {}
    with sp.client(homes[0]) as small, sp.client(homes[1]) as big:
        sides = (small, big)
        k = 0
        for row, row_cells in rows.items():
            times: dict[str, list[list[float]]] = {}
            for route, query, hours in row_cells:
                params: dict[str, str | int] = {"query": query, "hours": hours, "limit": 20}
                for side in sides:
                    side.get(route, params=params).raise_for_status()
                pairs = []
                for i in range(rounds):
                    pair = [0.0, 0.0]
                    for s in (0, 1) if (i + k) % 2 == 0 else (1, 0):
                        pair[s] = _ms(sides[s], route, params)
                    pairs.append(pair)
                times[f"{query} | {hours}"] = pairs
                k += 1
            out[row] = summarize(times)
    return out


def measure_blocks(homes: tuple[Path, Path], rows: dict[str, list[tuple[str, str, int]]], rounds: int
                   ) -> dict[str, Any]:
    """The control: the same daemons, each row's cells on one side alone, then on the other (one untimed
    call and `rounds` timed a cell, as the single-size rows), half a minute apart instead of minutes.
    Beside the paired figure it tells the pairing's effect from that of the daemons' state (these two
    restarted on saved views; the single-size rows measure the first daemon after the import)."""
    out: dict[str, Any] = {}
    with sp.client(homes[0]) as small, sp.client(homes[1]) as big:
        for row, row_cells in rows.items():
            p50s: list[dict[str, float]] = [{}, {}]
            for s, side in enumerate((small, big)):
                for route, query, hours in row_cells:
                    params: dict[str, str | int] = {"query": query, "hours": hours, "limit": 20}
                    side.get(route, params=params).raise_for_status()
                    p50s[s][f"{query} | {hours}"] = statistics.median(_ms(side, route, params) for _ in range(rounds))
            a, b = statistics.median(p50s[0].values()), statistics.median(p50s[1].values())
            out[row] = {"small_ms": a, "big_ms": b, "of_medians": b / a,
                        "median": statistics.median(p50s[1][c] / p50s[0][c] for c in p50s[0])}
    return out


def _ms(side: httpx.Client, route: str, params: dict[str, str | int]) -> float:
    started = time.perf_counter()
    side.get(route, params=params).raise_for_status()
    return (time.perf_counter() - started) * 1000


def summarize(times: dict[str, list[list[float]]], seed: int = 7, resamples: int = BOOTSTRAP) -> dict[str, Any]:
    """One row's figures from each cell's pairs [small ms, big ms]: see the module's docstring."""
    ratios = {cell: [b / a for a, b in pairs] for cell, pairs in times.items()}
    per_cell = {cell: statistics.median(r) for cell, r in ratios.items()}
    half = {cell: len(r) // 2 for cell, r in ratios.items()}
    halves = [statistics.median(statistics.median(r[:half[c]] or r) for c, r in ratios.items()),
              statistics.median(statistics.median(r[half[c]:]) for c, r in ratios.items())]
    rng = random.Random(seed)
    boot = sorted(statistics.median(statistics.median(rng.choices(r, k=len(r))) for r in ratios.values())
                  for _ in range(resamples))
    small = {cell: statistics.median(a for a, _ in pairs) for cell, pairs in times.items()}
    big = {cell: statistics.median(b for _, b in pairs) for cell, pairs in times.items()}
    worst = max(per_cell, key=lambda cell: per_cell[cell])
    return {"median": statistics.median(per_cell.values()), "halves": halves,
            "interval": [boot[int(INTERVAL[0] * (resamples - 1))], boot[int(INTERVAL[1] * (resamples - 1))]],
            "small_ms": statistics.median(small.values()), "big_ms": statistics.median(big.values()),
            "of_medians": statistics.median(big.values()) / statistics.median(small.values()),
            "worst": per_cell[worst], "worst_cell": worst, "pairs": min(len(r) for r in ratios.values()),
            "cells": {cell: {"small_ms": small[cell], "big_ms": big[cell], "ratio": per_cell[cell]}
                      for cell in per_cell},
            "times": times}

