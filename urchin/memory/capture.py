"""Memory's capture part: collectors and hook installation (the logic lives in `urchin.collectors`).

Agent hooks are recorded by `urchin hook` through `urchin.hooks` (the one hook path, light enough
for the 150 ms budget); nothing here duplicates it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from urchin.config import Settings

if TYPE_CHECKING:
    from urchin.collectors.base import CollectReport
    from urchin.collectors.install import InstallResult
    from urchin.collectors.uninstall import UninstallResult
    from urchin.ingest import IngestResult

__all__ = ["Capture"]

Ingest = Callable[[Iterable[Mapping[str, Any]]], "list[IngestResult]"]


class Capture:
    """Collectors and hook installation. Part of `Memory`, which passes its write path."""

    def __init__(self, settings: Settings, ingest: Callable[[], Ingest]) -> None:
        self._settings = settings
        self._ingest = ingest

    def collect(self, which: str) -> list[CollectReport]:
        from urchin import collectors

        return collectors.run(which, self._settings, self._ingest())

    def status(self) -> list[dict[str, Any]]:
        from urchin import collectors

        return collectors.status(self._settings)

    def changes(self, stop: threading.Event) -> Iterator[set[str]]:
        from urchin.collectors.watch import watch_collectors

        return watch_collectors(self._settings, stop)

    def install_hooks(self, target: str, path: str | None, dry_run: bool, shell: str | None) -> InstallResult:
        from pathlib import Path

        from urchin.collectors.install import install

        return install(target, self._settings, path=Path(path).expanduser() if path else None, dry_run=dry_run,
                       shell=shell)

    def uninstall_hooks(self, target: str | None, path: str | None, dry_run: bool,
                        shell: str | None) -> list[UninstallResult]:
        from pathlib import Path

        from urchin.collectors.uninstall import uninstall, uninstall_all

        if target is None:
            return list(uninstall_all(self._settings, dry_run=dry_run))
        return [uninstall(target, self._settings, path=Path(path).expanduser() if path else None, dry_run=dry_run,
                          shell=shell)]
