"""The journal: durable appends from many processes, crash repair, forward and reverse reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO
from urchin.config import Settings
from urchin.facade import Memory
from urchin.journal import Journal

WRITER = str(REPO / "tests" / "helpers" / "writer.py")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_append_then_read_forward_and_backward(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j" / "events.jsonl")
    lines = [orjson.dumps({"n": i, "pad": "x" * i}) for i in range(300)]
    first = journal.append(lines[:100])
    journal.append(lines[100:])
    assert first == 0
    forward = list(journal.iter_lines())
    assert [line for _, line in forward] == lines
    assert list(journal.reverse_lines()) == forward[::-1]
    for offset, line in forward[::37]:
        assert journal.read_line_at(offset) == line


def test_files_are_private(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "deep" / "j" / "events.jsonl")
    journal.append([b"{}"])
    assert journal.path.stat().st_mode & 0o777 == 0o600
    assert journal.path.parent.stat().st_mode & 0o777 == 0o700
    assert journal.lock_path.stat().st_mode & 0o777 == 0o600


def test_read_from_returns_only_complete_lines(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "events.jsonl")
    journal.append([b'{"a":1}'])
    with journal.path.open("ab") as handle:
        handle.write(b'{"partial"')
    result = journal.read_from(0)
    assert result.lines == [(0, b'{"a":1}')]
    assert result.next_offset == 8
    assert journal.read_from(result.next_offset).lines == []


def test_torn_tail_is_moved_aside_and_the_journal_continues(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "events.jsonl")
    journal.append([b'{"a":1}', b'{"a":2}'])
    with journal.path.open("ab") as handle:
        handle.write(b'{"a":3, "torn')
    journal.append([b'{"a":4}'])
    assert _lines(journal.path) == [b'{"a":1}', b'{"a":2}', b'{"a":4}']
    torn = [orjson.loads(line) for line in _lines(journal.torn_path)]
    assert len(torn) == 1 and torn[0]["offset"] == 16 and torn[0]["length"] == 13
    import base64

    assert base64.b64decode(torn[0]["data_b64"]) == b'{"a":3, "torn'
    assert journal.stats().torn_records == 1


def test_invalid_lines_are_skipped_and_counted(tmp_path: Path, settings: Settings) -> None:
    memory = Memory(settings)
    memory.ingest_one({"content": "first"})
    with settings.journal_path.open("ab") as handle:
        handle.write(b"this is not json\n{\"also\": \"not an event\"}\n")
    memory.ingest_one({"content": "second"})
    stats = memory.journal.stats()
    assert (stats.events, stats.invalid_lines) == (2, 2)
    assert [e.content for e in memory.tail(5)] == ["first", "second"]


def test_eight_processes_append_at_once_without_loss_or_interleaving(settings: Settings) -> None:
    procs = [subprocess.Popen([sys.executable, WRITER, f"w{n}", "500", "1"], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n in range(8)]
    acked: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
        acked += out.decode().split()
    assert len(acked) == 4000
    ids = [orjson.loads(line)["id"] for line in _lines(settings.journal_path)]
    assert len(ids) == 4000 and set(ids) == set(acked)
    for n in range(8):  # each writer's own events stay in its order
        mine = [i for i in ids if i.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(500)]


@pytest.mark.slow
def test_sigkill_mid_loop_never_loses_an_acknowledged_event(settings: Settings) -> None:
    acked: list[str] = []
    for round_no in range(20):
        proc = subprocess.Popen([sys.executable, WRITER, f"k{round_no}", "100000", "7"], env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        # Let it write for a moment, then kill it without warning.
        deadline = time.monotonic() + 0.15 + (round_no % 5) * 0.05
        got = b""
        while time.monotonic() < deadline or not got:
            got += os.read(proc.stdout.fileno(), 65536)
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate()
        got += rest
        acked += [line for line in got.decode().split("\n")[:-1] if line]
        # Simulate the worst case too: a write cut off mid-line by the crash.
        if round_no % 4 == 0:
            with settings.journal_path.open("ab") as handle:
                handle.write(b'{"id": "torn-%d", "content": "cut off' % round_no)
    memory = Memory(settings)
    memory.ingest_one({"content": "after the crashes"})  # the next writer repairs the tail
    stored = [orjson.loads(line)["id"] for line in _lines(settings.journal_path)]
    assert len(stored) == len(set(stored)), "an event appears twice"
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged events lost"
    assert memory.journal.stats().invalid_lines == 0
    assert memory.journal.torn_records() >= 5


def test_every_folder_urchin_creates_is_private(tmp_path: Path) -> None:
    home = tmp_path / "a" / "home"
    settings = Settings.resolve(home)
    Memory(settings).ingest_one({"content": "x"})
    for folder in (tmp_path / "a", home, home / "journal"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    for item in home.rglob("*"):
        if item.is_file():
            assert item.stat().st_mode & 0o777 == 0o600, item


def test_stats_are_cached_and_stay_right_after_appends_repairs_and_replacement(settings: Settings) -> None:
    memory = Memory(settings)
    memory.ingest([{"content": f"n{i}", "timestamp": f"2026-01-0{i + 1}T00:00:00Z"} for i in range(3)])
    stats = memory.journal.stats()
    assert (stats.events, stats.first_timestamp[:10], stats.last_timestamp[:10]) == (3, "2026-01-01", "2026-01-03")
    assert settings.journal_path.with_name("events.jsonl.stats").stat().st_mode & 0o777 == 0o600
    with settings.journal_path.open("ab") as handle:
        handle.write(b"garbage\n")
    memory.ingest_one({"content": "later", "timestamp": "2026-02-01T00:00:00Z"})
    stats = memory.journal.stats()
    assert (stats.events, stats.invalid_lines, stats.last_timestamp[:10]) == (4, 1, "2026-02-01")
    settings.journal_path.write_bytes(b'{"id":"x","timestamp":"2025-01-01T00:00:00Z","content":"replaced"}\n')
    stats = memory.journal.stats()
    assert (stats.events, stats.invalid_lines, stats.first_timestamp[:10]) == (1, 0, "2025-01-01")


def test_the_journal_mark_tells_grown_from_replaced_cut_and_rewritten(tmp_path: Path) -> None:
    from urchin.journal import Journal, JournalMark

    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * 200) for i in range(100)))
    journal = Journal(path)
    mark = journal.mark(path.stat().st_size)
    assert journal.replaced(mark) is None
    with path.open("ab") as handle:
        handle.write(b'{"n":100}\n')
    assert journal.replaced(mark) is None                       # grew: still the same prefix
    data = bytearray(path.read_bytes())
    data[mark.offset - 20:mark.offset - 10] = b"X" * 10           # same file, same size, other tail bytes
    with path.open("r+b") as handle:
        handle.write(bytes(data))
    assert "last bytes" in (journal.replaced(mark) or "")
    assert JournalMark.from_dict({**mark.to_dict(), "tail": ""}) is not None   # marks saved before tails
    old = JournalMark.from_dict({k: v for k, v in mark.to_dict().items() if k != "tail"})
    assert old is not None and journal.replaced(old) is None     # ...still check the head, size and file
    os.truncate(path, mark.offset - 1)
    assert "shorter" in (journal.replaced(mark) or "")
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)
    assert "replaced" in (journal.replaced(mark) or "")
