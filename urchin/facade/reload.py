"""config.toml read again by a long-running process (the daemon) when it changes, or when asked (SIGHUP).

A look costs one `stat`; only a changed file is parsed. The `[redact]` and `[recall]` tables
(`LIVE_SECTIONS`) apply from the next write or query; any other changed key is named as needing a
restart, since what it configures (ports, paths, the database, the embedder) was built at start-up.
A file that does not parse, or a `[redact]` rule that does not compile, keeps the rules in force and
is reported: a typo must not switch redaction off.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from urchin.config import LIVE_SECTIONS, Settings, changed_keys, config_stamp, read_config
from urchin.errors import ConfigError
from urchin.redact import Redactor
from urchin.redact._idkey import IdKey

__all__ = ["ConfigReload", "ConfigWatch"]


@dataclass(frozen=True, slots=True)
class ConfigReload:
    """What one look at a changed config.toml found: keys now in force, keys that wait for a restart
    (all of them since start-up), or why the file was not used."""

    applied: tuple[str, ...] = ()
    restart: tuple[str, ...] = ()
    error: str | None = None
    settings: Settings | None = None      # the settings to use from now on (None: keep them)
    redactor: Redactor | None = None

    def messages(self) -> list[str]:
        out = []
        if self.error:
            out.append(f"config.toml not reloaded, the settings in force stay: {self.error}")
        if self.applied:
            out.append(f"config.toml reloaded: {', '.join(self.applied)} in force from the next write or query")
        if self.restart:
            out.append(f"config.toml changed {', '.join(self.restart)} since start-up: "
                       "needs a restart of the daemon to apply")
        return out


class ConfigWatch:
    """Notices changes to `settings.config_path`. Construction does no I/O."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        # looked at before every request: a `Path` built per look (`settings.config_path`) cost ~10 us,
        # the `stat` itself ~3 us (the home, and so this path, never changes on a reload)
        self._path = os.fspath(settings.config_path)
        self._started = dict(settings.config)   # what start-up built everything else from
        self._stamp: tuple[int, int, int, int] | None | bool = False   # False: not looked at yet
        self._lock = threading.Lock()
        self.restart: tuple[str, ...] = ()
        self.error: str | None = None

    def poll(self, force: bool = False) -> ConfigReload | None:
        """A `ConfigReload` when config.toml changed since the last look (or `force`), else None."""
        stamp = config_stamp(self._path)
        if stamp == self._stamp and not force:
            return None
        with self._lock:
            if stamp == self._stamp and not force:
                return None
            self._stamp = stamp
            return self._read()

    def _read(self) -> ConfigReload:
        current = self._settings
        try:
            new = read_config(current.config_path)
        except ConfigError as exc:
            self.error = exc.message
            return ConfigReload(restart=self.restart, error=exc.message)
        live = {name: new[name] for name in LIVE_SECTIONS if name in new}
        applied = tuple(key for key in changed_keys(_live(current.config), live))
        self.restart = tuple(changed_keys(_rest(self._started), _rest(new)))
        if not applied:
            self.error = None
            return ConfigReload(restart=self.restart)
        config = {**_rest(current.config), **live}
        settings = current.with_(config=config)
        try:
            redactor = Redactor.from_config(settings.section("redact"), IdKey(settings.home))
        except ConfigError as exc:
            self.error = exc.message
            return ConfigReload(restart=self.restart, error=exc.message)
        self._settings, self.error = settings, None
        return ConfigReload(applied, self.restart, None, settings, redactor)


def _live(config: Mapping[str, Any]) -> dict[str, Any]:
    return {name: config[name] for name in LIVE_SECTIONS if name in config}


def _rest(config: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in config.items() if name not in LIVE_SECTIONS}
