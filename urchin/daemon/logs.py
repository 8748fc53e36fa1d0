"""The daemon's log lines (and its index process's): one per record on stderr, redacted.

A record quotes what it was given: uvicorn's access log the request line (a query string may hold
a token), an error its exception, a warning its message. The formatter redacts the whole line, the
traceback too, so no handler can print a secret whatever the record's origin.
"""

from __future__ import annotations

import logging
import sys

from urchin.redact import redact_message

__all__ = ["LOG_FORMAT", "RedactingFormatter", "setup_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _as_urchin(record: logging.LogRecord) -> bool:
    """uvicorn's records ("Uvicorn running on ...", errors) are the daemon's own: name them so."""
    if record.name in ("uvicorn", "uvicorn.error"):
        record.name = "urchin"
    elif record.name.startswith("uvicorn."):
        record.name = "urchin." + record.name[len("uvicorn."):]
    return True


class RedactingFormatter(logging.Formatter):
    """A `logging.Formatter` whose every output (message, arguments, traceback) passed the redactor."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_message(super().format(record))


def setup_logging(level: str) -> None:
    """One line per record on stderr (journald stores each line as one entry); warnings too."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(LOG_FORMAT))
    handler.addFilter(_as_urchin)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.captureWarnings(True)   # `warnings` would print to stderr past the formatter
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every batch of changes at info
    # The MCP SDK logs every stateless request's end ("Terminating session: None") at info.
    logging.getLogger("mcp").setLevel(max(logging.WARNING, root.level))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
