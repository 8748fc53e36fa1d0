"""Issue 37's scale bench: every row of its table and every goal's figure, at each size, in one run.

    python bench/bench_scale.py --events 1000000,3000000 [--workdir /tmp/scale-bench] [--repeat 11]
                                [--skip-feed] [--pairs 21] [--keep-homes] [--tree PATH] [--rg PATH] [--json]
    python bench/bench_scale.py --events 1000000,3000000 --paired-only --workdir DIR   # homes kept earlier

Per size: gen_journal's journal (one end time for all sizes; reused from --workdir), `urchin import`
into a fresh home, the first `urchin serve` (--no-index) timed to `/health`, its first `/semantic`
(blocked or partial) and when a whole-journal answer no longer says it is partial, then hot p50s of
`/semantic` and `/search` (bench_hot_search's queries x windows), `/recent`, CLI `urchin search` vs rg
(alternating), `urchin mcp` initialize and `urchin context` as whole processes (bench_startup), the
daemon's RSS after queries and the peak of the daemon and its children (PostgreSQL excluded), then a
restart to `/health` on the saved views. At the smallest size (unless --skip-feed) a daemon with the
PostgreSQL index feeds it from scratch: events/s, `/search` and `/semantic` p50s during it over idle,
and `search_context`'s token-cosine leg (strategy semantic) once fed. The report (markdown tables: the
issue's rows with growth, then each goal with its target and met/missed) goes to stdout; progress
to stderr. Then the paired growth (scale_paired): the smallest and the largest size's daemons at once on
their homes, each cell's calls alternating between them, each cell's ratio a median of paired ratios,
with its halves and a bootstrap interval, and a control (each side alone, one after the other);
`--paired-only` measures only that, on the homes an earlier run kept (`--keep-homes`: DIR/run-N/home).
`--tree` measures another checkout's code. Daemons and their PostgreSQL stop on any exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_paired as paired  # noqa: E402
import scale_parts as sp  # noqa: E402
from bench_daemon_start import spawn, stop  # noqa: E402
from bench_hot_search import QUERIES, WINDOWS, _fed, measure  # noqa: E402
from bench_startup import mcp_initialize, timed  # noqa: E402
from scale_parts import ABSENT_QUESTIONS, FIRST_QUESTION, PARTIAL  # noqa: E402
from scale_report import report  # noqa: E402

CONTEXT_QUESTION = "why did the retry budget change for the connection pool"
CLI_TERMS = ("lake near the trail", "xylophone", "pytest")   # the issue's: a phrase, an absent word, 20 hits
COVER_WAIT_S = 1800
STOP_WAIT_S = 900     # a daemon saves its views at its stop: minutes at 3M on a loaded machine
_daemons: list[tuple[Any, Path]] = []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="1000000,3000000", help="sizes, comma-separated")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/urchin-scale-bench"),
                        help="journals kept here between runs (and end_ms, their one end time); homes made and removed")
    parser.add_argument("--repeat", type=int, default=11, help="calls per p50, whole processes per row")
    parser.add_argument("--skip-feed", action="store_true", help="no PostgreSQL feed (its goals: 'not measured')")
    parser.add_argument("--feed-wait", type=float, default=3600,
                        help="seconds to wait for the feed's end; then its rate is of the share fed (default 3600)")
    parser.add_argument("--busy-from", type=float, default=0.0,
                        help="share of the journal fed before the during-feed queries start (default 0: at once)")
    parser.add_argument("--feed-pairs", type=int, default=0,
                        help="then this many rounds of the same cells with the feed child stopped (SIGSTOP) and "
                             "running: ratios of the same minutes, for a shared machine (default 0: none)")
    parser.add_argument("--feed-boost", action="store_true",
                        help="run the feed at normal priority, not the daemon's SCHED_IDLE (a shared machine)")
    parser.add_argument("--pairs", type=int, default=21,
                        help="calls on each side a cell in the paired growth (0: none; default 21)")
    parser.add_argument("--paired-only", action="store_true",
                        help="measure only the paired growth, on the homes a run with --keep-homes left in --workdir")
    parser.add_argument("--keep-homes", action="store_true",
                        help="keep --workdir/run-N/home (its journal and saved views) for --paired-only")
    parser.add_argument("--tree", type=Path, default=sp.REPO, help="the checkout whose code is measured")
    parser.add_argument("--rg", default=None, help="ripgrep binary (default: rg beside python or on PATH)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object instead")
    parser.add_argument("--report", type=Path, nargs="+", metavar="RESULTS_JSON",
                        help="measure nothing: print the report of runs saved earlier (--workdir/results-*.json), "
                             "their sizes merged (e.g. a 1M and a 3M run made apart)")
    return parser


def _sizes(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[int]:
    """The sizes asked for, the options checked against them."""
    sizes = sorted({int(s.replace("_", "")) for s in args.events.split(",") if s.strip()})
    if not sizes or min(sizes) < 100 or args.repeat < 1 or args.pairs < 0:
        parser.error("--events: sizes of at least 100 events; --repeat at least 1; --pairs at least 0")
    if args.paired_only:
        if len(sizes) < 2 or args.pairs < 1:
            parser.error("--paired-only: two sizes in --events and --pairs at least 1")
        for n in (sizes[0], sizes[-1]):
            if not (_home(args.workdir, n) / "journal" / "events.jsonl").exists():
                parser.error(f"--paired-only: no home with a journal at {_home(args.workdir, n)} "
                             "(a run with --keep-homes and the same --workdir leaves one)")
    return sizes


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.report:
        print(report(merge([orjson.loads(path.read_bytes()) for path in args.report]), args.json))
        return
    sizes = _sizes(args, parser)
    tree = args.tree.resolve()
    if not (tree / "urchin" / "__init__.py").exists():
        parser.error(f"--tree {tree}: no urchin package there")
    signal.signal(signal.SIGTERM, _interrupted)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "URCHIN_NO_DAEMON")}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "urchin")], env=clean, check=True)
    commit = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True,
                            text=True).stdout.strip()[:90]
    results: dict[str, Any] = {"tree": str(tree), "commit": commit, "repeat": args.repeat,
                               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "load_start": os.getloadavg()[0], "sizes": {}}
    rg = sp.find_rg(args.rg)
    if not rg and not args.paired_only:        # the paired growth calls only the daemons
        parser.error("needs ripgrep (the CLI's peer): --rg PATH, or rg on PATH (pip install ripgrep==14.1.0)")
    if rg:
        os.environ["PATH"] = f"{Path(rg).parent}{os.pathsep}{os.environ.get('PATH', '')}"   # bench_hot_search's rg
    names = "-".join(sp.label(n).replace(",", "") for n in sizes)
    kind = "paired-" if args.paired_only else ""
    saved = args.workdir / f"results-{kind}{names}-{time.strftime('%Y%m%dT%H%M')}.json"
    try:
        for n in sizes if not args.paired_only else ():
            results["sizes"][n] = {}      # filled as it goes: an interrupted run saves what it measured
            run_size(n, args, tree, clean, rg, not args.skip_feed and n == sizes[0], results["sizes"][n])
        if len(sizes) > 1 and args.pairs:
            results["paired"] = {}
            run_pair((sizes[0], sizes[-1]), args.workdir, tree, clean, args.pairs, results["paired"])
        results["complete"] = True
    except KeyboardInterrupt:
        sp.log("interrupted: stopping the daemons")
        raise SystemExit(130) from None
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):   # a second signal must not leave a daemon or its server
            signal.signal(sig, signal.SIG_IGN)
        for child in psutil.Process().children():     # a whole process being timed (an import, a CLI call)
            if child.pid not in {proc.pid for proc, _ in _daemons}:
                child.kill()
        for proc, home in reversed(_daemons):
            stop(proc, STOP_WAIT_S)
            sp.stop_pg(home)
        for n in sizes if not (args.keep_homes or args.paired_only) else ():
            shutil.rmtree(_home(args.workdir, n).parent, ignore_errors=True)
        results["load_end"] = os.getloadavg()[0]
        results["ended"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        saved.write_bytes(orjson.dumps(results, option=orjson.OPT_NON_STR_KEYS))
        sp.log(f"figures saved in {saved} (bench_scale.py --report FILE... prints them again, runs merged)")
    print(report(results, args.json))


def merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several saved runs as one: their sizes together (a later run's size replaces an earlier one's)."""
    merged = {**runs[0], "sizes": {}}
    for run in runs:
        merged["sizes"].update({int(n): figures for n, figures in run["sizes"].items()})
        merged.update({"paired": run["paired"]} if run.get("paired") else {})   # the last run's that has one
    if len(runs) > 1:
        merged.update(commit=" + ".join(dict.fromkeys(r["commit"] for r in runs)), ended=runs[-1]["ended"],
                      started=" / ".join(r["started"] for r in runs), load_end=runs[-1]["load_end"])
    return merged


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _daemon(tree: Path, home: Path, env: dict[str, str], flags: tuple[str, ...], mem: sp.Memory | None
            ) -> tuple[Any, dict[str, float]]:
    proc, _, times = spawn(tree, home, flags, env, log=home.parent / "daemon.log")
    _daemons.append((proc, home))
    if mem:
        mem.watch(proc.pid)
    return proc, times


