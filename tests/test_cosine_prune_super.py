"""The pruning's super-blocks (urchin.search.cosine_levels, issue 37) keep the top of every match: a
super-block's sum is at least each of its blocks' whatever the float16 maxima (zero, subnormal, 65504,
inf) and scales, and the pruned top equals every match's over journals made to cut super-blocks (a hot run
of blocks among cold ones, windows starting inside one, ties at the floor across many, sessions across
their edges, late rows, rows added after the maxima were made, words naming a kind or a source, session
slots 0-10) with super-blocks of 1 to 64 blocks (test_cosine_prune's property test: tied one-word rows,
super-blocks of 1-8, three queries)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from urchin.event import Event
from urchin.search.cosine import TokenCosineIndex
from urchin.search.cosine_bounds import TermBounds, widened
from urchin.search.cosine_levels import _sums
from urchin.search.cosine_settings import RankingSettings

BASE = 1_700_000_000_000


def test_a_super_blocks_sum_is_at_least_each_of_its_blocks_sums() -> None:
    """`TermBounds.add` (per super-block, what `over` skips super-blocks by) against `_sums` (per block),
    over terms whose float16 maxima are anything from zero through subnormals to 65504 and inf, with
    scales from tiny to large: never below, never NaN."""
    rng = np.random.default_rng(11)
    edges = np.array([0, 6e-8, 6.1e-5, 1e-3, 1.0, 65504, np.inf], dtype=np.float16)
    for size in (1, 2, 3, 4, 16):
        supers = 40
        terms = []
        for _ in range(int(rng.integers(1, 6))):
            bits = rng.integers(0, 0x7C01, size=(supers, size, 2), dtype=np.uint16)
            maxima = np.where(rng.random((supers, size, 2)) < 0.3, rng.choice(edges, (supers, size, 2)),
                              bits.view(np.float16)).astype(np.float16)
            scale = float(np.float32(10 ** rng.uniform(-8, 2)))
            terms.append((TermBounds(maxima, widened(maxima).max(axis=1), np.zeros(0, dtype=np.uint8)), scale))
        whole = np.zeros((supers, 2), dtype=np.float32)
        buffer = np.empty((supers, 2), dtype=np.float32)
        for tb, scale in terms:
            tb.add(0, supers, scale, whole, buffer)
        picked = rng.permutation(supers)[:17]
        for blocks in (_sums(terms, picked), _sums(terms, slice(0, supers))[picked]):
            assert not np.isnan(blocks).any() and not np.isnan(whole).any()
            assert (blocks <= whole[picked][:, None, :]).all()


_WORDS = ["retry", "retry", "retry", "retry retry", "retry cache", "cache", "w1 retry", "w2", "w3 w4"]


@hyp_settings(max_examples=30, deadline=None, derandomize=True)
@given(st.data())
def test_the_pruned_top_is_every_matchs_over_super_blocks(data: st.DataObject) -> None:
    """s18-attack2's tied journals (most rows one word: scores tie at the floor in many super-blocks), with a
    hot run of blocks among cold ones, super-blocks of 1-64 blocks of 1-8 rows, 0-2 read first, sessions
    long enough to cross super-blocks, windows starting anywhere (inside a super-block, past the last row),
    late rows, rows added after the maxima were made (sessions grown, new ones), session slots 0-10."""
    n = data.draw(st.sampled_from((1, 9, 65, 300, 900)), label="rows")
    rng = random.Random(data.draw(st.integers(0, 2**32), label="seed"))
    same_ts, sessions, hot = rng.random() < 0.2, rng.choice((1, 3, 40)), rng.random() < 0.5
    clock = [0]

    def events(count: int) -> list[Event]:
        out = []
        for i in range(count):
            clock[0] += rng.choice((0, 0, 1))
            ts = 0 if same_ts else clock[0] - (rng.randrange(30) if rng.random() < 0.05 else 0)
            words = rng.choice(_WORDS) if not hot or (i // 23) % 7 == 0 else f"w{rng.randrange(60)}"
            out.append(Event(id=f"{rng.getrandbits(40):010x}", timestamp="", content=words,
                             ts_ms=BASE + max(ts, 0) * 1000, source=rng.choice(("claude", "codex")),
                             kind=rng.choice(("conversation", "decision", "error")), workspace="api",
                             session=None if rng.random() < 0.1 else f"s{rng.randrange(sessions)}"))
        return out

    settings = RankingSettings(block=data.draw(st.sampled_from((1, 2, 4, 8)), label="block"),
                               super_block=data.draw(st.sampled_from((1, 2, 3, 4, 16, 64)), label="super"),
                               first_blocks=data.draw(st.integers(0, 2), label="first"), min_postings=0,
                               session_slots=rng.choice((0, 1, 3, 10)), bound_growth=rng.choice((1, 50)))
    index = TokenCosineIndex(settings)
    index.freeze_postings = rng.choice((64, 1 << 20))
    index.add_many(events(n))
    for _ in range(3):
        if rng.random() < 0.4:
            index.add_many(events(rng.randint(1, 20)))
        since = rng.choice((None, BASE + rng.randrange(0, clock[0] + 2) * 1000))
        for words in ("retry", "retry cache", "cache zqxabsent", "retry errors", "codex retry"):
            limit = rng.choice((1, 3, 10, 50))
            index.prune = True
            pruned = [(s.id, s.score) for s in index.search(words, since_ms=since, limit=limit)]
            assert index.prune
            index.prune = False
            every = [(s.id, s.score) for s in index.search(words, since_ms=since, limit=limit)]
            index.prune = True
            assert pruned == every, (words, since, limit)
