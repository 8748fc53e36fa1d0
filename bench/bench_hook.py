"""Hook latency: median wall time of `urchin hook claude < payload` as a real process.

Prints the median of N calls (default 30) next to the bare interpreter's start-up
(`python -c pass`) and `python -m urchin --version`, all measured in the same run, and the ratio
to the 150 ms budget. Each call appends one event (distinct tool_use_id) to a fresh URCHIN_HOME.

    PYTHONPATH=$PWD python bench/bench_hook.py [--calls 30] [--daemon]

`--daemon`: a daemon runs on the home (`urchin serve --no-index`) and the hooks' ingest-only token
exists, so each hook hands its event to the daemon over HTTP (the usual case once installed).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
BUDGET_MS = 150.0


def payload(n: int) -> bytes:
    return orjson.dumps({
        "session_id": "bench-session", "transcript_path": "/nonexistent/transcript.jsonl", "cwd": str(REPO),
        "permission_mode": "default", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": f"pytest -q tests/test_{n}.py", "description": "run the tests"},
        "tool_response": {"stdout": "ok\n" * 200, "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_bench_{n}",
    })


def timed(cmd: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--daemon", action="store_true", help="time hooks beside a running daemon")
    args = parser.parse_args()
    # An installed package has its bytecode compiled (pip does it); a checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would recompile every module on every call, so compile once here.
    compileall.compile_dir(str(REPO / "urchin"), quiet=1)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "URCHIN_HOME": home, "PYTHONPATH": str(REPO)}
        hook = [sys.executable, "-m", "urchin", "hook", "claude"]
        daemon = _daemon(Path(home), env) if args.daemon else None
        timed(hook, env, payload(-1))   # warm the page cache and create the journal
        bare, version, hooks = [], [], []
        for n in range(args.calls):     # interleaved, so machine noise hits all three alike
            bare.append(timed([sys.executable, "-c", "pass"], env))
            version.append(timed([sys.executable, "-m", "urchin", "--version"], env))
            hooks.append(timed(hook, env, payload(n)))
        journal = Path(home) / "journal" / "events.jsonl"
        lines = journal.read_bytes().count(b"\n") if journal.exists() else 0
        log = Path(home) / "hooks.log"
        if daemon is not None:
            daemon.terminate()
            daemon.wait(30)
            print("hooks beside a daemon, sent over HTTP with the ingest-only token"
                  + (f"; hooks.log: {log.read_text()[-300:]}" if log.exists() else " (hooks.log empty)"))
    m_bare, m_version, m_hook = (statistics.median(x) for x in (bare, version, hooks))
    print(f"python -c pass                 median {m_bare:7.1f} ms")
    print(f"python -m urchin --version     median {m_version:7.1f} ms")
    p90 = sorted(hooks)[int(len(hooks) * 0.9) - 1]
    print(f"urchin hook claude < payload   median {m_hook:7.1f} ms  (p90 {p90:.1f} ms)"
          f"  = {m_hook / m_bare:.1f}x interpreter start-up, {m_hook / BUDGET_MS:.2f} of the {BUDGET_MS:.0f} ms budget")
    print(f"events appended: {lines} (expected {args.calls + 1})")


def _daemon(home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    from urchin.api_tokens import ensure_hook_token

    ensure_hook_token(home)
    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--no-index", "--port", "0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (home / "daemon.json").exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the daemon did not start")
        time.sleep(0.05)
    return proc


if __name__ == "__main__":
    main()
