"""The index schema as numbered migrations, applied in order at connect (table `urchin_migrations`).

A migration is never edited once released; changes go in a new one. Chunks are keyed by
(`device`, `chunk_id`): the feeding device, and the event id for events or `<root>/<path>#<n>` for
workspace-file chunks (issue 9). An id is unique per device only (migration 6, issue 34).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "TS_CONFIG", "PGVECTOR_MIN", "GIN_INDEXES", "TRIGRAM_INDEX", "TRIGRAM_DEF", "TEAM_SQL"]

TS_CONFIG = "english"          # one explicit text search config, so results never depend on the server default
PGVECTOR_MIN = (0, 7)          # sparsevec and halfvec arrived in 0.7

# The GIN indexes of urchin_chunks as migrations 3-4 create them: a backfill drops them and builds them
# again at its end (PgWriter.begin_bulk / restore_indexes), which costs less than keeping them
# up to date row by row. tests/test_hybrid_feed.py checks these against the migrated schema.
GIN_INDEXES = {
    "urchin_chunks_tsv": "USING gin (tsv)",
    "urchin_chunks_tags": "USING gin (tags)",
    "urchin_chunks_terms": "USING gin (terms)",
    "urchin_chunks_trgm": "USING gin (content gin_trgm_ops)",
}
TRIGRAM_INDEX = "urchin_chunks_trgm"    # two thirds of the four GINs' build (bench/RESULTS.md, round nine)
TRIGRAM_DEF = GIN_INDEXES[TRIGRAM_INDEX]
# Whether this database serves team search: it was set up with `urchin db setup`, whose feeder group
# may write the chunks. Only there is the trigram index kept (migration 8); a single user's `search
# --team` over its own rows scans them. One expression for the migration and for the backfill's
# rebuild (PgWriter.restore_indexes), so the two never disagree.
TEAM_SQL = ("EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = 'urchin_feeder' "
            "AND has_table_privilege(r.oid, 'urchin_chunks', 'INSERT'))")

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
    (3, "team: literal search (pg_trgm), feeder devices, row-level security on device", """
-- Literal substring search over the shared database (`urchin search --team`): ILIKE on content uses it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX urchin_chunks_trgm ON urchin_chunks USING gin (content gin_trgm_ops);
CREATE INDEX urchin_chunks_device ON urchin_chunks (device, occurred_at);

-- Each feeder's journal head (crc32 of its first line) and the forget generation it was seen at: a
-- journal replaced under a cursor is recognised and fed again from 0 (see Feeder._check_replaced).
CREATE TABLE urchin_journal_heads (
    device      text NOT NULL,
    journal     text NOT NULL,
    head        bigint NOT NULL,
    generation  bigint NOT NULL,
    PRIMARY KEY (device, journal)
);

-- Which device each feeder role may write (`urchin db feeder DEVICE`). Only the owner writes it.
CREATE TABLE urchin_feeders (
    role    name PRIMARY KEY,
    device  text NOT NULL UNIQUE
);
-- The device the connected role feeds; NULL for the owner, a superuser or a reader.
CREATE FUNCTION urchin_device() RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT device FROM urchin_feeders WHERE role = current_user $$;

-- Row-level security: everyone who may read reads every row; a feeder role inserts, updates and
-- deletes only the rows (and cursors) of its own device. The owner (migrations) is not subject to it.
ALTER TABLE urchin_chunks ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_chunks FOR SELECT USING (true);
CREATE POLICY urchin_feed_insert ON urchin_chunks FOR INSERT WITH CHECK (device = urchin_device());
CREATE POLICY urchin_feed_update ON urchin_chunks FOR UPDATE USING (device = urchin_device())
    WITH CHECK (device = urchin_device());
CREATE POLICY urchin_feed_delete ON urchin_chunks FOR DELETE USING (device = urchin_device());

ALTER TABLE urchin_cursors ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_cursors FOR SELECT USING (true);
CREATE POLICY urchin_feed_insert ON urchin_cursors FOR INSERT WITH CHECK (device = urchin_device());
CREATE POLICY urchin_feed_update ON urchin_cursors FOR UPDATE USING (device = urchin_device())
    WITH CHECK (device = urchin_device());
CREATE POLICY urchin_feed_delete ON urchin_cursors FOR DELETE USING (device = urchin_device());

ALTER TABLE urchin_journal_heads ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_journal_heads FOR SELECT USING (true);
CREATE POLICY urchin_feed_all ON urchin_journal_heads FOR ALL USING (device = urchin_device())
    WITH CHECK (device = urchin_device());

