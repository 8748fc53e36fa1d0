"""`urchin backup` / `urchin restore`: a consistent snapshot taken beside a writing daemon, restored
elsewhere with the same events and answers; forgotten events stay forgotten; a home with data is
never overwritten unasked; a tar file that is not a backup is refused."""

from __future__ import annotations

import io
import shutil
import stat
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess, running
from urchin.facade.upgrade import FORMATS
from urchin.idindex import IdIndex
from urchin.journal import Journal
from urchin.tombstones import ForgetLog, forget_hash

WRITERS = 4
WRITE_FOR_S = 1.5


@pytest.fixture
def daemon(urchin_home: Path) -> Iterator[DaemonProcess]:
    yield from running(urchin_home)


def _cli(home: Path, *args: str) -> tuple[int, str, str]:
    done = run_urchin(*args, env={"URCHIN_HOME": str(home)})
    return done.returncode, done.stdout, done.stderr


def _call(home: Path, *args: str) -> tuple[int, str, str]:
    """As `_cli`, in the test's process (call_urchin: the same entry point), where the rule is about
    what the command does with its home and archive; the test beside a daemon runs real processes."""
    done = call_urchin(*args, env={"URCHIN_HOME": str(home)})
    return done.returncode, done.stdout, done.stderr


def _lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line]


def _every_byte(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_backup_under_concurrent_ingest_restores_the_same_events_and_answers(
        daemon: DaemonProcess, tmp_path: Path) -> None:
    api = daemon.client()
    for n in range(20):
        seed = {"id": f"seed-{n}", "content": f"kestrel migration step {n}"}
        assert api.post("/ingest", json=seed).status_code == 200
    # forgotten through the daemon (tombstone, then compaction) ...
    api.post("/ingest", json={"id": "gone-compacted", "content": "kestrel plover-secret-one"})
    assert api.post("/forget", json={"ids": ["gone-compacted"], "confirm": True}).status_code == 200
    # ... and one whose compaction a crash stopped: the tombstone alone hides it, its line is still there
    api.post("/ingest", json={"id": "gone-tombstoned", "content": "kestrel plover-secret-two"})
    journal = Journal(daemon.journal)
    with journal.locked():
        ForgetLog(journal).record_forget([forget_hash("gone-tombstoned")])
    assert b"plover-secret-two" in daemon.journal_bytes()

    acked: list[str] = []
    stop = threading.Event()

    def write(worker: int) -> None:
        with daemon.client() as client:
            n = 0
            while not stop.is_set():
                event_id = f"w{worker}-{n}"
                answer = client.post("/ingest", json={"id": event_id, "content": f"busy writer {worker} {n}"})
                if answer.status_code == 200:
                    acked.append(event_id)
                n += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 10
        while len(acked) < 50 and time.monotonic() < deadline:
            time.sleep(0.02)
        acked_before = list(acked)
        archive = tmp_path / "snap.tar"
        code, out, err = _cli(daemon.home, "backup", str(archive))
        time.sleep(WRITE_FOR_S / 3)   # writers go on after the snapshot point
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert code == 0, err
    assert "backed up" in out and "1 forgotten event left out" in out
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert len(acked_before) >= 50 and len(acked) > len(acked_before)   # the copy ran while writes went on

    restored = tmp_path / "restored-home"
    code, out, err = _cli(restored, "restore", str(archive))
    assert code == 0, err
    # the same events: the source journal's lines, forgotten ones left out, up to the snapshot point
    hidden = {forget_hash("gone-compacted"), forget_hash("gone-tombstoned")}
    source = [line for line in _lines(daemon.journal) if forget_hash(orjson.loads(line)["id"]) not in hidden]
    copy = _lines(restored / "journal" / "events.jsonl")
    assert copy == source[:len(copy)]
    ids = {orjson.loads(line)["id"] for line in copy}
    assert set(acked_before) <= ids and not set(acked) <= ids   # an acked write is in; later ones are not
    # forgotten stays forgotten: the text is nowhere in the restored home, and the id is refused
    everything = _every_byte(restored)
    assert b"plover-secret" not in everything and b"plover-secret" not in archive.read_bytes()
    for path in restored.rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    # the same answers (the views rebuild from the restored journal by themselves)
    for query in (("search", "kestrel", "--json"), ("semantic", "kestrel migration", "--json")):
        code, before, err = _cli(daemon.home, *query)
        assert code == 0, err
        code, after, err = _cli(restored, *query)
        assert code == 0, err
        # ranked scores weigh words by how rare they are among all events: the source holds more now
        same = [(e["id"], e["content"]) for e in orjson.loads(before)["events"]]
        assert [(e["id"], e["content"]) for e in orjson.loads(after)["events"]] == same and "seed-" in after
    assert not ForgetLog(Journal(restored / "journal" / "events.jsonl")).pending()   # no compaction owed
    code, out, _ = _cli(restored, "ingest", "--id", "gone-compacted", "kestrel plover-secret-one")
    assert code == 0 and out == "suppressed: gone-compacted was forgotten, nothing stored\n"
    assert b"plover-secret" not in _every_byte(restored)
    code, _, err = _cli(daemon.home, "restore", str(archive), "--force")   # never under a running daemon
    assert code == 1 and "stop it first" in err and daemon.info() is not None


def test_restore_never_overwrites_a_home_with_data_unless_forced(tmp_path: Path, urchin_home: Path) -> None:
    _call(urchin_home, "ingest", "from the backed-up home")
    archive = tmp_path / "b.tar.gz"
    assert _call(urchin_home, "backup", str(archive))[0] == 0
    other = tmp_path / "other"
    _call(other, "ingest", "only in the other home")
    code, out, err = _call(other, "restore", str(archive))
    assert code == 1 and "already holds" in err and "--force" in err and "Traceback" not in err
    assert b"only in the other home" in (other / "journal" / "events.jsonl").read_bytes()
    code, out, err = _call(other, "restore", str(archive), "--force")
    assert code == 0, err
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("other.before-restore-")]
    assert len(aside) == 1 and b"only in the other home" in (aside[0] / "journal" / "events.jsonl").read_bytes()
    assert b"only in the other home" not in _every_byte(other)
    assert _call(other, "search", "backed-up")[1].count("from the backed-up home") == 1
    # a backup never replaces a file, and usage errors exit 2
    code, _, err = _call(urchin_home, "backup", str(archive))
    assert code == 1 and "already exists" in err
    assert _call(urchin_home, "backup")[0] == 2 and _call(urchin_home, "restore")[0] == 2