def _home(workdir: Path, n: int) -> Path:
    return workdir / f"run-{n}" / "home"


def _stop(proc: Any, home: Path) -> float:
    seconds = stop(proc, STOP_WAIT_S)
    _daemons.remove((proc, home))
    sp.stop_pg(home)
    return seconds


def run_size(n: int, args: argparse.Namespace, tree: Path, clean: dict[str, str], rg: str | None,
             feed: bool, out: dict[str, Any]) -> None:
    out.update(events=n, load_start=os.getloadavg()[0])
    journal = sp.journal_for(args.workdir, n)
    home = _home(args.workdir, n)
    shutil.rmtree(home.parent, ignore_errors=True)
    home.mkdir(parents=True)
    env = {**clean, "PYTHONPATH": str(tree), "URCHIN_HOME": str(home)}
    sp.log(f"{sp.label(n)}: urchin import {journal}")
    wall, cpu = timed([sys.executable, "-m", "urchin", "import", str(journal)], env)
    out["import"] = {"s": wall / 1000, "cpu_s": cpu / 1000, "events_per_s": n / wall * 1000}
    mem = sp.Memory()
    try:
        first_start(n, home, tree, env, rg, args.repeat, mem, out)
        out["restart_health_s"] = restart(home, tree, env, mem)
        if feed:
            out["feed"] = {}          # filled as it goes, like `out`
            first_feed(home, tree, env, args.repeat, mem, out, args.feed_wait, args.feed_boost, args.busy_from,
                       args.feed_pairs)
    finally:
        mem.close()
    out["peak_rss_mb"] = mem.peak / sp.MB
    out["peak_pss_mb"] = mem.peak_pss / sp.MB
    out["load_end"] = os.getloadavg()[0]      # the home stays for the paired growth; main removes it


