"""TokenCosineIndex: ranking, incremental statistics, filters, windows, ties and session context."""

from __future__ import annotations

import math
import os
import random
from dataclasses import replace

import numpy as np
import pytest

from urchin.errors import QueryError
from urchin.event import Event
from urchin.search.cosine import TokenCosineIndex
from urchin.search.cosine_settings import RankingSettings

BASE = 1_700_000_000_000


def ev(eid: str, content: str, t: int = 0, **fields: object) -> Event:
    data: dict = {"source": "claude", "kind": "note", "workspace": None, "session": None}
    data.update(fields)
    return Event(id=eid, timestamp="", content=content, ts_ms=BASE + t * 1000, **data)  # type: ignore[arg-type]


def ids(hits: list) -> list[str]:
    return [h.id for h in hits]


def corpus(n: int = 300, seed: int = 3) -> list[Event]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(60)] + ["deploy", "auth", "token", "cache", "timeout"]
    return [ev(f"e{i:04d}", " ".join(rng.choices(words, k=rng.randint(3, 12))), t=i,
               session=f"s{i // 7}", source=rng.choice(["claude", "shell"]),
               workspace=rng.choice(["api", "web"]), kind=rng.choice(["note", "command"]))
            for i in range(n)]


QUERIES = ["deploy auth", "token cache timeout", "w3 w7 w11", "auth", "w59 deploy w1 w2"]


def test_blank_query_is_rejected() -> None:
    index = TokenCosineIndex()
    index.add(ev("a", "hello world"))
    for blank in ("", "   ", "\n\t"):
        with pytest.raises(QueryError, match="query must not be empty"):
            index.search(blank)


def test_limit_below_one_is_rejected() -> None:
    index = TokenCosineIndex()
    with pytest.raises(QueryError, match="limit"):
        index.search("x", limit=0)


def test_best_match_ranks_first_and_scores_are_in_unit_interval() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many([ev("a", "the deploy failed on auth token expiry"), ev("b", "lunch menu today"),
                    ev("c", "deploy went fine")])
    hits = index.search("auth token")
    assert ids(hits) == ["a"]
    assert 0 < hits[0].score <= 1
    assert all(0 < h.score <= 1 for h in index.search("deploy"))


def test_identical_text_scores_one() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many([ev("a", "rotate the signing keys"), ev("b", "keys of the piano")])
    # The source is part of what an event is found by, so the same text plus its source is a match.
    assert index.search("rotate the signing keys claude")[0].match == pytest.approx(1.0, abs=1e-6)


def test_query_with_only_unknown_words_finds_nothing() -> None:
    index = TokenCosineIndex()
    index.add(ev("a", "hello world"))
    assert index.search("zebra quantum") == []


def test_rare_terms_outweigh_common_ones() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many([ev(f"n{i}", f"build log line {i}") for i in range(20)]
                   + [ev("rare", "build flaky segfault"), ev("common", "build build log")])
    assert index.search("build segfault")[0].id == "rare"


def test_title_tags_source_and_workspace_are_searchable() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many([ev("t", "body", title="Quarterly roadmap"), ev("g", "body", tags=("security",)),
                    ev("s", "body", source="gemini"), ev("w", "body", workspace="billing")])
    assert ids(index.search("roadmap")) == ["t"]
    assert ids(index.search("security")) == ["g"]
    assert ids(index.search("gemini")) == ["s"]
    assert ids(index.search("billing")) == ["w"]


@pytest.mark.parametrize("context", [0.0, 0.5])
def test_incremental_adds_score_like_a_fresh_build(context: float) -> None:
    events = corpus()
    fresh = TokenCosineIndex(RankingSettings(context=context))
    fresh.add_many(events)
    grown = TokenCosineIndex(RankingSettings(context=context))
    grown.freeze_postings = 64  # force many frozen segments and merges on this small corpus
    for i, event in enumerate(events):
        grown.add(event)
        if i % 50 == 0:
            grown.search("deploy auth")  # a search between adds must not leave stale statistics
    assert len(grown._segments) >= 1 and grown.nnz == fresh.nnz
    for q in QUERIES:
        a, b = fresh.search(q, limit=20), grown.search(q, limit=20)
        assert ids(a) == ids(b)
        assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-5)


