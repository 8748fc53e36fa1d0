"""The embedded PostgreSQL's watchdog: `python -P -m urchin.hybrid.pgwatch FOLDER OWNER_PID`.

Each process that holds the server starts one (see `embedded`). It waits for its owner to die the
way the daemon's children wait for the daemon (`urchin.processes`), then releases the owner's hold:
a CLI killed by SIGKILL (`urchin index --rebuild`, `--follow`) runs no clean-up of its own, and its
server must not run on for minutes until the next command.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from urchin.processes import wait_for_parent

__all__ = ["main"]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m urchin.hybrid.pgwatch FOLDER OWNER_PID", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGHUP):   # a terminal's signals are the owner's business, not ours
        signal.signal(sig, signal.SIG_IGN)
    folder, owner = Path(argv[0]), int(argv[1])
    wait_for_parent(owner)
    from urchin.hybrid.embedded import release_dead  # loaded once needed: the watch itself costs nothing

    try:
        release_dead(folder, owner)
    except OSError:    # the folder went with its home meanwhile: nothing left to stop
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
