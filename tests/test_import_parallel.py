"""A large `urchin import` is validated and redacted in worker processes and written by one: the
journal and the report are exactly what one process makes (urchin/facade/bulk.py)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import orjson

from tests.pool_entries import in_a_fresh_python
from urchin.config import Settings
from urchin.facade import Memory, bulk
from urchin.facade.writing import IMPORT_BATCH
from urchin.ingest import BatchReport, Ingestor

REPO = Path(__file__).resolve().parent.parent   # not conftest's: the checks run in a fresh interpreter import this
SECRET = "ghp_" + "A1b2C3d4E5" * 4
IMPORT = """
import sys, orjson
from urchin.config import Settings
from urchin.facade import Memory
with open(sys.argv[2], "rb") as handle:
    report = Memory(Settings.resolve(sys.argv[1])).import_lines(handle)
print(orjson.dumps({**report.to_dict(), "workers": report.workers}).decode())
"""
SERIAL = IMPORT.replace("with open", "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), "
                                     "daemon=True).start()  # another thread: stay in one process\nwith open")


def _lines(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        record: object = {"id": f"p-{i % (n - 500)}", "timestamp": f"2026-01-01T00:00:{i % 60:02d}Z",
                          "content": f"event {i} token {SECRET if i % 97 == 0 else 'none'} ünï", "source": "shell"}
        if i % 1000 == 7:
            out.append(b"{broken json " + str(i).encode())
        elif i % 1000 == 8:
            out.append(b"[1, 2]")
        elif i % 1000 == 9:
            out.append(orjson.dumps({"id": f"bad-{i}", "content": ""}))
        elif i % 1000 == 10:
            out.append(b"   ")
        else:
            out.append(orjson.dumps(record))
    return out


def _run(code: str, home: Path, source: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", code, str(home), str(source)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(home.parent)},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def test_parallel_import_writes_what_a_serial_import_writes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(_lines(3 * IMPORT_BATCH + 777)) + b"\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    key = tmp_path / "a" / "home"
    parallel = _run(IMPORT, key, source)
    serial_home = tmp_path / "b" / "home"
    serial_home.mkdir()
    for name in [p.name for p in key.iterdir() if p.is_file() and "key" in p.name]:  # same keyed ids
        (serial_home / name).write_bytes((key / name).read_bytes())
    serial = _run(SERIAL, serial_home, source)
    assert parallel.pop("workers") >= 2 and serial.pop("workers") == 0
    parallel.pop("index"), serial.pop("index")
    assert parallel == serial
    assert parallel["duplicate"] and len(parallel["rejected"]) == 3 * 14  # type: ignore[arg-type]
    # each refusal names its own line (blank lines are skipped, not refused, and still counted)
    assert [r["line"] for r in parallel["rejected"]] == sorted(  # type: ignore[attr-defined]
        i + 1 for i in range(3 * IMPORT_BATCH + 777) if i % 1000 in (7, 8, 9))
    journal = Settings.resolve(key).journal_path.read_bytes()
    assert journal == Settings.resolve(serial_home).journal_path.read_bytes()
    assert SECRET.encode() not in journal and journal.count(b"\n") == parallel["appended"]


def _file_lines() -> bytes:
    """`_lines` and the awkward ends of a file: blank and whitespace lines, a CRLF line, no final newline."""
    extra = [b"", b"\t ", orjson.dumps({"id": "crlf", "timestamp": "2026-01-01T00:00:00Z", "content": "x"}) + b"\r",
             b'{"id": "cut", "content": "no end']
    return b"\n".join(_lines(900)[:450] + extra + _lines(900)[450:] + extra)


def _two_homes(tmp_path: Path) -> list[Ingestor]:
    """The ingestors of two homes that share one install key (the same keyed ids), each id kept in memory
    as `import_lines` keeps them: the first for the import under test, the second for the serial one."""
    homes = [tmp_path / "p", tmp_path / "s"]
    ingestors = [Memory(Settings.resolve(home)).ingestor for home in homes]
    ingestors[0].journal.proof.sign(b"{}")     # makes the install key, which both homes share
    homes[1].mkdir()
    (homes[1] / "redact-id.key").write_bytes((homes[0] / "redact-id.key").read_bytes())
    for ingestor in ingestors:
        ingestor.keep_ids_in_memory()
    return ingestors


def _children() -> set[int]:
    """This process's child processes, as /proc says (a forked worker runs this process's command line)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):   # gone meanwhile
            continue
    return found