def test_idf_follows_new_events() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0, pivot=1.0))  # the plain cosine, to check its value
    index.add_many([ev("a", "alpha beta"), ev("b", "gamma delta")])
    before = index.search("alpha gamma")
    index.add_many([ev(f"x{i}", "alpha filler") for i in range(10)])
    after = index.search("alpha gamma")
    # alpha became common, so the event with gamma now wins.
    assert before[0].id == "a" and after[0].id == "b"
    n = len(index)  # 12 events; df: alpha 11, gamma 1, delta 1, and the source "claude" 12
    idf_alpha, idf_rare, idf_source = (math.log((n + 1) / (df + 0.5)) for df in (11, 1, 12))
    norm_b = math.sqrt(2 * idf_rare**2 + idf_source**2)
    expected = idf_rare**2 / (math.hypot(idf_alpha, idf_rare) * norm_b)
    assert after[0].match == pytest.approx(expected, rel=1e-4)


def test_filters_select_results() -> None:
    events = corpus()
    index = TokenCosineIndex()
    index.add_many(events)
    by_id = {e.id: e for e in events}
    for name, value in (("source", "shell"), ("workspace", "web"), ("kind", "command"), ("session", "s3")):
        hits = index.search("deploy auth token w1 w2 w3", limit=50, **{name: value})
        assert hits and all(getattr(by_id[h.id], name) == value for h in hits)
    both = index.search("deploy auth w1", source="shell", workspace="api", limit=50)
    assert all(by_id[h.id].source == "shell" and by_id[h.id].workspace == "api" for h in both)


def test_unknown_filter_value_finds_nothing() -> None:
    index = TokenCosineIndex()
    index.add(ev("a", "deploy", source="claude"))
    assert index.search("deploy", source="nobody") == []


@pytest.mark.parametrize("shuffled", [False, True])
def test_time_window_is_inclusive(shuffled: bool) -> None:
    events = [ev(f"e{i}", "deploy report", t=i) for i in range(10)]
    if shuffled:
        random.Random(1).shuffle(events)
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many(events)
    hits = index.search("deploy", since_ms=BASE + 3000, until_ms=BASE + 5000)
    assert ids(hits) == ["e5", "e4", "e3"]
    assert ids(index.search("deploy", since_ms=BASE + 8000)) == ["e9", "e8"]
    assert ids(index.search("deploy", until_ms=BASE + 1000)) == ["e1", "e0"]
    assert index.search("deploy", since_ms=BASE + 99_000) == []


def test_ties_break_by_newer_timestamp_then_id() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many([ev("b", "same text", t=1), ev("a", "same text", t=1), ev("c", "same text", t=0),
                    ev("d", "same text", t=2)])
    assert ids(index.search("same text")) == ["d", "a", "b", "c"]
    assert ids(index.search("same text", limit=2)) == ["d", "a"]


def test_limit_caps_results() -> None:
    index = TokenCosineIndex()
    index.add_many(corpus())
    assert len(index.search("deploy", limit=3)) == 3


def test_a_reply_is_found_through_the_turn_it_answers() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.5, context_turns=1))
    index.add_many([ev("q", "where did you go hiking last weekend?", t=0, session="s1"),
                    ev("r", "up the north ridge, beautiful views", t=1, session="s1"),
                    ev("o", "unrelated chatter here", t=1, session="s2")])
    hits = index.search("hiking weekend")
    assert ids(hits) == ["q", "r"]
    assert hits[1].score < hits[0].score


def test_late_events_are_linked_in_timestamp_order() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.5, context_turns=1, session=0.0))
    index.add_many([ev("first", "kubernetes upgrade", t=0, session="s"), ev("third", "ok", t=5, session="s")])
    index.add(ev("second", "fine", t=2, session="s"))  # arrives last, belongs in the middle
    assert ids(index.search("kubernetes")) == ["first", "second"]


