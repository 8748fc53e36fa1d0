"""Memory's privacy part: ephemeral mode, what redaction would remove, and config.toml followed (its
`[redact]` rules apply to the write path from the next write)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import ValidationError
from urchin.facade.writing import WritePath

if TYPE_CHECKING:
    from urchin.ephemeral import EphemeralState
    from urchin.facade.reload import ConfigReload, ConfigWatch
    from urchin.params.ephemeral import EphemeralParams
    from urchin.redact import Finding

__all__ = ["Privacy"]


class Privacy:
    """Ephemeral mode, redaction's findings and rules, config.toml's changes. Part of `Memory`, which
    passes the write path (its redactor and ephemeral flag)."""

    def __init__(self, settings: Settings, write: WritePath) -> None:
        self._settings = settings
        self._write = write
        self._watch: ConfigWatch | None = None   # a daemon's: config.toml read again when it changes

    def ephemeral(self, p: EphemeralParams) -> EphemeralState:
        flag = self._write.ingestor.ephemeral
        if p.action == "start":
            return flag.start(p.minutes)
        return flag.end() if p.action == "end" else flag.state()

    def redact_check(self, path: str) -> Iterator[Finding]:
        try:
            handle = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise ValidationError("file", f"{path}: cannot read: {exc.strerror}") from None
        with handle:
            yield from self._write.ingestor.redactor.scan_lines(handle)

    def fingerprint(self) -> str:
        return str(self._write.ingestor.redactor.fingerprint)

    def poll(self, force: bool) -> ConfigReload | None:
        """A look at config.toml (`force`: parsed anyway); what changed, or None. `Memory` applies it."""
        if self._watch is None:
            from urchin.facade.reload import ConfigWatch

            self._watch = ConfigWatch(self._settings)
        return self._watch.poll(force)

    def config_state(self) -> dict[str, Any]:
        watch = self._watch
        redactor = self._write.ingestor.redactor
        return {"redaction": redactor.describe(), "redactionFingerprint": redactor.fingerprint,
                "configRestartNeeded": list(watch.restart) if watch else [],
                "configReloadError": watch.error if watch else None}
