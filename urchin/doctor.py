"""`urchin doctor`'s checks: journal, permissions, torn or invalid lines, daemon, token, embedder, database,
where the embedded PostgreSQL keeps its data, and what removed homes left behind.

Each check returns a `Check` (ok, warn or fail, what it saw, and how to fix it). It sits beside the
front ends (it asks the daemon over HTTP) and changes nothing it inspects; only `fix()` (`--fix`)
removes the embedded PostgreSQL data of homes that no longer exist.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from urchin.config import Settings
from urchin.daemon.client import daemon_alive
from urchin.dsn import is_url, mask_dsn, scrub
from urchin.errors import UrchinError
from urchin.journal import Journal
from urchin.words import plural

__all__ = ["Check", "run_checks", "CHECKS", "fix"]

Level = Literal["ok", "warn", "fail"]
NET_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    level: Level
    detail: str
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"check": self.name, "level": self.level, "detail": self.detail}
        if self.hint:
            out["hint"] = self.hint
        return out


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def check_home(settings: Settings) -> Check:
    home = settings.home
    if not home.exists():
        return Check("home", "warn", f"{home} does not exist yet", "it is created (0700) by the first write")
    mode = _mode(home)
    if mode & 0o077:
        return Check("home", "warn", f"{home} is {mode:04o}: others can look inside", f"chmod 700 {home}")
    return Check("home", "ok", f"{home} ({mode:04o})")


def check_config_keys(settings: Settings) -> Check | None:
    """Keys of config.toml that no setting reads (a typo, a removed setting): named, with the nearest known."""
    unknown = settings.unknown_keys()
    if not unknown:
        return None if not settings.config_path.exists() else Check("config-keys", "ok", f"{settings.config_path}")
    return Check("config-keys", "warn", f"{settings.config_path}: " + "; ".join(unknown),
                 "fix or remove these keys (README: Configuration lists every key)")


def check_journal(settings: Settings) -> Check:
    path = settings.journal_path
    if not path.exists():
        writable = os.access(path.parent if path.parent.exists() else settings.home.parent, os.W_OK)
        if not writable:
            return Check("journal", "fail", f"{path} does not exist and its folder is not writable",
                         f"check the permissions of {path.parent}")
        return Check("journal", "ok", f"{path} does not exist yet (the first write creates it)")
    problems = []
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        problems.append(f"cannot read: {exc.strerror}")
    if not os.access(path, os.W_OK):
        problems.append("cannot write")
    if problems:
        return Check("journal", "fail", f"{path}: {', '.join(problems)}", f"chown $USER {path} && chmod 600 {path}")
    mode = _mode(path)
    if mode & 0o077:
        return Check("journal", "warn", f"{path} is {mode:04o}: other users can read your events",
                     f"chmod 600 {path}")
    return Check("journal", "ok", f"{path} ({path.stat().st_size:,} bytes, {mode:04o})")


def check_lines(settings: Settings) -> Check:
    journal = Journal(settings.journal_path, settings.durability)
    size = journal.size()
    if size == 0:
        return Check("lines", "ok", "no events yet")
    try:
        stats = journal.stats()
        with journal.path.open("rb") as handle:
            handle.seek(size - 1)
            torn_tail = handle.read(1) != b"\n"
    except (OSError, UrchinError) as exc:
        return Check("lines", "fail", f"cannot scan the journal: {exc}", "see the journal check above")
    notes = []
    if torn_tail:
        notes.append("the last line is incomplete (a write was cut short)")
    if stats.invalid_lines:
        notes.append(f"{plural(stats.invalid_lines, 'line is', 'lines are')} not events (skipped by every reader)")
    detail = f"{stats.events:,} events"
    if stats.torn_records:   # repaired already: a write a crash cut short, never acknowledged, kept aside
        detail += (f"; {plural(stats.torn_records, 'torn tail', 'torn tails')} left by a crash moved aside to "
                   f"{journal.torn_path.name} (never acknowledged: nothing lost)")
    if not notes:
        return Check("lines", "ok", detail)
    return Check("lines", "warn", f"{detail}; " + "; ".join(notes),
                 "nothing is lost: the next write moves a torn tail to " + journal.torn_path.name
                 + "; invalid lines can be inspected with `grep -vn '^{' " + str(journal.path) + "`")


def check_token(settings: Settings) -> Check:
    if settings.intake_token:
        return Check("token", "ok", "from URCHIN_INTAKE_TOKEN")
    path = settings.token_path
    if not path.exists():
        return Check("token", "ok", f"{path} does not exist yet (`urchin serve` creates it, 0600)")
    mode = _mode(path)
    if mode & 0o077:
        return Check("token", "fail", f"{path} is {mode:04o}: other users can read the API token",
                     f"chmod 600 {path} (and consider deleting it so the next start makes a new one)")
    if not path.read_text("utf-8", "replace").strip():
        return Check("token", "fail", f"{path} is empty", f"rm {path} and restart `urchin serve`")
    return Check("token", "ok", f"{path} ({mode:04o})")


def check_daemon(settings: Settings) -> Check:
    from urchin.daemon.client import find_daemon

    if not settings.daemon_file.exists():
        return Check("daemon", "ok", "not running (commands work in-process)", "start it with `urchin serve`")
    info = find_daemon(settings)
    if info is None:
        if daemon_alive(settings):
            return Check("daemon", "fail", f"{settings.daemon_file} is unreadable but a daemon holds the lock",
                         "restart it: systemctl --user restart urchin (or kill the `urchin serve` process)")
        return Check("daemon", "warn", f"{settings.daemon_file} is stale (no daemon holds the lock)",
                     f"remove it (rm {settings.daemon_file}) or start the daemon: urchin serve")
    from urchin.daemon.client import RemoteMemory

    remote = RemoteMemory(settings, info, timeout_s=NET_TIMEOUT_S)
    try:
        remote.recent(limit=1)  # needs the token: proves reachability and auth at once
    except UrchinError as exc:
        return Check("daemon", "fail", f"pid {info.pid} at {info.address} does not answer properly: {exc}",
                     "check the token (URCHIN_INTAKE_TOKEN vs $URCHIN_HOME/token) and the daemon's log")
    finally:
        remote.close()
    if remote.fell_back:
        return Check("daemon", "fail", f"pid {info.pid} at {info.address} is not reachable",
                     "see its log (journalctl --user -u urchin) and restart it")
    return Check("daemon", "ok", f"pid {info.pid} at {info.address} (version {info.version or '?'})")


def check_config(settings: Settings) -> Check:
    """The redaction rules in force (the running daemon's, else config.toml's), and config.toml keys
    changed since the daemon started that it applies only after a restart."""
    from urchin.redact import Redactor

    try:
        local = Redactor.from_config(settings.section("redact")).describe()
    except UrchinError as exc:
        return Check("config", "fail", f"[redact] in {settings.config_path}: {exc}", "fix the rule; until then the "
                     "daemon keeps the rules it has")
    state = _daemon_config(settings)
    if state is None:
        return Check("config", "ok", f"redaction: {local}")
    running = f"redaction (daemon): {state.get('redaction') or '?'}"
    if state.get("configReloadError"):
        return Check("config", "fail", f"{running}; config.toml was not reloaded: {state['configReloadError']}",
                     "fix config.toml: the daemon reads it again when it changes")
    if state.get("configRestartNeeded"):
        return Check("config", "warn", f"{running}; changed since the daemon started, not applied until it restarts: "
                     f"{', '.join(state['configRestartNeeded'])}", "restart it: systemctl --user restart urchin "
                     "(or stop `urchin serve` and start it again); [redact] and [recall] apply without one")
    return Check("config", "ok", running)


def _daemon_config(settings: Settings) -> dict[str, Any] | None:
    """What the running daemon reports of its config (None: no daemon, or one too old to say)."""
    from urchin.daemon.client import RemoteMemory, find_daemon

    info = find_daemon(settings) if settings.daemon_file.exists() else None
    if info is None:
        return None
    remote = RemoteMemory(settings, info, timeout_s=NET_TIMEOUT_S)
    try:
        state = remote.status().get("daemon")
    except UrchinError:
        return None
    finally:
        remote.close()
    return state if isinstance(state, dict) and "redaction" in state and not remote.fell_back else None


def check_embedder(settings: Settings) -> Check | None:
    if not settings.embedder_url:
        return None
    import httpx

    url = settings.embedder_url
    try:
        response = httpx.get(url.rstrip("/") + ("/api/tags" if settings.embedder_api == "ollama" else "/models"),
                             timeout=NET_TIMEOUT_S, trust_env=False)
    except httpx.HTTPError as exc:
        return Check("embedder", "fail", f"{url} is not reachable: {exc}",
                     "start the embedding server or fix URCHIN_EMBEDDER_URL")
    if response.status_code >= 500:
        return Check("embedder", "fail", f"{url} answered HTTP {response.status_code}", "see the embedder's log")
    return Check("embedder", "ok", f"{url} answers (HTTP {response.status_code})")


PG_MAJOR = 18   # the one PostgreSQL the tests run (contrib/team/TEAM.md states it)


def check_database(settings: Settings) -> Check | None:
    if not settings.database_url:
        return None
    url = settings.database_url
    shown = mask_dsn(url)
    try:
        from urchin.hybrid import pgdriver
    except ImportError:
        host, port = _address(url)
        try:
            socket.create_connection((host, port), NET_TIMEOUT_S).close()
        except OSError as exc:
            return Check("database", "fail", f"{shown} is not reachable: {exc}",
                         "start PostgreSQL or fix URCHIN_DATABASE_URL")
        return Check("database", "ok", f"{shown} accepts connections (install urchin-memory[postgres] to check more)")
    from urchin.hybrid.pg_roles import role_device, wrong_device

    try:
        with pgdriver.connect(url, connect_timeout=int(NET_TIMEOUT_S)) as conn:
            version = conn.execute("show server_version").fetchone()
            fed = role_device(conn)
    except pgdriver.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Check("database", "fail", f"{shown}: {scrub(first, url)}",
                     "start PostgreSQL, or fix URCHIN_DATABASE_URL (user, password, database name)")
    problem = wrong_device(fed, settings.device)
    if problem:
        return Check("database", "fail", f"{shown}: {problem}", "a feeder role writes only its own device's rows")
    feeds = f", feeding device {fed}" if fed else ""
    shown_version = version[0] if version else "?"
    if shown_version.split(".")[0].isdigit() and int(shown_version.split(".")[0]) < PG_MAJOR:
        return Check("database", "warn", f"{shown} (PostgreSQL {shown_version}{feeds}): Urchin is tested "
                     f"with PostgreSQL {PG_MAJOR}",
                     f"upgrade the server to PostgreSQL {PG_MAJOR} (contrib/team/TEAM.md)")
    return Check("database", "ok", f"{shown} (PostgreSQL {shown_version}{feeds})")


def check_postgres(settings: Settings) -> Check | None:
    """Where the embedded PostgreSQL's data lives, and whether its server runs."""
    if settings.database_url:
        return None
    from urchin.hybrid.pgdata import ROOT_DATA, location, postmaster_pid

    folder = location(settings.pg_dir)
    why = ""
    if folder != settings.pg_dir:
        why = (f", linked from {settings.pg_dir}: as root the server runs as the system user embedded_postgres, "
               f"which cannot enter the 0700 home, so the data lives under {ROOT_DATA}")
    if not folder.exists():
        return Check("postgres", "ok", f"embedded, not created yet; its data will live in {folder}{why}")
    pid = postmaster_pid(folder)
    state = f"running (pid {pid})" if pid else "stopped"
    return Check("postgres", "ok", f"embedded, {state}; data in {folder}{why}")


