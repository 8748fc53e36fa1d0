"""Memory's capture part: collectors and hook installation (the logic lives in `urchin.collectors`).

Agent hooks are recorded by `urchin hook` through `urchin.hooks` (the one hook path, light enough
for the 150 ms budget); nothing here duplicates it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from urchin.config import Settings
from urchin.facade.writing import WritePath

if TYPE_CHECKING:
    from urchin.collectors import CollectorStatus
    from urchin.collectors.base import CollectReport
    from urchin.collectors.install import InstallResult
    from urchin.collectors.uninstall import UninstallResult

__all__ = ["Capture"]


class Capture:
    """Collectors and hook installation. Part of `Memory`, which passes its write path."""

    def __init__(self, settings: Settings, write: WritePath) -> None:
        self._settings = settings
        self._write = write

    def use(self, settings: Settings) -> None:
        """Settings read again (config.toml changed): collectors read them per call."""
        self._settings = settings

    def collect(self, which: str) -> list[CollectReport]:
        from urchin import collectors

        return collectors.run(which, self._settings, self._write.ingestor.ingest)

    def status(self) -> list[CollectorStatus]:
        """Each collector: folders, found, events collected, last run, last error."""
        from urchin import collectors

        return collectors.status(self._settings)

    def changes(self, stop: threading.Event) -> Iterator[set[str]]:
        """Names of collectors whose folders changed, batch by batch, until `stop` (the daemon runs them)."""
        from urchin.collectors.watch import watch_collectors

        return watch_collectors(self._settings, stop)

    def install_hooks(self, target: str, *, path: str | None = None, dry_run: bool = False,
                      shell: str | None = None) -> InstallResult:
        """Merge Urchin's hooks into an agent's (or shell's) config; an `InstallResult`."""
        from pathlib import Path

        from urchin.collectors.install import install

        return install(target, self._settings, path=Path(path).expanduser() if path else None, dry_run=dry_run,
                       shell=shell)

    def uninstall_hooks(self, target: str | None = None, *, path: str | None = None, dry_run: bool = False,
                        shell: str | None = None) -> list[UninstallResult]:
        """Remove Urchin's hooks from one agent's (or shell's) config, or (no target) from every default
        one; an `UninstallResult` each."""
        from pathlib import Path

        from urchin.collectors.uninstall import uninstall, uninstall_all

        if target is None:
            return list(uninstall_all(self._settings, dry_run=dry_run))
        return [uninstall(target, self._settings, path=Path(path).expanduser() if path else None, dry_run=dry_run,
                          shell=shell)]
