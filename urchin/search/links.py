"""Session links of the token-cosine index: each row's previous and next turn in its session, by time.

Rows arrive mostly in time order, so a batch is linked with array operations: every session whose
new rows come, in row order, at or after its newest row so far is a chain appended at its end. A
session that has a row out of that order (a back-dated event) has its rows of the batch linked one
by one, each walked back from the session's newest row to its place. Sessions never share links, so
the result is the row-by-row loop's, link for link.
"""

from __future__ import annotations

import numpy as np

__all__ = ["link_rows"]


def link_rows(prev: np.ndarray, nxt: np.ndarray, ts: np.ndarray, last_of: dict[int, int], start: int,
              sessions: np.ndarray, stamps: np.ndarray) -> None:
    """Link rows start.. (their session codes, -1: none, and timestamps) into their sessions' lists.
    `prev`, `nxt`, `ts`: the index's columns (the new rows' ts already in); `last_of`: per session
    code, its newest row (updated)."""
    order = np.flatnonzero(sessions >= 0)
    if not len(order):
        return
    order = order[np.argsort(sessions[order], kind="stable")]    # by session, row order within each
    codes, times, rows = sessions[order], stamps[order], order + start
    head = np.ones(len(order), dtype=bool)
    head[1:] = codes[1:] != codes[:-1]
    heads = np.flatnonzero(head)
    in_order = np.ones(len(order), dtype=bool)
    in_order[1:] = times[1:] >= times[:-1]
    in_order[heads] = True
    lasts = np.fromiter((last_of.get(code, -1) for code in codes[heads].tolist()), np.int64, len(heads))
    known = lasts >= 0
    after_last = ~known | (ts[np.where(known, lasts, 0)] <= times[heads])
    clean = np.logical_and.reduceat(in_order, heads) & after_last     # per session of the batch
    appended = clean[np.cumsum(head) - 1]
    inner = np.flatnonzero(appended & ~head)
    prev[rows[inner]] = rows[inner - 1]
    nxt[rows[inner - 1]] = rows[inner]
    joined = clean & known
    prev[rows[heads[joined]]] = lasts[joined]
    nxt[lasts[joined]] = rows[heads[joined]]
    tails = np.append(heads[1:], len(order)) - 1
    last_of.update(zip(codes[heads[clean]].tolist(), rows[tails[clean]].tolist(), strict=True))
    for row in np.sort(rows[~appended]).tolist():                     # back-dated rows' sessions
        _link_one(prev, nxt, ts, last_of, int(sessions[row - start]), row)


def _link_one(prev: np.ndarray, nxt: np.ndarray, ts: np.ndarray, last_of: dict[int, int], session: int,
              row: int) -> None:
    """Insert `row` into its session's list, ordered by timestamp (a late arrival walks back)."""
    last = last_of.get(session)
    if last is None:
        last_of[session] = row
        return
    stamp = ts[row]
    before, after = last, -1      # `after`: the earliest row passed, newer than `row`
    while before >= 0 and ts[before] > stamp:
        before, after = int(prev[before]), before
    if before >= 0:
        nxt[before] = row
        prev[row] = before
    if after >= 0:
        prev[after] = row
        nxt[row] = after
    else:
        last_of[session] = row
