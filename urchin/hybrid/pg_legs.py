"""The ranked legs' SQL over PostgreSQL: full text (`keyword`), token cosine over sparse vectors
(`sparse`) and embeddings (`dense`), each filtered inside (`pg_sql.filter_clause`), the first two with each
candidate's session neighbours and its priors; and what they read besides (term statistics, the mean
vector length, which terms a chunk holds). `hybrid.py` plans and fuses them.

Query-time settings (stated, see `QUERY_SETTINGS`) are set per transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from urchin.hybrid.base import MEMORY_KINDS, ContextRow, Filter, LegHit, Tier
from urchin.hybrid.gather import gather
from urchin.hybrid.pg_link import PgLink
from urchin.hybrid.pg_sql import KEY_SQL, filter_clause, split_keys, vector_literal
from urchin.hybrid.schema import TS_CONFIG
from urchin.search.cosine import NAMED_SOURCE_PRIOR

__all__ = ["PgLegs", "QUERY_SETTINGS", "RECENT_DAYS"]

# HNSW: ef_search 100 (recall ~0.95+ at 1M for 384-d), iterative scans so filtered queries still
# fill `limit` (relaxed order, re-sorted in SQL), bounded by max_scan_tuples.
QUERY_SETTINGS = {"hnsw.ef_search": "100", "hnsw.iterative_scan": "relaxed_order",
                  "hnsw.max_scan_tuples": "20000"}

# A leg that gathers its candidates in tiers reads each tier's last RECENT_DAYS first: when more chunks
# qualify than it may rank, the newer ones are the ones ranked (memory is asked about recent work).
RECENT_DAYS = 30
# A chunk from a source the question names ("what did Caroline say", "what did codex decide") counts
# 1 + NAMED_SOURCE_PRIOR, token-cosine's constant (chosen by leave-one-conversation-out CV on LoCoMo).
NORM_SAMPLE = 2000    # the newest chunks whose mean token-vector length pivots the length normalisation
NORM_DRIFT = 0.01     # ...read again once the index's chunk count has moved by this share (any move when small)


class PgLegs:
    """The legs over `link`; it keeps the mean vector length it last read (`norm_mean`)."""

    def __init__(self, link: PgLink) -> None:
        self._link = link
        self._norm_mean: tuple[float, int] | None = None   # (value, the chunk count it was read at)

    def term_stats(self, terms: Sequence[int]) -> tuple[dict[int, int], int]:
        # df kept per device by the owner's trigger from the chunk rows (schema 7) and summed here, each
        # device's df clamped to [0, its chunk count]: whatever a row says, one device's numbers can
        # only lower another's terms' weight as much as that many real chunks of its own would. The
        # chunk count comes in the same statement (term NULL).
        rows = self._link.read(
            "SELECT t.term, sum(least(greatest(t.df, 0), greatest(s.value, 0))) "
            "FROM urchin_terms t JOIN urchin_stats s ON s.device = t.device AND "
            "s.key = 'chunks' WHERE t.term = ANY(%s) GROUP BY t.term "
            "UNION ALL SELECT NULL, sum(greatest(value, 0)) FROM urchin_stats WHERE key = 'chunks'",
            (list(terms),))
        n = next((d for t, d in rows if t is None), None)
        return {int(t): int(d) for t, d in rows if t is not None}, int(n) if n is not None else 0

    def keyword(self, words: Sequence[str], constraints: str | None, flt: Filter, limit: int,
                context_turns: int = 0, every: str | None = None, tiers: Sequence[Tier] = (),
                budget: int = 0, prior: float = 0.0, named: Sequence[str] = ()) -> list[ContextRow]:
        """Full-text leg: any of `words` (OR, ranked) AND the websearch `constraints` (phrases, -exclusions);
        a chunk holding `every` word (to_tsquery syntax) ranks above any that holds only some. With
        `tiers`, only the first `budget` chunks they gather are ranked (see `_leg`)."""
        parts = []
        args: dict[str, Any] = {"cfg": TS_CONFIG}
        if words:
            parts.append("to_tsquery(%(cfg)s::regconfig, %(words)s)")
            args["words"] = " | ".join(words)
        if constraints:
            parts.append("websearch_to_tsquery(%(cfg)s::regconfig, %(constraints)s)")
            args["constraints"] = constraints
        if not parts:
            return []
        score = "ts_rank({t}tsv, q)"
        every_q = "NULL::tsquery"
        if every and words:
            every_q = "to_tsquery(%(cfg)s::regconfig, %(every)s)"
            args["every"] = every
            score = "ts_rank({t}tsv, q) + CASE WHEN {t}tsv @@ qa THEN 1 ELSE 0 END"
        query = f"(SELECT {' && '.join(parts)} AS q, {every_q} AS qa) AS qq"
        # With phrases or -exclusions, a neighbour must satisfy them too: context never smuggles in a
        # turn the query excluded. Without, any neighbour may carry context.
        near = " AND y.tsv @@ q" if constraints else ""
        steps = []
        for i, tier in enumerate(tiers):
            args[f"tier{i}"] = (" & " if tier.every else " | ").join(tier.items)
            steps.append(f"tsv @@ to_tsquery(%(cfg)s::regconfig, %(tier{i})s)")
        return self._leg(query, "tsv @@ q", score, flt, limit, context_turns, args, near, steps, budget, prior,
                         named, reads="tsv")

    def held(self, chunk_ids: Sequence[str], terms: Sequence[int]) -> dict[str, set[int]]:
        """Which of `terms` each chunk holds, by key (the evidence a score is made of)."""
        if not chunk_ids or not terms:
            return {}
        devices, ids = split_keys(chunk_ids)
        rows = self._link.read(
            f"SELECT {KEY_SQL.format(t='c.')}, ARRAY(SELECT x.t FROM unnest(%(t)s::integer[]) AS x(t) "
            "WHERE x.t = ANY(c.terms)) FROM urchin_chunks c "
            "JOIN unnest(%(d)s::text[], %(ids)s::text[]) AS k(device, chunk_id) "
            "ON c.device = k.device AND c.chunk_id = k.chunk_id",
            {"t": list(terms), "d": devices, "ids": ids})
        return {r[0]: set(r[1]) for r in rows}

    def sparse(self, vector: str, terms: Sequence[int], flt: Filter, limit: int,
               context_turns: int = 0, tiers: Sequence[Tier] = (), budget: int = 0,
               pivot: tuple[float, float] = (0.0, 1.0), prior: float = 0.0,
               named: Sequence[str] = ()) -> list[ContextRow]:
        """Token-cosine leg over the chunks sharing a term (GIN on `terms`); with `tiers`, over the first
        `budget` chunks they gather (see `_leg`). A chunk's score is its inner product with the query
        over the query's length times `a + b x its own length`, `pivot` = (a, b): (0, 1) is the cosine."""
        if not terms and not tiers:
            return []
        args: dict[str, Any] = {"v": vector, "terms": list(terms), "pa": float(pivot[0]), "pb": float(pivot[1])}
        steps = []
        for i, tier in enumerate(tiers):
            args[f"tier{i}"] = list(tier.items)
            steps.append(f"terms {'@>' if tier.every else '&&'} %(tier{i})s::integer[]")
        score = "(-({t}tvec <#> q) / greatest(qn * (%(pa)s + %(pb)s * l2_norm({t}tvec)), 1e-9))"
        return self._leg("(SELECT %(v)s::sparsevec AS q, l2_norm(%(v)s::sparsevec) AS qn) AS qq",
                         "terms && %(terms)s::integer[]", score, flt, limit, context_turns, args, "", steps, budget,
                         prior, named, reads="tvec")

    def norm_mean(self, chunks: int) -> float:
        """The mean l2 norm of the newest NORM_SAMPLE chunks' token vectors (1.0 when there are none): the
        pivot of the token-cosine leg's length normalisation. `chunks` is the index's chunk count as the
        question read it (`term_stats`): the mean is read again when that has moved (by NORM_DRIFT, or at
        all below NORM_SAMPLE / NORM_DRIFT chunks), so every connection ranks alike and a feed in
        between is seen at once."""
        cached = self._norm_mean
        small = chunks < NORM_SAMPLE / NORM_DRIFT
        if cached is None or (cached[1] != chunks and (small or abs(chunks - cached[1]) > NORM_DRIFT * cached[1])):
            conn = self._link.conn
            with conn.transaction():
                row = conn.execute("SELECT avg(l2_norm(tvec)) FROM (SELECT tvec FROM urchin_chunks "
                                   "ORDER BY occurred_at DESC, chunk_id LIMIT %s) AS s", (NORM_SAMPLE,)).fetchone()
            value = float(row[0]) if row and row[0] else 1.0
            self._norm_mean = cached = (value, chunks)
        return cached[0]

    def _leg(self, source: str, match: str, score: str, flt: Filter, limit: int, turns: int,
             args: dict[str, Any], near: str = "", steps: Sequence[str] = (), budget: int = 0,
             prior: float = 0.0, named: Sequence[str] = (), reads: str = "tsv") -> list[ContextRow]:
        """Top `limit` by `score`, plus each one's `turns` session neighbours on either side (with their
        own score, filters applied) as rows (anchor, chunk, distance, score, kind, occurred_at).

        With `steps` (conditions, best first, each holding the one before), the candidates are not every
        chunk `match`ing but the first `budget` that the steps gather in order, each step's last
        RECENT_DAYS first: a UNION ALL under one LIMIT, so PostgreSQL stops reading (and scoring) once the
        budget is full (see `gather`, which reads two steps with one scan). The parts are disjoint (a
        step leaves out what the step before it held, and the older half what the recent half held), so
        the budget counts distinct chunks. `reads`: the column `score` reads (tsv, tvec).

        Priors multiply a chunk's total after its neighbours' scores are added (as token-cosine
        multiplies its smoothed scores): each row carries its factor, 1 + `prior` for a memory times
        1 + NAMED_SOURCE_PRIOR when its source is one of `named` (the sources the question names); the
        top `limit` are chosen by score times factor. A neighbour of a named speaker's turn gets the
        context of that turn's plain score, not of its boosted one."""
        where, fargs = filter_clause(flt)
        args = {**args, **fargs, "limit": limit, "turns": turns}
        factor = "1.0"
        if prior > 0:
            args.update({"memory_kinds": list(MEMORY_KINDS), "prior": 1.0 + prior})
            factor = "CASE WHEN {t}kind = ANY(%(memory_kinds)s) THEN %(prior)s ELSE 1 END"
        if named and NAMED_SOURCE_PRIOR > 0:
            args.update({"named_sources": list(named), "source_prior": 1.0 + NAMED_SOURCE_PRIOR})
            factor += " * CASE WHEN {t}source = ANY(%(named_sources)s) THEN %(source_prior)s ELSE 1 END"
        ctes: list[str] = []
        if steps:
            args["budget"] = budget
            ctes, ranked = gather(steps, score, factor, source, where, reads)
        else:
            ranked = (f"SELECT device, chunk_id, session, occurred_at, kind, {score.format(t='')} AS s, "
                      f"{factor.format(t='')} AS f FROM urchin_chunks, {source} WHERE {match} {where}")
        base = (f"WITH {''.join(cte + ', ' for cte in ctes)}c AS MATERIALIZED (SELECT * FROM ({ranked}) AS r "
                f"ORDER BY s * f DESC, occurred_at DESC, chunk_id LIMIT %(limit)s) "
                f"SELECT {KEY_SQL.format(t='')} AS k, {KEY_SQL.format(t='')}, 0, s, kind, occurred_at, f FROM c")
        if turns > 0:
            ywhere, _ = filter_clause(flt, alias="y.")
            # a session's turns are its device's: another device's rows never join them as context
            side = (f"(SELECT {KEY_SQL.format(t='y.')} AS k, {{sign}} row_number() OVER (ORDER BY y.occurred_at "
                    f"{{dir}}) AS dist, {score.format(t='y.')} AS s, y.kind, y.occurred_at, "
                    f"{factor.format(t='y.')} AS f FROM urchin_chunks y WHERE y.session = c.session "
                    "AND y.device = c.device AND y.occurred_at {op} c.occurred_at "
                    + ywhere + near + " ORDER BY y.occurred_at {dir} LIMIT %(turns)s)")
            base += (f" UNION ALL SELECT {KEY_SQL.format(t='c.')}, x.k, x.dist, x.s, x.kind, x.occurred_at, x.f "
                     f"FROM c, {source}, LATERAL ({side.format(sign='-', dir='DESC', op='<')} UNION ALL "
                     f"{side.format(sign='', dir='ASC', op='>')}) AS x WHERE c.session IS NOT NULL")
        conn = self._link.conn
        with conn.transaction():
            if steps:
                # The window's edge as a value of this transaction's now(): the planner then plans only
                # the months each window reaches (with `now() - interval` it planned every month). And no
                # parallel workers: the budget takes the first rows of each part in the order read, which
                # must be the heap's, not whichever worker answers first (and the two legs already run at once).
                # Nor a prepared statement: after five runs PostgreSQL may keep one generic plan for every
                # question, which reads the months in another order (and took three times as long).
                row = conn.execute("SELECT now() - %s, set_config('max_parallel_workers_per_gather', '0', true)",
                                   (timedelta(days=RECENT_DAYS),)).fetchone()
                args["cutoff"] = row[0] if row else None
            rows = conn.execute(base, args, prepare=False if steps else None).fetchall()
        return [ContextRow(r[0], r[1], int(r[2]), float(r[3]), r[4], r[5], float(r[6])) for r in rows]

    def dense(self, model: str, vector: Sequence[float], flt: Filter, limit: int,
              dim: int | None = None) -> list[LegHit]:
        """Embedding leg: HNSW over this model's vectors only; relaxed iterative scan, re-sorted exactly."""
        dim = dim or len(vector)
        where, args = filter_clause(flt, alias="c.")
        args.update({"v": vector_literal(vector), "model": model, "limit": limit})
        query = (f"WITH hits AS MATERIALIZED (SELECT {KEY_SQL.format(t='c.')} AS k, c.kind, c.occurred_at, "
                 f"e.embedding::halfvec({dim}) <=> %(v)s::halfvec({dim}) AS distance "
                 f"FROM urchin_embeddings e JOIN urchin_chunks c ON c.device = e.device AND c.chunk_id = e.chunk_id "
                 f"WHERE e.model = %(model)s {where} "
                 f"ORDER BY e.embedding::halfvec({dim}) <=> %(v)s::halfvec({dim}) LIMIT %(limit)s) "
                 "SELECT k, 1 - distance, kind, occurred_at FROM hits "
                 "ORDER BY distance, occurred_at DESC, k")
        conn = self._link.conn
        with conn.transaction():
            for name, value in QUERY_SETTINGS.items():
                conn.execute("SELECT set_config(%s, %s, true)", (name, value))
            rows = conn.execute(query, args).fetchall()
        return [LegHit(r[0], float(r[1]), r[2], r[3]) for r in rows]
