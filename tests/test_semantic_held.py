"""A ranked result set held while the journal is rewritten under it: a prompt's recall takes its hits
lazily, after the view's lock, from the journal file they were ranked in (a held descriptor). What a
forget or a `redact --rewrite` removed from the journal in the meantime is never served from that file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
from freezegun import freeze_time

from urchin.config import Settings
from urchin.facade import Memory
from urchin.search.query import Filters

NOW = datetime(2026, 5, 4, 20, 0, tzinfo=UTC)
SECRET = "ZQX-7734-SECRET-CODE"


def _fill(memory: Memory) -> None:
    memory.ingest([{"id": f"e{i}", "content": f"authentication token rotation step {i}", "session": f"s{i % 3}",
                    "timestamp": (NOW - timedelta(hours=50 - i / 10)).isoformat()} for i in range(30)]
                  + [{"id": "leaky", "content": f"authentication door code is {SECRET}", "session": "s1",
                      "timestamp": (NOW - timedelta(hours=1)).isoformat()}])


def _lazily(memory: Memory) -> list[str]:
    view = memory.cosine_view()
    return [h.event.id for h in view.search("authentication", since_ms=None, limit=40, filters=Filters())]


@freeze_time(NOW)
def test_a_result_set_held_across_the_first_forget_never_serves_the_forgotten_event(memory: Memory) -> None:
    """The hits' reader skipped forgotten ids only when some were forgotten before the ranking (a
    snapshot); the first forget, compacted while the set was held, left its event in the held file."""
    _fill(memory)
    ranked = _lazily(memory)
    assert "e7" in ranked
    lazily = memory.cosine_view().search_lazily("authentication", since_ms=None, limit=40, filters=Filters())
    memory.forget(["e7"], confirm=True)
    got = [h.event.id for h in lazily]
    assert "e7" not in got
    assert "e7" not in _lazily(memory) and len(_lazily(memory)) == len(ranked) - 1


@freeze_time(NOW)
def test_a_result_set_held_across_a_forget_by_session_serves_none_of_it(memory: Memory) -> None:
    _fill(memory)
    lazily = memory.cosine_view().search_lazily("authentication", since_ms=None, limit=40, filters=Filters())
    memory.forget(session="s2", confirm=True)
    assert not [h.event for h in lazily if h.event.session == "s2"]


@freeze_time(NOW)
def test_a_result_set_held_across_redact_rewrite_never_serves_the_old_text(settings: Settings) -> None:
    """The held file keeps the line as it was before the rewrite: its secret must not be served."""
    memory = Memory(settings)
    _fill(memory)
    assert "leaky" in _lazily(memory)
    lazily = memory.cosine_view().search_lazily("authentication", since_ms=None, limit=40, filters=Filters())
    (settings.home / "config.toml").write_text('[redact]\nextra = { door_code = "ZQX-[0-9]{4}-[A-Z-]+" }\n')
    rules = Memory(Settings.resolve(settings.home))
    assert rules.redact_rewrite()["rewritten"] == 1
    served = " ".join(h.event.content for h in lazily)
    assert SECRET not in served
    rules.close()
    memory.close()


@freeze_time(NOW)
def test_a_journal_rewritten_in_place_never_serves_another_event_as_a_hit(memory: Memory) -> None:
    """Two lines of one length swapped in place (the same file, the same size): the view's rows still
    point at their old offsets, where the other event now is. A hit read there is not the one ranked:
    it is left out, never served under the ranked one's score."""
    def at(hours_ago: float) -> str:
        return (NOW - timedelta(hours=hours_ago)).isoformat()

    memory.ingest([{"id": f"a{i}", "content": f"authentication step {i}", "timestamp": at(9 - i)} for i in range(5)]
                  + [{"id": f"b{i}", "content": f"invoicingstep {i} ledge", "timestamp": at(3 - i)} for i in range(2)])
    assert len(_lazily(memory)) == 5
    path = memory.journal.path
    lines = path.read_bytes().splitlines(keepends=True)
    ids = [orjson.loads(line)["id"] for line in lines]
    a, b = ids.index("a1"), ids.index("b1")
    assert len(lines[a]) == len(lines[b])
    lines[a], lines[b] = lines[b], lines[a]
    with path.open("r+b") as handle:              # the same inode, the same size
        handle.write(b"".join(lines))
    served = memory.cosine_view().search("authentication", since_ms=None, limit=40, filters=Filters())
    assert all("authentication" in h.event.content for h in served)