ALTER TABLE urchin_embeddings ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_embeddings FOR SELECT USING (true);
CREATE POLICY urchin_feed_all ON urchin_embeddings FOR ALL
    USING (EXISTS (SELECT 1 FROM urchin_chunks c WHERE c.chunk_id = urchin_embeddings.chunk_id
                   AND c.device = urchin_device()))
    WITH CHECK (EXISTS (SELECT 1 FROM urchin_chunks c WHERE c.chunk_id = urchin_embeddings.chunk_id
                        AND c.device = urchin_device()));
"""),
    (4, "chunks partitioned by month of occurred_at (native partitioning)", """
-- Growth path: urchin_chunks becomes a table partitioned by month (range on occurred_at). Every
-- unique key includes the partition key: the primary key is (chunk_id, occurred_at); an event's id
-- and time never change, so idempotent upserts still conflict on the same row. Embeddings lose their
-- foreign key (a partitioned table's key would need occurred_at): deletes take them out explicitly.
-- Partitions are created on demand by urchin_ensure_partition (SECURITY DEFINER: feeders may call it).
ALTER TABLE urchin_embeddings DROP CONSTRAINT IF EXISTS urchin_embeddings_chunk_id_fkey;
DROP POLICY urchin_feed_all ON urchin_embeddings;
ALTER TABLE urchin_chunks RENAME TO urchin_chunks_unpartitioned;
CREATE TABLE urchin_chunks (LIKE urchin_chunks_unpartitioned INCLUDING DEFAULTS INCLUDING GENERATED)
    PARTITION BY RANGE (occurred_at);

CREATE FUNCTION urchin_ensure_partition(moment timestamptz) RETURNS void LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    lo timestamp := date_trunc('month', moment AT TIME ZONE 'UTC');
    name text := 'urchin_chunks_' || to_char(lo, 'YYYY"m"MM');
BEGIN
    IF to_regclass(name) IS NULL THEN
        BEGIN
            EXECUTE format('CREATE TABLE %I PARTITION OF urchin_chunks FOR VALUES FROM (%L) TO (%L)', name,
                           lo AT TIME ZONE 'UTC', (lo + interval '1 month') AT TIME ZONE 'UTC');
        EXCEPTION WHEN duplicate_table THEN NULL;  -- another feeder made it first
        END;
    END IF;
END $$;
REVOKE ALL ON FUNCTION urchin_ensure_partition(timestamptz) FROM PUBLIC;

SELECT urchin_ensure_partition(min(occurred_at)) FROM urchin_chunks_unpartitioned
    GROUP BY date_trunc('month', occurred_at AT TIME ZONE 'UTC');
INSERT INTO urchin_chunks (chunk_id, doc_id, doc_type, source, kind, workspace, session, title, tags, content,
                           occurred_at, account, device, journal_offset, path, heading_path, start_line, end_line,
                           content_hash, terms, tvec)
    SELECT chunk_id, doc_id, doc_type, source, kind, workspace, session, title, tags, content, occurred_at, account,
           device, journal_offset, path, heading_path, start_line, end_line, content_hash, terms, tvec
    FROM urchin_chunks_unpartitioned;
DROP TABLE urchin_chunks_unpartitioned;

ALTER TABLE urchin_chunks ADD PRIMARY KEY (chunk_id, occurred_at);
CREATE INDEX urchin_chunks_tsv ON urchin_chunks USING gin (tsv);
CREATE INDEX urchin_chunks_tags ON urchin_chunks USING gin (tags);
CREATE INDEX urchin_chunks_terms ON urchin_chunks USING gin (terms);
CREATE INDEX urchin_chunks_ws_time ON urchin_chunks (workspace, occurred_at);
CREATE INDEX urchin_chunks_time ON urchin_chunks (occurred_at);
CREATE INDEX urchin_chunks_session ON urchin_chunks (session, occurred_at);
CREATE INDEX urchin_chunks_doc ON urchin_chunks (doc_id);
CREATE INDEX urchin_chunks_trgm ON urchin_chunks USING gin (content gin_trgm_ops);
CREATE INDEX urchin_chunks_device ON urchin_chunks (device, occurred_at);

ALTER TABLE urchin_chunks ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_chunks FOR SELECT USING (true);
CREATE POLICY urchin_feed_insert ON urchin_chunks FOR INSERT WITH CHECK (device = urchin_device());
CREATE POLICY urchin_feed_update ON urchin_chunks FOR UPDATE USING (device = urchin_device())
    WITH CHECK (device = urchin_device());
CREATE POLICY urchin_feed_delete ON urchin_chunks FOR DELETE USING (device = urchin_device());
CREATE POLICY urchin_feed_all ON urchin_embeddings FOR ALL
    USING (EXISTS (SELECT 1 FROM urchin_chunks c WHERE c.chunk_id = urchin_embeddings.chunk_id
                   AND c.device = urchin_device()))
    WITH CHECK (EXISTS (SELECT 1 FROM urchin_chunks c WHERE c.chunk_id = urchin_embeddings.chunk_id
                        AND c.device = urchin_device()));
"""),
    (5, "source and kind lookup", """
-- Filters naming a source or kind that matches nothing are warned about (issue 14), and query_source
-- lists the known sources: both read this index (a loose scan for the list, an index probe per name).
CREATE INDEX urchin_chunks_source_kind ON urchin_chunks (source, kind);
"""),
    (6, "team: every row keyed by its device, per-device statistics, accounts bound to feeder roles", """
-- Issue 34: a feeder could change another device's data. Every row a feeder writes is now keyed by
-- its device (an id is unique per device: a feeder's event carrying another device's id is another
-- row), every table a feeder writes has row-level security on device, and a feeder role's rows carry
-- the account its mapping names. Existing rows keep their data; NULL devices become '' (the owner's).

-- Chunks: the device leads the primary key.
UPDATE urchin_chunks SET device = '' WHERE device IS NULL;
ALTER TABLE urchin_chunks ALTER COLUMN device SET DEFAULT '', ALTER COLUMN device SET NOT NULL;
DO $$
DECLARE key name := (SELECT conname FROM pg_constraint WHERE conrelid = 'urchin_chunks'::regclass AND contype = 'p');
BEGIN
    EXECUTE format('ALTER TABLE urchin_chunks DROP CONSTRAINT %I', key);
END $$;
ALTER TABLE urchin_chunks ADD PRIMARY KEY (device, chunk_id, occurred_at);

-- Embeddings: keyed by (device, chunk_id, model). A vector whose chunk id more than one device holds
-- cannot be told apart: it is dropped, and embedded again as pending.
ALTER TABLE urchin_embeddings ADD COLUMN device text;
UPDATE urchin_embeddings e SET device = c.device
    FROM (SELECT chunk_id, min(device) AS device FROM urchin_chunks
          WHERE chunk_id IN (SELECT chunk_id FROM urchin_embeddings)
          GROUP BY chunk_id HAVING count(DISTINCT device) = 1) AS c
    WHERE c.chunk_id = e.chunk_id;
DELETE FROM urchin_embeddings WHERE device IS NULL;
ALTER TABLE urchin_embeddings ALTER COLUMN device SET NOT NULL;
ALTER TABLE urchin_embeddings DROP CONSTRAINT urchin_embeddings_pkey;
ALTER TABLE urchin_embeddings ADD PRIMARY KEY (device, chunk_id, model);

-- Term statistics per device, summed at query time, counted again from the chunks (which also
-- repairs any counts a feeder changed before this migration).
ALTER TABLE urchin_terms ADD COLUMN device text NOT NULL DEFAULT '';
ALTER TABLE urchin_terms DROP CONSTRAINT urchin_terms_pkey;
DELETE FROM urchin_terms;
INSERT INTO urchin_terms (term, device, df)
    SELECT t, device, count(*) FROM urchin_chunks, unnest(terms) AS t GROUP BY t, device;
ALTER TABLE urchin_terms ADD PRIMARY KEY (term, device);
ALTER TABLE urchin_stats ADD COLUMN device text NOT NULL DEFAULT '';
ALTER TABLE urchin_stats DROP CONSTRAINT urchin_stats_pkey;
DELETE FROM urchin_stats WHERE key = 'chunks';
INSERT INTO urchin_stats (device, key, value) SELECT device, 'chunks', count(*) FROM urchin_chunks GROUP BY device;
ALTER TABLE urchin_stats ADD PRIMARY KEY (device, key);

-- The file catalogue per device: a row goes to the device whose chunks the file (or else its root) has.
ALTER TABLE urchin_files ADD COLUMN device text NOT NULL DEFAULT '';
UPDATE urchin_files f SET device = coalesce(
    (SELECT min(c.device) FROM urchin_chunks c WHERE c.doc_type = 'file' AND c.doc_id = f.root || '/' || f.path),
    (SELECT min(c.device) FROM urchin_chunks c WHERE c.doc_type = 'file' AND c.workspace = f.root), '');
ALTER TABLE urchin_files DROP CONSTRAINT urchin_files_pkey;
ALTER TABLE urchin_files ADD PRIMARY KEY (device, root, path);

-- The account a feeder role writes (`urchin db feeder DEVICE --account NAME`); an existing feeder
-- is bound to the one account its rows carry, if they carry exactly one.
ALTER TABLE urchin_feeders ADD COLUMN account text;
UPDATE urchin_feeders f SET account = (SELECT min(c.account) FROM urchin_chunks c WHERE c.device = f.device
                                       HAVING count(DISTINCT c.account) = 1);
-- The policies' functions get standard SQL bodies, resolved once, here: a body in quotes is resolved
-- at each call on the caller's search_path, where a temporary table named urchin_feeders (any role may
-- create one) would come first and name another device.
CREATE OR REPLACE FUNCTION urchin_device() RETURNS text LANGUAGE sql STABLE
    RETURN (SELECT device FROM urchin_feeders WHERE role = current_user);
CREATE FUNCTION urchin_account() RETURNS text LANGUAGE sql STABLE
    RETURN (SELECT account FROM urchin_feeders WHERE role = current_user);

-- Row-level security on device for every table a feeder writes; chunks also check the account.
-- (urchin_feeders and urchin_migrations are written by the owner only: a feeder may only read them.)
DROP POLICY urchin_feed_insert ON urchin_chunks;
DROP POLICY urchin_feed_update ON urchin_chunks;
CREATE POLICY urchin_feed_insert ON urchin_chunks FOR INSERT
    WITH CHECK (device = urchin_device() AND account IS NOT DISTINCT FROM urchin_account());
CREATE POLICY urchin_feed_update ON urchin_chunks FOR UPDATE USING (device = urchin_device())
    WITH CHECK (device = urchin_device() AND account IS NOT DISTINCT FROM urchin_account());
DROP POLICY urchin_feed_all ON urchin_embeddings;
CREATE POLICY urchin_feed_all ON urchin_embeddings FOR ALL USING (device = urchin_device())
    WITH CHECK (device = urchin_device());
ALTER TABLE urchin_terms ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_terms FOR SELECT USING (true);
CREATE POLICY urchin_feed_all ON urchin_terms FOR ALL USING (device = urchin_device())
    WITH CHECK (device = urchin_device());
ALTER TABLE urchin_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_stats FOR SELECT USING (true);
CREATE POLICY urchin_feed_all ON urchin_stats FOR ALL USING (device = urchin_device())
    WITH CHECK (device = urchin_device());
ALTER TABLE urchin_files ENABLE ROW LEVEL SECURITY;
CREATE POLICY urchin_read ON urchin_files FOR SELECT USING (true);
CREATE POLICY urchin_feed_all ON urchin_files FOR ALL USING (device = urchin_device())
    WITH CHECK (device = urchin_device());
"""),
    (7, "team: statistics kept from the chunk rows by the owner; monthly partitions within a window", """
-- Issue 34 D, second round. (1) A feeder wrote its own statistics: a negative count, summed with the
-- others', hid every device's rows. The statistics are now kept by a trigger of the owner from the
-- chunk rows themselves (a feeder may no longer write them): a device's counts only ever describe
-- its own rows, and are never negative. (2) A feeder could create a partition for any month:
-- thousands of them exhausted the server's lock table for every query. A monthly partition is now
-- created only for a month in a window (30 years before this month to a year after it); any
-- other moment is stored in the default partition.

CREATE TABLE urchin_chunks_default PARTITION OF urchin_chunks DEFAULT;

CREATE OR REPLACE FUNCTION urchin_ensure_partition(moment timestamptz) RETURNS void LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    lo timestamp := date_trunc('month', moment AT TIME ZONE 'UTC');
    now_month timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    name text := 'urchin_chunks_' || to_char(lo, 'YYYY"m"MM');
BEGIN
    IF lo < now_month - interval '30 years' OR lo > now_month + interval '1 year' OR to_regclass(name) IS NOT NULL
       -- a month the window reached after its rows were stored keeps them in the default partition
       OR EXISTS (SELECT 1 FROM urchin_chunks_default WHERE occurred_at >= lo AT TIME ZONE 'UTC'
                  AND occurred_at < (lo + interval '1 month') AT TIME ZONE 'UTC') THEN
        RETURN;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF urchin_chunks FOR VALUES FROM (%L) TO (%L)', name,
                       lo AT TIME ZONE 'UTC', (lo + interval '1 month') AT TIME ZONE 'UTC');
    EXCEPTION WHEN duplicate_table THEN NULL;  -- another feeder made it first
    END;
