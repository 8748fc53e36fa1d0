"""`urchin import` over several processes: workers parse, validate, redact and serialise; one writer appends.

Per event, validation and redaction cost ~35-45 us of Python CPU, which held one process to ~30k
events/s. Here the lines go out in batches to forked workers (each with its own `Ingestor`, built
from the same settings, so `prepare` gives the same bytes), and the parent appends the finished
lines in input order through `Ingestor.append_lines` (the same dedupe, forgotten-id and ephemeral
checks and one write per batch as the serial path): the journal is byte for byte what a serial
import writes, bad lines are reported with the same numbers and reasons. Only a bounded number of
batches is in flight, so memory stays flat on any input size.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from urchin.config import Settings
from urchin.errors import ValidationError
from urchin.idindex import id_hash
from urchin.ingest import BatchReport, Ingestor

__all__ = ["parallel_workers", "import_parallel", "import_serial", "prepare_batch", "numbered_batches"]

_Lines = tuple[list[int], list[bytes | str]]   # line numbers, and the lines (two flat lists pickle fast)
# what a batch became: how many lines, each rejected line's (number, reason), then the accepted
# events' ids, journal lines and id hashes, in input order
_Done = tuple[int, list[tuple[int, str]], list[str], list[bytes], list[int]]

_worker: Ingestor | None = None


def parallel_workers() -> int:
    """Worker processes worth forking here: 0 (stay serial) with one core, or where fork is unsafe
    (another thread running: a forked child would inherit its locks mid-use)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 2 or threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return cores


def _init(settings: Settings) -> None:
    global _worker
    _worker = Ingestor(settings)


def prepare_batch(ingestor: Ingestor, lines: _Lines) -> _Done:
    """Each numbered raw line -> its journal line, or the reason it is rejected (as `import_lines` says it)."""
    rejected: list[tuple[int, str]] = []
    ids: list[str] = []
    out: list[bytes] = []
    prepare, sign, loads = ingestor.prepare, ingestor.journal.proof.sign, orjson.loads   # looked up once a batch
    for number, line in zip(*lines, strict=True):
        try:
            record = loads(line)
        except orjson.JSONDecodeError as exc:
            rejected.append((number, f"not valid JSON: {exc}"))
            continue
        if not isinstance(record, dict):
            rejected.append((number, "event: must be a JSON object"))
            continue
        try:
            event = prepare(record)
        except ValidationError as exc:
            rejected.append((number, ingestor.rejected(record, exc).reason or "rejected"))
            continue
        ids.append(event.id)
        out.append(sign(event.to_json()))
    return len(lines[0]), rejected, ids, out, list(map(id_hash, ids))


def _prepare(lines: _Lines) -> _Done:
    assert _worker is not None
    return prepare_batch(_worker, lines)


def import_parallel(ingestor: Ingestor, batches: Iterator[_Lines], workers: int,
                    record: Callable[[_Done, BatchReport], None]) -> None:
    """Prepare `batches` in `workers` processes; append each, in order, here; `record` counts."""
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_init, initargs=(ingestor.settings,)) as pool:
        pending: deque[Any] = deque()
        for batch in batches:
            pending.append(pool.apply_async(_prepare, (batch,)))
            if len(pending) > 2 * workers:
                _append(ingestor, pending.popleft().get(), record)
        while pending:
            _append(ingestor, pending.popleft().get(), record)


def import_serial(ingestor: Ingestor, batches: Iterable[_Lines],
                  record: Callable[[_Done, BatchReport], None]) -> None:
    """The same steps in this process (small imports, one core, or a process with other threads)."""
    for batch in batches:
        _append(ingestor, prepare_batch(ingestor, batch), record)


def _append(ingestor: Ingestor, done: _Done, record: Callable[[_Done, BatchReport], None]) -> None:
    _, _, ids, lines, hashes = done
    record(done, ingestor.append_lines(ids, lines, hashes) if ids else BatchReport())


def numbered_batches(lines: Iterable[bytes | str], size: int) -> Iterator[_Lines]:
    """Non-blank lines with their 1-based numbers, `size` at a time."""
    numbers: list[int] = []
    kept: list[bytes | str] = []
    for number, line in enumerate(lines, 1):
        if not line or line.isspace():   # what strip() would empty, without copying the line
            continue
        numbers.append(number)
        kept.append(line)
        if len(kept) >= size:
            yield numbers, kept
            numbers, kept = [], []
    if kept:
        yield numbers, kept
