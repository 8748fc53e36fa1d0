"""What a recall reads: a prompt looks up what its session was given in that session's own records
(not a scan of the journal's last days), and the session-start digest reads the journal once when
the workspace's latest events already hold the decisions and commits it shows; the answers are the
same as reading each apart."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import urchin.recall as recall_module
from urchin.config import Settings
from urchin.event import Event
from urchin.facade import Memory
from urchin.search.query import Filters
from urchin.search.substring import SubstringSearcher

NOW = datetime.now(UTC)


def _event(ident: str, minutes_ago: float, content: str, *, kind: str = "conversation", ws: str = "alpha",
           session: str = "s-1", source: str = "claude") -> dict[str, Any]:
    stamp = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return {"id": ident, "timestamp": stamp, "source": source, "kind": kind, "content": content,
            "workspace": ws, "session": session}


@pytest.fixture
def memory(urchin_home: Path) -> Iterator[Memory]:
    with Memory(Settings.resolve(str(urchin_home))) as m:
        yield m


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The filters of every substring search (a read of the journal's blocks, or its kept answer's tail)."""
    seen: list[Any] = []
    search = SubstringSearcher.search

    def counting(self: SubstringSearcher, query: str | None, **kwargs: Any) -> Any:
        seen.append(kwargs.get("filters"))
        return search(self, query, **kwargs)

    def counting_newest(self: SubstringSearcher, filters: Filters, **kwargs: Any) -> Any:
        seen.append(filters)
        return newest(self, filters, **kwargs)

    newest = SubstringSearcher.newest
    monkeypatch.setattr(SubstringSearcher, "search", counting)
    monkeypatch.setattr(SubstringSearcher, "newest", counting_newest)
    return seen


def test_a_prompt_looks_up_what_its_session_was_given_in_the_session_not_the_journal(
        memory: Memory, scans: list[Any]) -> None:
    memory.ingest([_event(f"noise-{i}", 60 + i, f"unrelated chatter number {i}", ws="other", session=f"n{i % 5}")
                   for i in range(300)])
    memory.ingest([_event("old-1", 300, "The release checklist lives in docs/release.md", kind="decision",
                          session="s-old"),
                   _event("old-2", 200, "Release checklist: tag, build the wheel, publish", session="s-old2")])
    first = memory.recall(workspace="alpha", session="s-now", prompt="where is the release checklist")
    assert {line.id for line in first.items} == {"old-1", "old-2"}
    scans.clear()
    again = memory.recall(workspace="alpha", session="s-now", prompt="where is the release checklist")
    assert again.items == [] and again.text == ""          # given before: not again
    assert [f for f in scans if f is not None and f.session is not None] == []
    other = memory.recall(workspace="alpha", session="s-other", prompt="where is the release checklist")
    assert {line.id for line in other.items} == {"old-1", "old-2"}


def _digest_both_ways(memory: Memory, monkeypatch: pytest.MonkeyPatch, scans: list[Any]) -> tuple[str, int]:
    """The digest as recall gives it (and how many reads it made), checked against each part read apart."""
    scans.clear()
    text = memory.recall(workspace="alpha").text
    reads = len(scans)

    def apart(reader: Any, workspace: str, latest: Any, kind: str, since_ms: int, limit: int) -> Any:
        return reader.recent(Filters(workspace=workspace, kind=kind), since_ms, limit)

    with monkeypatch.context() as patch:
        patch.setattr(recall_module, "_newest", apart)
        assert memory.recall(workspace="alpha").text == text
    return text, reads


def test_the_digest_reads_the_journal_once_when_its_latest_events_hold_what_it_shows(
        memory: Memory, monkeypatch: pytest.MonkeyPatch, scans: list[Any]) -> None:
    items = [_event(f"c-{i}", 100 + i, f"talk {i}", session=f"s{i // 10}") for i in range(30)]
    items += [_event(f"d-{i}", 50 + i, f"decided: option {i}", kind="decision", session="s9") for i in range(7)]
    items += [_event(f"g-{i}", 40 + i, f"commit {i}: fix", kind="commit", source="git", session="s9")
              for i in range(4)]
    memory.ingest(items)
    text, reads = _digest_both_ways(memory, monkeypatch, scans)
    assert reads == 1 and "decided: option 0" in text and "commit 0: fix" in text


