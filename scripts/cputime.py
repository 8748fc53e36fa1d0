"""Run a command and print the CPU (user+sys) of everything it started, daemonized processes included.

`python scripts/cputime.py make test`: `time` misses what outlives its parent (the embedded PostgreSQL,
its watchdogs, the test embedder); here this process is a child subreaper, so those are reparented to
it and reaped, and their time counted. Processes still running when the command ends are named, and
their time so far added. Linux only. Exits with the command's status.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def _children() -> list[int]:
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        found.extend(int(pid) for pid in task.read_text().split())
    return found


def _live_cpu(pid: int) -> tuple[float, str]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return 0.0, ""
    fields = stat.rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK"), cmd[:100]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("cputime: cannot become a child subreaper", file=sys.stderr)
    started = time.monotonic()
    status = subprocess.call(argv)
    wall = time.monotonic() - started
    deadline = time.monotonic() + 30        # orphans stopping after the command (a server's shutdown)
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.2)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    left = [(pid, *_live_cpu(pid)) for pid in _children()]
    cpu = usage.ru_utime + usage.ru_stime + sum(c for _, c, _ in left)
    for pid, seconds, cmd in left:
        print(f"cputime: still running: {pid} ({seconds:.1f} s) {cmd}", file=sys.stderr)
    print(f"cputime: {cpu:.1f} s CPU (user {usage.ru_utime:.1f}, sys {usage.ru_stime:.1f}"
          f"{', still running ' + format(sum(c for _, c, _ in left), '.1f') if left else ''}), "
          f"{wall:.1f} s wall, exit {status}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
