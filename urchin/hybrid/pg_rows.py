"""Rows read back from PostgreSQL as they are, unranked: chunks by key (a fused answer's bodies), the
team's literal `urchin search`, the sources the index holds, session heads, and which of a question's
filters match nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from urchin.hybrid.base import Filter
from urchin.hybrid.pg_link import PgLink
from urchin.hybrid.pg_sql import FETCH, FETCH_SQL, KEY_SQL, split_keys
from urchin.timestamps import format_timestamp

__all__ = ["PgRows"]


class PgRows:
    """Unranked reads over `link`."""

    def __init__(self, link: PgLink) -> None:
        self._link = link

    def known_sources(self) -> list[str]:
        """Every source the index holds (a loose index scan: one probe per distinct source)."""
        rows = self._link.read(
            "WITH RECURSIVE s(v) AS (SELECT min(source) FROM urchin_chunks UNION ALL "
            "SELECT (SELECT min(source) FROM urchin_chunks WHERE source > s.v) FROM s WHERE s.v IS NOT NULL) "
            "SELECT v FROM s WHERE v IS NOT NULL")
        return [r[0] for r in rows]

    def session_heads(self, sessions: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each session's title (its first event's that has one), first prompt (its first conversation
        event, cut) and last event time: textrawl's conversation results name their session by these."""
        rows = self._link.read(
            "SELECT s, (SELECT title FROM urchin_chunks WHERE session = s AND doc_type = 'event' AND title "
            "IS NOT NULL ORDER BY occurred_at, chunk_id LIMIT 1), (SELECT left(content, 400) FROM urchin_chunks "
            "WHERE session = s AND doc_type = 'event' AND kind = 'conversation' ORDER BY occurred_at, chunk_id "
            "LIMIT 1), (SELECT max(occurred_at) FROM urchin_chunks WHERE session = s AND doc_type = 'event') "
            "FROM unnest(%s::text[]) AS s", (list(sessions),))
        return {r[0]: {"title": r[1], "firstPrompt": r[2], "updatedAt": format_timestamp(r[3]) if r[3] else None}
                for r in rows}

    def unmatched(self, flt: Filter) -> list[str]:
        """Warnings for each source, kind or workspace filter that no indexed chunk carries."""
        probes = ([("source", "sources", v) for v in flt.sources] + [("kind", "kinds", v) for v in flt.kinds]
                  + ([("workspace", "workspace", flt.workspace)] if flt.workspace else []))
        out = []
        conn = self._link.conn
        with conn.transaction():
            for column, name, value in probes:
                row = conn.execute(f"SELECT EXISTS (SELECT 1 FROM urchin_chunks WHERE {column} = %s)",
                                   (value,)).fetchone()
                if row is not None and not row[0]:
                    out.append(f"{name}: nothing indexed has {column} {value!r}")
        return out

    def literal(self, query: str, since: datetime | None, limit: int, filters: dict[str, str | None]
                ) -> list[dict[str, Any]]:
        """Events whose content holds `query` (ILIKE, the pg_trgm GIN index), newest first: the team's
        `urchin search` over every device's rows. `filters` are exact matches (source, workspace, ...)."""
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where = ["doc_type = 'event'", "content ILIKE %(p)s"]
        args: dict[str, Any] = {"p": pattern, "since": since, "limit": limit}
        if since is not None:
            where.append("occurred_at >= %(since)s")
        for name, value in filters.items():
            if value is not None:
                where.append(f"{name} = %(f_{name})s")
                args[f"f_{name}"] = value
        rows = self._link.read(f"SELECT {FETCH_SQL.format(t='')} FROM urchin_chunks WHERE {' AND '.join(where)} "
                               "ORDER BY occurred_at DESC, chunk_id DESC LIMIT %(limit)s", args)
        return [dict(zip(FETCH, r, strict=True)) for r in rows]

    def fetch(self, chunk_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The rows of chunk keys (`chunk_key`), by key."""
        devices, ids = split_keys(chunk_ids)
        rows = self._link.read(f"SELECT {KEY_SQL.format(t='c.')}, {FETCH_SQL.format(t='c.')} "
                               "FROM urchin_chunks c JOIN unnest(%s::text[], %s::text[]) AS k(device, chunk_id) "
                               "ON c.device = k.device AND c.chunk_id = k.chunk_id", (devices, ids))
        return {r[0]: dict(zip(FETCH, r[1:], strict=True)) for r in rows}
