"""The PostgreSQL store's schema: numbered migrations recorded in a version table.

Migration 1 is the plain hybrid table: one row per chunk holding the content, its
origin and metadata, the content hash, the vector (``vector``, nullable, any
dimension; each collection gets its own HNSW index once its dimension is known) and
the lexical document, a ``tsvector`` *generated* from the analysed fields
``lex_exact`` / ``lex_stems`` with a GIN index. The row is the unit of truth: the
two arms cannot drift because the lexical document is computed by PostgreSQL from
the very row the vector lives in.

The lexical document is built by :sql:`plait_lex_document`, not ``to_tsvector``:
the default parser (``simple`` configuration included) splits ``err-4012`` into
``err`` + ``-4012`` and ``resolve_tenant_db`` into three words, so identifiers
would not survive. plait's analyser has already produced the tokens; each distinct
token becomes one whole lexeme, prefixed with its field (``e:`` exact, ``s:``
stems), carrying positions ``1..tf`` so its term frequency is the number of
positions (capped at 256, PostgreSQL's limit per lexeme).

Migration 2 adds what BM25 needs beyond the row: per-chunk field lengths (generated
columns), per-collection totals and a document-frequency table
``plait_lex_terms``, kept by statement-level triggers in the same transaction as
every insert or delete of chunks — so the statistics cannot drift either.

Migration 3 adds the postings the lexical arm reads: ``plait_postings`` holds one row
per (collection, field-prefixed term, chunk row) with the term frequency (the true
count, not capped) and the chunk's length in the term's field, denormalised so a
query never touches the chunk rows until its top ``n`` is known. The primary key
``(collection_id, key, chunk_row) INCLUDE (tf, len)`` makes each query term one
index range (index-only once vacuum has marked the pages visible). The same
statistics triggers fill and empty it, in the same transaction as the chunk rows;
deleting a collection removes its postings by ``ON DELETE CASCADE``. The migration
backfills the postings of every chunk already stored and drops the GIN index on
``lex``, which no query reads any more (``lex`` itself stays: the df triggers use it,
and ad-hoc ``ts_rank`` queries can still index it).

Migration 5 makes the postings compact and prunable: ``plait_lex_terms`` gets an
integer ``id`` and per-term bounds ``max_tf`` / ``min_len`` (the largest term
frequency and smallest field length among the term's postings; widened on every
insert, left alone on deletes, where they remain valid bounds), and ``plait_postings``
becomes ``(collection_id integer, term integer, chunk_row, tf, len)`` with the
primary key ``(collection_id, term, chunk_row) INCLUDE (tf, len)`` (no text key, no
foreign key: :meth:`~plait.stores.postgres.PostgresStore.delete_collection` deletes a
collection's postings itself), with autovacuum told to visit both tables after 2 % of
new rows instead of 20 %, so index-only scans come back soon after a large load.

Migration 8 (:mod:`plait.stores.postgres_bounds`) tightens the pruning bound: the
smallest ``len/tf`` per term (``min_ratio``) next to ``max_tf``.

Migration 9 (:mod:`plait.stores.postgres_generation`) adds ``plait_collections.generation``,
bumped by the same triggers in the same transaction as every change of a collection's
chunk rows and postings: the serving process's lexical cache is keyed by it.

Migration 10 (:mod:`plait.stores.postgres_changes`) adds ``plait_changes``, the log of
each generation's inserted and deleted chunk row ids, written by the same triggers:
a serving process applies only the changes since its cached generation.

Migration 11 (:mod:`plait.stores.postgres_revision`) adds ``plait_collections.revision``,
bumped once per transaction that updates a chunk row in place (a vector, metadata…): the
in-process dense matrix is keyed by ``(generation, revision)``.

Migration 12 (:mod:`plait.stores.postgres_lockwait`) redefines ``plait_lex_stats_remove``
so that its postings delete probes ``plait_postings_pkey`` by the full key.

Migration 13 (:mod:`plait.stores.postgres_keys`) lets in-place updates from other SQL log
their revision in ``plait_revisions`` instead of locking the collection's row (no deadlock
with the store's writers), and adds ``plait_instance``, the schema's identity in every
cache key.

Migration 14 (:mod:`plait.stores.postgres_counts`) does the same for inserts and deletes
of chunks from other SQL: their counts and generation bump are queued in ``plait_counts``
and folded by the next store write, and the store's writers lock the collection's row
``FOR NO KEY UPDATE`` (a foreign-key check does not wait for it).

Migration 6 adds the record tables of :mod:`plait.stores.records` (refinery runs and
cards, API keys, and which former side files were imported).

Migrations run under ``pg_advisory_lock`` so several processes may start at once, each
in its own transaction under a short ``lock_timeout``, retried with a growing pause
(:mod:`plait.stores.postgres_migrate`): a migration waiting for a table lock never queues
searches behind it for more than that.
"""

