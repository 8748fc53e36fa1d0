"""How soon a freshly started daemon serves: `urchin serve` until `daemon.json` names it, until
`GET /health` answers, and until `/mcp` answers `tools/list` (issue 16). Each start is on a fresh home
(`--no-index`: the embedded PostgreSQL's start is its own figure), then SIGTERM until the exit.
`--repo` runs another checkout's code too, alternating with this one's, for an A/B in one sitting.

    python bench/bench_daemon_start.py [--starts 7] [--repo OLD_WORKTREE]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

REPO = Path(__file__).resolve().parent.parent
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def spawn(repo: Path, home: Path, flags: tuple[str, ...] = ("--no-index", "--no-collect"),
          env: dict[str, str] | None = None, log: Path | None = None
          ) -> tuple[subprocess.Popen[bytes], dict[str, Any], dict[str, float]]:
    """`urchin serve` from `repo`'s code on `home` until `GET /health` answers: the process, its
    daemon.json and the seconds from the spawn to each. It runs in a session of its own, so a Ctrl-C
    at the terminal reaches only the caller, which stops it with one SIGTERM (two would force it).
    `log`: a file for its stderr (else dropped)."""
    env = env or {k: v for k, v in os.environ.items() if k != "URCHIN_NO_DAEMON"}
    env = {**env, "PYTHONPATH": str(repo), "URCHIN_HOME": str(home)}
    stderr = log.open("ab") if log else subprocess.DEVNULL
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", *flags], env=env, cwd=repo,
                            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    if log:
        stderr.close()  # type: ignore[union-attr]
    try:   # `-m` imports from the working directory first: each checkout runs its own code
        while True:
            try:
                info = orjson.loads((home / "daemon.json").read_bytes())
                if info.get("pid") == proc.pid:
                    break
            except (OSError, orjson.JSONDecodeError):
                pass
            if proc.poll() is not None:
                raise SystemExit(f"daemon exited {proc.returncode}")
            time.sleep(0.005)
        out = {"daemon.json": time.perf_counter() - started}
        with httpx.Client(base_url=info["address"], trust_env=False, timeout=600) as client:
            assert client.get("/health").status_code == 200
        out["/health"] = time.perf_counter() - started
    except BaseException:
        stop(proc)
        raise
    return proc, info, out


def stop(proc: subprocess.Popen[bytes], timeout: float = 120) -> float:
    """SIGTERM (the daemon stops its PostgreSQL and saves its views), SIGKILL after `timeout` s; the
    seconds it took."""
    started = time.perf_counter()
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return time.perf_counter() - started


def start_once(repo: Path, home: Path) -> dict[str, float]:
    proc, info, out = spawn(repo, home)
    healthy = time.perf_counter()
    try:
        headers = {"authorization": f"Bearer {(home / 'token').read_text().strip()}",
                   "accept": "application/json, text/event-stream"}
        with httpx.Client(base_url=info["address"], headers=headers, trust_env=False, timeout=30) as client:
            answer = client.post("/mcp", json=TOOLS_LIST)
            assert answer.status_code == 200 and answer.json()["result"]["tools"], answer.text[:200]
            out["/mcp tools/list"] = out["/health"] + time.perf_counter() - healthy
        stopping = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        out["SIGTERM to exit"] = time.perf_counter() - stopping
        return out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=7)
    parser.add_argument("--repo", type=Path, help="another checkout to compare with, alternating")
    args = parser.parse_args()
    repos = [("this code", REPO)] + ([(f"{args.repo}", args.repo.resolve())] if args.repo else [])
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in repos}
    with tempfile.TemporaryDirectory(prefix="urchin-bench-start-") as tmp:
        for i in range(args.starts + 1):        # the first of each warms the page cache, not counted
            for name, repo in repos:
                result = start_once(repo, Path(tmp) / f"{name.replace('/', '_')}-{i}")
                if i:
                    runs[name].append(result)
    print(f"{args.starts} starts each on a fresh home (--no-index --no-collect), medians (min-max), s; "
          f"load {os.getloadavg()[0]:.1f}")
    for name, results in runs.items():
        cells = []
        for key in results[0]:
            values = [r[key] for r in results]
            cells.append(f"{key} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"{name}: " + ", ".join(cells))
    if len(runs) == 2:
        (a, ra), (b, rb) = runs.items()
        for key in ra[0]:
            ratio = statistics.median(r[key] for r in ra) / statistics.median(r[key] for r in rb)
            print(f"{key}: this code / {b} = {ratio:.2f}x")


if __name__ == "__main__":
    main()
