"""The learned associations of a saved token-cosine index, built in a process of their own.

The build (`assoc.build`: a randomised SVD over up to 50,000 events) takes seconds of CPU, most of it
in numpy calls that hold the GIL; in the daemon's process it made every query and write wait behind
it (a growing journal rebuilds at each half again of its size). The daemon's view runs
`python -P -m urchin.search.learn INDEX_DIR JOURNAL OUT` at the lowest priority instead: it loads the
index saved in INDEX_DIR for the journal at JOURNAL, builds the model and writes it to OUT (0600,
atomically); the view installs it beside the index if that index still stands
(`TokenCosineView._learn`). The child ends with its parent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from urchin.children import end_with_parent, lowest_priority
from urchin.search import assoc, cosine_store
from urchin.search.cosine import TokenCosineIndex

__all__ = ["main"]


def main(argv: list[str]) -> int:
    lowest_priority()
    end_with_parent(os.getppid())
    if len(argv) != 3:
        print("usage: python -m urchin.search.learn INDEX_DIR JOURNAL OUT", file=sys.stderr)
        return 2
    index_dir, journal, out = (Path(arg) for arg in argv)
    try:
        saved = cosine_store.load(index_dir, journal)
    except cosine_store.StoreError as exc:
        print(f"no saved index to learn from: {exc}", file=sys.stderr)
        return 1
    assoc.build(TokenCosineIndex.from_state(saved.state)).save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
