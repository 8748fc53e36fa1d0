"""Keep the substring block index caught up from a second process while a bulk writer runs.

`urchin import` is one busy core; indexing what it writes on the other core means the first
search afterwards pays nothing, and the import pays only the last few blocks. If the helper
process cannot run, the writer catches up itself on exit: the answer is the same, only slower.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import orjson

from urchin.journal import Journal
from urchin.search.blockindex import CatchUp
from urchin.search.substring import SubstringSearcher

__all__ = ["BackgroundCatchUp"]


class BackgroundCatchUp:
    """`with BackgroundCatchUp(searcher): <append lots>`; then `.report` (totals) and `.waited` (s).

    `waited` is what the writer paid at the end: the helper's last catch-up, or the whole build
    when the helper could not start.
    """

    def __init__(self, searcher: SubstringSearcher, interval_s: float = 0.25) -> None:
        self.searcher = searcher
        self.interval_s = interval_s
        self.report = CatchUp(0, 0, 0, False, 0.0)
        self.waited = 0.0
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BackgroundCatchUp:
        # -P and PYTHONPATH: the helper runs this urchin, whatever the current folder holds
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH"))
                                                            if p)}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "urchin.search.indexer", str(self.searcher.journal.path),
                 str(self.searcher.index.dir), str(self.interval_s)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        except OSError:
            self._proc = None
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        started = time.perf_counter()
        totals = CatchUp(0, 0, 0, False, 0.0)
        if self._proc is not None:
            out, _ = self._proc.communicate()  # closing stdin tells the helper the writer is done
            if self._proc.returncode == 0 and out.strip():
                totals = CatchUp(*orjson.loads(out.splitlines()[-1]))
        if kind is None:
            last = self.searcher.catch_up()  # whatever the helper missed, or everything if it failed
            totals = _add(totals, last)
        self.waited = time.perf_counter() - started
        self.report = totals


def _add(a: CatchUp, b: CatchUp) -> CatchUp:
    return CatchUp(a.bytes + b.bytes, a.blocks + b.blocks, a.events + b.events, a.rebuilt or b.rebuilt,
                   a.seconds + b.seconds)


def _follow(journal_path: str, index_dir: str, interval_s: float) -> int:
    """The helper: catch up, wait for more (or for stdin to close), catch up again; print totals."""
    searcher = SubstringSearcher(Journal(Path(journal_path)), Path(index_dir))
    totals = CatchUp(0, 0, 0, False, 0.0)
    stdin = sys.stdin.fileno()
    while True:
        totals = _add(totals, searcher.catch_up())
        ready, _, _ = select.select([stdin], [], [], interval_s)
        if ready and not os.read(stdin, 4096):
            break
    totals = _add(totals, searcher.catch_up())
    sys.stdout.write(orjson.dumps([totals.bytes, totals.blocks, totals.events, totals.rebuilt,
                                   totals.seconds]).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_follow(sys.argv[1], sys.argv[2], float(sys.argv[3])))
