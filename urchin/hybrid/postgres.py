"""The PostgreSQL backend (`base.IndexBackend`): its parts, one per noun, composed in one place.

| part | module | holds |
|---|---|---|
| `link` | `pg_link` | the connection (migrated and bound on each open), its twin, partitions |
| `writer` | `pg_writer` | batches and the cursor, forgetting, a backfill's index drop and build |
| `catalogue` | `pg_files` | the workspace files' catalogue and their chunks |
| `embeddings` | `pg_embeddings` | a model's HNSW index, rows without a vector, vectors stored |
| `legs` | `pg_legs` | the ranked legs' SQL and what they read besides |
| `rows` | `pg_rows` | rows read back unranked (by key, literal search, session heads) |
| `report` | `pg_status` | the index's status |

Every part is given the link and nothing else (no part calls another through this class); the
methods below are the parts' as they are (`urchin/delegation.py`). psycopg, the driver, is reached
through `pgdriver` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from urchin.delegation import Delegated
from urchin.hybrid.pg_embeddings import PgEmbeddings
from urchin.hybrid.pg_files import PgFiles
from urchin.hybrid.pg_legs import QUERY_SETTINGS, PgLegs
from urchin.hybrid.pg_link import PgLink
from urchin.hybrid.pg_rows import PgRows
from urchin.hybrid.pg_status import PgStatus
from urchin.hybrid.pg_writer import FORGOTTEN_MARK, GENERATION_MARK, PgWriter
from urchin.hybrid.pgdriver import OUTAGE_ERRORS, REFUSED_ERRORS, Connection

__all__ = ["PostgresIndex", "OUTAGE_ERRORS", "REFUSED_ERRORS", "QUERY_SETTINGS", "GENERATION_MARK", "FORGOTTEN_MARK"]


class PostgresIndex:
    """One connection (reopened after an outage) and the parts that use it; `url` is called on each
    (re)connect."""

    outage_errors = OUTAGE_ERRORS
    refused_errors = REFUSED_ERRORS

    def __init__(self, url: Callable[[], str] | str | PgLink, connect_timeout: float = 5.0,
                 niceness: int | None = None, owned: bool = False) -> None:
        """`url`: the database's, or a function giving it, or a link already made (a twin's).
        `niceness`: see `PgLink`. `owned`: Urchin's own server (the embedded one), which it vacuums after
        each forget."""
        self.link = url if isinstance(url, PgLink) else PgLink(url, connect_timeout, niceness)
        self.writer = PgWriter(self.link, owned)
        self.catalogue = PgFiles(self.link)
        self.embeddings = PgEmbeddings(self.link)
        self.legs = PgLegs(self.link)
        self.rows = PgRows(self.link)
        self.report = PgStatus(self.link)
        self._twin: PostgresIndex | None = None

    # ---- connection ---------------------------------------------------------------------------
    @property
    def conn(self) -> Connection[Any]:
        return self.link.conn

    @property
    def bound(self) -> tuple[str, str | None] | None:
        return self.link.bound

    @property
    def own_device(self) -> str:
        return self.link.own_device

    def twin(self) -> PostgresIndex:
        """The index over the link's twin (`PgLink.twin`): `search_context` runs its semantic leg on it
        while the keyword leg runs on this one."""
        if self._twin is None:
            self._twin = PostgresIndex(self.link.twin())
        return self._twin

    reset = Delegated(PgLink.reset, "link")
    close = Delegated(PgLink.reset, "link")

    # ---- feeding, forgetting, backfills --------------------------------------------------------
    cursor = Delegated(PgWriter.cursor, "writer")
    write_batch = Delegated(PgWriter.write_batch, "writer")
    marks = Delegated(PgWriter.marks, "writer")
    journal_head = Delegated(PgWriter.journal_head, "writer")
    set_journal_head = Delegated(PgWriter.set_journal_head, "writer")
    apply_forget = Delegated(PgWriter.apply_forget, "writer")
    purge = Delegated(PgWriter.purge, "writer")
    rebuild = Delegated(PgWriter.rebuild, "writer")
    begin_bulk = Delegated(PgWriter.begin_bulk, "writer")
    restore_indexes = Delegated(PgWriter.restore_indexes, "writer")

    # ---- workspace files (issue 9) --------------------------------------------------------------
    file_catalog = Delegated(PgFiles.file_catalog, "catalogue")
    file_roots = Delegated(PgFiles.file_roots, "catalogue")
    files = Delegated(PgFiles.files, "catalogue")
    replace_file = Delegated(PgFiles.replace_file, "catalogue")
    delete_files = Delegated(PgFiles.delete_files, "catalogue")
    document_chunks = Delegated(PgFiles.document_chunks, "catalogue")

    # ---- embeddings ---------------------------------------------------------------------------
    ensure_model = Delegated(PgEmbeddings.ensure_model, "embeddings")
    pending_embeddings = Delegated(PgEmbeddings.pending_embeddings, "embeddings")
    write_embeddings = Delegated(PgEmbeddings.write_embeddings, "embeddings")

    # ---- querying -----------------------------------------------------------------------------
    term_stats = Delegated(PgLegs.term_stats, "legs")
    keyword = Delegated(PgLegs.keyword, "legs")
    sparse = Delegated(PgLegs.sparse, "legs")
    norm_mean = Delegated(PgLegs.norm_mean, "legs")
    dense = Delegated(PgLegs.dense, "legs")
    held = Delegated(PgLegs.held, "legs")
    fetch = Delegated(PgRows.fetch, "rows")
    literal = Delegated(PgRows.literal, "rows")
    known_sources = Delegated(PgRows.known_sources, "rows")
    session_heads = Delegated(PgRows.session_heads, "rows")
    unmatched = Delegated(PgRows.unmatched, "rows")
    status = Delegated(PgStatus.status, "report")
