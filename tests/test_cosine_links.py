"""Session links by arrays (`urchin.search.links`): a batch is linked exactly as inserting its rows one
by one after the last row of their session not newer than each (the rule `TokenCosineIndex` kept),
whatever the batches, back-dated rows and ties."""

from __future__ import annotations

import numpy as np

from urchin.search.links import link_rows


def _one_by_one(prev: np.ndarray, nxt: np.ndarray, ts: np.ndarray, last_of: dict[int, int], start: int,
                sessions: np.ndarray) -> None:
    for row in range(start, start + len(sessions)):
        session = int(sessions[row - start])
        if session < 0:
            continue
        last = last_of.get(session, -1)
        before, after = last, -1
        while before >= 0 and ts[before] > ts[row]:
            before, after = int(prev[before]), before
        if before >= 0:
            nxt[before], prev[row] = row, before
        if after >= 0:
            prev[after], nxt[row] = row, after
        else:
            last_of[session] = row


def test_batches_are_linked_as_rows_inserted_one_by_one() -> None:
    rng = np.random.default_rng(37)
    for _ in range(400):
        n, sessions = int(rng.integers(1, 300)), int(rng.integers(1, 10))
        ts = np.sort(rng.integers(0, 1000, n)).astype(np.int64)
        late = rng.random(n) < rng.choice([0.0, 0.02, 0.3])          # back-dated rows
        ts[late] = rng.integers(0, 1000, int(late.sum()))
        if rng.random() < 0.3:
            ts = rng.integers(0, 4, n).astype(np.int64)                # many ties
        codes = rng.integers(-1, sessions, n).astype(np.int32)         # -1: no session
        cuts = sorted({0, n, *rng.integers(0, n, int(rng.integers(0, 6))).tolist()})
        want = (np.full(n, -1, np.int32), np.full(n, -1, np.int32), {})
        got = (np.full(n, -1, np.int32), np.full(n, -1, np.int32), {})
        for a, b in zip(cuts, cuts[1:], strict=False):
            _one_by_one(want[0], want[1], ts, want[2], a, codes[a:b])
            link_rows(got[0], got[1], ts, got[2], a, codes[a:b], ts[a:b])
        assert (want[0] == got[0]).all() and (want[1] == got[1]).all() and want[2] == got[2]
