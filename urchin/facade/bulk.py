"""`urchin import` over several processes: workers parse, validate, redact and serialise; one writer appends.

Per event, validation and redaction cost ~35-45 us of Python CPU, which held one process to ~30k
events/s. Here the lines go out in batches to a `Pool` of workers forked from this process (each with
its own `Ingestor`, built from the same settings, so `prepare` gives the same bytes; a regular file's
chunks are read by them, at their offsets), and the parent appends the finished
lines in input order through `Ingestor.append_lines` (the same dedupe, forgotten-id and ephemeral
checks and one write per batch as the serial path): the journal is byte for byte what a serial
import writes, bad lines are reported with the same numbers and reasons. Only a bounded number of
batches is in flight, so memory stays flat on any input size.
"""

from __future__ import annotations

import io
import os
import pickle
import stat
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate, chain
from typing import Any, NamedTuple

import orjson

from urchin.errors import ValidationError
from urchin.idindex import id_hash
from urchin.ingest import BatchReport, Ingestor, Joined
from urchin.processes import Pool, WorkerError, can_fork

__all__ = ["parallel_workers", "import_parallel", "import_serial", "prepare_batch", "prepare_chunk",
           "numbered_batches", "numbered_chunks", "worker", "CHUNK_BYTES"]

_Lines = tuple[list[int], list[bytes | str]]   # line numbers, and the lines (two flat lists pickle fast)
# A piece of a file read as it is: the number of its first line, and whole lines (the parent never
# touches a line: workers split, number and skip blank ones, so nothing of the parent runs per line).
_Chunk = tuple[int, bytes]
_Batch = _Lines | _Chunk


class _Piece(NamedTuple):
    """A chunk of a regular file as a worker is sent it: where to read it (`os.pread` of the file
    descriptor the forked worker inherited), not its bytes (a pickle and a pipe each way cost the
    parent and the worker ~0.8 CPU-s per GB)."""

    first: int
    fd: int
    offset: int
    size: int

# what a batch became: how many lines, each rejected line's (number, reason), then the accepted
# events' journal lines, joined, with their ids and id hashes, in input order
_Done = tuple[int, list[tuple[int, str]], Joined]
CHUNK_BYTES = 2 << 20   # a batch read from a file: ~4,800 events of a typical journal
_ENTRY = "urchin.facade.bulk:worker"


def parallel_workers() -> int:
    """Worker processes worth forking here: 0 (stay serial) with one core, or where fork is unsafe
    (`processes.can_fork`: another thread running, whose locks a forked child would inherit mid-use)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 2 or not can_fork():
        return 0
    return cores


def worker(init: bytes) -> Callable[[bytes], bytes]:
    """A pool worker's entry: `init` is the pickled `Settings` its `Ingestor` is built from, once; a
    task is a pickled batch or `_Piece`, its result the pickled `_Done`."""
    ingestor = Ingestor(pickle.loads(init))   # our own parent's bytes, through a pipe of its own

    def run(task: bytes) -> bytes:
        return pickle.dumps(_prepare(ingestor, pickle.loads(task)), protocol=pickle.HIGHEST_PROTOCOL)

    return run


def prepare_batch(ingestor: Ingestor, lines: _Lines) -> tuple[int, list[tuple[int, str]], list[str], list[bytes]]:
    """Each numbered raw line -> its journal line, or the reason it is rejected (as `import_lines` says it)."""
    rejected: list[tuple[int, str]] = []
    ids: list[str] = []
    out: list[bytes] = []
    prepare, as_given, sign, loads = ingestor.prepare, ingestor.as_given, ingestor.journal.proof.sign, orjson.loads
    for number, line in zip(*lines, strict=True):
        try:
            record = loads(line)
        except orjson.JSONDecodeError as exc:
            rejected.append((number, f"not valid JSON: {exc}"))
            continue
        body = as_given(record)   # a line in the journal's own shape with nothing to redact: one pass
        if body is not None:
            ids.append(record["id"])
            out.append(sign(body))
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
    return len(lines[0]), rejected, ids, out


def prepare_chunk(ingestor: Ingestor, batch: _Batch) -> _Done:
    """A batch (numbered lines, or a chunk of the file) -> what it became, packed for the parent."""
    count, rejected, ids, out = prepare_batch(ingestor, _numbered(batch) if isinstance(batch[1], bytes) else batch)
    out.append(b"")   # the payload ends in a newline
    payload = b"\n".join(out)
    # arrays: pickled as their bytes, not an int object each (the parent unpickles every batch)
    starts = array("q", accumulate(map(len, out), lambda at, n: at + n + 1, initial=0))[:-2] if ids else array("q")
    return count, rejected, Joined("\n".join(ids), len(set(ids)) == len(ids), payload, starts,
                                   array("Q", map(id_hash, ids)))


def _numbered(chunk: _Chunk) -> _Lines:
    """The chunk's non-blank lines with their numbers, as `numbered_batches` gives them."""
    first, data = chunk
    numbers: list[int] = []
    kept: list[bytes | str] = []
    for number, line in enumerate(io.BytesIO(data), first):   # lines keep their newline, as a file gives them
        if not line.isspace():
            numbers.append(number)
            kept.append(line)
    return numbers, kept