def test_context_does_not_cross_sessions_or_sessionless_events() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.5))
    index.add_many([ev("a", "terraform plan", t=0, session="s1"), ev("b", "next", t=1, session="s2"),
                    ev("c", "loose", t=2)])
    assert ids(index.search("terraform")) == ["a"]


def test_many_exact_ties_are_ordered_by_id() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many([ev(f"id{i:03d}", "same text", t=5) for i in reversed(range(200))])
    index.add(ev("older", "same text", t=1))
    assert ids(index.search("same text", limit=3)) == ["id000", "id001", "id002"]
    assert ids(index.search("same text", limit=201))[-1] == "older"


def _backfilled(n: int = 400, seed: int = 5, late: float = 0.05) -> list[Event]:
    """Events in arrival order: mostly in time order, `late` of them backfilled with an older time."""
    rng = random.Random(seed)
    events = corpus(n, seed)
    out = []
    for i, e in enumerate(events):
        t = i * 10 if rng.random() >= late else rng.randrange(0, max(1, i * 10))
        out.append(e.replace(ts_ms=BASE + t * 1000))
    return out


WINDOWS = [(0, 10**9), (500, 1500), (3000, 3990), (0, 200), (3900, 10**9), (1234, 1236), (2000, None), (None, 700)]


@pytest.mark.parametrize("since,until", WINDOWS)
def test_windows_are_exact_with_backfilled_events(since: int | None, until: int | None) -> None:
    events = _backfilled()
    lo = None if since is None else BASE + since * 1000
    hi = None if until is None else BASE + until * 1000
    index = TokenCosineIndex(RankingSettings(context=0.0, session=0.0))
    index.add_many(events)
    assert len(index._late.view()) > 5
    # Without context (neighbours' or the session's) a score does not depend on the window: windowed
    # results are the unwindowed ones whose own time is inside the window.
    for q in QUERIES:
        everything = index.search(q, limit=1000)
        inside = [h for h in everything
                  if (lo is None or events[h.row].ts_ms >= lo) and (hi is None or events[h.row].ts_ms <= hi)]
        assert index.search(q, since_ms=lo, until_ms=hi, limit=1000) == inside


@pytest.mark.parametrize("since,until", WINDOWS)
def test_arrival_order_does_not_change_windowed_results(since: int | None, until: int | None) -> None:
    events = _backfilled()
    lo = None if since is None else BASE + since * 1000
    hi = None if until is None else BASE + until * 1000
    arrived, ordered = TokenCosineIndex(), TokenCosineIndex()
    arrived.add_many(events)
    ordered.add_many(sorted(events, key=lambda e: e.ts_ms))  # no late rows: the plain slice
    assert not len(ordered._late.view())
    for q in QUERIES:
        a = sorted((h.id, round(h.score, 5)) for h in arrived.search(q, since_ms=lo, until_ms=hi, limit=1000))
        b = sorted((h.id, round(h.score, 5)) for h in ordered.search(q, since_ms=lo, until_ms=hi, limit=1000))
        assert a == b


def test_one_backfilled_event_does_not_widen_recent_windows() -> None:
    index = TokenCosineIndex(RankingSettings(context=0.0))
    index.add_many([ev(f"e{i}", "deploy report", t=i) for i in range(1000)])
    index.add(ev("old", "deploy report", t=3))  # arrives last, belongs near the start
    lo, hi, late = index._row_range(BASE + 990_000, None)
    assert (lo, hi, late) == (990, 1001, True)  # the late row is scored but checked on its own time
    assert ids(index.search("deploy", since_ms=BASE + 990_000, limit=20)) == [f"e{i}" for i in range(999, 989, -1)]
    assert "old" in ids(index.search("deploy", since_ms=BASE + 2000, until_ms=BASE + 4000))


# ---- associations, the session leg, the kind prior -------------------------------------------------
def _project_journal(sessions: int = 30, seed: int = 7) -> list[Event]:
    """Sessions on three topics; each topic's words spread over different turns of a session."""
    rng = random.Random(seed)
    topics = [["authentication", "login", "oauth", "pkce", "token", "idp"],
              ["invoice", "billing", "stripe", "webhook", "refund", "ledger"],
              ["kubernetes", "helm", "ingress", "pod", "cluster", "node"]]
    filler = ["git", "status", "pytest", "passed", "read", "edit", "file", "diff"]
    out: list[Event] = []
    t = 0
    for s in range(sessions):
        words = topics[s % 3]
        for turn in range(6):
            t += 1
            text = rng.sample(words, 2) + rng.sample(filler, 3)
            out.append(ev(f"s{s}-{turn}", " ".join(text), t=t, session=f"s{s}"))
    return out


