"""Group commit: concurrent requests share one locked write and one fsync.

Requests hand validated events to `GroupWriter.append` (from the event loop) or `submit` (from any
thread) and await the result. The requests an event loop answers in one step are handed to the
writer thread together at the end of that step (one queue put and at most one wake-up of the thread,
not one per request). One thread drains everything queued since its last write and passes it to
`Memory.ingest_prepared` (one lock, one `write`, one `fsync`), then completes every waiter: a
thread's future directly, an event loop's with one wake-up per write for all of them (not one per
request). A waiter completes only after the fsync, so an acknowledged event is durable; while one
fsync runs, the next batch gathers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import cast

from urchin.errors import DaemonError, JournalError
from urchin.event import Event
from urchin.facade import Memory
from urchin.ingest import BatchReport, IngestResult

__all__ = ["GroupWriter", "WriterStats"]

log = logging.getLogger("urchin.daemon.writer")
MAX_GROUP_EVENTS = 8192
GATHER_S = 0.002  # how long a write waits for the writers the previous write answered


@dataclass(slots=True)
class WriterStats:
    batches: int = 0
    events: int = 0
    largest: int = 0
    failures: int = 0
    by_status: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, int]:
        return {"writes": self.batches, "events": self.events, "largestWrite": self.largest,
                "failures": self.failures, **self.by_status}


_Waiter = Future[list[IngestResult]] | asyncio.Future[list[IngestResult]]
_Job = tuple[Sequence[Event], _Waiter]
_LoopFuture = asyncio.Future[list[IngestResult]]
_STOP = object()


class GroupWriter:
    """The daemon's only journal writer. `start()` launches the thread, `close()` drains and stops it."""

    def __init__(self, memory: Memory, max_group: int = MAX_GROUP_EVENTS, gather_s: float = GATHER_S) -> None:
        self.memory = memory
        self.max_group = max_group
        self.gather_s = gather_s
        self._recent: collections.deque[int] = collections.deque([0], maxlen=16)  # requests per recent write
        self.stats = WriterStats()
        self._queue: queue.SimpleQueue[_Job | list[_Job] | object] = queue.SimpleQueue()
        # per event loop: the jobs its current step appended, put on the queue at the step's end
        self._staged: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        self._thread: threading.Thread | None = None
        self._closing = False
        self._submit_lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="urchin-writer", daemon=True)
        self._thread.start()

    def submit(self, events: Sequence[Event]) -> Future[list[IngestResult]]:
        """Queue `events` (appended together, in order); the future holds one result per event."""
        future: Future[list[IngestResult]] = Future()
        self._put((events, future))
        return future

    async def append(self, events: Sequence[Event]) -> list[IngestResult]:
        """`submit` for a coroutine on an event loop: one result per event, once they are fsync'd."""
        return await self.stage(events, asyncio.get_running_loop())

    def stage(self, events: Sequence[Event], loop: asyncio.AbstractEventLoop) -> _LoopFuture:
        """`append` without a coroutine, called on `loop` (the HTTP protocol's direct `POST /ingest`):
        a future of `loop` that gets one result per event once they are fsync'd."""
        if self._closing or self._thread is None:
            raise DaemonError("the daemon is shutting down; retry shortly")
        future: _LoopFuture = loop.create_future()
        staged = self._staged.get(loop)
        if staged is None:      # the step's first: its jobs go to the writer when the step ends
            staged = self._staged[loop] = []
            loop.call_soon(self._hand_over, loop)
        staged.append((events, future))
        return future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`, at the end of the step that staged them: its jobs go to the writer as one item."""
        jobs = self._staged.pop(loop, None)
        if not jobs:
            return
        try:
            self._put(jobs)
        except DaemonError as exc:   # closed meanwhile: every staged request hears it, nothing is written
            for _, future in jobs:
                if not future.done():
                    future.set_exception(exc)

    def _put(self, item: _Job | list[_Job]) -> None:
        with self._submit_lock:  # no job may slip in behind the stop marker
            if self._closing or self._thread is None:
                raise DaemonError("the daemon is shutting down; retry shortly")
            self._queue.put(item)

    def close(self, timeout: float = 5.0) -> None:
        """Write everything already queued, fsync, and stop the thread."""
        with self._submit_lock:
            if self._closing:
                return
            self._closing = True
            self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout)

    # ---- the writer thread ------------------------------------------------------------------
    def _run(self) -> None:
        stop = False
        while not stop:
            jobs: list[_Job] = []
            count = 0
            item = self._queue.get()
            # Writers answered by a write come back within a millisecond or two; waiting that long
            # (never longer) for as many requests as recent writes carried lets one fsync
            # acknowledge all of them again instead of splitting them over two.
            deadline = time.monotonic() + self.gather_s
            expected = max(self._recent)
            while True:
                if item is _STOP:
                    stop = True
                    break
                # A request that went away before this point is dropped unwritten (it was never
                # acknowledged); a thread's future can no longer be cancelled from here on.
                step = cast(list[_Job], item) if type(item) is list else [cast(_Job, item)]  # a loop's step, or one job
                for job in step:
                    if _still_wanted(job[1]):
                        jobs.append(job)
                        count += len(job[0])
                if count >= self.max_group:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    wait = deadline - time.monotonic()
                    if len(jobs) >= expected or wait <= 0:
                        break
                    try:
                        item = self._queue.get(timeout=wait)
                    except queue.Empty:
                        break
            self._recent.append(len(jobs))
            if jobs:
                self._write(jobs)

    def _write(self, jobs: list[_Job]) -> None:
        events = [event for batch, _ in jobs for event in batch]
        try:
            results = self.memory.ingest_prepared(events)
        except (JournalError, OSError) as exc:   # the journal itself failed: nobody's write landed
            self._fail(jobs, exc)
            return
        except BaseException as exc:  # noqa: BLE001 - every waiting request must hear about it
            if len(jobs) == 1:
                self._fail(jobs, exc)
            else:
                # Nothing was written (lines are serialised before the write); whatever one request
                # carried must not fail the others batched with it: write each request on its own.
                log.warning("group write of %d requests failed (%s); writing them one by one", len(jobs), exc)
                for job in jobs:
                    self._write([job])
            return
        self.stats.batches += 1
        self.stats.events += len(events)
        self.stats.largest = max(self.stats.largest, len(events))
        for status, count in BatchReport.of(results).counts().items():
            if count:
                self.stats.by_status[status] = self.stats.by_status.get(status, 0) + count
        outcomes: list[tuple[_Waiter, list[IngestResult] | BaseException]] = []
        start = 0
        for batch, future in jobs:
            outcomes.append((future, results[start:start + len(batch)]))
            start += len(batch)
        _settle(outcomes)

    def _fail(self, jobs: list[_Job], exc: BaseException) -> None:
        self.stats.failures += 1
        log.error("journal write of %d events failed: %s", sum(len(batch) for batch, _ in jobs), exc)
        _settle([(future, exc) for _, future in jobs])


def _still_wanted(waiter: _Waiter) -> bool:
    if isinstance(waiter, Future):
        return waiter.set_running_or_notify_cancel()
    return not waiter.cancelled()   # an event loop's future: cancelled only on its loop, read here


def _settle(outcomes: list[tuple[_Waiter, list[IngestResult] | BaseException]]) -> None:
    """Complete every waiter: threads' futures here, each event loop's in one callback on that loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[list[IngestResult]], object]]] = {}
    for waiter, outcome in outcomes:
        if isinstance(waiter, Future):
            if isinstance(outcome, BaseException):
                waiter.set_exception(outcome)
            else:
                waiter.set_result(outcome)
        else:
            by_loop.setdefault(waiter.get_loop(), []).append((waiter, outcome))
    for loop, waiters in by_loop.items():
        with contextlib.suppress(RuntimeError):   # the loop closed: nobody is waiting any more
            loop.call_soon_threadsafe(_complete, waiters)


def _complete(waiters: list[tuple[asyncio.Future[list[IngestResult]], object]]) -> None:
    for future, outcome in waiters:
        if future.done():        # cancelled while the write ran: written, but nobody to tell
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)  # type: ignore[arg-type]