from __future__ import annotations

import psycopg

from plait.errors import StoreReadOnlyError
from plait.stores.postgres_bounds import MIGRATION_8
from plait.stores.postgres_changes import MIGRATION_10
from plait.stores.postgres_counts import MIGRATION_14
from plait.stores.postgres_generation import MIGRATION_9
from plait.stores.postgres_keys import MIGRATION_13
from plait.stores.postgres_lockwait import MIGRATION_12
from plait.stores.postgres_migrate import DEFAULT_ATTEMPTS, DEFAULT_LOCK_TIMEOUT, apply_migration
from plait.stores.postgres_revision import MIGRATION_11

__all__ = ["LATEST_VERSION", "MIGRATIONS", "migrate", "schema_version"]

_MIGRATION_1 = r"""
CREATE TABLE plait_collections (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE,
    provider text,
    model text,
    dimension integer,
    settings jsonb NOT NULL DEFAULT '{}',
    created_at text NOT NULL
);
CREATE TABLE plait_sources (
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    source_id text NOT NULL,
    scope text NOT NULL,
    indexed_at text NOT NULL,
    root text NOT NULL DEFAULT '',
    PRIMARY KEY (collection_id, source_id)
);
CREATE INDEX plait_sources_root ON plait_sources (collection_id, root);
CREATE TABLE plait_scopes (
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    scope text NOT NULL,
    last_indexed_at text NOT NULL,
    PRIMARY KEY (collection_id, scope)
);
CREATE FUNCTION plait_lex_document(exact text, stems text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(
        '''' || replace(replace(k, '\', '\\'), '''', '''''') || ''':'
        || (SELECT string_agg(g::text, ',') FROM generate_series(1, least(n, 256)) AS g),
        ' '), '')::tsvector
    FROM (
        SELECT k, count(*) AS n FROM (
            SELECT 'e:' || t AS k FROM unnest(string_to_array(exact, ' ')) AS t
            UNION ALL
            SELECT 's:' || t FROM unnest(string_to_array(stems, ' ')) AS t
        ) AS tokens GROUP BY k
    ) AS counted
$$;
CREATE TABLE plait_chunks (
    id bigint GENERATED ALWAYS AS IDENTITY,
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    chunk_id text NOT NULL,
    source_id text NOT NULL,
    scope text NOT NULL,
    ordinal integer NOT NULL,
    content text NOT NULL,
    content_hash text NOT NULL,
    origin jsonb NOT NULL,
    metadata jsonb NOT NULL,
    vector vector,
    lex_exact text NOT NULL,
    lex_stems text NOT NULL,
    lex tsvector GENERATED ALWAYS AS (plait_lex_document(lex_exact, lex_stems)) STORED,
    -- keys lead with collection_id, so the table can be distributed by collection (Citus)
    PRIMARY KEY (collection_id, id),
    UNIQUE (collection_id, chunk_id)
);
CREATE INDEX plait_chunks_source ON plait_chunks (collection_id, source_id);
CREATE INDEX plait_chunks_hash ON plait_chunks (collection_id, content_hash);
CREATE INDEX plait_chunks_lex ON plait_chunks USING gin (lex);
"""