def test_restore_refuses_what_is_not_an_intact_backup(tmp_path: Path, urchin_home: Path) -> None:
    _call(urchin_home, "ingest", "an event to keep")
    archive = tmp_path / "b.tar"
    assert _call(urchin_home, "backup", str(archive))[0] == 0
    hostile = tmp_path / "hostile.tar"
    with tarfile.open(archive) as good, tarfile.open(hostile, "w") as bad:
        for member in good:
            bad.addfile(member, good.extractfile(member))
        escape = tarfile.TarInfo("../escaped.txt")
        escape.size = 3
        bad.addfile(escape, io.BytesIO(b"bad"))
    damaged = tmp_path / "damaged.tar"
    with tarfile.open(archive) as good, tarfile.open(damaged, "w") as bad:
        for member in good:
            data = good.extractfile(member).read()   # type: ignore[union-attr]
            bad.addfile(member, io.BytesIO(data.replace(b"an event to keep", b"an event to lose")))
    (tmp_path / "plain.txt").write_text("hello")
    for path, words in ((hostile, "not an Urchin backup"), (damaged, "does not match its checksum"),
                        (tmp_path / "plain.txt", "not an Urchin backup"), (tmp_path / "missing.tar", "no such file")):
        target = tmp_path / f"home-{path.stem}"
        code, out, err = _call(target, "restore", str(path))
        assert code == 1 and words in err and "Traceback" not in err, (path, err)
        assert not (target / "journal" / "events.jsonl").exists()
    assert not (tmp_path / "escaped.txt").exists()



def test_a_restored_home_and_a_copy_of_it_keep_their_id_index_and_forget_log(tmp_path: Path,
                                                                            urchin_home: Path) -> None:
    """A restore builds the id index (the first start does not), and a copy of the restored home
    (`cp -a`: other files, the same bytes) keeps it, re-stamped, and keeps its forget log's word that
    no compaction is owed; a forgotten id stays refused in both."""
    _call(urchin_home, "ingest", "--id", "kept-one", "restored and copied")
    _call(urchin_home, "ingest", "--id", "gone-one", "forgotten before the backup")
    with Journal(urchin_home / "journal" / "events.jsonl").locked():   # a tombstone, its compaction not run
        ForgetLog(Journal(urchin_home / "journal" / "events.jsonl")).record_forget([forget_hash("gone-one")])
    formats = urchin_home / "format.json"    # as an Urchin whose id index had format 2 recorded it
    formats.write_bytes(orjson.dumps({**orjson.loads(formats.read_bytes()), "formats": {
        **orjson.loads(formats.read_bytes())["formats"], "id-index": 2}}))
    archive = tmp_path / "b.tar"
    assert _call(urchin_home, "backup", str(archive))[0] == 0
    restored = tmp_path / "restored"
    assert _call(restored, "restore", str(archive))[0] == 0
    assert orjson.loads((restored / "format.json").read_bytes())["formats"]["id-index"] == FORMATS["id-index"]
    copied = tmp_path / "copied"
    shutil.copytree(restored, copied, copy_function=shutil.copy2)
    for home, done in ((restored, "caught up"), (copied, "kept")):
        journal = Journal(home / "journal" / "events.jsonl")
        log = ForgetLog(journal)
        assert not log.pending() and not log.unfinished() and log.generation() == 1, home
        with journal.locked():
            assert IdIndex(journal).catch_up() == done, home
        assert _call(home, "ingest", "--id", "kept-one", "again")[1] == "duplicate kept-one\n"
        assert "was forgotten" in _call(home, "ingest", "--id", "gone-one", "again")[1]
