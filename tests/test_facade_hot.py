"""Memory's hot mode: views fed every new journal line once, in order, whoever appended it."""

from __future__ import annotations

from collections.abc import Sequence

from urchin.config import Settings
from urchin.facade import HotView, Memory


class RecordingView:
    def __init__(self) -> None:
        self.lines: list[tuple[int, bytes]] = []
        self.ends: list[int] = []
        self.resets = 0

    def feed(self, lines: Sequence[tuple[int, bytes]], next_offset: int) -> None:
        self.lines.extend(lines)
        self.ends.append(next_offset)

    def reset(self) -> None:
        self.resets += 1
        self.lines.clear()


def test_views_get_every_line_once_including_other_writers(settings: Settings) -> None:
    hot = Memory(settings)
    view = RecordingView()
    assert isinstance(view, HotView)
    hot.ingest([{"content": "before warm", "id": "a"}])
    hot.add_view(view)
    hot.warm()
    assert [line for _, line in view.lines][0].find(b'"a"') > 0
    other = Memory(settings)  # another process would do exactly this
    other.ingest([{"content": "from elsewhere", "id": "b"}, {"content": "and more", "id": "c"}])
    assert hot.refresh() == settings.journal_path.stat().st_size
    assert hot.refresh() == settings.journal_path.stat().st_size  # nothing new: nothing fed twice
    assert [b'"%s"' % i in line for (_, line), i in zip(view.lines, (b"a", b"b", b"c"), strict=True)] == [True] * 3
    offsets = [offset for offset, _ in view.lines]
    assert offsets == sorted(set(offsets)) and view.ends[-1] == settings.journal_path.stat().st_size
    assert hot.followed == (view.ends[-1], 3)


def test_partial_tail_waits_for_its_newline(settings: Settings) -> None:
    hot = Memory(settings)
    view = RecordingView()
    hot.add_view(view)
    hot.ingest([{"content": "whole", "id": "w"}])
    hot.warm()
    with settings.journal_path.open("ab") as handle:
        handle.write(b'{"id": "half", "content": "still being wri')
    hot.refresh()
    assert len(view.lines) == 1
    with settings.journal_path.open("ab") as handle:
        handle.write(b'tten", "timestamp": "2024-01-01T00:00:00Z"}\n')
    hot.refresh()
    assert len(view.lines) == 2 and b'"half"' in view.lines[1][1]


def test_truncated_journal_resets_views(settings: Settings) -> None:
    hot = Memory(settings)
    view = RecordingView()
    hot.add_view(view)
    hot.ingest([{"content": f"event {i}"} for i in range(5)])
    hot.warm()
    settings.journal_path.write_bytes(b"")
    Memory(settings).ingest([{"content": "a new life", "id": "fresh"}])
    hot.refresh()
    assert view.resets == 1 and len(view.lines) == 1 and b'"fresh"' in view.lines[0][1]
    assert hot.followed[1] == 1


def test_hot_search_reads_its_own_writes(settings: Settings) -> None:
    hot = Memory(settings)
    hot.warm()
    Memory(settings).ingest_one({"content": "needle written elsewhere"})
    assert hot.search("needle").events[0].content == "needle written elsewhere"
    assert hot.followed[1] == 1  # the search caught the views up first


def test_follow_events_yields_what_lands_after_it_starts(memory: Memory) -> None:
    import threading

    memory.ingest_one({"content": "before", "id": "f-0"})
    stop = threading.Event()
    seen: list[str] = []

    def write() -> None:
        for i in (1, 2):
            memory.ingest_one({"content": f"after {i}", "id": f"f-{i}"})

    events = memory.follow_events(stop, poll_s=0.01)
    threading.Timer(0.05, write).start()
    for event in events:
        seen.append(event.id)
        if len(seen) == 2:
            stop.set()
    assert seen == ["f-1", "f-2"]


def test_a_journal_rewritten_in_place_restarts_every_hot_view(memory: Memory) -> None:
    view = RecordingView()
    memory.add_view(view)
    memory.warm()
    memory.ingest([{"content": "one", "id": "r-1"}, {"content": "two", "id": "r-2"}])
    memory.refresh()
    path = memory.journal.path
    data = path.read_bytes()
    with path.open("r+b") as handle:   # same file, same size: only the bytes differ (a restored copy, an editor)
        handle.write(data.replace(b'"one"', b'"uno"'))
    memory.refresh()
    assert view.resets == 1 and memory.followed[1] == 2


def test_a_long_stretch_of_lines_is_counted_behind_the_refresh(settings: Settings) -> None:
    """A daemon's start on a large journal does not wait for the line count (a scan that grows with
    the journal): `refresh` reaches the end at once, the count follows in the background, stays a lower
    bound meanwhile, and starts over when the journal is replaced."""
    import time

    from urchin.facade.hot import HotViews
    from urchin.journal import Journal

    path = settings.journal_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(b'{"id": "l-%d", "content": "line"}\n' % i for i in range(3000)))
    hot = HotViews(Journal(path))
    hot.COUNT_INLINE = 1024     # bytes: anything longer is counted by a thread
    assert hot.refresh() == path.stat().st_size and hot.followed[0] == path.stat().st_size
    deadline = time.monotonic() + 5
    while hot.counting:
        assert hot.followed[1] <= 3000 and time.monotonic() < deadline
        time.sleep(0.01)
    assert hot.followed == (path.stat().st_size, 3000)
    path.write_bytes(b"".join(b'{"id": "n-%d", "content": "a new journal"}\n' % i for i in range(40)))
    hot.refresh()
    while hot.counting:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert hot.followed == (path.stat().st_size, 40)
