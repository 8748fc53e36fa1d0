"""Which rows a query filtered to one workspace can be ranked from: that workspace's rows, and every
row of a session that also holds rows of it.

A token-cosine score reads only a row's own terms, its session neighbours' and its session's sum
(urchin.search.cosine), so a workspace's rows score the same when every other row is left out,
except where a session holds rows of several workspaces: those sessions' rows are kept whole. The
index keeps, per session code, its rows' one workspace or that it is mixed (and then which).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from urchin.search.postings import Column, distinct, span

if TYPE_CHECKING:
    from urchin.search.cosine import TokenCosineIndex

__all__ = ["SessionScopes", "Scope", "CACHED"]

CACHED = 2                  # scope rows kept, in all, per row of the index (4 bytes each): scopes split
                            # the rows, so this keeps every workspace's but where sessions cross a lot

_UNSET, _MIXED = -3, -2     # a session code with no rows yet; with rows of several workspaces (-1: none)


class SessionScopes:
    """Per session code, the workspace code its rows share (or mixed, with the codes it holds)."""

    __slots__ = ("_one", "_mixed", "_version", "_rows")

    def __init__(self) -> None:
        self._one = Column(np.int32, _UNSET)
        self._mixed: dict[int, set[int]] = {}
        self._version = 0       # bumped when a session's workspaces change: cached rows are then stale
        self._rows: dict[int, tuple[int, int, np.ndarray]] = {}   # workspace -> (rows covered, version, rows)

    @classmethod
    def of(cls, sessions: np.ndarray, workspaces: np.ndarray, n_sessions: int) -> SessionScopes:
        scopes = cls()
        scopes.add(sessions, workspaces, n_sessions)
        return scopes

    def add(self, sessions: np.ndarray, workspaces: np.ndarray, n_sessions: int) -> None:
        """New rows' session and workspace codes (-1: none); `n_sessions`: session codes there are."""
        one = self._one
        one.extend(np.full(max(0, n_sessions - one.size), _UNSET, dtype=np.int32))
        has = sessions >= 0
        if not has.any():
            return
        pairs = distinct((sessions[has].astype(np.int64) << 32) | (workspaces[has].astype(np.int64) + 1))
        s, w = (pairs >> 32).astype(np.int64), ((pairs & 0xFFFFFFFF) - 1).astype(np.int32)
        alone = np.ones(len(s), dtype=bool)         # the session's only pair in this batch
        alone[1:] &= s[1:] != s[:-1]
        alone[:-1] &= s[:-1] != s[1:]
        current = one.data[s]
        simple = alone & ((current == _UNSET) | (current == w))
        one.data[s[simple]] = w[simple]
        for i in np.flatnonzero(~simple).tolist():
            self._join(int(s[i]), int(w[i]))

    def _join(self, session: int, workspace: int) -> None:
        current = int(self._one.data[session])
        if current == _UNSET:
            self._one.data[session] = workspace
        elif current == _MIXED:
            if workspace not in self._mixed[session]:
                self._mixed[session].add(workspace)
                self._version += 1
        elif current != workspace:
            self._one.data[session] = _MIXED
            self._mixed[session] = {current, workspace}
            self._version += 1

    def rows(self, workspace: int, n: int, workspace_codes: np.ndarray, session_codes: np.ndarray,
             n_sessions: int) -> np.ndarray:
        """The rows 0..n-1 in `workspace`'s scope, ascending (int32): kept (the last asked first, up
        to CACHED x n rows in all), extended by the rows added since, found again when a session's
        workspaces changed."""
        cached = self._rows.pop(workspace, None)
        if cached is None or cached[1] != self._version or cached[0] > n:
            cached = (0, self._version, np.zeros(0, dtype=np.int32))
        done, _, rows = cached
        if done < n:
            new = np.arange(done, n, dtype=np.int32)
            rows = np.concatenate([rows, new[self.keep(new, workspace, workspace_codes, session_codes, n_sessions)]])
        self._rows[workspace] = (n, self._version, rows)
        while sum(len(r) for _, _, r in self._rows.values()) > CACHED * n and len(self._rows) > 1:
            del self._rows[next(iter(self._rows))]      # the least recently asked
        return rows

    def keep(self, rows: np.ndarray, workspace: int, workspace_codes: np.ndarray, session_codes: np.ndarray,
             n_sessions: int) -> np.ndarray:
        """Which of `rows` are in `workspace`'s scope: its own, and those of mixed sessions holding it."""
        keep = np.take(workspace_codes, rows) == workspace      # take: ~3x fancy indexing's speed here
        touching = [s for s, held in self._mixed.items() if workspace in held]
        if touching:
            table = np.zeros(n_sessions + 1, dtype=bool)      # the last slot: no session (-1)
            table[np.asarray(touching, dtype=np.int64)] = True
            keep |= np.take(table, np.take(session_codes, rows))
        return keep

    @property
    def nbytes(self) -> int:
        return (int(self._one.data.nbytes) + 100 * sum(len(v) + 1 for v in self._mixed.values())
                + sum(int(rows.nbytes) for _, _, rows in self._rows.values()))


class Scope:
    """One query's view of a workspace's scope in an index: which rows are in it, and its rows."""

    __slots__ = ("index", "code")

    def __init__(self, index: TokenCosineIndex, code: int) -> None:
        self.index, self.code = index, code

    def _columns(self) -> tuple[np.ndarray, np.ndarray, int]:
        fields = self.index._fields
        return fields["workspace"].column.data, fields["session"].column.data, len(fields["session"]) - 1

    def keep(self, rows: np.ndarray) -> np.ndarray:
        return self.index._scopes.keep(rows, self.code, *self._columns())

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """The scope's rows in lo..hi-1, ascending."""
        rows = self.index._scopes.rows(self.code, len(self.index), *self._columns())
        a, b = span(rows, lo, hi)
        return rows[a:b]