def test_associations_relate_words_that_share_sessions_not_events() -> None:
    from urchin.search import assoc

    index = TokenCosineIndex()
    index.add_many(_project_journal())
    model = assoc.build(index, dim=8)
    near = [t for t, _ in model.related("authent", 5)]
    assert set(near) & {"login", "oauth", "pkce", "idp"}
    assert not set(near) & {"invoic", "stripe", "kubernet", "helm"}


def test_expansion_finds_an_event_that_shares_no_word_with_the_query() -> None:
    from urchin.search import assoc

    journal = _project_journal()
    target = ev("answer", "we switched to oauth with pkce through the idp", t=10_000, session="late")
    plain = TokenCosineIndex(RankingSettings(session=0.0, related=0.0))  # learned associations only: no thesaurus
    plain.add_many([*journal, target])
    assert plain.search("authentication", session="late") == []
    expanded = TokenCosineIndex(RankingSettings(session=0.0, expand=0.5, expand_terms=5, related=0.0))
    expanded.add_many([*journal, target])
    expanded.assoc = assoc.build(expanded, dim=8)
    assert ids(expanded.search("authentication", session="late")) == ["answer"]


def test_associations_save_and_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from urchin.search import assoc

    index = TokenCosineIndex()
    index.add_many(_project_journal())
    model = assoc.build(index, dim=8)
    path = model.save(tmp_path / "cosine.assoc.npz")
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = assoc.load(path)
    assert loaded is not None and loaded.terms == model.terms and loaded.rows == model.rows
    assert loaded.related("authent", 3)[0][0] == model.related("authent", 3)[0][0]
    path.write_bytes(b"not an npz")
    assert assoc.load(path) is None  # damaged: the caller rebuilds
    assert assoc.load(tmp_path / "missing.npz") is None


def test_associations_stay_bounded() -> None:
    from urchin.search import assoc

    index = TokenCosineIndex()
    index.add_many(corpus(3000))
    model = assoc.build(index, dim=6, max_terms=20, max_docs=500)
    assert len(model) <= 20 and model.vectors.shape[1] <= 6
    assert model.memory_bytes() < 20 * 6 * 4 + 20 * 200
    assert not model.stale(3000) and model.stale(4500) and model.stale(10)


def test_associations_sum_as_bincount_does_a_chunk_at_a_time(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The learning child's sums (`assoc._sums`, chunked: bincount's int64 and float64 copies of every
    entry were its peak) are bincount's, bit for bit, so the model is the one it always was."""
    from urchin.search import assoc

    monkeypatch.setattr(assoc, "_CHUNK", 1_000)
    rng = np.random.default_rng(3)
    bins = rng.integers(0, 300, 10_500).astype(np.int32)
    w, column = rng.random(10_500).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    at = rng.integers(0, 300, 10_500).astype(np.int32)
    assert assoc._sums(bins, 300, lambda part: w[part]).tobytes() == np.bincount(bins, w, minlength=300).tobytes()
    assert assoc._sums(bins, 300, assoc._times(w, column, at)).tobytes() == \
        np.bincount(bins, w * column[at], minlength=300).tobytes()


