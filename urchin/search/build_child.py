"""The child a process on its own starts to build the token-cosine index (`cosine_build.spawn`).

    python -P -m urchin.search.build_child INDEX_DIR JOURNAL [HOME]

Builds from what is saved in INDEX_DIR to the journal's end at nice 10, saving as it goes
(`TokenCosineView.build`); exits at once when another builder holds the folder.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from urchin.journal import Journal
from urchin.search.cosine_build import NICENESS, building
from urchin.search.semantic import TokenCosineView

__all__ = ["main"]


def main(argv: list[str]) -> int:
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, NICENESS)
    if len(argv) not in (2, 3):
        print("usage: python -m urchin.search.build_child INDEX_DIR JOURNAL [HOME]", file=sys.stderr)
        return 2
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
    view.build()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