def test_the_digest_still_reads_decisions_and_commits_older_than_its_latest_events(
        memory: Memory, monkeypatch: pytest.MonkeyPatch, scans: list[Any]) -> None:
    monkeypatch.setattr(recall_module, "SCAN_LIMIT", 20)
    items = [_event("d-old", 3000, "decided: keep the old parser", kind="decision", session="s-a"),
             _event("g-old", 2900, "commit 1: vendor the parser", kind="commit", source="git", session="s-a")]
    items += [_event(f"c-{i}", 100 + i, f"talk {i}", session=f"s{i // 10}") for i in range(40)]
    memory.ingest(items)
    text, reads = _digest_both_ways(memory, monkeypatch, scans)
    assert reads == 3 and "decided: keep the old parser" in text and "commit 1: vendor the parser" in text


def test_a_daemons_query_never_saves_the_token_cosine_index_its_follower_does(memory: Memory) -> None:
    """In hot mode (the daemon) a ranked query never writes the index (its caller, a hook, would wait
    for the whole save); the follower's catch-up saves it when due."""
    memory.ingest([_event(f"e-{i}", 100 + i, f"the release checklist, part {i}", session=f"s{i % 3}")
                   for i in range(40)])
    memory.warm()
    view = memory.cosine_view()
    view.save_every = 1                                  # due at every new row
    assert view.index_dir is not None
    manifest = view.index_dir / "manifest.json"
    assert memory.recall(workspace="alpha", session="s-new", prompt="where is the release checklist").items
    assert not manifest.exists()
    memory.refresh()                                     # what the daemon's follower calls
    assert manifest.exists()


