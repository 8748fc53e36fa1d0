"""Urchin: a local memory daemon for coding agents.

The public API is re-exported here lazily, so light entry points (agent hooks) pay only for what
they use: `Memory`, `Event`, `Settings` and the error tree.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Memory",
    "Event",
    "Settings",
    "UrchinError",
    "ValidationError",
    "QueryError",
    "TooLarge",
    "NotFoundError",
    "JournalError",
    "ConfigError",
    "EmbedderError",
    "DatabaseError",
    "DaemonError",
    "__version__",
]

_WHERE = {
    "Memory": "urchin.memory",
    "Event": "urchin.event",
    "Settings": "urchin.config",
    **{name: "urchin.errors" for name in ("UrchinError", "ValidationError", "QueryError", "TooLarge",
                                          "NotFoundError", "JournalError", "ConfigError", "EmbedderError",
                                          "DatabaseError", "DaemonError")},
}

if TYPE_CHECKING:
    from urchin.config import Settings
    from urchin.errors import (
        ConfigError,
        DaemonError,
        DatabaseError,
        EmbedderError,
        JournalError,
        NotFoundError,
        QueryError,
        TooLarge,
        UrchinError,
        ValidationError,
    )
    from urchin.event import Event
    from urchin.memory import Memory


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'urchin' has no attribute {name!r}")
