"""Semantic search through the Memory facade: ranking, scores, filters, and following the journal."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from freezegun import freeze_time

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from urchin.errors import QueryError
from urchin.facade import Memory

NOW = datetime(2026, 5, 4, 20, 0, tzinfo=UTC)


def _at(hours_ago: float) -> str:
    return (NOW - timedelta(hours=hours_ago)).isoformat()


@pytest.fixture
def filled(memory: Memory) -> Memory:
    memory.ingest([
        {"id": "q", "content": "Which database should back the hybrid index?", "session": "s1",
         "timestamp": _at(5), "source": "claude", "workspace": "api"},
        {"id": "a", "content": "PostgreSQL with pgvector; HNSW for the vectors.", "session": "s1",
         "timestamp": _at(4.9), "source": "claude", "workspace": "api"},
        {"id": "shell", "content": "git status", "timestamp": _at(3), "source": "shell"},
        {"id": "auth", "content": "Authentication decisions: tokens rotate daily", "timestamp": _at(2),
         "source": "codex", "kind": "decision"},
        {"id": "old", "content": "database migration notes", "timestamp": _at(500), "source": "claude"},
    ])
    return memory


@freeze_time(NOW)
def test_best_first_with_scores_in_zero_one(filled: Memory) -> None:
    result = filled.semantic("database for the index")
    assert result.mode == "token-cosine"
    assert [h.event.id for h in result.hits][:1] == ["q"]
    assert "a" in [h.event.id for h in result.hits]  # found through its session neighbour
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores if s is not None)


@freeze_time(NOW)
def test_window_and_filters(filled: Memory) -> None:
    assert "old" not in [h.event.id for h in filled.semantic("database migration").hits]
    assert [h.event.id for h in filled.semantic("database migration", hours=1000).hits][0] == "old"
    assert [h.event.id for h in filled.semantic("authentication", kind="decision").hits] == ["auth"]
    assert filled.semantic("authentication", source="claude").hits == []
    assert [h.event.id for h in filled.semantic("pgvector", workspace="api").hits] == ["a", "q"]


@freeze_time(NOW)
def test_events_appended_by_another_process_are_found(filled: Memory) -> None:
    assert filled.semantic("kubernetes rollout").hits == []
    out = run_urchin("ingest", "--timestamp", _at(1), "kubernetes rollout paused for the weekend")
    assert out.returncode == 0
    assert [h.event.content for h in filled.semantic("kubernetes rollout").hits] == [
        "kubernetes rollout paused for the weekend"]


def test_bad_parameters(memory: Memory) -> None:
    with pytest.raises(QueryError, match="query must not be empty"):
        memory.semantic("   ")
    with pytest.raises(QueryError, match="limit"):
        memory.semantic("x", limit=0)


def test_cli_prints_scores() -> None:
    run_urchin("ingest", "the deploy pipeline uses blue green")
    out = run_urchin("semantic", "deploy pipeline")
    assert out.returncode == 0
    # the MCP tool's text: which mode ran, then one scored line per event
    line = r"\[[0-9T:-]+Z\] manual \(0\.\d{3}\) — the deploy pipeline uses blue green"
    assert re.fullmatch(rf"mode: token-cosine\n{line}\n", out.stdout)


def _embedder_env(url: str) -> dict[str, str]:
    return {"URCHIN_EMBEDDER_URL": url, "URCHIN_EMBEDDER_MODEL": "all-MiniLM-L6-v2", "URCHIN_EMBEDDER_API": "openai"}


def test_unreachable_embedder_falls_back_to_token_cosine_and_says_so(urchin_home) -> None:
    import socket

    from urchin.config import Settings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _embedder_env(f"http://127.0.0.1:{port}")
    memory = Memory(Settings.resolve(urchin_home, env=env))
    memory.ingest_one({"content": "the deploy pipeline uses blue green"})
    result = memory.semantic("deploy pipeline")
    assert result.mode == "token-cosine (the embedder failed)"
    assert [h.event.content for h in result.hits] == ["the deploy pipeline uses blue green"]
    out = call_urchin("semantic", "deploy pipeline", env=env)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines[0] == "mode: token-cosine (the embedder failed)"
    assert lines[1].startswith("note: fell back to token-cosine: embedder unreachable at ") and "blue green" in lines[2]
    assert out.stdout.count("unreachable") == 1   # the reason once, not wrapped in itself


@pytest.mark.slow
def test_semantic_search_with_a_real_embedder(embedder_url: str, urchin_home) -> None:
    from urchin.config import Settings

    memory = Memory(Settings.resolve(urchin_home, env=_embedder_env(embedder_url)))
    memory.ingest([
        {"id": "auth", "content": "We rotate OAuth refresh tokens every day and store them in the keychain"},
        {"id": "db", "content": "Postgres with pgvector backs the hybrid index"},
        {"id": "cat", "content": "My cat sleeps on the keyboard"},
    ])
    result = memory.semantic("decisions about authentication and login credentials")
    assert result.mode == "embedder (all-MiniLM-L6-v2)" and result.notes == []
    assert result.hits[0].event.id == "auth"
    # Each event is embedded once, ever: a second search embeds nothing new.
    assert memory.embed()["embedded"] == 0
    memory.ingest_one({"id": "late", "content": "SSO login via SAML was approved"})
    assert memory.embed()["embedded"] == 1
    assert "late" in [h.event.id for h in memory.semantic("single sign-on authentication", limit=2).hits]
    best = memory.semantic("postgres database for the index", source="manual", limit=1)
    assert [h.event.id for h in best.hits] == ["db"]


@pytest.mark.slow
def test_beside_the_daemons_embedder_loop_a_query_never_embeds_a_backlog(embedder_url: str, urchin_home) -> None:
    """Background work never holds up a query (issue 16): beside the embedder loop, a query embeds a few
    new events itself, one small request, but leaves a backlog to the loop and never waits for the loop;
    it answers from the vectors cached and says the rest is being embedded."""
    from urchin.config import Settings

    memory = Memory(Settings.resolve(urchin_home, env=_embedder_env(embedder_url)))
    memory.embed_in_background()
    memory.ingest([{"id": f"n{i}", "content": f"note {i} on the release train"} for i in range(20)])
    result = memory.semantic("when does the release train leave")
    assert result.mode == "embedder (all-MiniLM-L6-v2)" and result.hits == []
    assert result.notes == ["some events are not embedded yet and were not searched: the daemon is embedding them"]
    view = memory.embedding_view()
    assert len(view.cache()) == 0                      # the query embedded none of the 20
    assert memory.embed()["embedded"] == 20            # the loop's call
    memory.ingest_one({"id": "late", "content": "SSO login via SAML was approved"})
    result = memory.semantic("single sign-on authentication", limit=1)
    assert [h.event.id for h in result.hits] == ["late"] and result.notes == []   # a few new: embedded inline
    memory.ingest_one({"id": "later", "content": "The cafeteria serves soup on Fridays"})
    with view._lock:                                   # the loop mid-catch-up: the query does not wait for it
        result = memory.semantic("what is for lunch on friday", limit=1)
    assert "later" not in [h.event.id for h in result.hits] and "the daemon is embedding them" in result.notes[0]
    assert [h.event.id for h in memory.semantic("what is for lunch on friday", limit=1).hits] == ["later"]


@pytest.mark.slow
def test_what_a_writer_checked_before_a_compaction_is_not_trusted_after_it(embedder_url: str, urchin_home) -> None:
    """The embedder loop does not take the journal lock: it may record how far it checked the journal
    after a compaction rewrote it, or after a drop took rewritten lines' vectors out. Neither record
    may skip an event: the first names the journal generation it was made in, the second is refused."""
    from urchin.config import Settings

    memory = Memory(Settings.resolve(urchin_home, env=_embedder_env(embedder_url)))
    memory.ingest([{"id": f"n{i}", "content": f"note {i} on the release train"} for i in range(6)])
    view = memory.embedding_view()
    generation, stamp = 0, view.cache().stamp()
    assert memory.embed()["embedded"] == 6
    stale = view._offset_file().read_text()
    memory.forget(["n0"], confirm=True)
    memory.ingest([{"id": f"m{i}", "content": f"a later note {i}"} for i in range(3)])
    view._offset_file().write_text(stale)           # written late, by a loop that scanned the old journal
    assert sorted(e.id for e in view.pending()[0]) == ["m0", "m1", "m2"]
    view._offset_file().unlink()
    view._checked(memory.journal.size(), generation + 1, stamp, wait=True)   # scanned before the drop
    assert not view._offset_file().exists()
    assert memory.embed()["embedded"] == 3
    middle = memory.journal.size() - 5                       # inside the last line
    for damaged in ("-5 1", "x 1", "9 9 9", "", "\u0663 1", f"{middle} 1"):   # every event checked again
        view._offset_file().write_text(damaged)
        assert view.pending() == ([], memory.journal.size())
    memory.ingest_one({"id": "m3", "content": "the last note"})
    view._offset_file().write_text(f"{memory.journal.size() - 5} 1")
    assert [e.id for e in view.pending()[0]] == ["m3"]
    view._offset_file().unlink()
    view._offset_file().mkdir()
    assert [e.id for e in view.pending()[0]] == ["m3"]
    assert memory.embed()["embedded"] == 1 and view.pending()[0] == []


@pytest.mark.slow
@pytest.mark.parametrize("change", ["forget", "redact"])
def test_the_embedder_loop_never_caches_an_event_forgotten_or_rewritten_while_it_runs(
        embedder_url: str, urchin_home, change: str) -> None:
    """The loop reads a backlog once, then embeds it 16 events per request. A compaction between two
    requests (a forget, or a redaction rule applied to the journal) drops vectors: the loop must not
    add the forgotten event's vector after it, nor the rewritten line's old text under its id."""
    from urchin.config import Settings
    from urchin.search.vectors import VectorCache

    settings = Settings.resolve(urchin_home, env=_embedder_env(embedder_url))
    memory = Memory(settings)
    memory.embed_in_background()
    memory.ingest([{"id": f"n{i}", "content": f"note {i} on the release train"} for i in range(40)]
                  + [{"id": "f", "content": "the door code is ZQX-7734-SECRET"}])
    done: list[int] = []

    def between_requests(_: int) -> None:
        if done:
            return
        done.append(1)
        if change == "forget":
            Memory(settings).forget(["f"], confirm=True)
        else:
            (urchin_home / "config.toml").write_text('[redact]\nextra = { door_code = "ZQX-[0-9]{4}-[A-Z-]+" }\n')
            rules = Settings.resolve(urchin_home, env=_embedder_env(embedder_url))    # reads the new rule
            assert Memory(rules).redact_rewrite()["rewritten"] == 1

    memory.embed(between_requests, limit=256)
    view = memory.embedding_view()
    cache = VectorCache(urchin_home, view.embedder.fingerprint, view.embedder.dim).open()
    assert done and "f" not in cache
    memory.embed()                                     # the loop's next calls: every event checked again
    cache = VectorCache(urchin_home, view.embedder.fingerprint, view.embedder.dim).open()
    assert len(cache) == (40 if change == "forget" else 41)
    if change == "redact":
        expected = view.embedder.embed(["the door code is [REDACTED:door_code]"])[0]
        cached = cache.vectors_of(["f"])["f"]
        assert float(cached @ expected / np.linalg.norm(expected)) > 0.9999


# ---- saying when it is weak ------------------------------------------------------------------------
def test_no_match_is_weak_and_says_what_to_try(filled: Memory) -> None:
    result = filled.semantic("zebra giraffe")
    assert result.hits == [] and result.weak
    assert result.hint and "urchin search" in result.hint and "embedder" in result.hint
    assert result.to_dict()["weak"] is True and result.to_dict()["hint"] == result.hint


@freeze_time(NOW)
def test_a_strong_match_is_not_weak(filled: Memory) -> None:
    result = filled.semantic("PostgreSQL pgvector HNSW vectors")
    assert result.hits and not result.weak and result.hint is None and "weak" not in result.to_dict()


def test_cli_and_mcp_print_the_hint(memory: Memory) -> None:
    from urchin.mcp_server import run_tool

    out = call_urchin("semantic", "zebra giraffe")
    assert out.returncode == 0 and "hint: no match" in out.stdout and "urchin search" in out.stdout
    memory.ingest([{"id": "a", "content": "we picked postgres for the hybrid index"}])
    reply = run_tool(memory, "urchin_semantic_search", {"query": "zebra giraffe"})
    text = reply.content[0].text  # type: ignore[union-attr]
    assert "hint: no match" in text and "urchin search" in text   # the CLI's render, the same text
    assert reply.structured_content["weak"] is True  # type: ignore[index]
    assert "urchin search" in reply.structured_content["hint"]  # type: ignore[index]


# ---- associations beside the saved index --------------------------------------------------------
def _sessions(memory: Memory, n: int, start: int = 0) -> None:
    topics = [("authentication login oauth", "pkce idp token refresh"), ("invoice stripe webhook", "ledger refund")]
    memory.ingest([{"id": f"e{i}-{j}", "content": f"{topics[i % 2][j]} step {i}", "session": f"s{i}",
                    "timestamp": _at(100 - (i * 2 + j) / 100)} for i in range(start, start + n) for j in range(2)])


@freeze_time(NOW)
def test_associations_are_built_saved_beside_the_index_and_reloaded(memory: Memory) -> None:
    from urchin.search import assoc
    from urchin.search.semantic import TokenCosineView

    _sessions(memory, 60)
    view = memory.cosine_view()
    folder = view.index_dir
    assert folder is not None
    memory.semantic("authentication")
    model = view.index.assoc
    assert model is not None and model.rows == 120  # small journal: built before the query
    assert view.save() and assoc.path_beside(folder).stat().st_mode & 0o777 == 0o600
    again = TokenCosineView(view.journal, folder)
    again.catch_up()
    assert again.loaded_from_disk and again.index.assoc is not None and again.index.assoc.rows == 120
    _sessions(memory, 40, start=60)  # grown by more than half: rebuilt at the next query
    memory.semantic("authentication")
    assert view.index.assoc is not None and view.index.assoc.rows == 200


@freeze_time(NOW)
def test_another_ranking_gets_the_saved_associations_while_they_cover_the_journal(memory: Memory) -> None:
    """`associations()` (search_context's token-cosine leg) reads the model a save wrote, never builds
    or waits: none before a save, the same model in another process's view, none once the journal
    is compacted (a forget: the model may hold forgotten words) until the next save."""
    from urchin.search.semantic import TokenCosineView

    _sessions(memory, 60)
    view = memory.cosine_view()
    assert view.index_dir is not None
    assert view.associations() is None                       # nothing saved yet
    memory.semantic("authentication")
    assert view.save()
    model = view.associations()
    assert model is not None and model.rows == 120 and view.associations() is model   # read once
    cold = TokenCosineView(view.journal, view.index_dir)     # another process: the view not loaded
    other = cold.associations()
    assert other is not None and other.terms == model.terms and not cold._opened
    with view._lock:                                          # the view busy: no waiting
        assert view.associations() is model
    memory.forget(query="login", confirm=True)  # compacts the journal: both files go
    assert view.associations() is None and cold.associations() is None


def test_the_seed_example_finds_a_decision_sharing_no_word_with_the_question() -> None:
    # urchin_semantic_search's own example, through the CLI: no model, the shipped thesaurus
    call_urchin("ingest", "--kind", "decision", "We switched login to OAuth with PKCE")
    out = call_urchin("semantic", "decisions about authentication")
    assert out.returncode == 0, out.stderr
    assert "We switched login to OAuth with PKCE" in out.stdout


# ---- what a ranked query reads besides its ranking (issue 37: its fixed cost) ---------------------
_OPENED: list[str] | None = None      # the paths opened while a test records (`_opens`)


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)     # for the whole run (a hook cannot be removed): records only inside `_opens`


def _opens(call: Callable[[], object]) -> list[str]:
    """The files `call` opened in this process (Python's audit events: `open`, `os.open`)."""
    global _OPENED
    _OPENED = []
    try:
        call()
        return _OPENED
    finally:
        _OPENED = None


@freeze_time(NOW)
def test_a_ranked_query_opens_neither_the_journal_nor_the_saved_index_again(memory: Memory,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A query read its hits by opening the journal once a hit, read the journal's end to find nothing
    new, and read the saved manifest and hashed the journal's ends to know its associations still held:
    ~1-3 ms of a ~5 ms query at 1M events. Now the view keeps the journal open (its hits are `pread`s)
    and answers whether the saved index covers the journal from two `stat`s, until a save or another
    journal file changes that."""
    from urchin.search import cosine_view_learn

    monkeypatch.setattr(cosine_view_learn, "INLINE_ASSOC_ROWS", 50)   # the saved model, as past 1,000 rows
    _sessions(memory, 60)
    view = memory.cosine_view()
    assert view.index_dir is not None
    manifest, journal = view.index_dir / "manifest.json", str(memory.journal.path)
    memory.semantic("authentication")
    assert view.save() and view.associations() is not None
    first = memory.semantic("authentication token").hits
    assert len(first) >= 10
    hits: list[tuple[str, float | None]] = []
    again = _opens(lambda: hits.extend((h.event.id, h.score) for h in memory.semantic("authentication token").hits))
    assert hits == [(h.event.id, h.score) for h in first]
    assert journal not in again and str(manifest) not in again
    _sessions(memory, 10, start=60)                 # appended: read once, by the next catch-up
    assert _opens(lambda: memory.semantic("ledger")).count(journal) == 1
    with freeze_time(NOW + timedelta(seconds=1)):   # a save's generation is named by the clock
        assert view.save()                          # another manifest: checked again, once
    assert str(manifest) in _opens(lambda: memory.semantic("ledger"))
    assert str(manifest) not in _opens(lambda: memory.semantic("ledger"))


@freeze_time(NOW)
def test_hits_ranked_before_the_journal_is_swapped_are_read_from_the_file_they_were_ranked_in(
        memory: Memory) -> None:
    """A prompt's recall takes its hits lazily, after the view's lock: they were read from whatever
    file was at the journal's path then, at the offsets of the one ranked (another event, or none, once
    a restore or a compaction swapped it). They come from the file they were ranked in; the next query
    follows the new file, and the old one is closed once no query reads it."""
    from urchin.search.query import Filters

    _sessions(memory, 30)
    view = memory.cosine_view()
    ranked = [h.event.id for h in view.search("authentication", since_ms=None, limit=10, filters=Filters())]
    lazily = view.search_lazily("authentication", since_ms=None, limit=10, filters=Filters())
    path = memory.journal.path
    lines = path.read_bytes().splitlines(keepends=True)
    swapped = path.with_name("swapped.jsonl")
    swapped.write_bytes(b"".join(reversed(lines)))           # the same events, in another order
    os.replace(swapped, path)
    assert [h.event.id for h in lazily] == ranked
    assert [h.event.id for h in view.search("authentication", since_ms=None, limit=10,
                                             filters=Filters())] == ranked   # ranked again, on the new file
    assert not _held_deleted_journal()
    memory.forget(query="ledger", confirm=True)   # compacted: the old file is let go at once, not at a query
    assert not _held_deleted_journal()


def _held_deleted_journal() -> list[str]:
    """Links of this process's descriptors to a journal file since removed (/proc/self/fd)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.endswith("(deleted)") and "events.jsonl" in link:
            out.append(link)
    return out
