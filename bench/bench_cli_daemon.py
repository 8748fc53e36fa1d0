"""Whole `urchin search|semantic|recent` processes beside a running daemon, and without one, vs `rg -i -F`.

Starts `urchin serve` on a home whose journal is the gen_journal file (hard-linked, never written),
waits for the hot views, then times, interleaved and in one run: `rg -i -F -c TERM journal` (the
peer), `python -m urchin search TERM` with the daemon (the stdlib fast path), the same through the
full click CLI (what it cost before), and `URCHIN_NO_DAEMON=1` (in-process). Medians, wall ms.

    python bench/bench_cli_daemon.py [--journal bench/data/journal-1000000.jsonl] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent
FULL_CLI = "from urchin.cli import main; main(prog_name='urchin')"
TERMS = (("rare", "Zanzibar-Quokka"), ("common", "retry budget"), ("word", "connection"),
         ("absent", "xylophone nebula"))


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 and not (cmd[0].endswith("rg") and proc.returncode == 1):  # rg: 1 = no match
        raise SystemExit(f"{cmd} failed: {proc.stderr.decode()[-500:]}")
    return elapsed * 1000


def start_daemon(home: Path, env: dict[str, str], busy: bool = False) -> subprocess.Popen[bytes]:
    """`urchin serve` ready with its hot views; `busy` leaves its Postgres feed running (first start)."""
    flags = [] if busy else ["--no-index"]
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "warning",
                             *flags], env=env)
    while not (home / "daemon.json").exists():
        if proc.poll() is not None:
            raise SystemExit("daemon exited")
        time.sleep(0.05)
    info = orjson.loads((home / "daemon.json").read_bytes())
    token = (home / "token").read_text().strip()
    with httpx.Client(base_url=info["address"], headers={"authorization": f"Bearer {token}"}, timeout=900,
                      trust_env=False) as client:
        started = time.perf_counter()
        client.get("/search", params={"query": "warm", "hours": 1e6}).raise_for_status()
        client.get("/semantic", params={"query": "warm up", "limit": 5}).raise_for_status()
        print(f"daemon ready; hot views built in {time.perf_counter() - started:.1f}s after daemon.json")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", type=Path, default=REPO / "bench" / "data" / "journal-1000000.jsonl")
    parser.add_argument("--home", type=Path, default=None,
                        help="reuse this home (its journal/events.jsonl, indexes saved by earlier runs)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--busy", action="store_true", help="leave the daemon's Postgres feed on (background work)")
    args = parser.parse_args()
    rg = shutil.which("rg", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if not rg or not args.journal.exists():
        raise SystemExit("needs rg and the journal (bench/gen_journal.py 1000000)")
    print(f"load average before: {os.getloadavg()[0]:.2f}; journal {args.journal.stat().st_size / 1e6:,.0f} MB")
    with tempfile.TemporaryDirectory(dir=args.journal.parent) as tmp:
        home = args.home or Path(tmp) / "home"
        journal = home / "journal" / "events.jsonl"
        if not journal.exists():
            journal.parent.mkdir(parents=True)
            os.link(args.journal, journal)
        journal.read_bytes()
        env = {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home)}
        env.pop("URCHIN_NO_DAEMON", None)
        local_env = {**env, "URCHIN_NO_DAEMON": "1"}
        subprocess.run([sys.executable, "-m", "urchin", "search", "warm"], env=local_env, capture_output=True)
        daemon = start_daemon(home, env, args.busy)
        try:
            run(rg, journal, env, local_env, args.repeat)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)


def run(rg: str, journal: Path, env: dict[str, str], local_env: dict[str, str], repeat: int) -> None:
    py = sys.executable
    fixed = {"python -c pass": [py, "-c", "pass"]}
    rows: list[tuple[str, dict[str, tuple[list[str], dict[str, str]]]]] = []
    for label, term in TERMS:
        for hours in (168, 2160):
            base = ["search", term, "--hours", str(hours), "--limit", "20"]
            rows.append((f"search {label}, {hours} h", {
                "rg": ([rg, "-i", "-F", "-c", term, str(journal)], env),
                "fast": ([py, "-m", "urchin", *base], env),
                "full CLI": ([py, "-c", FULL_CLI, *base], env),
                "no daemon": ([py, "-m", "urchin", *base], local_env),
            }))
    rows.append(("semantic 'retry budget connection'", {
        "rg": ([rg, "-i", "-F", "-c", "retry budget", str(journal)], env),
        "fast": ([py, "-m", "urchin", "semantic", "retry budget connection", "--hours", "2160"], env),
        "full CLI": ([py, "-c", FULL_CLI, "semantic", "retry budget connection", "--hours", "2160"], env),
    }))
    rows.append(("recent --limit 20", {
        "rg": ([rg, "-i", "-F", "-c", "retry budget", str(journal)], env),
        "fast": ([py, "-m", "urchin", "recent", "--limit", "20"], env),
        "full CLI": ([py, "-c", FULL_CLI, "recent", "--limit", "20"], env),
    }))
    for name, cmd in fixed.items():
        print(f"{name}: {statistics.median(timed(cmd, env) for _ in range(repeat)):.1f} ms")
    print(f"{'row':<34} {'rg':>7} {'fast':>7} {'ratio':>6} {'full CLI':>9} {'ratio':>6} {'no daemon':>10} {'ratio':>6}")
    worst = 0.0
    for label, cmds in rows:
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(repeat):
            for name, (cmd, cmd_env) in cmds.items():
                times[name].append(timed(cmd, cmd_env))
        med = {name: statistics.median(values) for name, values in times.items()}
        worst = max(worst, med["fast"] / med["rg"])
        cells = [f"{label:<34} {med['rg']:7.1f} {med['fast']:7.1f} {med['fast'] / med['rg']:5.2f}x "
                 f"{med['full CLI']:9.1f} {med['full CLI'] / med['rg']:5.2f}x"]
        if "no daemon" in med:
            cells.append(f"{med['no daemon']:10.1f} {med['no daemon'] / med['rg']:5.2f}x")
        print(" ".join(cells))
    print(f"worst fast-path ratio to rg: {worst:.2f}x (target <= 1.0x); load average after: "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