def run_pair(pair: tuple[int, int], workdir: Path, tree: Path, clean: dict[str, str], rounds: int,
             out: dict[str, Any]) -> None:
    """Both sizes' daemons at once on their homes (views saved by their last stop), each ready and quiet,
    then every `/semantic`, absent-word and `/search` cell alternating between them (scale_paired), then
    one `/context` each and both RSS at the same moment."""
    homes = (_home(workdir, pair[0]), _home(workdir, pair[1]))
    out.update(sizes=list(pair), rounds=rounds, load_start=os.getloadavg()[0],
               started=time.strftime("%H:%M:%S UTC", time.gmtime()))
    sp.log(f"paired growth {sp.label(pair[1])}/{sp.label(pair[0])}: both daemons at once")
    began = time.perf_counter()
    procs = []
    for home in homes:
        env = {**clean, "PYTHONPATH": str(tree), "URCHIN_HOME": str(home)}
        procs.append(_daemon(tree, home, env, ("--no-index", "--no-collect"), None)[0])
    out["ready"] = [paired.ready(home, proc.pid) for home, proc in zip(homes, procs, strict=True)]
    out["quiet_s"] = sum(sp.wait_quiet(proc.pid) for proc in procs)      # the first one's since, if any
    sp.log(f"both ready after {time.perf_counter() - began:.0f} s; {rounds} pairs a cell")
    started = time.perf_counter()
    out["routes"] = paired.measure_pairs(homes, paired.cells(QUERIES, ABSENT_QUESTIONS, WINDOWS), rounds)
    out["measure_s"] = time.perf_counter() - started
    sp.log(f"the control: the same cells on the {sp.label(pair[0])} daemon alone, then on the {sp.label(pair[1])} one")
    out["blocks"] = paired.measure_blocks(homes, paired.cells(QUERIES, ABSENT_QUESTIONS, WINDOWS), rounds)
    for home in homes:
        with sp.client(home) as c:
            c.post("/context", json={"query": CONTEXT_QUESTION}).raise_for_status()
    out["rss_mb"] = [sp.rss(proc.pid)[0] / sp.MB for proc in procs]
    for proc, home in zip(procs, homes, strict=True):
        _stop(proc, home)
    out.update(load_end=os.getloadavg()[0], ended=time.strftime("%H:%M:%S UTC", time.gmtime()),
               total_s=time.perf_counter() - began)
    sp.log(f"paired growth measured in {out['measure_s']:.0f} s, {out['total_s']:.0f} s with the starts and stops")