END $$;

-- Counted again from the chunks: repairs whatever a feeder wrote before.
DELETE FROM urchin_terms;
INSERT INTO urchin_terms (term, device, df)
    SELECT t, device, count(*) FROM urchin_chunks, unnest(terms) AS t GROUP BY t, device;
DELETE FROM urchin_stats WHERE key = 'chunks';
INSERT INTO urchin_stats (device, key, value) SELECT device, 'chunks', count(*) FROM urchin_chunks GROUP BY device;
ALTER TABLE urchin_terms ADD CONSTRAINT urchin_terms_df_count CHECK (df >= 0);
ALTER TABLE urchin_stats ADD CONSTRAINT urchin_stats_value_count CHECK (value >= 0);

-- One statement-level trigger per operation (a transition table serves one event). Terms are locked
-- in one order (device, term) by every writer, so two writers of a device never deadlock.
CREATE FUNCTION urchin_count_chunks() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM urchin_terms;
        DELETE FROM urchin_stats WHERE key = 'chunks';
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        PERFORM 1 FROM urchin_terms t JOIN (SELECT DISTINCT o.device, x FROM urchin_old o, unnest(o.terms) AS x) AS d
            ON t.device = d.device AND t.term = d.x ORDER BY t.device, t.term FOR UPDATE OF t;
        UPDATE urchin_terms t SET df = greatest(t.df - d.n, 0)
            FROM (SELECT o.device, x, count(*) AS n FROM urchin_old o, unnest(o.terms) AS x GROUP BY 1, 2) AS d
            WHERE t.device = d.device AND t.term = d.x;
        UPDATE urchin_stats s SET value = greatest(s.value - d.n, 0)
            FROM (SELECT device, count(*) AS n FROM urchin_old GROUP BY device) AS d
            WHERE s.device = d.device AND s.key = 'chunks';
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO urchin_terms (term, device, df)
            SELECT x, n.device, count(*) FROM urchin_new n, unnest(n.terms) AS x GROUP BY 1, 2 ORDER BY 2, 1
            ON CONFLICT (term, device) DO UPDATE SET df = urchin_terms.df + excluded.df;
        INSERT INTO urchin_stats (device, key, value)
            SELECT device, 'chunks', count(*) FROM urchin_new GROUP BY device ORDER BY device
            ON CONFLICT (device, key) DO UPDATE SET value = urchin_stats.value + excluded.value;
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION urchin_count_chunks() FROM PUBLIC;
CREATE TRIGGER urchin_count_insert AFTER INSERT ON urchin_chunks REFERENCING NEW TABLE AS urchin_new
    FOR EACH STATEMENT EXECUTE FUNCTION urchin_count_chunks();
