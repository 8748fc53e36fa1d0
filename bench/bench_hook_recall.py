"""Hook latency with recall: the whole `urchin hook claude` process, start to exit, at N events.

    PYTHONPATH=$PWD python bench/bench_hook_recall.py [--events 1000000] [--calls 40] [--workdir DIR]
        [--compare OTHER_CHECKOUT] [--daemon-checkout CHECKOUT] [--no-daemonless] [--warm ROUNDS]

The hook runs as it is installed: the `urchin` console script of a virtualenv that holds Urchin and its
dependencies on plain `sys.path` entries (as a wheel install does; the checkout's editable install
runs a meta-path finder from a .pth file at every start, ~35 ms of pathlib and re before any of ours).
That venv is made in the work folder from this interpreter's site-packages; its `python -c pass` is
the floor, measured interleaved with the hooks (machine noise hits all alike), beside this
interpreter's own floor.

With a daemon (`urchin serve --no-index`, the hooks' token installed): capture-only calls (PostToolUse),
capture + session-start recall (SessionStart) and capture + prompt recall (UserPromptSubmit),
interleaved; p50 and p95 of each (target p95 <= 100 ms), and the daemon's CPU during each call (all
its threads, /proc/PID/stat: a mean over the calls). `--compare DIR`: the same calls through another
checkout's hook (e.g. a `git worktree` of the previous release), against the same daemon; `--daemon-checkout DIR`: the
daemon runs that checkout (run the bench once per checkout, alternating, to A/B the daemon's work).
Then without a daemon: SessionStart calls, and how many printed a digest, and the slowest that did
(the rule: a digest within 300 ms of the process's start, or nothing).
`--workdir DIR` keeps the generated journal and imported home there and reuses them (1M events take
minutes to generate and import); hooks add their few events to it.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
PROMPTS = ["why does the retry budget run out", "how do we deploy the index", "fix the flaky cache test",
           "what did we decide about the session token", "where is the workspace build configured"]
SCRIPT = "#!{python}\nimport sys\nfrom urchin.__main__ import entry\nif __name__ == '__main__':\n" \
         "    sys.exit(entry())\n"   # what pip writes for `urchin = "urchin.__main__:entry"`


RUN = f"{os.getpid():x}{time.time_ns() % 1_000_000:x}"   # sessions new to each run: every call is stored
# (a re-run's calls would otherwise be duplicates, stored by none, and its prompts silent: given before)


def _payload(kind: str, n: int) -> bytes:
    base = {"session_id": f"bench-{kind}-{RUN}-{n}", "transcript_path": "/nonexistent.jsonl",
            "cwd": f"/nonexistent/bench/proj-{n % 12}", "permission_mode": "default"}
    if kind == "capture":
        return orjson.dumps({**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                             "tool_input": {"command": f"pytest -q tests/test_{n}.py"},
                             "tool_response": {"stdout": "ok\n" * 50, "stderr": ""}, "tool_use_id": f"toolu_{RUN}_{n}"})
    if kind == "session":
        return orjson.dumps({**base, "hook_event_name": "SessionStart", "source": "startup"})
    return orjson.dumps({**base, "hook_event_name": "UserPromptSubmit", "prompt": f"{PROMPTS[n % 5]} ({n})"})


def _venv(folder: Path, checkout: Path) -> Path:
    """A venv whose `urchin` script runs `checkout` with this interpreter's dependencies, no .pth hook."""
    if not (folder / "bin" / "python").exists():
        subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
                        str(folder)], check=True)
    site = Path(subprocess.run([str(folder / "bin" / "python"), "-c", "import sysconfig; print("
                                "sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    (site / "urchin-bench.pth").write_text(f"{checkout}\n{sysconfig.get_paths()['purelib']}\n")
    script = folder / "bin" / "urchin"
    script.write_text(SCRIPT.format(python=folder / "bin" / "python"))
    script.chmod(0o755)
    compileall.compile_dir(str(checkout / "urchin"), quiet=1)
    return script


CPU: dict[str, list[float]] = {}   # the hook process's own CPU (user + system), by row: robust to load
DAEMON_CPU: dict[str, list[float]] = {}   # the daemon's CPU during each call (every thread), by row
DAEMON: list[int] = []                    # the daemon's pid while it runs


def _daemon_cpu_ms() -> float:
    """The daemon's CPU so far (user + system, every thread, ended ones too), in clock ticks: 10 ms
    steps, so a row's figure is the mean over its calls (threads of a pool end: a sum over the
    live threads' schedstat goes backwards)."""
    if not DAEMON:
        return 0.0
    try:
        fields = Path(f"/proc/{DAEMON[0]}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _run(cmd: list[str], env: dict[str, str], payload: bytes | None, row: str | None = None) -> tuple[float, bytes]:
    daemon_before = _daemon_cpu_ms()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(payload or b"")      # a hook's payload fits the pipe: no deadlock with its stdout
    proc.stdin.close()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)   # reaped here, so its rusage is the hook's own
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = (time.perf_counter() - started) * 1000
    proc.stdout.close()
    if row is not None:
        CPU.setdefault(row, []).append((usage.ru_utime + usage.ru_stime) * 1000)
        if DAEMON:
            DAEMON_CPU.setdefault(row, []).append(_daemon_cpu_ms() - daemon_before)
    return wall, out


def _stats(name: str, times: list[float], printed: int | None = None) -> None:
    times = sorted(times)
    p95 = times[max(0, int(round(len(times) * 0.95)) - 1)]
    tail = "" if printed is None else f", {printed} printed context"
    cpu = f"{statistics.median(CPU[name]):6.1f}" if CPU.get(name) else "     -"
    served = DAEMON_CPU.get(name)
    daemon = f"{statistics.mean(served):6.1f}" if served else "     -"
    print(f"| {name:44s} | {statistics.median(times):6.1f} | {p95:6.1f} | {cpu} | {daemon} | "
          f"{len(times)} calls{tail} |")


def _home(work: Path, events: int, env: dict[str, str]) -> Path:
    home = work / "home"
    if (home / "journal" / "events.jsonl").exists():
        return home
    journal = work / "journal.jsonl"
    subprocess.run([sys.executable, str(REPO / "bench" / "gen_journal.py"), str(events), "--out", str(journal)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "urchin", "import", str(journal)], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    journal.unlink()
    return home


def _with_daemon(env: dict[str, str], home: Path, hooks: dict[str, list[str]], floors: dict[str, list[str]],
                 calls: int, checkout: Path, warm: int = 3) -> None:
    from urchin.api_tokens import ensure_hook_token

    ensure_hook_token(home)
    daemon_env = {**env, "PYTHONPATH": str(checkout)}
    # cwd: `python -m` puts it first on sys.path, before PYTHONPATH
    daemon = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--no-index", "--port", "0"], env=daemon_env,
                              cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not (home / "daemon.json").exists():
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit("the daemon did not start")
            time.sleep(0.1)
        DAEMON[:] = [daemon.pid]
        started = time.perf_counter()
        for n in range(warm):   # warm: the daemon builds its views on first use (and keeps what a digest read)
            for cmd in hooks.values():
                _run(cmd, env, _payload("prompt", 10_000 + n))
                _run(cmd, env, _payload("session", 10_000 + n))
        print(f"daemon warm after {time.perf_counter() - started:.1f} s\n")
        kinds = {"capture": "capture only (PostToolUse)", "session": "capture + recall (SessionStart)",
                 "prompt": "capture + recall (UserPromptSubmit)"}
        times: dict[str, list[float]] = {}
        printed: dict[str, int] = {}
        for n in range(calls):      # everything interleaved: machine noise hits all alike
            for name, cmd in floors.items():
                times.setdefault(name, []).append(_run(cmd, env, b"", name)[0])
            for label, cmd in hooks.items():
                for kind in kinds:
                    key = f"{kinds[kind]}, {label}"
                    ms, out = _run(cmd, env, _payload(kind, n), key)
                    times.setdefault(key, []).append(ms)
                    printed[key] = printed.get(key, 0) + bool(out)
        print("| with a daemon running                        | p50 ms | p95 ms | hook CPU p50 ms "
              "| daemon CPU mean ms | |\n|---|---:|---:|---:|---:|---|")
        for key, values in times.items():
            _stats(key, values, printed.get(key))
    finally:
        DAEMON.clear()
        daemon.terminate()
        daemon.wait(60)


def _without_daemon(env: dict[str, str], hook: list[str], calls: int) -> None:
    alone: list[float] = []
    shown: list[float] = []
    for n in range(calls):
        ms, out = _run(hook, env, _payload("session", 20_000 + n), "capture + recall (SessionStart), no daemon")
        alone.append(ms)
        if out:
            shown.append(ms)
    print("\n| no daemon                                    | p50 ms | p95 ms | hook CPU p50 ms | |\n"
          "|---|---:|---:|---:|---|")
    _stats("capture + recall (SessionStart), no daemon", alone, len(shown))
    if shown:
        print(f"slowest call that printed a digest: {max(shown):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--workdir", type=Path, help="keep (and reuse) the journal and home here")
    parser.add_argument("--compare", type=Path, help="another checkout whose hook runs beside this one's")
    parser.add_argument("--daemon-checkout", type=Path, default=REPO,
                        help="the checkout the daemon runs (default this one; A/B the daemon's work with another)")
    parser.add_argument("--no-daemonless", action="store_true", help="skip the calls without a daemon")
    parser.add_argument("--warm", type=int, default=3,
                        help="warm-up rounds (a prompt and a session start each, workspace n %% 12); 12: every "
                             "workspace's first digest after the daemon's start is not among the timed calls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="urchin-hook-recall-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "URCHIN_HOME": str(work / "home"), "PYTHONPATH": str(REPO)}
        env.pop("URCHIN_NO_DAEMON", None)
        home = _home(work, args.events, env)
        lines = (home / "journal" / "events.jsonl").read_bytes().count(b"\n")
        print(f"{lines} events in the journal; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
        hooks = {"this checkout": [str(_venv(Path(tmp) / "venv", REPO)), "hook", "claude"]}
        if args.compare:
            hooks[f"{args.compare.name}"] = [str(_venv(Path(tmp) / "venv-compare", args.compare.resolve())),
                                             "hook", "claude"]
        hook_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}   # the venvs' .pth say where Urchin is
        floors = {"python -c pass (the floor: the hook's venv)": [str(Path(tmp) / "venv" / "bin" / "python"), "-c",
                                                                  "pass"],
                  "python -c pass (this venv, editable install)": [sys.executable, "-c", "pass"]}
        print(f"daemon: {args.daemon_checkout.resolve()}")
        _with_daemon(hook_env, home, hooks, floors, args.calls, args.daemon_checkout.resolve(), args.warm)
        if not args.no_daemonless:
            _without_daemon(hook_env, hooks["this checkout"], max(10, args.calls // 2))


if __name__ == "__main__":
    main()
