"""Start-ups users feel, as whole processes beside a running daemon, A/B against another checkout.

Starts `urchin serve` (this checkout's, with `/mcp`) on a home whose journal is a gen_journal file
(hard-linked, never written) or a small generated one, then times, alternating between this checkout
(B) and `--base` (A, e.g. a detached worktree of the branch point) in one sitting:
`urchin mcp` (spawn, send `initialize`, read its answer), `urchin context QUESTION`,
`urchin search foo`, `urchin --version`, and `python -c pass` as the floor; and the daemon's own
share of a context, one `POST /context` from the bench process. Both trees are
byte-compiled first (PYTHONDONTWRITEBYTECODE is dropped: users have __pycache__). Wall ms p50/p95,
and CPU ms (user+sys of the process, from wait4) p50.

    python bench/bench_startup.py --base /tmp/base-start [--journal /tmp/journal-1m.jsonl] [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}) + "\n"


def _wait(proc: subprocess.Popen[bytes]) -> float:
    """Reap `proc`; its CPU ms (user + sys)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{proc.args} exited {proc.returncode}")
    return (usage.ru_utime + usage.ru_stime) * 1000


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one whole process, its output read and dropped. It runs in its checkout
    (`python -m` puts the working directory first on sys.path, before PYTHONPATH)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=env["PYTHONPATH"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    proc.stdout.read()
    cpu = _wait(proc)
    return (time.perf_counter() - started) * 1000, cpu


def mcp_initialize(env: dict[str, str]) -> tuple[float, float]:
    """(wall ms from spawn to the initialize answer read, CPU ms of the whole process)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "mcp"], env=env, cwd=env["PYTHONPATH"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE.encode())
    proc.stdin.flush()
    answer = proc.stdout.readline()
    wall = (time.perf_counter() - started) * 1000
    if b'"protocolVersion"' not in answer:
        raise SystemExit(f"urchin mcp answered {answer[:200]!r}")
    proc.stdin.close()
    proc.stdout.read()
    return wall, _wait(proc)


def _context_alone(env: dict[str, str], question: str) -> tuple[float, float]:
    """The daemon's own share of `urchin context`: one POST /context from this process (CPU: none of ours)."""
    from urchin.daemon_http import request

    home = Path(env["URCHIN_HOME"])
    address = json.loads((home / "daemon.json").read_bytes())["address"]
    token = (home / "token").read_text().strip()
    started = time.perf_counter()
    status, _, _ = request(address, token, "POST", "/context", json.dumps({"query": question}).encode(), timeout=600)
    if status != 200:
        raise SystemExit(f"/context answered {status}")
    return (time.perf_counter() - started) * 1000, 0.0


def start_daemon(home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning",
                             "--no-index", "--no-collect"], env=env, cwd=env["PYTHONPATH"])
    while not (home / "daemon.json").exists():
        if proc.poll() is not None:
            raise SystemExit("daemon exited")
        time.sleep(0.05)
    return proc


def warm(home: Path, env: dict[str, str]) -> None:
    """Wait for the hot views (the first queries build them: minutes at 1M on a loaded machine) and /mcp."""
    from urchin.daemon_http import request

    started = time.perf_counter()
    address = json.loads((home / "daemon.json").read_bytes())["address"]
    token = (home / "token").read_text().strip()
    for method, target, body in (("GET", "/search?query=warm&hours=1000000", None),
                                 ("GET", "/semantic?query=warm+up&limit=5", None),
                                 ("POST", "/context", b'{"query": "warm up the views"}')):
        status, _, answer = request(address, token, method, target, body, timeout=1800)
        if status != 200:
            raise SystemExit(f"{target}: {status} {answer[:300]!r}")
    mcp_initialize(env)     # the daemon builds /mcp in a thread after it starts: wait for it once
    print(f"daemon ready: views and /mcp warm {time.perf_counter() - started:.1f}s after daemon.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the A checkout (e.g. a worktree of the branch point)")
    parser.add_argument("--journal", type=Path, default=None, help="a gen_journal file (default: 2,000 events)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--question", default="why did the retry budget change for the connection pool")
    args = parser.parse_args()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "URCHIN_NO_DAEMON")}
    for tree in (REPO, args.base):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "urchin")], env=clean, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        journal = home / "journal" / "events.jsonl"
        journal.parent.mkdir(parents=True)
        if args.journal:
            os.link(args.journal, journal)
        else:
            subprocess.run([sys.executable, str(REPO / "bench" / "gen_journal.py"), "2000", "--out", str(journal)],
                           check=True, capture_output=True)
        print(f"journal {journal.stat().st_size / 1e6:,.1f} MB; load average {os.getloadavg()[0]:.2f}")
        envs = {name: {**clean, "PYTHONPATH": str(tree), "URCHIN_HOME": str(home)}
                for name, tree in (("A", args.base), ("B", REPO))}
        daemon = start_daemon(home, envs["B"])
        try:
            warm(home, envs["B"])
            run(envs, args.repeat, args.question)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)


def run(envs: dict[str, dict[str, str]], repeat: int, question: str) -> None:
    py = sys.executable
    rows = {
        "python -c pass": lambda env: timed([py, "-c", "pass"], env),
        "urchin --version": lambda env: timed([py, "-m", "urchin", "--version"], env),
        "urchin search foo": lambda env: timed([py, "-m", "urchin", "search", "foo"], env),
        "urchin context Q": lambda env: timed([py, "-m", "urchin", "context", question], env),
        "urchin mcp initialize": mcp_initialize,
        "/context alone (HTTP)": lambda env: _context_alone(env, question),
    }
    wall: dict[tuple[str, str], list[float]] = {(row, ab): [] for row in rows for ab in envs}
    cpu: dict[tuple[str, str], list[float]] = {(row, ab): [] for row in rows for ab in envs}
    for i in range(repeat):
        for ab in ("A", "B") if i % 2 == 0 else ("B", "A"):
            for row, measure in rows.items():
                w, c = measure(envs[ab])
                wall[row, ab].append(w)
                cpu[row, ab].append(c)
    print(f"{repeat} runs each, alternating A (base) and B (this checkout); wall ms p50/p95, CPU ms p50")
    print(f"{'row':<24} {'A p50':>7} {'A p95':>7} {'A cpu':>6} {'B p50':>7} {'B p95':>7} {'B cpu':>6} {'B/A':>6}")
    for row in rows:
        a, b = wall[row, "A"], wall[row, "B"]
        print(f"{row:<24} {_p(a, 50):7.0f} {_p(a, 95):7.0f} {statistics.median(cpu[row, 'A']):6.0f} "
              f"{_p(b, 50):7.0f} {_p(b, 95):7.0f} {statistics.median(cpu[row, 'B']):6.0f} "
              f"{_p(b, 50) / _p(a, 50):5.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def _p(values: list[float], pct: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


if __name__ == "__main__":
    main()