_MIGRATION_2 = r"""
ALTER TABLE plait_chunks
    ADD COLUMN len_exact integer
        GENERATED ALWAYS AS (cardinality(string_to_array(lex_exact, ' '))) STORED,
    ADD COLUMN len_stems integer
        GENERATED ALWAYS AS (cardinality(string_to_array(lex_stems, ' '))) STORED;
ALTER TABLE plait_collections
    ADD COLUMN n_chunks bigint NOT NULL DEFAULT 0,
    ADD COLUMN len_exact_total bigint NOT NULL DEFAULT 0,
    ADD COLUMN len_stems_total bigint NOT NULL DEFAULT 0;
CREATE TABLE plait_lex_terms (
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    key text NOT NULL,
    df integer NOT NULL,
    PRIMARY KEY (collection_id, key)
);
INSERT INTO plait_lex_terms (collection_id, key, df)
    SELECT c.collection_id, k, count(*)
    FROM plait_chunks AS c, unnest(tsvector_to_array(c.lex)) AS k GROUP BY 1, 2;
UPDATE plait_collections AS p
    SET n_chunks = x.n, len_exact_total = x.e, len_stems_total = x.s
    FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
          FROM plait_chunks GROUP BY collection_id) AS x
    WHERE p.id = x.collection_id;

CREATE FUNCTION plait_lex_stats_add() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    INSERT INTO plait_lex_terms AS t (collection_id, key, df)
        SELECT c.collection_id, k, count(*)
        FROM changed AS c, unnest(tsvector_to_array(c.lex)) AS k
        GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (collection_id, key) DO UPDATE SET df = t.df + excluded.df;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks + x.n,
            len_exact_total = p.len_exact_total + x.e,
            len_stems_total = p.len_stems_total + x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;

CREATE FUNCTION plait_lex_stats_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    UPDATE plait_lex_terms AS t SET df = t.df - x.n
        FROM (SELECT c.collection_id, k, count(*) AS n
              FROM changed AS c, unnest(tsvector_to_array(c.lex)) AS k
              GROUP BY 1, 2 ORDER BY 1, 2) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.k;
    DELETE FROM plait_lex_terms AS t
        USING (SELECT DISTINCT c.collection_id, k
               FROM changed AS c, unnest(tsvector_to_array(c.lex)) AS k) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.k AND t.df <= 0;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks - x.n,
            len_exact_total = p.len_exact_total - x.e,
            len_stems_total = p.len_stems_total - x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;

CREATE FUNCTION plait_lex_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'plait_chunks.lex_exact / lex_stems are never updated in place: '
        'delete the row and insert it again so the BM25 statistics follow';
END $$;

CREATE TRIGGER plait_chunks_stats_insert AFTER INSERT ON plait_chunks
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION plait_lex_stats_add();
CREATE TRIGGER plait_chunks_stats_delete AFTER DELETE ON plait_chunks
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION plait_lex_stats_remove();
CREATE TRIGGER plait_chunks_lex_immutable BEFORE UPDATE OF lex_exact, lex_stems ON plait_chunks
    FOR EACH ROW EXECUTE FUNCTION plait_lex_immutable();
"""

