"""The daemon's log lines (and its index process's): one per record on stderr."""

from __future__ import annotations

import logging
import sys

__all__ = ["LOG_FORMAT", "setup_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _as_urchin(record: logging.LogRecord) -> bool:
    """uvicorn's records ("Uvicorn running on ...", errors) are the daemon's own: name them so."""
    if record.name in ("uvicorn", "uvicorn.error"):
        record.name = "urchin"
    elif record.name.startswith("uvicorn."):
        record.name = "urchin." + record.name[len("uvicorn."):]
    return True


def setup_logging(level: str) -> None:
    """One line per record on stderr (journald stores each line as one entry)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(_as_urchin)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every batch of changes at info
    # The MCP SDK logs every stateless request's end ("Terminating session: None") at info.
    logging.getLogger("mcp").setLevel(max(logging.WARNING, root.level))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