def check_orphans(settings: Settings) -> Check | None:
    """PostgreSQL data folders under ROOT_DATA whose home was removed."""
    from urchin.hybrid.pgdata import ROOT_DATA, find_orphans

    if not ROOT_DATA.is_dir():
        return None
    orphans, unknown = find_orphans()
    if not orphans and not unknown:
        return Check("orphans", "ok", f"no data left in {ROOT_DATA} by removed homes")
    parts = []
    if orphans:
        size = sum(o.size for o in orphans) / 2**20
        parts.append(f"{plural(len(orphans), 'PostgreSQL data folder', 'PostgreSQL data folders')} in {ROOT_DATA} "
                     f"belong{'s' if len(orphans) == 1 else ''} to removed homes "
                     f"({size:.0f} MiB): " + ", ".join(f"{o.folder.name} (was {o.link})" for o in orphans))
    if unknown:
        parts.append(f"{plural(len(unknown), 'folder', 'folders')} with no owner record, made by an older Urchin "
                     "and not used "
                     f"since: " + ", ".join(p.name for p in unknown))
    hints = []
    if orphans:
        hints.append("`urchin doctor --fix` removes the folders of removed homes (stopping a server left running)")
    if unknown:
        hints.append(f"a folder with no owner record can be removed by hand (rm -rf {ROOT_DATA}/<name>) once unused")
    hint = "; ".join(hints)
    return Check("orphans", "warn", "; ".join(parts), hint)


