"""Group commit on a real journal: concurrent writers share writes, each gets its own results,
and close() writes everything already queued."""

from __future__ import annotations

import asyncio
import queue
import threading

import orjson
import pytest

from urchin.config import Settings
from urchin.daemon.writer import GroupWriter
from urchin.errors import DaemonError
from urchin.facade import Memory


def test_concurrent_writers_share_fsyncs_and_get_their_own_results(settings: Settings) -> None:
    memory = Memory(settings)
    memory.warm()
    writer = GroupWriter(memory)
    writer.start()
    mismatches: list[str] = []

    def write(worker: int) -> None:
        for i in range(40):
            event = memory.prepare({"id": f"g{worker}-{i}", "content": f"group {worker} {i}"})
            result = writer.submit([event]).result(10)[0]
            if (result.id, result.status) != (f"g{worker}-{i}", "appended"):
                mismatches.append(f"{result}")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    assert mismatches == []
    ids = [orjson.loads(line)["id"] for line in settings.journal_path.read_bytes().splitlines()]
    assert sorted(ids) == sorted(f"g{w}-{i}" for w in range(8) for i in range(40))
    assert writer.stats.events == 320
    assert writer.stats.batches < 320 and writer.stats.largest > 1  # writes were shared


def test_duplicates_across_requests_in_one_write_are_caught(settings: Settings) -> None:
    memory = Memory(settings)
    writer = GroupWriter(memory, gather_s=0.05)
    event = memory.prepare({"id": "same", "content": "twice"})
    writer.start()
    futures = [writer.submit([event]) for _ in range(3)]
    statuses = sorted(f.result(10)[0].status for f in futures)
    writer.close()
    assert statuses == ["appended", "duplicate", "duplicate"]
    assert settings.journal_path.read_bytes().count(b'"same"') == 1


def test_close_writes_what_is_queued_then_refuses(settings: Settings) -> None:
    memory = Memory(settings)
    writer = GroupWriter(memory)
    writer.start()
    futures = [writer.submit([memory.prepare({"content": f"queued {i}"})]) for i in range(200)]
    writer.close()
    assert all(f.done() and f.result()[0].status == "appended" for f in futures)
    assert len(settings.journal_path.read_bytes().splitlines()) == 200
    with pytest.raises(DaemonError):
        writer.submit([memory.prepare({"content": "too late"})])


def test_a_request_cancelled_before_its_write_is_not_written(settings: Settings) -> None:
    memory = Memory(settings)
    writer = GroupWriter(memory)
    writer._thread = threading.Thread(target=lambda: None)  # accept submissions, drain nothing yet
    gone = writer.submit([memory.prepare({"content": "client went away", "id": "gone"})])
    kept = writer.submit([memory.prepare({"content": "client waits", "id": "kept"})])
    assert gone.cancel()
    writer._thread = None
    writer.start()
    assert kept.result(10)[0].status == "appended"
    writer.close()
    journal = settings.journal_path.read_bytes()
    assert b'"kept"' in journal and b'"gone"' not in journal


def test_event_loop_writers_share_fsyncs_and_wake_once_per_write(settings: Settings) -> None:
    """`append` from coroutines: each gets its own results after the fsync, and a write's waiters on
    one loop are completed by one callback, not one cross-thread wake-up each."""
    memory = Memory(settings)
    memory.warm()
    writer = GroupWriter(memory, gather_s=0.05)
    writer.start()

    async def main() -> tuple[list[str], int]:
        loop = asyncio.get_running_loop()
        wakeups = 0
        original = loop.call_soon_threadsafe

        def counted(*args: object, **kwargs: object) -> object:
            nonlocal wakeups
            wakeups += 1
            return original(*args, **kwargs)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        events = [memory.prepare({"id": f"a{i}", "content": f"loop {i}"}) for i in range(64)]
        results = await asyncio.gather(*(writer.append([event]) for event in events))
        return [f"{r[0].id}:{r[0].status}" for r in results], wakeups

    outcomes, wakeups = asyncio.run(main())
    writer.close()
    assert outcomes == [f"a{i}:appended" for i in range(64)]
    assert wakeups == writer.stats.batches < 64       # one per write, and writes were shared
    journal = settings.journal_path.read_bytes()
    assert sorted(orjson.loads(line)["id"] for line in journal.splitlines()) == sorted(f"a{i}" for i in range(64))


def test_an_event_loop_request_cancelled_before_its_write_is_not_written(settings: Settings) -> None:
    memory = Memory(settings)
    writer = GroupWriter(memory)
    writer._thread = threading.Thread(target=lambda: None)  # accept submissions, drain nothing yet

    async def main() -> str:
        gone = asyncio.ensure_future(writer.append([memory.prepare({"content": "went away", "id": "gone"})]))
        kept = asyncio.ensure_future(writer.append([memory.prepare({"content": "waits", "id": "kept"})]))
        await asyncio.sleep(0)      # both queued
        gone.cancel()
        await asyncio.sleep(0)
        writer._thread = None
        writer.start()
        return (await kept)[0].status

    assert asyncio.run(main()) == "appended"
    writer.close()
    journal = settings.journal_path.read_bytes()
    assert b'"kept"' in journal and b'"gone"' not in journal


class _CountedQueue(queue.SimpleQueue[object]):
    """The writer's queue, counting what is put on it (each put may wake the writer thread)."""

    def __init__(self) -> None:
        self.puts = 0

    def put(self, item: object, block: bool = True, timeout: float | None = None) -> None:
        self.puts += 1
        super().put(item, block, timeout)


def test_an_event_loop_step_s_requests_reach_the_writer_in_one_hand_over(settings: Settings) -> None:
    """64 requests answered in one step of the event loop are put on the writer's queue once (not 64
    times, each a possible wake-up of its thread and a turn of the GIL), and each still gets its own
    results after the fsync."""
    memory = Memory(settings)
    memory.warm()
    writer = GroupWriter(memory, gather_s=0.05)
    counted = writer._queue = _CountedQueue()
    writer.start()

    async def main() -> list[str]:
        events = [memory.prepare({"id": f"s{i}", "content": f"step {i}"}) for i in range(64)]
        results = await asyncio.gather(*(writer.append([event]) for event in events))
        return [f"{r[0].id}:{r[0].status}" for r in results]

    assert asyncio.run(main()) == [f"s{i}:appended" for i in range(64)]
    writer.close()
    assert counted.puts == 2          # the step's 64 jobs, then the stop marker
    assert writer.stats.events == 64


def test_a_step_s_requests_staged_when_the_writer_closes_are_refused_unwritten(settings: Settings) -> None:
    memory = Memory(settings)
    writer = GroupWriter(memory)
    writer.start()

    async def main() -> list[str]:
        appends = [asyncio.ensure_future(writer.append([memory.prepare({"content": f"late {i}"})])) for i in range(3)]
        await asyncio.sleep(0)      # staged for the end of this step
        writer.close()
        outcomes = await asyncio.gather(*appends, return_exceptions=True)
        return [type(outcome).__name__ for outcome in outcomes]

    assert asyncio.run(main()) == ["DaemonError"] * 3
    assert not settings.journal_path.exists() or settings.journal_path.read_bytes() == b""