CREATE TRIGGER urchin_count_delete AFTER DELETE ON urchin_chunks REFERENCING OLD TABLE AS urchin_old
    FOR EACH STATEMENT EXECUTE FUNCTION urchin_count_chunks();
CREATE TRIGGER urchin_count_update AFTER UPDATE ON urchin_chunks
    REFERENCING OLD TABLE AS urchin_old NEW TABLE AS urchin_new
    FOR EACH STATEMENT EXECUTE FUNCTION urchin_count_chunks();
CREATE TRIGGER urchin_count_truncate AFTER TRUNCATE ON urchin_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION urchin_count_chunks();
-- the feeders' write grants of migration 3 (`urchin db setup` revokes them too)
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'urchin_feeder') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON urchin_terms, urchin_stats FROM urchin_feeder;
    END IF;
END $$;
"""),
    (8, "trigram index only on a team database", f"""
-- Issue 37: the trigram GIN index on content serves only `urchin search --team` and was a third of
-- the feed's CPU per row. It is kept where team search exists (a database set up with `urchin db
-- setup`, which builds it) and dropped from a single user's index.
DO $$
BEGIN
    IF NOT {TEAM_SQL} THEN
        DROP INDEX IF EXISTS urchin_chunks_trgm;
    END IF;
END $$;
"""),
)