def first_start(n: int, home: Path, tree: Path, env: dict[str, str], rg: str | None, repeat: int,
                mem: sp.Memory, out: dict[str, Any]) -> None:
    """The first daemon after the import: /health, the first /semantic, then every hot figure."""
    proc, times = _daemon(tree, home, env, ("--no-index", "--no-collect"), mem)
    out["health_s"] = times["/health"]
    sp.log(f"{sp.label(n)}: first start, /health after {times['/health']:.2f} s; first /semantic")
    journal = home / "journal" / "events.jsonl"
    with sp.client(home) as c:
        params: dict[str, str | int] = {"query": FIRST_QUESTION, "hours": 2160, "limit": 20}
        started = time.perf_counter()
        answer = c.get("/semantic", params=params)
        answer.raise_for_status()
        out["first_semantic_s"] = time.perf_counter() - started
        notes = [str(note) for note in answer.json().get("notes") or []]
        out["first_semantic_notes"] = notes
        while any(PARTIAL.search(note) for note in notes) and time.perf_counter() - started < COVER_WAIT_S:
            time.sleep(1)
            notes = [str(note) for note in c.get("/semantic", params=params).json().get("notes") or []]
        out["covered_s"] = time.perf_counter() - started
        started = time.perf_counter()
        c.get("/search", params={"query": "warm", "hours": 1e6}).raise_for_status()
        out["first_search_s"] = time.perf_counter() - started
        out["quiet_wait_s"] = sp.wait_quiet(proc.pid)
        sp.log(f"{sp.label(n)}: first /semantic {out['first_semantic_s']:.1f} s, covered {out['covered_s']:.1f} s; "
               f"background work done after {out['quiet_wait_s']:.0f} s more; hot p50s")
        with contextlib.redirect_stdout(sys.stderr):
            out["semantic"] = _cells(measure(home, journal, "/semantic", repeat))
            out["search"] = _cells(measure(home, journal, "/search", repeat))
        out["semantic_absent"] = _cells({(q, h): sp.p50_ms(partial(c.get, "/semantic", params={
            "query": q, "hours": h, "limit": 20}), repeat) for q in ABSENT_QUESTIONS for h in WINDOWS})
        out["recent"] = {str(h): sp.p50_ms(partial(c.get, "/recent", params={"hours": h, "limit": 20}), repeat)
                         for h in WINDOWS}
        c.post("/context", json={"query": CONTEXT_QUESTION}).raise_for_status()     # its first builds views
        out["context_http_ms"] = sp.p50_ms(lambda: c.post("/context", json={"query": CONTEXT_QUESTION})
                                           .raise_for_status(), repeat)
    sp.log(f"{sp.label(n)}: whole processes (CLI vs rg, urchin mcp, urchin context)")
    sp.count_lines(journal)      # the page cache warm for rg, as the issue measured it
    out["cli"] = {term: sp.versus_rg(rg, journal, env, term, repeat) for term in CLI_TERMS}
    out["mcp_initialize"] = _processes(lambda: mcp_initialize(env), repeat)
    out["context_process"] = _processes(
        lambda: timed([sys.executable, "-m", "urchin", "context", CONTEXT_QUESTION], env), repeat)
    out["rss_after_mb"], out["hwm_mb"] = (v / sp.MB for v in sp.rss(proc.pid))
    out["daemon_cpu_s"] = sp.cpu_s(proc.pid)
    out["stop_s"] = _stop(proc, home)


