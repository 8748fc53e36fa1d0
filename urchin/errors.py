"""Every error Urchin raises on purpose, in one tree.

    UrchinError                 base; front ends turn it into exit code 1, HTTP 4xx/5xx, MCP isError
    ├── ValidationError         bad input: names the field and the rule (HTTP 422)
    │   ├── QueryError          bad query parameters (HTTP 400)
    │   ├── TooLarge            input over a size limit (HTTP 413)
    │   └── Forbidden           outside the caller's token: its scope or workspaces (HTTP 403)
    ├── NotFoundError           an id or path that does not exist (HTTP 404)
    ├── JournalError            the journal cannot be read or written (names the path)
    ├── ConfigError             a setting or the config file is wrong
    ├── FormatError             a home's file is in a format newer than this code knows (format.json)
    ├── EmbedderError           the embedding server failed or refused
    ├── DatabaseError           the PostgreSQL index (or the embedded server) failed
    └── DaemonError             the daemon is unreachable, refused, or already running

Leaf module: imports nothing of the package.
"""

from __future__ import annotations

__all__ = [
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
]


class UrchinError(Exception):
    """Base of every error Urchin raises on purpose; its message is safe to show a user."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ValidationError(UrchinError):
    """Input broke a rule; `field` names where, `rule` says what (`content: must not be blank`)."""

    status = 422

    def __init__(self, field: str, rule: str, *, message: str | None = None) -> None:
        super().__init__(message or (f"{field}: {rule}" if field else rule))
        self.field = field
        self.rule = rule


class QueryError(ValidationError):
    """A query parameter is out of range or blank."""

    status = 400


class TooLarge(ValidationError):
    """Input over a size limit (a batch's count, an event's bytes)."""

    status = 413


class Forbidden(ValidationError):
    """A call its token may not make: an operation outside its scope, or a workspace not its own. The
    field is `authorization` (the scope) or `workspace`; nothing was read or written."""

    status = 403


class NotFoundError(UrchinError):
    status = 404


class JournalError(UrchinError):
    status = 500


class ConfigError(UrchinError):
    status = 500


class FormatError(UrchinError):
    """A file of the home records a format this code does not know (written by a newer Urchin): refused
    untouched, naming the file and both versions."""

    status = 500


class EmbedderError(UrchinError):
    status = 502


class DatabaseError(UrchinError):
    """The PostgreSQL index failed: unreachable, refused, missing pgvector, or the embedded server."""

    status = 503


class IndexBusyError(DatabaseError):
    """A write that may not wait found a row or table locked by another feeder (an inline catch-up
    beside the daemon's feed): the caller answers from the index as it is."""


class DaemonError(UrchinError):
    status = 503
