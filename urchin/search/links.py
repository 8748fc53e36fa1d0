"""Session links of the token-cosine index: each row's previous and next turn in its session, by time.

A session's rows are linked in the order of their timestamps, ties in arrival (row) order: what
inserting each new row after the last row of its session not newer than it makes. So a batch is
linked with array operations: per session, its new rows sorted by time are a chain hung after the
session's newest row so far, but for the rows older than that one (back-dated events, a few), which
are then inserted one by one, each walked back from the session's newest row to its place.
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
    order = order[np.lexsort((stamps[order], sessions[order]))]    # by session, time, then row
    codes, times, rows = sessions[order], stamps[order], order + start
    head = np.ones(len(order), dtype=bool)
    head[1:] = codes[1:] != codes[:-1]
    heads = np.flatnonzero(head)
    group = np.cumsum(head) - 1
    lasts = np.fromiter((last_of.get(code, -1) for code in codes[heads].tolist()), np.int64, len(heads))
    known = lasts >= 0
    floor = np.where(known, ts[np.where(known, lasts, 0)], np.iinfo(np.int64).min)
    hung = times >= floor[group]          # per session, a suffix of its new rows in time order
    first = hung.copy()                   # the first row of each session's hung chain
    first[1:] &= head[1:] | ~hung[:-1]
    inner = np.flatnonzero(hung & ~first)
    prev[rows[inner]] = rows[inner - 1]
    nxt[rows[inner - 1]] = rows[inner]
    firsts = np.flatnonzero(first)
    joined = known[group[firsts]]
    prev[rows[firsts[joined]]] = lasts[group[firsts[joined]]]
    nxt[lasts[group[firsts[joined]]]] = rows[firsts[joined]]
    tails = np.append(heads[1:], len(order)) - 1
    grew = hung[tails]
    last_of.update(zip(codes[tails[grew]].tolist(), rows[tails[grew]].tolist(), strict=True))
    for row in np.sort(rows[~hung]).tolist():          # older than their session's newest row
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