def restart(home: Path, tree: Path, env: dict[str, str], mem: sp.Memory) -> float:
    """A second start on the same home (its views saved by the first daemon's stop): to /health."""
    proc, times = _daemon(tree, home, env, ("--no-index", "--no-collect"), mem)
    _stop(proc, home)
    return times["/health"]


def first_feed(home: Path, tree: Path, env: dict[str, str], repeat: int, mem: sp.Memory,
               idle: dict[str, Any], feed_wait: float, boosted: bool, busy_from: float = 0.0, pairs: int = 0) -> None:
    """A daemon feeding its empty PostgreSQL index from the journal: events/s over the whole wall time
    (spawn to the GIN indexes built, or to `feed_wait` s: then the share fed by then, GIN build not
    included), the CPU per event of the feed (its child and PostgreSQL: steadier than the wall on a
    shared machine), the hot p50s while it feeds over idle, the token-cosine leg after."""
    sp.log("first PostgreSQL feed" + (" (boosted: normal priority)" if boosted else ""))
    started = time.perf_counter()
    proc, _ = _daemon(tree, home, env, ("--no-collect",), mem)
    boost = sp.Boost(proc.pid, home) if boosted else None
    try:
        _feeding(proc, home, env, repeat, idle, feed_wait, started, boosted, busy_from, pairs)
    finally:
        if boost:
            boost.close()


def _feeding(proc: Any, home: Path, env: dict[str, str], repeat: int, idle: dict[str, Any], feed_wait: float,
             started: float, boosted: bool, busy_from: float = 0.0, pairs: int = 0) -> None:
    journal = home / "journal" / "events.jsonl"
    size, events = journal.stat().st_size, idle["events"]
    out: dict[str, Any] = idle["feed"]
    _fed(home, journal, wait=True)
    while busy_from and proc.poll() is None and time.perf_counter() < started + feed_wait:
        state = sp.pg_state(home)           # past the feed's first part (the daemon and its server just started)
        if state and state[0] / size >= busy_from:
            break
        time.sleep(0.5)
    out.update(boosted=boosted, busy_from=busy_from, fed_at_start=_fed(home, journal))
    # as many calls a p50 as idle: with 5 against idle's 11, the worst of 30 ratios was mostly the noise of
    # the smaller sample (a different 2-5 ms cell at ~2x in each run, the medians ~1.0x); these take seconds
    with contextlib.redirect_stdout(sys.stderr):
        busy = {"semantic": _cells(measure(home, journal, "/semantic", repeat)),
                "search": _cells(measure(home, journal, "/search", repeat))}
    out["fed_at_end"] = _fed(home, journal)
    out["busy_over_idle"] = {route: _ratios(busy[route], idle[route]) for route in busy}
    if pairs:
        out["busy_over_paused"] = _paired(proc, home, journal, repeat, pairs)
    deadline = started + feed_wait
    while not sp.feed_done(home, size) and time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the feeding daemon exited {proc.returncode}; see {home.parent / 'daemon.log'}")
        time.sleep(1)
    out["s"] = time.perf_counter() - started
    state = sp.pg_state(home)
    out["done"] = sp.feed_done(home, size)
    out["share"] = 1.0 if out["done"] else (state[0] if state else 0) / size
    fed = events * out["share"]                 # events are spread evenly enough over the journal's bytes
    out["events_per_s"] = fed / out["s"]
    out["daemon_cpu_s"] = sp.cpu_s(proc.pid)
    out["feed_cpu_s"] = sp.feed_cpu_s(proc.pid, home)
    out["cpu_us_per_event"] = out["feed_cpu_s"] / max(fed, 1) * 1e6
    sp.log(f"fed {out['share']:.0%} of {events:,} events in {out['s']:.0f} s "
           f"({out['cpu_us_per_event']:.0f} us of CPU each); search_context's token-cosine leg")
    with sp.client(home) as c:
        legs = {q: sp.p50_ms(partial(c.post, "/context", json={"query": q, "strategy": "semantic"}), repeat)
                for q in QUERIES}
        out["context_leg_ms"] = {"median": statistics.median(legs.values()), "worst": max(legs.values())}
        out["context_http_ms"] = sp.p50_ms(lambda: c.post("/context", json={"query": CONTEXT_QUESTION})
                                           .raise_for_status(), repeat)
    try:    # on a partly fed index `urchin context` may refuse (exit 1): say so, keep the rest
        out["context_process"] = _processes(
            lambda: timed([sys.executable, "-m", "urchin", "context", CONTEXT_QUESTION], env), repeat)
    except SystemExit as exc:
        out["context_process"] = {"p50_ms": None, "cpu_ms": None, "error": str(exc)[:300]}
    _stop(proc, home)


