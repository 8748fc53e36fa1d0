"""The embedded PostgreSQL's holder bookkeeping leaves nothing behind for a folder removed with its home."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from urchin.hybrid import embedded
from urchin.hybrid.pgdata import folder_lock


def test_a_watchdog_finishing_after_its_folder_was_removed_writes_no_holders_back(tmp_path: Path) -> None:
    folder = tmp_path / "0123456789abcdef"
    folder.mkdir()
    (tmp_path / "0123456789abcdef.holders").write_text("[]")
    dead = subprocess.Popen(["true"])
    dead.wait()
    with folder_lock(folder):           # a removal holds the lock while the watchdog checks the folder
        watchdog = threading.Thread(target=embedded.release_dead, args=(folder, dead.pid))
        watchdog.start()
        time.sleep(0.5)                 # it passes its first look at the folder and waits for the lock
        folder.rmdir()
        (tmp_path / "0123456789abcdef.holders").unlink()
    watchdog.join(10)
    assert not watchdog.is_alive()
    assert not (tmp_path / "0123456789abcdef.holders").exists()
