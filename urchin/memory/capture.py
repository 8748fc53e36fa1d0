# mypy: disable-error-code="attr-defined"
# (a mixin of `Memory`: the attributes and methods it uses are Memory's own)
"""Memory's capture operations: collectors and agent hooks (logic in `urchin.collectors`, `urchin.hooks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.journal import Journal

if TYPE_CHECKING:
    from urchin.ingest import IngestResult
    from urchin.search.substring import SubstringSearcher


class CaptureOps:
    """Mixed into `Memory`; uses its settings, journal and views."""

    settings: Settings
    journal: Journal
    substring: SubstringSearcher

    # ---- capture: collectors and hooks (the logic lives in urchin/collectors/) -----------------
    def collect(self, which: str = "all") -> list[Any]:
        """Run one collector, or `all` whose folders exist; a `CollectReport` each."""
        from urchin import collectors

        return collectors.run(which, self.settings, self.ingestor.ingest)

    def collectors_status(self) -> list[dict[str, Any]]:
        """Each collector: folders, found, events collected, last run, last error."""
        from urchin import collectors

        return collectors.status(self.settings)

    def hook(self, agent: str, payload: Mapping[str, Any], event: str | None = None) -> IngestResult | None:
        """Record one agent hook payload; None when the adapter found nothing worth keeping."""
        from urchin.collectors import adapt_hook
        from urchin.hooks import prepare_item

        item = adapt_hook(agent, payload, event)
        return None if item is None else self.ingest_one(prepare_item(item, self.settings.soft_cap_bytes))

    def install_hooks(self, target: str, *, path: str | None = None, dry_run: bool = False,
                      shell: str | None = None) -> Any:
        """Merge Urchin's hooks into an agent's (or shell's) config; an `InstallResult`."""
        from pathlib import Path

        from urchin.collectors.install import install

        return install(target, self.settings, path=Path(path).expanduser() if path else None, dry_run=dry_run,
                       shell=shell)
