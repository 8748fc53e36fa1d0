"""Memory's writing part: the write path built on first use (`WritePath`), batches split into ready
events and refusals, and JSONL imports.

One tally (`BatchReport`) counts an import, an HTTP batch and the daemon writer's totals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import ValidationError
from urchin.event import Event
from urchin.journal import Journal
from urchin.search.substring import SubstringSearcher

if TYPE_CHECKING:
    from urchin.ingest import BatchReport, Ingestor, IngestResult
    from urchin.redact import Redactor

__all__ = ["WritePath", "PreparedBatch", "prepare_batch", "import_lines", "IMPORT_BATCH"]

IMPORT_BATCH = 4096


class WritePath:
    """The one write path (`Ingestor`: validation, redaction, the id index), built on first use so that
    readers never pay for the redaction rules. Part of `Memory`; the parts that write, redact or look
    an id up hold this object (never a call back into `Memory`)."""

    def __init__(self, settings: Settings, journal: Journal) -> None:
        self._settings = settings
        self._journal = journal
        self._ingestor: Ingestor | None = None

    @property
    def ingestor(self) -> Ingestor:
        if self._ingestor is None:
            from urchin.ingest import Ingestor

            self._ingestor = Ingestor(self._settings, self._journal)
        return self._ingestor

    def use(self, settings: Settings, redactor: Redactor | None) -> None:
        """Settings read again (config.toml changed); a new redactor applies from the next write."""
        self._settings = settings
        if redactor is not None:
            ingestor = self.ingestor
            ingestor.redactor = redactor
            ingestor.settings = settings


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
    """Import JSONL; a bad line is reported with its number and never stops the rest; what was
    appended is indexed for substring search before this returns.

    A large import is validated and redacted in worker processes and written here, in order
    (urchin/facade/bulk.py); the journal and the report are the same as one process makes."""
    import io
    from itertools import chain

    from urchin.facade import bulk
    from urchin.ingest import BatchReport

    ingestor.keep_ids_in_memory()
    report = BatchReport()

    def record(done: tuple[int, list[tuple[int, str]], Any], tally: BatchReport) -> None:
        report.rejected.extend(done[1])
        report.rejected.extend(tally.rejected)
        report.appended += tally.appended
        report.duplicate += tally.duplicate
        report.suppressed += tally.suppressed
        if on_progress:
            on_progress(done[0])

    batches: Iterator[Any]
    if isinstance(lines, io.BufferedIOBase):   # a file: read in chunks, split into lines by the workers
        batches = bulk.numbered_chunks(lines)
        chunk: tuple[int, bytes] = next(batches, (1, b""))
        first: Any = chunk
        large = len(chunk[1]) >= bulk.CHUNK_BYTES or chunk[1].count(b"\n") >= IMPORT_BATCH
    else:
        batches = bulk.numbered_batches(lines, IMPORT_BATCH)
        first = next(batches, ([], []))
        large = len(first[0]) >= IMPORT_BATCH
    workers = bulk.parallel_workers() if large else 0
    report.workers = workers
    if workers:
        bulk.import_parallel(ingestor, chain([first], batches), workers, record, source=lines)
    else:
        bulk.import_serial(ingestor, chain([first], batches), record)
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
