"""Pieces of bench/bench_scale.py: its journals in a work folder, a daemon's memory and CPU, timed
HTTP calls, alternating CLI-vs-rg runs and the PostgreSQL feed's progress. The benches it reuses
(bench_hot_search, bench_startup, bench_cli_daemon, bench_daemon_start) keep their own CLIs."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from bench_cli_daemon import timed as timed_wall  # noqa: E402
from bench_hot_search import _remove_pg  # noqa: E402
from bench_startup import timed  # noqa: E402
from gen_journal import generate  # noqa: E402

FIRST_QUESTION = "how do we retry the connection pool"
# A row of its own beside the 30 cells (round twenty-three): questions with a word no event holds (a name, a
# typo, LoCoMo's "What books has Tim read?"), no row holding every word, over WINDOWS, limit 20
ABSENT_QUESTIONS = ("what books has Tim read", "What did Priya decide about the database migration?",
                    "conection pool retry", "retyr budget for the cache")
# A whole-journal /semantic answer that is partial says so in its notes (issue 37); today none is.
PARTIAL = re.compile(r"not (?:\w+ )?yet|partial|cover|so far|building|indexing", re.IGNORECASE)
PG_NAMES = ("postgres", "pg_ctl", "initdb")     # the embedded server's processes: not the daemon's memory
MB = 1 << 20


def log(message: str) -> None:
    """Progress goes to stderr with the time and load; stdout holds only the report."""
    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}] {message}", file=sys.stderr, flush=True)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n:,}"


def journal_for(workdir: Path, n: int) -> Path:
    """gen_journal's journal of `n` events in `workdir`, generated once (seed 7, 90 days) with one end
    time for every size (`workdir/end_ms`, written at the first generation); one already there with
    `n` lines is reused (journal-1m.jsonl, journal-3m.jsonl, journal-N.jsonl otherwise)."""
    workdir.mkdir(parents=True, exist_ok=True)
    end_file = workdir / "end_ms"
    if not end_file.exists():
        end_file.write_text(str(int(time.time() * 1000)))
    end_ms = int(end_file.read_text())
    name = f"journal-{n // 1_000_000}m.jsonl" if n >= 1_000_000 and n % 1_000_000 == 0 else f"journal-{n}.jsonl"
    path = workdir / name
    if path.exists():
        lines = count_lines(path)
        if lines == n:
            log(f"reusing {path} ({path.stat().st_size / 1e6:,.0f} MB, end time {end_ms})")
            return path
        log(f"{path} holds {lines:,} lines, not {n:,}: generating it again")
    partial = path.with_name(path.name + ".partial")
    started = time.perf_counter()
    generate(n, partial, end_ms=end_ms)
    partial.rename(path)
    log(f"generated {path} in {time.perf_counter() - started:.0f} s")
    return path


def count_lines(path: Path) -> int:
    lines = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 24):
            lines += chunk.count(b"\n")
    return lines


class Memory:
    """The daemon's RSS and its children's (PostgreSQL excluded), sampled every 0.2 s in a thread:
    `peak` is the highest sum seen (RSS sums count the pages a forked child shares with its parent
    twice: an upper bound); `peak_pss` the same processes' proportional set sizes summed at that moment
    (a shared page split between its processes: `peak - peak_pss` is about what the RSS sum counted
    twice). The PSS is read only when the RSS sum rises to a new peak (a walk of each process's pages)."""

    def __init__(self) -> None:
        self.peak = 0
        self.peak_pss = 0
        self._pids: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, pid: int) -> None:
        self._pids = [pid]

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pid in self._pids:
                procs = _measured(pid)
                total = _sum(procs, lambda p: p.memory_info().rss)
                if total > self.peak:
                    self.peak, self.peak_pss = total, _sum(procs, pss)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _tree(pid: int) -> list[psutil.Process]:
    """`pid` and its descendants (none when it is gone)."""
    try:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def _measured(pid: int) -> list[psutil.Process]:
    """`pid` and its descendants but PostgreSQL's."""
    out = []
    for p in _tree(pid):
        try:
            if p.name() not in PG_NAMES:
                out.append(p)
        except psutil.Error:
            pass
    return out