_MIGRATION_3 = r"""
CREATE FUNCTION plait_lex_postings(exact text, stems text)
RETURNS TABLE (key text, tf integer, field integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT k, count(*)::integer, min(f) FROM (
        SELECT 'e:' || t AS k, 0 AS f FROM unnest(string_to_array(exact, ' ')) AS t
        UNION ALL
        SELECT 's:' || t, 1 FROM unnest(string_to_array(stems, ' ')) AS t
    ) AS tokens GROUP BY k
$$;
CREATE TABLE plait_postings (
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    key text NOT NULL,
    chunk_row bigint NOT NULL,
    tf integer NOT NULL,
    len integer NOT NULL
);
INSERT INTO plait_postings (collection_id, key, chunk_row, tf, len)
    SELECT c.collection_id, p.key, c.id, p.tf,
           CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END
    FROM plait_chunks AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p
    ORDER BY 1, 2, 3;
ALTER TABLE plait_postings ADD PRIMARY KEY (collection_id, key, chunk_row) INCLUDE (tf, len);
ANALYZE plait_postings;
-- No query of the store reads the GIN index any more; every write paid for it.
DROP INDEX plait_chunks_lex;

CREATE OR REPLACE FUNCTION plait_lex_stats_add() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    INSERT INTO plait_lex_terms AS t (collection_id, key, df)
        SELECT c.collection_id, k, count(*)
        FROM changed AS c, unnest(tsvector_to_array(c.lex)) AS k
        GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (collection_id, key) DO UPDATE SET df = t.df + excluded.df;
    INSERT INTO plait_postings (collection_id, key, chunk_row, tf, len)
        SELECT c.collection_id, p.key, c.id, p.tf,
               CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END
        FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p
        ORDER BY 1, 2, 3;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks + x.n,
            len_exact_total = p.len_exact_total + x.e,
            len_stems_total = p.len_stems_total + x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION plait_lex_stats_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    UPDATE plait_lex_terms AS t SET df = t.df - x.n
        FROM (SELECT c.collection_id, k, count(*) AS n
              FROM changed AS c, unnest(tsvector_to_array(c.lex)) AS k
              GROUP BY 1, 2 ORDER BY 1, 2) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.k;
    DELETE FROM plait_lex_terms AS t
        USING (SELECT DISTINCT c.collection_id, k
               FROM changed AS c, unnest(tsvector_to_array(c.lex)) AS k) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.k AND t.df <= 0;
    DELETE FROM plait_postings AS t
        USING (SELECT c.collection_id, p.key, c.id
               FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.key AND t.chunk_row = x.id;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks - x.n,
            len_exact_total = p.len_exact_total - x.e,
            len_stems_total = p.len_stems_total - x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;
"""

_MIGRATION_4 = r"""
-- Backfill claims: which process embeds which vector-less chunk, until when.
CREATE TABLE plait_vector_claims (
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    chunk_id text NOT NULL,
    owner text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (collection_id, chunk_id)
);
CREATE INDEX plait_vector_claims_owner ON plait_vector_claims (collection_id, owner);
CREATE INDEX plait_chunks_without_vector ON plait_chunks (collection_id, id) WHERE vector IS NULL;
"""