def _paired(proc: Any, home: Path, journal: Path, repeat: int, pairs: int) -> dict[str, Any]:
    """`pairs` rounds of the cells with the feed child stopped (SIGSTOP: its server process ends the
    statement it runs, then waits) and running, alternating which goes first: each cell's running p50
    over its stopped one, the median over the rounds. On a machine shared with other work both sides
    meet the same load, which the idle figures (taken minutes before) do not."""
    child = next(p for p in psutil.Process(proc.pid).children(recursive=True)
                 if "urchin.daemon.indexer" in " ".join(p.cmdline()))
    rounds: dict[str, list[dict[str, float]]] = {"semantic": [], "search": []}
    for i in range(pairs):
        p50s: dict[bool, dict[str, Any]] = {}
        for stopped in (True, False) if i % 2 == 0 else (False, True):
            if stopped:
                child.suspend()
                time.sleep(0.5)
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    p50s[stopped] = {r: _cells(measure(home, journal, "/" + r, repeat))["cells"] for r in rounds}
            finally:
                if stopped:
                    child.resume()
        for route, cells in rounds.items():
            cells.append({c: p50s[False][route][c] / p50s[True][route][c] for c in p50s[True][route]})
    out = {}
    for route, cells in rounds.items():
        ratios = {c: statistics.median(r[c] for r in cells) for c in cells[0]}
        worst = max(ratios, key=lambda c: ratios[c])
        out[route] = {"median": statistics.median(ratios.values()), "worst": ratios[worst], "worst_cell": worst,
                      "within_1_5": sum(r <= 1.5 for r in ratios.values()), "cells": len(ratios), "rounds": pairs}
    return out


def _cells(p50s: dict[tuple[str, int], float]) -> dict[str, Any]:
    worst = max(p50s, key=lambda cell: p50s[cell])
    return {"median": statistics.median(p50s.values()), "worst": p50s[worst], "worst_cell": list(worst),
            "cells": {f"{q} | {h}": v for (q, h), v in p50s.items()}}


def _ratios(busy: dict[str, Any], idle: dict[str, Any]) -> dict[str, Any]:
    ratios = {cell: busy["cells"][cell] / idle["cells"][cell] for cell in busy["cells"]}
    worst = max(ratios, key=lambda cell: ratios[cell])
    return {"median": statistics.median(ratios.values()), "worst": ratios[worst], "worst_cell": worst,
            "within_1_5": sum(r <= 1.5 for r in ratios.values()), "cells": len(ratios)}


def _processes(call: Any, repeat: int) -> dict[str, float]:
    runs = [call() for _ in range(repeat)]
    return {"p50_ms": statistics.median(w for w, _ in runs), "cpu_ms": statistics.median(c for _, c in runs)}


if __name__ == "__main__":
    main()
