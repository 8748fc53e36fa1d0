"""The SQL of a ranked leg's tiered candidate gathering (`PgLegs._leg`, `hybrid.plan`).

A leg that may rank only `budget` chunks takes the first `budget` its steps gather, best first: the
chunks of step 1, then those of step 2 not in step 1, ..., each step's last RECENT_DAYS first, under
one LIMIT so that PostgreSQL stops reading once the budget is full. Every scan of a step decodes the
posting lists of all its words, the commonest ones included; at 1M events each cost ~10 ms of CPU
per month, so a question whose every-word step holds fewer chunks than the budget (most questions
in real text) paid that once per step, window and month. Steps are therefore read in pairs: one scan
of the looser step of a pair over both windows, each row labelled with the first step it matches
(see PAIRED).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PAIRED", "gather"]

# How many consecutive AND steps one scan serves. The steps are nested (each holds the one before: its
# words are a prefix of the one before's), so the looser step's rows are the pair's rows, and "matches
# step a" tells which part a row belongs to. A pair's first step's recent part is still read alone: it is
# the part that most often fills the budget, and alone it stops reading there; the pair's scan (a
# MATERIALIZED CTE over both windows, so each month is read once) serves the parts after it,
# filled only as far as they ask.
PAIRED = 2
RECENT = "occurred_at >= %(cutoff)s"       # the last RECENT_DAYS, read first
OLDER = "occurred_at < %(cutoff)s"
COLUMNS = "device, chunk_id, session, occurred_at, kind"


def gather(steps: Sequence[str], score: str, factor: str, source: str, where: str, reads: str
           ) -> tuple[list[str], str]:
    """(CTEs, SELECT) of the gathered candidates `COLUMNS, s, f`: the first `%(budget)s` chunks of
    `steps` (conditions on `urchin_chunks`, best first, nested) within `where`, in the order of one
    part per step and window as before (each window's months in partition order, its rows in the
    heap's), each scored by `score` and weighed by `factor` (templates over `{t}`, `source`'s names).
    `reads`: the columns `score` reads. The last step (any kept word) is read alone: it holds the others."""
    ctes: list[str] = []
    parts: list[str] = []
    for first, last in _groups(len(steps)):
        own = f"{steps[first]} AND NOT ({steps[first - 1]})" if first else steps[first]
        parts.append(_direct(own, RECENT, score, factor, source, where))
        if first == last:
            parts.append(_direct(own, OLDER, score, factor, source, where))
            continue
        name = f"g{first}"
        label = " ".join(f"WHEN {steps[k]} THEN {k}" for k in range(first, last))
        looser = f"{steps[last]} AND NOT ({steps[first - 1]})" if first else steps[last]
        ctes.append(f"{name} AS MATERIALIZED (SELECT {COLUMNS}, source, {reads}, CASE {label} ELSE {last} END AS "
                    f"step, {RECENT} AS recent FROM urchin_chunks WHERE {looser} {where})")
        shared = [(first, False)] + [(k, recent) for k in range(first + 1, last + 1) for recent in (True, False)]
        parts += [f"(SELECT {', '.join('x.' + c for c in COLUMNS.split(', '))}, {score.format(t='x.')} AS s, "
                  f"{factor.format(t='x.')} AS f FROM {name} AS x, {source} WHERE x.step = {k} AND "
                  f"{'' if recent else 'NOT '}x.recent LIMIT %(budget)s)" for k, recent in shared]
    return ctes, f"SELECT {COLUMNS}, s, f FROM ({' UNION ALL '.join(parts)} LIMIT %(budget)s) AS g"


def _direct(own: str, window: str, score: str, factor: str, source: str, where: str) -> str:
    """One part read on its own scan (as every part was before)."""
    return (f"(SELECT {COLUMNS}, {score.format(t='')} AS s, {factor.format(t='')} AS f FROM urchin_chunks, "
            f"{source} WHERE {own} AND {window} {where} LIMIT %(budget)s)")


def _groups(count: int) -> list[tuple[int, int]]:
    """The steps read by one scan, as (first, last): the AND steps by PAIRED, the last step alone."""
    groups = [(i, min(i + PAIRED, count - 1) - 1) for i in range(0, count - 1, PAIRED)]
    return [*groups, (count - 1, count - 1)] if count else []
