"""The index schema as numbered migrations, applied in order at connect (table `urchin_migrations`).

A migration is never edited once released; changes go in a new one. Chunks are keyed by
`chunk_id` (the event id for events; `<root>/<path>#<n>` for workspace-file chunks, issue 9).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "TS_CONFIG", "PGVECTOR_MIN"]

TS_CONFIG = "english"          # one explicit text search config, so results never depend on the server default
PGVECTOR_MIN = (0, 7)          # sparsevec and halfvec arrived in 0.7

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "chunks, cursors, term statistics, embeddings", """
CREATE TABLE urchin_chunks (
    chunk_id        text PRIMARY KEY,
    doc_id          text NOT NULL,                 -- the event id, or the file's path
    doc_type        text NOT NULL DEFAULT 'event', -- 'event' | 'file'
    source          text NOT NULL,
    kind            text NOT NULL,
    workspace       text,
    session         text,
    title           text,                          -- files: the heading path joined, so it weighs as A
    tags            text[] NOT NULL DEFAULT '{}',
    content         text NOT NULL,
    occurred_at     timestamptz NOT NULL,          -- files: mtime
    account         text,
    device          text,
    journal_offset  bigint,                        -- events: byte offset in the feeding device's journal
    path            text,                          -- files: relative path (issue 9)
    heading_path    text[],
    start_line      integer,
    end_line        integer,
    content_hash    text,                          -- files: skip unchanged chunks
    terms           integer[] NOT NULL DEFAULT '{}',   -- hashed token ids of `tvec`, for the GIN candidate scan
    tvec            sparsevec(1048576),            -- token-cosine weights (1 + ln tf), no idf
    tsv             tsvector GENERATED ALWAYS AS (            -- two parser calls, not three: it is the feed's cost
                        CASE WHEN title IS NULL THEN ''::tsvector
                             ELSE setweight(to_tsvector('english'::regconfig, title), 'A') END ||
                        setweight(to_tsvector('english'::regconfig, content || ' ' || source), 'B')) STORED
);
CREATE INDEX urchin_chunks_tsv ON urchin_chunks USING gin (tsv);
CREATE INDEX urchin_chunks_tags ON urchin_chunks USING gin (tags);
CREATE INDEX urchin_chunks_terms ON urchin_chunks USING gin (terms);
CREATE INDEX urchin_chunks_ws_time ON urchin_chunks (workspace, occurred_at);
CREATE INDEX urchin_chunks_time ON urchin_chunks (occurred_at);
CREATE INDEX urchin_chunks_session ON urchin_chunks (session, occurred_at);  -- session neighbours (context)
CREATE INDEX urchin_chunks_doc ON urchin_chunks (doc_id);

-- Vectors of an embedding model, one row per (chunk, model): switching models leaves the old rows
-- unused and the new model's rows missing (= pending re-embedding); a query reads one model only.
-- Each model gets a partial HNSW index on embedding::halfvec(dim), created when it is first used.
CREATE TABLE urchin_embeddings (
    chunk_id   text NOT NULL REFERENCES urchin_chunks (chunk_id) ON DELETE CASCADE,
    model      text NOT NULL,                      -- fingerprint: api + url + model name + dimension
    embedding  halfvec NOT NULL,
    PRIMARY KEY (chunk_id, model)
);

CREATE TABLE urchin_cursors (
    device       text NOT NULL,
    journal      text NOT NULL,
    byte_offset  bigint NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device, journal)
);

-- Document frequency of hashed tokens, counted once per chunk when it is first inserted (idf for the
-- token-cosine leg). `urchin_stats.chunks` is the N of that idf.
CREATE TABLE urchin_terms (
    term  integer PRIMARY KEY,
    df    bigint NOT NULL
);
CREATE TABLE urchin_stats (
    key    text PRIMARY KEY,
    value  bigint NOT NULL
);
INSERT INTO urchin_stats VALUES ('chunks', 0);
"""),
    (2, "workspace file catalog", """
-- One row per workspace file seen (issue 9): indexed (chunks in urchin_chunks), cataloged (over the
-- size cap: no body stored, read live on demand) or failed (unreadable, not UTF-8).
CREATE TABLE urchin_files (
    root    text NOT NULL,
    path    text NOT NULL,
    size    bigint NOT NULL,
    mtime   timestamptz NOT NULL,
    hash    text NOT NULL,
    state   text NOT NULL CHECK (state IN ('indexed', 'cataloged', 'failed')),
    error   text,
    PRIMARY KEY (root, path)
);
"""),
    (3, "source and kind lookup", """
-- Filters naming a source or kind that matches nothing are warned about (issue 14), and query_source
-- lists the known sources: both read this index (a loose scan for the list, an index probe per name).
CREATE INDEX urchin_chunks_source_kind ON urchin_chunks (source, kind);
"""),
)