def _sum(procs: list[psutil.Process], size: Callable[[psutil.Process], int]) -> int:
    total = 0
    for p in procs:
        try:
            total += size(p)
        except (psutil.Error, OSError, ValueError):     # gone since
            pass
    return total


def tree_rss(pid: int) -> int:
    """RSS bytes of `pid` and its descendants but PostgreSQL's."""
    return _sum(_measured(pid), lambda p: p.memory_info().rss)


def pss(proc: psutil.Process) -> int:
    """The proportional set size of one process, bytes (/proc/PID/smaps_rollup; 0 where there is none)."""
    try:
        text = Path(f"/proc/{proc.pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("Pss:")), 0)


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of one process, bytes."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def cpu_s(pid: int) -> float:
    """User + system seconds of `pid` and its reaped children."""
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def tree_cpu_s(pid: int) -> float:
    """User + system seconds of `pid`, its live descendants and its reaped children."""
    total = 0.0
    for p in _tree(pid):
        try:
            t = p.cpu_times()
            total += t.user + t.system + (t.children_user + t.children_system if p.pid == pid else 0.0)
        except psutil.Error:
            pass
    return total


def wait_quiet(pid: int, limit_s: float = 240.0, busy_s: float = 0.05, window_s: float = 1.0) -> float:
    """Seconds until `pid` and its descendants use under `busy_s` of CPU in `window_s` (at most `limit_s`):
    the hot figures are the daemon's steady state, not the background work after a first start
    (s12-semantic: a 3M daemon's associations child ran ~116 s after the build and inflated them)."""
    started = time.monotonic()
    before = tree_cpu_s(pid)
    while time.monotonic() - started < limit_s:
        time.sleep(window_s)
        now = tree_cpu_s(pid)
        if now - before < busy_s:
            break
        before = now
    return time.monotonic() - started


def feed_cpu_s(daemon: int, home: Path) -> float:
    """User + system seconds of the daemon's feeding child (`urchin.daemon.indexer`) and of the home's
    PostgreSQL (its server and the backends running now, and those it reaped)."""
    total = 0.0
    for pid in feed_processes(daemon, home):
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def feed_processes(daemon: int, home: Path) -> list[int]:
    """Pids of the daemon's feeding child and of the home's PostgreSQL server and backends."""
    sys.path.insert(0, str(REPO))
    from urchin.hybrid.embedded import running_pid

    pids: list[int] = []
    try:
        pids += [p.pid for p in psutil.Process(daemon).children(recursive=True)
                 if "urchin.daemon.indexer" in " ".join(p.cmdline())]
        server = running_pid(home / "pg")
        if server:
            pids += [server, *(p.pid for p in psutil.Process(server).children(recursive=True))]
    except psutil.Error:
        pass
    return pids


class Boost:
    """`--feed-boost`: every 0.5 s, the feeding child and PostgreSQL's processes (each thread) back to the
    normal class at nice 0, their autogroup too. The daemon runs its feed at SCHED_IDLE nice 19, which on
    a machine shared with other busy work gets next to no CPU: the feed's cost per event is then
    measurable, not its rate or its effect on queries as a user's idle machine sees them."""

    def __init__(self, daemon: int, home: Path) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(daemon, home), daemon=True)
        self._thread.start()

    def _run(self, daemon: int, home: Path) -> None:
        while not self._stop.wait(0.5):
            for pid in feed_processes(daemon, home):
                try:
                    Path(f"/proc/{pid}/autogroup").write_text("0")
                except OSError:
                    pass
                for task in Path(f"/proc/{pid}/task").glob("*"):
                    try:
                        os.sched_setscheduler(int(task.name), os.SCHED_OTHER, os.sched_param(0))
                        os.setpriority(os.PRIO_PROCESS, int(task.name), 0)
                    except OSError:
                        pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def client(home: Path) -> Iterator[httpx.Client]:
    info = orjson.loads((home / "daemon.json").read_bytes())
    token = (home / "token").read_text().strip()
    with httpx.Client(base_url=info["address"], headers={"authorization": f"Bearer {token}"}, timeout=3600,
                      trust_env=False) as c:
        yield c


