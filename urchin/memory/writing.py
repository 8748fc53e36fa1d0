"""Memory's writing part: batches split into ready events and refusals, and JSONL imports.

One tally (`BatchReport`) counts an import, an HTTP batch and the daemon writer's totals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from urchin.errors import ValidationError
from urchin.event import Event
from urchin.search.substring import SubstringSearcher

if TYPE_CHECKING:
    from urchin.ingest import BatchReport, Ingestor, IngestResult

__all__ = ["PreparedBatch", "prepare_batch", "import_lines", "IMPORT_BATCH"]

IMPORT_BATCH = 4096


@dataclass(slots=True)
class PreparedBatch:
    """A batch split by `Memory.prepare_batch`: events ready to append, and each item's place or refusal."""

    events: list[Event]
    refused: list[IngestResult | None]

    def merge(self, appended: Sequence[IngestResult]) -> list[IngestResult]:
        """One result per item, in the batch's order: the refusals, and the appends' results between them."""
        written = iter(appended)
        return [result if result is not None else next(written) for result in self.refused]


def prepare_batch(ingestor: Ingestor, items: Sequence[Any], defaults: Mapping[str, Any] | None) -> PreparedBatch:
    events: list[Event] = []
    refused: list[IngestResult | None] = []
    for item in items:
        try:
            events.append(ingestor.prepare(item, defaults))
            refused.append(None)
        except ValidationError as exc:
            refused.append(ingestor.rejected(item, exc))
    return PreparedBatch(events, refused)


def import_lines(ingestor: Ingestor, substring: SubstringSearcher, lines: Iterable[bytes | str],
                 on_progress: Callable[[int], None] | None) -> BatchReport:
    """Import JSONL in batches; a bad line is reported with its number and never stops the rest; what
    was appended is indexed for substring search before this returns."""
    from urchin.ingest import BatchReport

    ingestor.keep_ids_in_memory()
    report = BatchReport()
    batch: list[Mapping[str, Any]] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            report.rejected.append((number, f"not valid JSON: {exc}"))
            continue
        if not isinstance(record, dict):
            report.rejected.append((number, "event: must be a JSON object"))
            continue
        batch.append(record)
        numbers.append(number)
        if len(batch) >= IMPORT_BATCH:
            _write(ingestor, batch, numbers, report, on_progress)
            batch, numbers = [], []
    _write(ingestor, batch, numbers, report, on_progress)
    report.rejected.sort()
    if report.appended:
        # Index now, in one pass, rather than surprising the first search after a big import.
        caught = substring.catch_up()
        report.indexed_events, report.index_seconds = caught.events, caught.seconds
    return report


def _write(ingestor: Ingestor, batch: list[Mapping[str, Any]], numbers: list[int], report: BatchReport,
           on_progress: Callable[[int], None] | None) -> None:
    if not batch:
        return
    for number, result in zip(numbers, ingestor.ingest(batch), strict=False):
        report.add(result, number)
    if on_progress:
        on_progress(len(batch))