def test_a_repeated_session_start_digest_parses_only_what_the_journal_gained(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon keeps the digest's reads (the workspace's newest events, decisions, commits) and
    brings them up to date from the journal's tail: the next session start parses what was added,
    not the workspace's latest 250 events again, and says the same as reading them afresh."""
    items = [_event(f"c-{i}", 100 + i, f"talk {i}", session=f"s{i // 10}") for i in range(300)]
    items += [_event(f"d-{i}", 50 + i, f"decided: option {i}", kind="decision", session="s9") for i in range(3)]
    memory.ingest(items)
    memory.recall(workspace="alpha")
    memory.ingest([_event("c-new", 1, "talk new", session="s-last"),
                   _event("d-new", 1, "decided: option new", kind="decision", session="s-last")])
    parsed: list[Any] = []
    parse = Event.from_json

    def counting(line: Any) -> Event | None:
        parsed.append(line)
        return parse(line)

    with monkeypatch.context() as patch:
        patch.setattr(Event, "from_json", staticmethod(counting))
        text = memory.recall(workspace="alpha").text
    assert len(parsed) <= 3 * 2, len(parsed)      # three reads, each of the two lines added
    assert "decided: option new" in text and "talk new" in text

    def afresh(self: SubstringSearcher, filters: Filters, *, since_ms: int, limit: int) -> Any:
        return self.search(None, since_ms=since_ms, limit=limit, filters=filters)

    monkeypatch.setattr(SubstringSearcher, "newest", afresh, raising=False)
    assert memory.recall(workspace="alpha").text == text


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every line `Event.from_json` parses from now on (this test's)."""
    parsed: list[Any] = []
    parse = Event.from_json

    def counting(line: Any) -> Event | None:
        parsed.append(line)
        return parse(line)

    monkeypatch.setattr(Event, "from_json", staticmethod(counting))
    return parsed


def test_a_repeated_session_start_digest_parses_no_line_of_another_workspace(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the journal gained since the last digest is read for this workspace's lines only (the
    other workspaces' lines are passed over unparsed, as a read of the blocks passes them over)."""
    memory.ingest([_event(f"c-{i}", 100 + i, f"talk {i}", session=f"s{i // 10}") for i in range(30)])
    memory.recall(workspace="alpha")
    memory.ingest([_event(f"o-{i}", 2, f"other talk {i}", ws="other", session="s-o") for i in range(60)]
                  + [_event("c-new", 1, "talk new", session="s-last")])
    with monkeypatch.context() as patch:
        parsed = _parses(patch)
        text = memory.recall(workspace="alpha").text
    assert len(parsed) <= 3, len(parsed)       # at most one line a read: the one of this workspace
    assert "talk new" in text and "other talk" not in text


def test_a_repeated_session_start_digest_does_not_frame_or_redact_what_it_gave_before_again(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A digest shows mostly what the last one showed: each content is neutralised, checked and cut
    once (not its whole text at every session start), each line redacted once per redactor; the
    block is the one a fresh process makes, and a new redactor (new `[redact]` rules) applies at once."""
    from urchin.recall import frame
    from urchin.redact import Redactor

    memory.ingest([_event(f"c-{i}", 100 + i, f"ran the suite {i}: " + "ok " * 2000, kind="decision",
                          session=f"s{i // 3}") for i in range(6)])
    first = memory.recall(workspace="alpha").text
    seen: list[int] = []
    neutralise, redact_text = frame.neutralise, Redactor.redact_text

    def counting(text: str) -> str:
        seen.append(len(text))
        return neutralise(text)

    def redacting(self: Redactor, text: str) -> Any:
        seen.append(len(text))
        return redact_text(self, text)

    with monkeypatch.context() as patch:
        patch.setattr(frame, "neutralise", counting)
        patch.setattr(Redactor, "redact_text", redacting)
        again = memory.recall(workspace="alpha").text
        assert again == first
        assert sum(seen) < 6 * 1000, seen          # on 8abc0bb: each 6,000-character content, twice
    frame.remembered.cache_clear()
    frame._shown_remembered.cache_clear()
    assert memory.recall(workspace="alpha").text == first        # what a fresh process gives
    memory.ingestor.redactor = Redactor({"suite_word": r"suite"})   # what a `[redact]` change installs
    assert "[REDACTED:suite_word]" in memory.recall(workspace="alpha").text


def test_a_prompt_reads_from_the_journal_only_the_candidates_its_block_takes(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranking names 40 candidates; each is read from the journal only when the block asks for
    it, and the block stops at the first line its budget does not hold."""
    from urchin.journal import Journal

    memory.ingest([_event(f"r-{i}", 100 + i, f"the release checklist step {i}: tag, build, publish " + "x" * 200,
                          session=f"s{i % 7}") for i in range(60)])
    reads: list[int] = []
    read = Journal.read_line_at

    def counting(self: Journal, offset: int) -> bytes | None:
        reads.append(offset)
        return read(self, offset)

    monkeypatch.setattr(Journal, "read_line_at", counting)
    result = memory.recall(workspace="alpha", session="s-now", prompt="where is the release checklist", budget=250)
    assert 1 <= len(result.items) < 10
    assert len(reads) <= len(result.items) + 1, (len(reads), len(result.items))   # 40 on 8abc0bb


def test_a_daemons_start_digests_the_active_workspaces_so_their_first_session_start_reads_only_the_tail(
        memory: Memory) -> None:
    """The first session-start digest of a workspace after a daemon's start used to read its latest
    events from the blocks (a hook's whole budget at 1M events); `warm()` digests the workspaces of the
    last week in the background, so the hooks' first digests find their reads kept. Nothing is recorded."""
    items = [_event(f"{ws}-{i}", 100 + i, f"talk {i} in {ws}", ws=ws, session=f"{ws}-s{i // 10}")
             for ws in ("alpha", "beta", "gamma") for i in range(40)]
    memory.ingest(items)
    size = memory.settings.journal_path.stat().st_size
    memory.warm()
    warming = next(t for t in threading.enumerate() if t.name == "urchin-recall-warm")
    warming.join(60)
    assert not warming.is_alive()
    kept = {key[0].workspace for key in memory._substring._kept}
    assert kept >= {"alpha", "beta", "gamma"}
    assert memory.settings.journal_path.stat().st_size == size          # no audit record: no session
    fresh = Memory(memory.settings)
    for ws in ("alpha", "beta", "gamma"):
        assert memory.recall(workspace=ws).text == fresh.recall(workspace=ws).text