def _prepare(ingestor: Ingestor, batch: _Batch | _Piece) -> _Done:
    if isinstance(batch, _Piece):
        data = os.pread(batch.fd, batch.size, batch.offset)
        if len(data) != batch.size:
            raise OSError(f"the file being imported changed: {len(data)} bytes at {batch.offset}, not {batch.size}")
        batch = (batch.first, data)
    return prepare_chunk(ingestor, batch)


def _regular_fd(source: Any) -> int | None:
    """The descriptor of `source` when it is a regular file (workers can read it at an offset)."""
    try:
        fd = source.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):   # io.UnsupportedOperation is both
        return None


def import_parallel(ingestor: Ingestor, batches: Iterator[_Batch], workers: int,
                    record: Callable[[_Done, BatchReport], None], source: Any = None) -> None:
    """Prepare `batches` in `workers` forked processes; append each, in order, here; `record` counts.
    `source`: the binary file `numbered_chunks` reads the batches from, if any: a regular file's
    chunks are read again by the workers (forked after it was opened) rather than sent to them.
    When the workers cannot start or one fails, the batches not yet appended and the rest are
    prepared here (nothing is appended twice)."""
    fd = _regular_fd(source)
    sent: deque[_Batch] = deque()   # batches sent and not yet appended, oldest first

    def tasks() -> Iterator[bytes]:
        for batch in batches:
            task: _Batch | _Piece = batch
            if fd is not None and isinstance(batch[1], bytes):   # just read: the file is at its end
                task = _Piece(batch[0], fd, source.tell() - len(batch[1]), len(batch[1]))
            sent.append(batch)
            yield pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)

    try:
        with Pool(_ENTRY, workers, init=pickle.dumps(ingestor.settings), start="fork") as pool:
            for result in pool.ordered(tasks()):
                sent.popleft()
                _append(ingestor, pickle.loads(result), record)   # our own workers' bytes
    except WorkerError:
        import_serial(ingestor, chain(list(sent), batches), record)


def import_serial(ingestor: Ingestor, batches: Iterable[_Batch],
                  record: Callable[[_Done, BatchReport], None]) -> None:
    """The same steps in this process (small imports, one core, or a process with other threads)."""
    for batch in batches:
        _append(ingestor, prepare_chunk(ingestor, batch), record)


def _append(ingestor: Ingestor, done: _Done, record: Callable[[_Done, BatchReport], None]) -> None:
    joined = done[2]
    record(done, ingestor.append_joined(joined) if joined.hashes else BatchReport())


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


def numbered_chunks(handle: io.BufferedIOBase, size: int = CHUNK_BYTES) -> Iterator[_Chunk]:
    """A binary file in pieces of about `size` bytes that end at a line's end, each with the number of
    its first line: what `numbered_batches` numbers, read without a step per line here."""
    number = 1
    while True:
        data = handle.read(size)
        if not data:
            return
        if not data.endswith(b"\n"):
            data += handle.readline()
        yield number, data
        number += data.count(b"\n")