def p50_ms(call: Callable[[], Any], repeat: int) -> float:
    """Median ms of `repeat` calls; a call answering an HTTP error status raises."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        answer = call()
        if isinstance(answer, httpx.Response):
            answer.raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def versus_rg(rg: str | None, journal: Path, env: dict[str, str], term: str, repeat: int
              ) -> dict[str, float | None]:
    """`urchin search TERM` (whole process, beside the daemon) and `rg -i -F -c TERM journal`, alternating
    `repeat` times: the medians, CPU of urchin, and the median of the per-pair ratios."""
    py = sys.executable
    ours: list[float] = []
    cpus: list[float] = []
    theirs: list[float] = []
    for i in range(repeat):
        for who in ("rg", "urchin") if i % 2 == 0 else ("urchin", "rg"):
            if who == "urchin":
                wall, cpu = timed([py, "-m", "urchin", "search", term], env)
                ours.append(wall)
                cpus.append(cpu)
            elif rg:
                theirs.append(timed_wall([rg, "-i", "-F", "-c", term, str(journal)], env))
    out: dict[str, float | None] = {"urchin_ms": statistics.median(ours), "urchin_cpu_ms": statistics.median(cpus),
                                    "rg_ms": None, "ratio": None}
    if theirs:
        out["rg_ms"] = statistics.median(theirs)
        out["ratio"] = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
    return out


def find_rg(given: str | None) -> str | None:
    return given or shutil.which("rg", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def pg_state(home: Path) -> tuple[int, int, int] | None:
    """(cursor byte offset, GIN indexes on urchin_chunks, indexes being built) of the home's embedded
    PostgreSQL, or None while it or its tables are not there yet."""
    import psycopg

    sys.path.insert(0, str(REPO))
    from urchin.hybrid.embedded import EmbeddedPostgres

    try:
        with psycopg.connect(EmbeddedPostgres(home / "pg", stop_at_exit=False, start=False).url(),
                             connect_timeout=5) as conn:
            offset = conn.execute("SELECT coalesce(max(byte_offset), 0) FROM urchin_cursors").fetchone()
            gins = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'urchin_chunks' "
                                "AND indexdef ILIKE '%USING gin%'").fetchone()
            building = conn.execute("SELECT count(*) FROM pg_stat_progress_create_index").fetchone()
    except Exception:  # noqa: BLE001 - not started yet, or its tables not made yet
        return None
    return int(offset[0]) if offset else 0, int(gins[0]) if gins else 0, int(building[0]) if building else 0


def feed_done(home: Path, size: int) -> bool:
    """The first feed is over: the cursor at the journal's end and the GIN indexes built, none building
    (three on a single user's index, four with the trigram one before issue 37), as bench_first_feed."""
    state = pg_state(home)
    return state is not None and state[0] >= size and state[1] >= 3 and state[2] == 0


def stop_pg(home: Path) -> None:
    """A server its daemon left running on the home (a SIGKILL, a daemon that never started it fully) is
    stopped, and its data removed."""
    sys.path.insert(0, str(REPO))
    from urchin.hybrid.embedded import adopt_or_stop

    try:
        adopt_or_stop(home / "pg", use=False)
    except Exception as exc:  # noqa: BLE001 - report it; the rest of the clean-up still runs
        log(f"could not stop the PostgreSQL of {home}: {exc}")
    _remove_pg(home)
