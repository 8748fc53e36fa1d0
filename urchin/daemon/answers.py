"""The daemon's JSON answers read back as the facade's result objects, and its errors as the exceptions
the in-process call raises: what `RemoteMemory` (urchin/daemon/client.py) returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from urchin.errors import DaemonError, NotFoundError, QueryError, UrchinError, ValidationError
from urchin.event import Event

if TYPE_CHECKING:
    from urchin.ingest import IngestResult
    from urchin.recall import RecallDict
    from urchin.search.query import SearchResult

__all__ = ["RecallAnswer", "search_result", "ingest_results", "error"]


class RecallAnswer:
    """The daemon's `recall` answer, as the CLI formats it (`text`, `to_dict`)."""

    def __init__(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise DaemonError("the daemon answered recall with something that is not a recall result")
        self.text: str = body["text"]
        self._body = body

    def to_dict(self) -> RecallDict:
        return cast("RecallDict", dict(self._body))   # `RecallResult.to_dict()`, as the daemon answered it


def search_result(body: Any) -> SearchResult:
    from urchin.search.query import Hit, SearchResult

    hits = []
    for record in body.get("events", []):
        record = dict(record)
        score = record.pop("score", None)
        explain = record.pop("explain", None)
        event = Event.from_record(record)
        if event is not None:
            hits.append(Hit(event, score, explain if isinstance(explain, dict) else None))
    return SearchResult(hits, body.get("query"), body.get("mode", "substring"), list(body.get("notes", [])),
                        weak=bool(body.get("weak", False)), hint=body.get("hint"),
                        older=body.get("olderMatch") if isinstance(body.get("olderMatch"), dict) else None)


def ingest_results(body: Any) -> list[IngestResult]:
    from urchin.ingest import IngestResult

    out = []
    for item in body.get("results", []):
        status: Any = str(item.get("status", "rejected")).split(":", 1)[0]
        out.append(IngestResult(status, item.get("id"), item.get("reason")))
    return out


def error(status: int, body: Any, address: str) -> UrchinError:
    """The daemon's JSON error as the same exception the in-process call would raise."""
    message = body.get("error") if isinstance(body, dict) else None
    field = body.get("field") if isinstance(body, dict) else None
    message = str(message or f"the daemon at {address} answered HTTP {status}")
    if status in (400, 413, 422) and field:
        rule = message[len(field) + 2:] if message.startswith(f"{field}: ") else message
        return (QueryError if status == 400 else ValidationError)(str(field), rule, message=message)
    if status == 404:
        return NotFoundError(message)
    if status == 401:
        return DaemonError(f"the daemon at {address} refused our token ({message}); check URCHIN_INTAKE_TOKEN "
                           "and $URCHIN_HOME/token")
    error = UrchinError(message)
    error.status = status
    return error
