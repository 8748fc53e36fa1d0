"""Urchin: a local memory daemon for coding agents.

The public API is re-exported here lazily, so light entry points (agent hooks) pay only for what
they use: `Memory`, `Event`, `Settings` and the error tree.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False   # not `typing`'s: its import costs an agent hook a few ms (urchin/hook_fast.py)

# BLAS runs on one thread in every Urchin process, set before numpy loads. OpenBLAS stops its worker
# threads in a fork handler; a fork that runs such handlers (a subprocess started with `user=` or
# `preexec_fn`, as the embedded server's pg_ctl is) while another thread is inside a threaded BLAS call
# leaves that call waiting, at 100% of a core, for threads that are gone, forever. The daemon's
# follower hung so in the associations' SVD (its views stopped, SIGTERM waited on it). Our BLAS work is
# small and runs beside queries on few cores, where more threads only contend (tests/test_cosine.py).
os.environ["OPENBLAS_NUM_THREADS"] = "1"

__version__ = "0.2.0"

__all__ = [
    "Memory",
    "Event",
    "Settings",
    "UrchinError",
    "ValidationError",
    "QueryError",
    "TooLarge",
    "Forbidden",
    "NotFoundError",
    "JournalError",
    "ConfigError",
    "FormatError",
    "EmbedderError",
    "DatabaseError",
    "DaemonError",
    "__version__",
]

_WHERE = {
    "Memory": "urchin.facade",
    "Event": "urchin.event",
    "Settings": "urchin.config",
    **{name: "urchin.errors" for name in ("UrchinError", "ValidationError", "QueryError", "TooLarge",
                                          "Forbidden", "NotFoundError", "JournalError", "ConfigError", "FormatError",
                                          "EmbedderError", "DatabaseError", "DaemonError")},
}

if TYPE_CHECKING:
    from typing import Any

    from urchin.config import Settings
    from urchin.errors import (
        ConfigError,
        DaemonError,
        DatabaseError,
        EmbedderError,
        Forbidden,
        FormatError,
        JournalError,
        NotFoundError,
        QueryError,
        TooLarge,
        UrchinError,
        ValidationError,
    )
    from urchin.event import Event
    from urchin.facade import Memory


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        from importlib import import_module

        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'urchin' has no attribute {name!r}")