def test_associations_from_the_newest_segments_alone_equal_those_of_every_posting() -> None:
    """`learn` walks only the segments holding the newest `max_docs` rows (the learning child reads
    no older one): the same model as over every posting."""
    from urchin.search import assoc
    from urchin.search.postings import walk

    index = TokenCosineIndex()
    index.freeze_postings = index.max_merge_postings = 2_000    # many segments
    events = corpus(3000)
    for start in range(0, len(events), 100):
        index.add_many(events[start:start + 100])
    n = len(index)
    read: list[int] = []

    def postings(since: int):  # type: ignore[no-untyped-def]
        for rows, tf, terms in walk(index._segments, index._pending(), since=since):
            read.append(len(rows))
            yield rows, tf, terms

    every = assoc.learn(list(index._vocab), index._df.view(), index._prev.data[:n], index._next.data[:n],
                        lambda since: index._all_postings(), dim=6, max_docs=500)
    newest = assoc.learn(list(index._vocab), index._df.view(), index._prev.data[:n], index._next.data[:n],
                         postings, dim=6, max_docs=500)
    assert newest.terms == every.terms and newest.vectors.tobytes() == every.vectors.tobytes()
    assert 0 < sum(read) < index.nnz / 2


def test_the_session_leg_finds_the_turn_a_session_was_about() -> None:
    events = [ev("p", "the dashboard authentication flow is a mess", t=0, session="s1"),
              *[ev(f"x{i}", f"routine step {i}", t=1 + i, session="s1") for i in range(4)],
              ev("t", "authentication tests failing again", t=6, session="s1"),
              ev("d", "moved sign in to an identity provider", t=9, session="s1"),
              *[ev(f"o{i}-{j}", f"other work {i}" if j else
                   "authentication came up during the long quarterly roadmap review with sales",
                   t=20 + 3 * i + j, session=f"o{i}") for i in range(5) for j in range(3)]]
    without = TokenCosineIndex(RankingSettings(session=0.0, context=0.0, related=0.0))
    without.add_many(events)
    assert "d" not in ids(without.search("authentication", limit=10))
    with_leg = TokenCosineIndex(RankingSettings(session=2.0, session_slots=3, context=0.0, related=0.0))
    with_leg.add_many(events)
    hits = with_leg.search("authentication", limit=10)
    assert "d" in ids(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_query_naming_a_kind_favours_events_of_that_kind() -> None:
    events = [ev("n", "cache eviction for the ranker", t=1, kind="note"),
              ev("z", "cache eviction for the ranker", t=0, kind="decision")]
    index = TokenCosineIndex(RankingSettings(kind=0.5, memory=0.0))
    index.add_many(events)
    assert ids(index.search("decisions about cache eviction")) == ["z", "n"]
    assert ids(index.search("cache eviction")) == ["n", "z"]  # no kind named: the newer first
    plain = TokenCosineIndex(RankingSettings(kind=0.0, memory=0.0))
    plain.add_many(events)
    assert ids(plain.search("decisions about cache eviction")) == ["n", "z"]
    remembered = TokenCosineIndex(RankingSettings(kind=0.0))  # the memory prior: a decision counts double, always
    remembered.add_many(events)
    hits = remembered.search("cache eviction")
    assert ids(hits) == ["z", "n"] and hits[0].match == pytest.approx(min(1.0, 2 * hits[1].match), rel=1e-5)


@pytest.mark.parametrize("since,until", WINDOWS)
def test_shortcuts_give_the_same_floats_as_the_full_passes(since: int | None, until: int | None) -> None:
    """Context walked from the matches and the top found above a sampled floor are exact: the same
    scores, bit for bit, and the same hits as the passes over every row of the window."""
    import urchin.search.cosine as cosine
    from urchin.search import cosine_dense, cosine_weights

    events = _backfilled(n=1500, seed=9, late=0.1)
    lo = None if since is None else BASE + since * 1000
    hi = None if until is None else BASE + until * 1000
    # always the dense context pass, and a partition of every candidate
    full_passes = RankingSettings(sparse_context=10**9, sampled_top=10**9)
    index = TokenCosineIndex(full_passes)
    index.add_many(events)
    queries = [*QUERIES, "w1", "w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12"]   # rare, and matching most rows

    def run() -> list[list[tuple[str, float]]]:
        return [[(h.id, h.score) for h in index.search(q, since_ms=lo, until_ms=hi, limit=limit)]
                for q in queries for limit in (1, 7, 30)]

    full = run()
    row_lo, row_hi, _ = index._row_range(lo, hi)
    for q in queries:
        weights, own = cosine_weights.query_weights(index, cosine.tokenize(q))
        if not weights or row_lo >= row_hi:
            continue
        scores, _ = cosine_dense.cosines(index, weights, own, row_lo, row_hi)
        hit = np.flatnonzero(scores[:-1])
        dense = cosine_dense.with_context(index, scores, row_lo, row_hi, hit)
        index.settings = replace(full_passes, sparse_context=0)
        assert np.array_equal(cosine_dense.with_context(index, scores, row_lo, row_hi, hit), dense)
        index.settings = full_passes
    index.settings = RankingSettings(sparse_context=0, sampled_top=1)   # always from the matches, above a floor
    assert run() == full
    assert any(full) or (since, until) == (1234, 1236)    # that window holds no match


_FORK_RACE = """
import subprocess, sys, threading, time
import urchin.search.assoc as assoc
import numpy as np
from urchin.event import Event
from urchin.search.cosine import TokenCosineIndex

words = [f"w{i}" for i in range(400)]
rng = np.random.default_rng(1)
index = TokenCosineIndex()
for n in range(3000):
    text = " ".join(words[j] for j in rng.integers(0, len(words), 12))
    index.add(Event(id=f"e{n}", timestamp="", content=text, ts_ms=1_700_000_000_000 + n, source="shell",
                    kind="command", workspace=None, session=f"s{n // 20}"))
done, builds = [], []
def build():
    while not done:
        assoc.build(index, dim=32)
        builds.append(1)
        print("built", flush=True)
thread = threading.Thread(target=build, daemon=True)
thread.start()
end, cap = time.monotonic() + float(sys.argv[1]), time.monotonic() + 30
# forks that run atfork handlers, as pg_ctl with user= does: for the time asked, and until two builds
# ran beside them (a loaded machine builds slower), unless a build hangs
while (time.monotonic() < end or len(builds) < 2) and time.monotonic() < cap:
    subprocess.run(["true"], preexec_fn=lambda: None, check=True)
done.append(1)
thread.join(10)
print("hung" if thread.is_alive() else "ok", flush=True)
"""


@pytest.mark.slow
def test_blas_in_a_thread_survives_forks_from_another(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A fork running OpenBLAS's fork handlers while another thread is inside a threaded BLAS call hung
    that call forever (the daemon's follower, building the associations while pg_ctl started). Every
    Urchin process keeps BLAS on one thread: this fails (hangs, then times out) without that."""
    script = tmp_path / "race.py"
    script.write_text(_FORK_RACE)
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}  # even if a user set it
    env["OPENBLAS_NUM_THREADS"] = "4"
    done = subprocess.run([sys.executable, str(script), "1.5"], env=env, capture_output=True, text=True, timeout=60)
    lines = done.stdout.split()
    assert done.returncode == 0, done.stderr
    assert lines[-1] == "ok" and lines.count("built") >= 2, done.stdout


def test_settings_given_to_a_built_index_rank_as_an_index_built_with_them() -> None:
    """Benches try several settings on one index (`index.settings = ...`): from the next query on it ranks
    as one built with them, the thesaurus loaded once related words are wanted."""
    events = _backfilled(n=800, seed=11)
    bare = RankingSettings(related=0.0, session=0.0, context=0.0)
    swapped, fresh = TokenCosineIndex(bare), TokenCosineIndex()
    swapped.add_many(events)
    fresh.add_many(events)
    assert swapped.thesaurus is None
    swapped.settings = RankingSettings()
    queries = [*QUERIES, "database query latency"]
    assert [swapped.search(q, limit=20) for q in queries] == [fresh.search(q, limit=20) for q in queries]
    swapped.settings, fresh = bare, TokenCosineIndex(bare)
    fresh.add_many(events)
    assert [swapped.search(q, limit=20) for q in queries] == [fresh.search(q, limit=20) for q in queries]


@pytest.mark.parametrize("field,value", [("pivot", 0.0), ("context", 1.5), ("session", -1.0), ("block", 0),
                                         ("walk_budget", -1), ("bound_growth", 0), ("expand_df", -0.1)])
def test_ranking_settings_out_of_range_are_refused_naming_the_setting(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        RankingSettings(**{field: value})
