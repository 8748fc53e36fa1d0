"""The daemon's config reload: config.toml looked at before each request, every second and on SIGHUP."""

from __future__ import annotations

import logging

from urchin.errors import UrchinError
from urchin.facade import Memory

__all__ = ["reload_config"]

log = logging.getLogger("urchin.daemon")


def reload_config(memory: Memory, force: bool = False) -> None:
    """Apply a changed config.toml (one `stat` when nothing changed); each change is logged once."""
    try:
        change = memory.reload_config(force)
    except UrchinError as exc:   # never a request's failure: the settings in force stay
        log.error("config.toml not reloaded: %s", exc.message)
        return
    if change is None:
        return
    if force and not change.applied and not change.error:
        log.info("config.toml read again (SIGHUP): nothing new to apply")
    for message in change.messages():
        log.warning("%s", message)
