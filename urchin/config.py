"""Paths and settings, resolved once: explicit argument > environment > config file > default.

`Settings.resolve()` is the only place that reads `os.environ` or the config file
(`$URCHIN_HOME/config.toml`); everything else receives the frozen `Settings` it returns.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import math
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from urchin.config_keys import SCHEMA, Table, unknown_keys
from urchin.errors import ConfigError, QueryError, ValidationError
from urchin.event import HARD_LIMIT_BYTES, SOFT_CAP_BYTES, check_name

# re-exported for the modules of issue 37's work (search/semantic.py, cosine_store.py, vectors.py) until
# they import urchin.fileio themselves; everything else does already
from urchin.fileio import ensure_private_dir, write_private
from urchin.home import home_dir
from urchin.value_checks import check_number

__all__ = ["Settings", "Durability", "DEFAULT_PORT", "ensure_private_dir", "write_private", "resolve_home",
           "runtime_dir", "use_runtime_dir", "LIVE_SECTIONS", "config_stamp", "read_config", "changed_keys"]

Durability = Literal["always", "batch", "never"]
DEFAULT_PORT = 18799
_DURABILITY = ("always", "batch", "never")
_EMBEDDER_APIS = ("openai", "ollama")
# config.toml tables a running daemon reads again when the file changes (or on SIGHUP): they apply from
# the next write or query; every other key is read once, at start-up, and needs a restart.
LIVE_SECTIONS = ("redact", "recall")


@contextlib.contextmanager
def exclusive_lock(path: Path, wait: bool = True) -> Iterator[bool]:
    """An exclusive flock on the file `path` (made 0600), held while the block runs; yields True once
    held, or with `wait=False` False at once when another holds it. Not inherited by children."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Settings:
    home: Path
    journal_path: Path
    durability: Durability = "always"
    soft_cap_bytes: int = SOFT_CAP_BYTES
    embedder_url: str | None = None
    embedder_model: str | None = None
    embedder_api: str | None = None
    embedder_timeout_s: float = 10.0
    database_url: str | None = None
    intake_token: str | None = None
    account: str = ""
    device: str = ""
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    use_daemon: bool = True
    notify_socket: str | None = None  # systemd's $NOTIFY_SOCKET (Type=notify), only ever from the environment
    config: Mapping[str, Any] = field(default_factory=dict)
    # Where the collectors look (tests point these at temporary folders).
    user_home: Path = field(default_factory=Path.home)
    claude_dir: Path | None = None
    copilot_dir: Path | None = None
    gemini_dir: Path | None = None
    codex_dir: Path | None = None
    shell_histories: tuple[Path, ...] = ()
    git_roots: tuple[Path, ...] = ()

    # ---- derived paths -----------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.home / "config.toml"

    @property
    def token_path(self) -> Path:
        return self.home / "token"

    @property
    def daemon_file(self) -> Path:
        return self.home / "daemon.json"

    @property
    def ephemeral_path(self) -> Path:
        return self.home / "ephemeral"

    @property
    def vectors_dir(self) -> Path:
        return self.home / "vectors"

    @property
    def index_dir(self) -> Path:
        return self.home / "index"

    @property
    def pg_dir(self) -> Path:
        return self.home / "pg"

    @property
    def collectors_dir(self) -> Path:
        return self.home / "collectors"

    @property
    def hooks_log(self) -> Path:
        return self.home / "hooks.log"

    def __post_init__(self) -> None:
        if not isinstance(self.config, Table):     # every read of it is checked against config_keys.SCHEMA
            object.__setattr__(self, "config", Table(self.config))

    def unknown_keys(self) -> list[str]:
        """What config.toml holds that no setting reads, each with the nearest known key (doctor, start-up)."""
        config = self.config.raw if isinstance(self.config, Table) else self.config
        return [unknown.describe() for unknown in unknown_keys(config)]

    def section(self, name: str) -> Mapping[str, Any]:
        """The table `[name]` (empty when absent or not a table); its reads are checked like the rest."""
        value = self.config.get(name, {})
        return value if isinstance(value, Table) else Table({}, SCHEMA[name], f"{name}.")

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    # ---- resolution ----------------------------------------------------------------------------
    @classmethod
    def resolve(
        cls,
        home: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Build the settings for one process run. Raises `ConfigError` naming the bad setting."""
        env = os.environ if env is None else env
        home_path = resolve_home(home, env)
        config = Table(_read_config(home_path / "config.toml"))
        core = config.get("urchin", {}) if isinstance(config.get("urchin"), Mapping) else {}
        identity = config.get("identity", {}) if isinstance(config.get("identity"), Mapping) else {}

        def pick(env_name: str, key: str, default: Any = None, table: Mapping[str, Any] = core,
                 table_name: str = "urchin") -> tuple[Any, str]:
            """(value, the name an error about it should give: the variable or the config key)."""
            if env.get(env_name):
                return env[env_name], env_name
            if key in table:
                return table[key], f"{table_name}.{key} in {home_path / 'config.toml'}"
            return default, env_name

        journal = _text(*pick("URCHIN_EVENT_JOURNAL_PATH", "journal_path"))
        values: dict[str, Any] = dict(
            home=home_path,
            journal_path=Path(journal or home_path / "journal" / "events.jsonl").expanduser().absolute(),
            durability=_choice(*pick("URCHIN_DURABILITY", "durability", "always"), _DURABILITY) or "always",
            soft_cap_bytes=_int(*pick("URCHIN_SOFT_CAP_BYTES", "soft_cap_bytes", SOFT_CAP_BYTES), 1024,
                                HARD_LIMIT_BYTES),
            embedder_url=_text(*pick("URCHIN_EMBEDDER_URL", "embedder_url")),
            embedder_model=_text(*pick("URCHIN_EMBEDDER_MODEL", "embedder_model")),
            embedder_api=_choice(*pick("URCHIN_EMBEDDER_API", "embedder_api"), _EMBEDDER_APIS),
            embedder_timeout_s=_float(*pick("URCHIN_EMBEDDER_TIMEOUT", "embedder_timeout_s", 10.0), 3600.0),
            database_url=_text(*pick("URCHIN_DATABASE_URL", "database_url")),
            intake_token=_text(*pick("URCHIN_INTAKE_TOKEN", "intake_token")),
            account=_text(*pick("URCHIN_ACCOUNT_ID", "account", None, identity, "identity")) or _user_name(),
            device=_text(*pick("URCHIN_DEVICE_ID", "device", None, identity, "identity")) or _host_name(),
            host=_text(*pick("URCHIN_HOST", "host", "127.0.0.1")) or "127.0.0.1",
            port=_int(*pick("URCHIN_PORT", "port", DEFAULT_PORT), 0, 65535),
            use_daemon=not _flag(*pick("URCHIN_NO_DAEMON", "no_daemon", False)),
            notify_socket=env.get("NOTIFY_SOCKET") or None,
            config=config,
        )
        values.update(_collector_paths(env, config))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _collector_paths(env: Mapping[str, str], config: Mapping[str, Any]) -> dict[str, Any]:
    """Collector folders: URCHIN_<AGENT>_DIR > the agent's own variable > [collectors] > ~/.<agent>."""
    raw_table = config.get("collectors")
    table: Mapping[str, Any] = raw_table if isinstance(raw_table, Mapping) else {}
    user_home = Path(env.get("URCHIN_USER_HOME") or env.get("HOME") or Path.home()).expanduser()

    def folder(ours: str, theirs: str | None, key: str, default: str) -> Path:
        value = env.get(ours) or (env.get(theirs) if theirs else None) or table.get(key) or user_home / default
        return Path(str(value)).expanduser().absolute()

    def paths(ours: str, sub: str, key: str, default: list[Path]) -> tuple[Path, ...]:
        if env.get(ours) is not None:
            items: list[Any] = [p for p in env[ours].split(os.pathsep) if p]
        else:
            raw_section = table.get(sub)
            section: Mapping[str, Any] = raw_section if isinstance(raw_section, Mapping) else {}
            raw = section.get(key, default)
            if not isinstance(raw, list) or not all(isinstance(p, (str, Path)) for p in raw):
                raise ConfigError(f"collectors.{sub}.{key}: must be a list of paths")
            items = raw
        return tuple(Path(str(p)).expanduser().absolute() for p in items)

    fish = Path(env.get("XDG_DATA_HOME") or user_home / ".local" / "share") / "fish" / "fish_history"
    return dict(
        user_home=user_home.absolute(),
        claude_dir=folder("URCHIN_CLAUDE_DIR", "CLAUDE_CONFIG_DIR", "claude_dir", ".claude"),
        copilot_dir=folder("URCHIN_COPILOT_DIR", "COPILOT_HOME", "copilot_dir", ".copilot"),
        gemini_dir=folder("URCHIN_GEMINI_DIR", None, "gemini_dir", ".gemini"),
        codex_dir=folder("URCHIN_CODEX_DIR", "CODEX_HOME", "codex_dir", ".codex"),
        shell_histories=paths("URCHIN_SHELL_HISTORY", "shell", "histories",
                              [user_home / ".bash_history", user_home / ".zsh_history", fish]),
        git_roots=paths("URCHIN_GIT_ROOTS", "git", "roots", []),
    )


def resolve_home(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Just the home folder (argument > URCHIN_HOME > platform default): where a hook logs even
    when the rest of the settings cannot be resolved. The rule itself is `urchin.home`'s, which a
    hook's fast path shares."""
    return Path(home_dir(home, env))


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where per-user runtime files (locks, sockets) go: `$XDG_RUNTIME_DIR` when it is a private
    folder of ours, else `/run/user/<uid>` when it is, else `<tmp>/urchin-runtime-<uid>` (created 0700).

    Chosen here so that no library falls back on its own and prints a warning about it (platformdirs
    does when `XDG_RUNTIME_DIR` is unset: containers, ssh, cron, CI)."""
    env = os.environ if env is None else env
    uid = os.geteuid()
    for candidate in (env.get("XDG_RUNTIME_DIR"), f"/run/user/{uid}"):
        if candidate and _private_dir(Path(candidate), uid):
            return Path(candidate)
    import tempfile

    base = Path(env.get("TMPDIR") or tempfile.gettempdir())
    folder = base / f"urchin-runtime-{uid}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"runtime folder {folder}: cannot create: {exc.strerror}") from None
    if not _private_dir(folder, uid):
        raise ConfigError(f"runtime folder {folder}: must be a folder owned by uid {uid} with mode 0700 "
                          "(set XDG_RUNTIME_DIR to one)")
    return folder


def use_runtime_dir() -> Path:
    """Point `XDG_RUNTIME_DIR` of this process (and its children) at `runtime_dir()`: called before a
    library that reads it is imported (the embedded PostgreSQL keeps its lock file there)."""
    folder = runtime_dir()
    if os.environ.get("XDG_RUNTIME_DIR") != str(folder):
        os.environ["XDG_RUNTIME_DIR"] = str(folder)
    return folder


def _private_dir(path: Path, uid: int) -> bool:
    import stat

    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == uid and stat.S_IMODE(info.st_mode) == 0o700


def _host_name() -> str:
    # os.uname() is what socket.gethostname() returns on POSIX, without importing socket (~10 ms).
    try:
        return os.uname().nodename or "unknown"
    except AttributeError:  # pragma: no cover - Windows
        import socket

        return socket.gethostname()


def _int(value: Any, name: str, low: int, high: int) -> int:
    try:
        return int(check_number(value, name, whole=True, low=low, high=high, from_text=True))
    except QueryError as exc:
        raise ConfigError(str(exc)) from None


def _float(value: Any, name: str, high: float) -> float:
    try:
        number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else math.nan
    except (ValueError, OverflowError):
        number = math.nan
    if not 0 < number <= high:   # false for nan
        raise ConfigError(f"{name}: must be a number of seconds greater than 0 and at most {high:g}, got {value!r}")
    return number


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> Any:
    if value is None or value == "":
        return None
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in choices:
        raise ConfigError(f"{name}: must be one of {', '.join(choices)}, got {value!r}")
    return text


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}: must be true or false (1/0, yes/no), got {value!r}")


def _text(value: Any, name: str) -> str | None:
    """A string setting (empty means unset); no control characters, which no URL, path or name holds."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{name}: must be a string, got {value!r}")
    try:
        return check_name(value, name)
    except ValidationError as exc:
        raise ConfigError(exc.message) from None


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _read_config(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:   # tomllib decodes the whole file first
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start}): TOML files are UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def read_config(path: Path) -> dict[str, Any]:
    """config.toml as a dict ({} when there is none); `ConfigError` names the file and what is wrong."""
    return _read_config(path)


def config_stamp(path: str | os.PathLike[str]) -> tuple[int, int, int, int] | None:
    """What changes when config.toml is edited or replaced (inode, size, mtime, ctime); None: no file."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Dotted names (`urchin.port`, `redact.extra`) of the settings that differ between two configs."""
    out: list[str] = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        if before is None and isinstance(after, Mapping) or after is None and isinstance(before, Mapping):
            before, after = before or {}, after or {}   # a table added or removed: name its keys
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            out.extend(f"{name}.{key}" for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key))
        else:
            out.append(name)
    return out