_MIGRATION_5 = r"""
-- Integer term ids, per-term bounds, compact postings keyed by term id.
ALTER TABLE plait_lex_terms
    ADD COLUMN id integer GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN max_tf integer NOT NULL DEFAULT 0,
    ADD COLUMN min_len integer NOT NULL DEFAULT 2147483647;
UPDATE plait_lex_terms AS t SET max_tf = x.max_tf, min_len = x.min_len
    FROM (SELECT collection_id, key, max(tf) AS max_tf, min(len) AS min_len
          FROM plait_postings GROUP BY 1, 2) AS x
    WHERE t.collection_id = x.collection_id AND t.key = x.key;
CREATE TABLE plait_postings_v5 (
    collection_id integer NOT NULL,
    term integer NOT NULL,
    chunk_row bigint NOT NULL,
    tf integer NOT NULL,
    len integer NOT NULL
) WITH (fillfactor = 100,
        autovacuum_vacuum_insert_scale_factor = 0.02,
        autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.02);
INSERT INTO plait_postings_v5 (collection_id, term, chunk_row, tf, len)
    SELECT p.collection_id, t.id, p.chunk_row, p.tf, p.len
    FROM plait_postings AS p
    JOIN plait_lex_terms AS t ON t.collection_id = p.collection_id AND t.key = p.key
    ORDER BY 1, 2, 3;
DROP TABLE plait_postings;
ALTER TABLE plait_postings_v5 RENAME TO plait_postings;
ALTER TABLE plait_postings ADD CONSTRAINT plait_postings_pkey
    PRIMARY KEY (collection_id, term, chunk_row) INCLUDE (tf, len);
ALTER TABLE plait_chunks SET (autovacuum_vacuum_insert_scale_factor = 0.02,
                              autovacuum_analyze_scale_factor = 0.02);
ANALYZE plait_postings;
ANALYZE plait_lex_terms;

CREATE OR REPLACE FUNCTION plait_lex_stats_add() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    INSERT INTO plait_lex_terms AS t (collection_id, key, df, max_tf, min_len)
        SELECT c.collection_id, p.key, count(*), max(p.tf),
               min(CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END)
        FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p
        GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (collection_id, key) DO UPDATE SET df = t.df + excluded.df,
        max_tf = greatest(t.max_tf, excluded.max_tf), min_len = least(t.min_len, excluded.min_len);
    INSERT INTO plait_postings (collection_id, term, chunk_row, tf, len)
        SELECT c.collection_id, t.id, c.id, p.tf,
               CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END
        FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p, plait_lex_terms AS t
        WHERE t.collection_id = c.collection_id AND t.key = p.key
        ORDER BY 1, 2, 3;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks + x.n,
            len_exact_total = p.len_exact_total + x.e,
            len_stems_total = p.len_stems_total + x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;

-- A delete leaves max_tf / min_len as they are: still bounds, only looser.
CREATE OR REPLACE FUNCTION plait_lex_stats_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    DELETE FROM plait_postings AS t
        USING (SELECT c.collection_id, lt.id AS term, c.id
               FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p, plait_lex_terms AS lt
               WHERE lt.collection_id = c.collection_id AND lt.key = p.key) AS x
        WHERE t.collection_id = x.collection_id AND t.term = x.term AND t.chunk_row = x.id;
    UPDATE plait_lex_terms AS t SET df = t.df - x.n
        FROM (SELECT c.collection_id, p.key, count(*) AS n
              FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p
              GROUP BY 1, 2 ORDER BY 1, 2) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.key;
    DELETE FROM plait_lex_terms AS t
        USING (SELECT DISTINCT c.collection_id, p.key
               FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.key AND t.df <= 0;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks - x.n,
            len_exact_total = p.len_exact_total - x.e,
            len_stems_total = p.len_stems_total - x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;
"""

_MIGRATION_6 = r"""
-- Refinery runs and FAQ cards, API keys: in the store, so servers on one database share them
-- (plait.stores.records; formerly refinery.db / keys.db files).
CREATE TABLE plait_refinery_runs (
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id text PRIMARY KEY,
    collection text NOT NULL,
    status text NOT NULL,
    mode text NOT NULL,
    chunks_scanned integer NOT NULL DEFAULT 0,
    chunks_total integer NOT NULL DEFAULT 0,
    cards_made integer NOT NULL DEFAULT 0,
    cards_merged integer NOT NULL DEFAULT 0,
    llm_calls integer NOT NULL DEFAULT 0,
    groups_skipped integer NOT NULL DEFAULT 0,
    created_at double precision NOT NULL,
    started_at double precision,
    finished_at double precision,
    heartbeat_at double precision,
    pid integer,
    error text,
    note text,
    cancel_requested integer NOT NULL DEFAULT 0
);
CREATE INDEX plait_refinery_runs_by_collection ON plait_refinery_runs (collection, created_at);
CREATE TABLE plait_refinery_cards (
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id text PRIMARY KEY,
    collection text NOT NULL,
    question text NOT NULL,
    answer text NOT NULL,
    sources text NOT NULL,
    status text NOT NULL,
    mode text NOT NULL,
    run_id text,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);
CREATE INDEX plait_refinery_cards_by_collection ON plait_refinery_cards (collection, status);
CREATE TABLE plait_api_keys (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    token_hash text NOT NULL UNIQUE,
    hint text NOT NULL,
    role text NOT NULL,
    collection text NOT NULL,
    created_at text NOT NULL,
    revoked_at text
);
CREATE TABLE plait_record_imports (
    source text PRIMARY KEY,
    imported_at text NOT NULL,
    runs integer NOT NULL,
    cards integer NOT NULL,
    keys integer NOT NULL
);
"""