def fix(settings: Settings) -> list[str]:
    """Remove the embedded PostgreSQL data folders of removed homes (never one in use); what was done."""
    from urchin.hybrid.embedded import remove_orphans
    from urchin.hybrid.pgdata import ROOT_DATA

    if not ROOT_DATA.is_dir():
        return []
    return [f"removed {o.folder} ({o.size / 2**20:.0f} MiB): the PostgreSQL data of {o.link}, whose home is gone"
            for o in remove_orphans()]


def _address(dsn: str) -> tuple[str, int]:
    """Host and port to try a TCP connection to, without the driver (a URL's; else the defaults)."""
    if is_url(dsn):
        try:
            parts = urlsplit(dsn)
            return parts.hostname or "localhost", parts.port or 5432
        except ValueError:
            pass
    return "localhost", 5432


CHECKS: list[Callable[[Settings], Check | None]] = [
    check_home, check_config_keys, check_journal, check_lines, check_token, check_daemon, check_config, check_embedder,
    check_database,
    check_postgres, check_orphans,
]


def run_checks(settings: Settings) -> list[Check]:
    out: list[Check] = []
    for check in CHECKS:
        try:
            result = check(settings)
        except Exception as exc:  # noqa: BLE001 - a broken check is itself a finding
            result = Check(check.__name__.removeprefix("check_"), "fail", f"the check crashed: {exc!r}")
        if result is not None:
            out.append(result)
    return out
