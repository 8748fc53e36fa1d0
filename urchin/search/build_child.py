"""The child that builds the token-cosine index for another process (`cosine_build`).

    python -P -m urchin.search.build_child INDEX_DIR JOURNAL [HOME] [--parent PID]

Builds from what is saved in INDEX_DIR to the journal's end, saving as it goes
(`TokenCosineView.build`); exits at once when another builder holds the folder. At nice 10, for a
CLI's detached build (`cosine_build.spawn`); with `--parent` (a daemon's, `cosine_build.build_beside`)
at the lowest priority, ending as soon as PID is no longer its parent, and without the learned
associations: the daemon learns them after it swapped the index in, in a child of their own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from urchin.journal import Journal
from urchin.processes import end_with_parent, lowest_priority
from urchin.search.cosine_build import NICENESS, building
from urchin.search.cosine_extract import bound_heap
from urchin.search.semantic import TokenCosineView

__all__ = ["main"]

_USAGE = "usage: python -m urchin.search.build_child INDEX_DIR JOURNAL [HOME] [--parent PID]"


def main(argv: list[str]) -> int:
    parent = None
    if len(argv) >= 2 and argv[-2] == "--parent":
        if not argv[-1].isdigit():
            print(f"{_USAGE}\n--parent: a process id (digits)", file=sys.stderr)
            return 2
        parent, argv = int(argv[-1]), argv[:-2]
    if parent is None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, NICENESS)
    else:
        lowest_priority()
        end_with_parent(parent)
    if len(argv) not in (2, 3):
        print(_USAGE, file=sys.stderr)
        return 2
    if parent is not None:
        bound_heap()    # a daemon's child, beside it; not a CLI's, which learns at its end (many large temporaries)
    index_dir, path = Path(argv[0]), Path(argv[1])
    home = Path(argv[2]) if len(argv) == 3 else None
    proof = None
    if home is not None:
        from urchin.config import Settings
        from urchin.proof import LineProof

        proof = LineProof(Settings.resolve(str(home)))
    with building(index_dir, wait=False) as held:
        if not held:
            return 0      # another builder got there first
    view = TokenCosineView(Journal(path, proof=proof), index_dir, home=home)
    view.build(learn=parent is None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
