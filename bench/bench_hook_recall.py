"""Hook latency with recall: the whole `urchin hook claude` process, start to exit, at N events.

    PYTHONPATH=$PWD python bench/bench_hook_recall.py [--events 1000000] [--calls 40]

With a daemon (`urchin serve --no-index`, the hooks' token installed): capture-only calls (PostToolUse),
capture + session-start recall (SessionStart) and capture + prompt recall (UserPromptSubmit), interleaved;
p50 and p95 of each (target p95 <= 100 ms). Then without a daemon: SessionStart calls, and how many printed
a digest (the rule: a digest within the deadline, or nothing).
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
PROMPTS = ["why does the retry budget run out", "how do we deploy the index", "fix the flaky cache test",
           "what did we decide about the session token", "where is the workspace build configured"]


def _payload(kind: str, n: int) -> bytes:
    base = {"session_id": f"bench-{kind}-{n}", "transcript_path": "/nonexistent.jsonl",
            "cwd": f"/nonexistent/bench/proj-{n % 12}", "permission_mode": "default"}
    if kind == "capture":
        return orjson.dumps({**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                             "tool_input": {"command": f"pytest -q tests/test_{n}.py"},
                             "tool_response": {"stdout": "ok\n" * 50, "stderr": ""}, "tool_use_id": f"toolu_{n}"})
    if kind == "session":
        return orjson.dumps({**base, "hook_event_name": "SessionStart", "source": "startup"})
    return orjson.dumps({**base, "hook_event_name": "UserPromptSubmit", "prompt": f"{PROMPTS[n % 5]} ({n})"})


def _run(env: dict[str, str], payload: bytes) -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "urchin", "hook", "claude"], input=payload, env=env,
                          capture_output=True, check=False)
    return (time.perf_counter() - started) * 1000, done.stdout


def _stats(name: str, times: list[float], printed: int) -> None:
    times = sorted(times)
    p95 = times[max(0, int(round(len(times) * 0.95)) - 1)]
    print(f"{name:34s} p50 {statistics.median(times):6.1f} ms  p95 {p95:6.1f} ms  ({len(times)} calls, "
          f"{printed} printed context)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    compileall.compile_dir(str(REPO / "urchin"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="urchin-hook-recall-") as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "URCHIN_HOME": str(home), "PYTHONPATH": str(REPO)}
        env.pop("URCHIN_NO_DAEMON", None)
        journal = Path(tmp) / "journal.jsonl"
        subprocess.run([sys.executable, str(REPO / "bench" / "gen_journal.py"), str(args.events), "--out",
                        str(journal)], check=True, env=env, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "urchin", "import", str(journal)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        from urchin.tokens import ensure_hook_token

        ensure_hook_token(home)
        daemon = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--no-index", "--port", "0"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not (home / "daemon.json").exists():
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise SystemExit("the daemon did not start")
                time.sleep(0.1)
            started = time.perf_counter()
            for n in range(3):      # warm: the daemon builds its views on first use
                _run(env, _payload("prompt", 10_000 + n))
                _run(env, _payload("session", 10_000 + n))
            print(f"{args.events} events; daemon warm after {time.perf_counter() - started:.1f} s")
            results: dict[str, tuple[list[float], int]] = {k: ([], 0) for k in ("capture", "session", "prompt")}
            bare: list[float] = []
            for n in range(args.calls):     # interleaved with the bare interpreter: machine noise hits all alike
                started = time.perf_counter()
                subprocess.run([sys.executable, "-c", "pass"], env=env, check=False)
                bare.append((time.perf_counter() - started) * 1000)
                for kind in results:
                    ms, out = _run(env, _payload(kind, n))
                    times, printed = results[kind]
                    times.append(ms)
                    results[kind] = (times, printed + bool(out))
            names = {"capture": "capture only (PostToolUse)", "session": "capture + recall (SessionStart)",
                     "prompt": "capture + recall (UserPromptSubmit)"}
            _stats("python -c pass (the floor)", bare, 0)
            for kind, (times, printed) in results.items():
                _stats(names[kind] + ", daemon", times, printed)
        finally:
            daemon.terminate()
            daemon.wait(60)
        alone: list[float] = []
        printed = 0
        for n in range(max(10, args.calls // 2)):
            ms, out = _run(env, _payload("session", 20_000 + n))
            alone.append(ms)
            printed += bool(out)
        _stats("capture + recall (SessionStart), no daemon", alone, printed)


if __name__ == "__main__":
    main()