def test_a_file_read_in_chunks_is_numbered_and_prepared_as_its_lines(tmp_path: Path) -> None:
    """Workers split a chunk of the file into lines themselves: the same numbers, refusals, journal
    lines and offsets as the lines a file gives one by one, wherever the chunks end."""
    from itertools import accumulate

    from urchin.idindex import id_hash
    from urchin.ingest import Joined

    ingestor = Memory(Settings.resolve(tmp_path / "home")).ingestor
    data = _file_lines()

    def flat(batches: list[tuple[int, list[tuple[int, str]], Joined]]) -> tuple[object, ...]:
        count, payload = 0, b""
        rejected: list[tuple[int, str]] = []
        ids: list[str] = []
        starts: list[int] = []
        hashes: list[int] = []
        for done, refused, joined in batches:
            count += done
            rejected += refused
            ids += joined.id_list()
            starts += [len(payload) + start for start in joined.starts]
            payload += joined.payload
            hashes += joined.hashes
        lines = payload.split(b"\n")[:-1]
        assert starts == list(accumulate((len(line) + 1 for line in lines), initial=0))[:-1]
        assert hashes == [id_hash(i) for i in ids] and len(ids) == len(lines)
        return count, rejected, ids, payload

    by_lines = flat([bulk.prepare_chunk(ingestor, b) for b in bulk.numbered_batches(io.BytesIO(data), 128)])
    assert by_lines[1] and by_lines[2]
    for size in (1, 97, 4096, 1 << 20):
        chunks = list(bulk.numbered_chunks(io.BytesIO(data), size))
        assert b"".join(c for _, c in chunks) == data
        assert flat([bulk.prepare_chunk(ingestor, c) for c in chunks]) == by_lines, size


def _workers_read_the_file(folder: str) -> None:
    tmp_path = Path(folder)
    data = _file_lines()
    source = tmp_path / "in.jsonl"
    source.write_bytes(data)
    ingestors = _two_homes(tmp_path)
    done: list[list[object]] = [[], []]
    before, forked = _children(), set()

    def record(d: tuple[int, list[tuple[int, str]], object], r: BatchReport) -> None:
        done[0].append((d[0], d[1], r.appended, r.duplicate))
        forked.update(_children() - before)

    with source.open("rb") as handle:
        assert bulk._regular_fd(handle) is not None and bulk._regular_fd(io.BytesIO(data)) is None
        bulk.import_parallel(ingestors[0], bulk.numbered_chunks(handle, 997), 2, record, source=handle)
    bulk.import_serial(ingestors[1], bulk.numbered_chunks(io.BytesIO(data), 997),
                       lambda d, r: done[1].append((d[0], d[1], r.appended, r.duplicate)))
    assert len(done[0]) > 20 and done[0] == done[1]
    journals = [ingestor.journal.path.read_bytes() for ingestor in ingestors]
    assert journals[0] == journals[1] and journals[0].count(b"\n") > 400
    assert len(forked) == 2   # the workers did read it


def test_workers_read_a_regular_file_s_chunks_themselves(tmp_path: Path) -> None:
    """A regular file's chunks go to the workers as where to read them (`os.pread` at an offset), not
    as bytes: a parallel import of a file in small chunks writes the journal and reports the lines
    a serial import of the same bytes (from memory, no file) does. (In a fresh interpreter: the
    workers fork only where no other thread runs.)"""
    in_a_fresh_python(_workers_read_the_file, str(tmp_path))


def _workers_killed(folder: str) -> None:
    tmp_path = Path(folder)
    data = b"\n".join(_lines(2000)) + b"\n"
    ingestors = _two_homes(tmp_path)
    bulk.import_serial(ingestors[1], bulk.numbered_chunks(io.BytesIO(data), 8192), lambda done, tally: None)
    before = _children()
    killed: list[int] = []

    def kill_the_workers(done: object, tally: object) -> None:
        for pid in [] if killed else _children() - before:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    bulk.import_parallel(ingestors[0], bulk.numbered_chunks(io.BytesIO(data), 8192), 2, kill_the_workers)
    assert len(killed) == 2 and not _children() - before
    journals = [ingestor.journal.path.read_bytes() for ingestor in ingestors]
    assert journals[0] == journals[1] and journals[0].count(b"\n") > 1000


def test_workers_killed_mid_import_leave_the_rest_to_this_process(tmp_path: Path) -> None:
    """Both workers SIGKILLed once the first batch is appended: the batches they held and the rest are
    prepared here, and the journal is what a serial import writes, each event once."""
    in_a_fresh_python(_workers_killed, str(tmp_path))


def test_an_import_beside_another_thread_forks_nothing_and_writes_the_same_journal(tmp_path: Path) -> None:
    """A forked child would inherit the other thread's locks mid-use: the pool refuses to fork, and
    the import goes on in this process."""
    data = b"\n".join(_lines(1500)) + b"\n"
    ingestors = _two_homes(tmp_path)
    bulk.import_serial(ingestors[1], bulk.numbered_chunks(io.BytesIO(data), 8192), lambda done, tally: None)
    before = _children()
    seen: list[set[int]] = []
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        bulk.import_parallel(ingestors[0], bulk.numbered_chunks(io.BytesIO(data), 8192), 2,
                             lambda done, tally: seen.append(_children() - before))
    finally:
        stop.set()
        other.join()
    assert len(seen) > 10 and not any(seen)
    journals = [ingestor.journal.path.read_bytes() for ingestor in ingestors]
    assert journals[0] == journals[1] and journals[0].count(b"\n") > 900