#: Usage metering: provider calls and tokens per collection, hour, kind, purpose, model.
_MIGRATION_7 = r"""
CREATE TABLE plait_usage (
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    bucket text NOT NULL,
    kind text NOT NULL,
    purpose text NOT NULL,
    provider text NOT NULL,
    model text NOT NULL,
    estimated boolean NOT NULL,
    calls bigint NOT NULL DEFAULT 0,
    texts bigint NOT NULL DEFAULT 0,
    characters bigint NOT NULL DEFAULT 0,
    input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (collection_id, bucket, kind, purpose, provider, model, estimated)
);
"""

#: Migration ``n`` is ``MIGRATIONS[n - 1]``; applied in order, each in the same
#: transaction as its row in ``plait_schema_version``.
MIGRATIONS: tuple[str, ...] = (
    _MIGRATION_1, _MIGRATION_2, _MIGRATION_3, _MIGRATION_4, _MIGRATION_5, _MIGRATION_6, _MIGRATION_7,
    MIGRATION_8, MIGRATION_9, MIGRATION_10, MIGRATION_11, MIGRATION_12, MIGRATION_13, MIGRATION_14,
)
LATEST_VERSION = len(MIGRATIONS)

_LOCK_KEY = "SELECT hashtextextended('plait.migrate:' || current_schema(), 0)"


def schema_version(conn: psycopg.Connection) -> int:
    """The highest migration applied in the connection's schema (0 when none)."""
    exists = conn.execute("SELECT to_regclass('plait_schema_version') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM plait_schema_version").fetchone()
    return int(row[0]) if row else 0


def migrate(
    conn: psycopg.Connection,
    *,
    target: int | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    attempts: int = DEFAULT_ATTEMPTS,
) -> int:
    """Bring the schema up to ``target`` (default: the latest); returns the version.

    ``conn`` must be in autocommit mode. A session-level advisory lock (keyed by the
    current schema) serialises concurrent starts: the second process waits, then
    finds nothing left to do. Each migration waits at most ``lock_timeout`` seconds for
    a table lock per attempt, ``attempts`` times, so searches never queue behind it for
    longer (:mod:`plait.stores.postgres_migrate`; past that
    :class:`~plait.errors.StoreConflictError`). On a hot standby it only reads: the version
    when the standby holds ``target`` already, else :class:`~plait.errors.StoreReadOnlyError`
    (as for a server that refuses the migration's writes as read-only).
    """
    goal = LATEST_VERSION if target is None else target
    if not 0 <= goal <= LATEST_VERSION:
        raise ValueError(f"target version {goal} is not between 0 and {LATEST_VERSION}")
    standby = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    if standby and standby[0]:
        # A read replica cannot migrate; it must already hold what the primary has.
        current = schema_version(conn)
        if current < goal:
            raise StoreReadOnlyError(
                f"PostgreSQL at {_where(conn)} is a read-only hot standby with plait schema version "
                f"{current}, {goal} is needed and a standby cannot migrate: migrate on the primary "
                "(open the store there once) and let the standby replay it"
            )
        return current
    key_row = conn.execute(_LOCK_KEY).fetchone()
    key = int(key_row[0]) if key_row else 0
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    try:
        with conn.transaction():
            conn.execute(
                "CREATE TABLE IF NOT EXISTS plait_schema_version ("
                "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        current = schema_version(conn)
        for number in range(current + 1, goal + 1):
            apply_migration(conn, number, MIGRATIONS[number - 1], lock_timeout=lock_timeout, attempts=attempts)
        return max(current, goal)
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        # a primary whose sessions are default_transaction_read_only (25006)
        raise StoreReadOnlyError(
            f"PostgreSQL at {_where(conn)} refused the plait schema migration as read-only "
            f"({exc.sqlstate}: {' '.join(str(exc).split())}): migrate in a session that may write "
            "(on the primary, without default_transaction_read_only)"
        ) from exc
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _where(conn: psycopg.Connection) -> str:
    """``host:port`` of the connection's server, for messages (never the password)."""
    return f"{conn.info.host}:{conn.info.port}"
