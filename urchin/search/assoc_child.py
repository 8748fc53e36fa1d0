"""The learned associations of a saved token-cosine index, built in a process of their own.

The build (`assoc.build`: a randomised SVD over up to 50,000 events) takes seconds of CPU (a growing
journal rebuilds at each half again of its size); in the daemon's follower thread it stalled the
views' updates for that long and competed with queries and writes at the daemon's priority. The daemon's view runs
`python -P -m urchin.search.assoc_child INDEX_DIR JOURNAL OUT PARENT` at the lowest priority instead: it
loads the index saved in INDEX_DIR for the journal at JOURNAL, builds the model and writes it to OUT
(0600, atomically); the view installs it beside the index if that index still stands
(`TokenCosineView._learn_once`). The child ends as soon as PARENT (the daemon's pid) is not its parent,
even when the daemon died before the child got this far.

It reads only what the model is made of (`assoc.learn`): the vocabulary and `df`, the session links
of the rows, and the postings of the segments that hold the newest rows, all from the saved files'
read-only maps; not a whole index (its vocabulary dict, running maxima, session maps).
"""

from __future__ import annotations

import sys
from pathlib import Path

from urchin.processes import end_with_parent, lowest_priority
from urchin.search import assoc, cosine_store
from urchin.search.postings import Segment, walk

__all__ = ["main"]


def main(argv: list[str]) -> int:
    lowest_priority()
    if len(argv) != 4 or not argv[3].isdigit():
        print("usage: python -m urchin.search.assoc_child INDEX_DIR JOURNAL OUT PARENT_PID", file=sys.stderr)
        return 2
    end_with_parent(int(argv[3]))
    index_dir, journal, out = (Path(arg) for arg in argv[:3])
    try:
        saved = cosine_store.load(index_dir, journal)
    except cosine_store.StoreError as exc:
        print(f"no saved index to learn from: {exc}", file=sys.stderr)
        return 1
    cosine_store.release(saved)     # what loading's checks read leaves this process: the model reads a part
    state, arrays = saved.state, saved.state.arrays
    segments = [Segment(*parts) for parts in state.segments]
    pending = (arrays["pending_terms"], arrays["pending_rows"], arrays["pending_tf"])
    rows = int(state.meta["rows"])
    assoc.learn(state.vocab, arrays["df"], arrays["prev"][:rows], arrays["next"][:rows],
                lambda since: walk(segments, pending, since=since)).save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
