"""Migration 9 of the PostgreSQL store: a per-collection generation for in-process caches.

The lexical arm scores in the serving process, from a cached
:class:`~plait.stores.lexical_index.LexicalIndex` of the collection (as the SQLite store
does), and such a cache is only right while the chunks and postings it was read from are
unchanged. ``plait_collections.generation`` counts those changes: the statistics
triggers on ``plait_chunks`` (:mod:`plait.stores.postgres_schema`) bump it in the very
statement that updates the collection's totals, so in the same transaction as every
insert or delete of chunk rows and their postings — whatever issued them (the store's
writes, ``plait copy``'s bulk writes, a raw ``INSERT … SELECT``). Other processes see the
new value exactly when they see the new rows: a snapshot that reads the generation and
the postings reads them consistently.

What does not bump it, and why that is right: updates of a chunk's scope, ordinal,
origin, metadata or vector leave its lexical fields, lengths and postings as they were,
and the lexical cache holds nothing else (filters are evaluated in SQL on every filtered
query). What the cache does hold — ``lex_exact`` / ``lex_stems`` (so the generated
``len_exact`` / ``len_stems``), ``chunk_id``, ``collection_id`` — is never updated in
place: a trigger refuses it (delete the row and insert it again). ``TRUNCATE`` of ``plait_chunks``,
``plait_postings`` or ``plait_lex_terms`` fires no row or statement ``DELETE`` trigger,
so it is refused too (a statement trigger raises): no raw SQL can change what a serving
process caches without moving the generation. Deleting a collection deletes its row (its
id is never reused: a re-created collection has a new id, so no cache keyed by id can be
mistaken for it).

The migration also adds ``plait_chunks_lengths``, ``(collection_id, id) INCLUDE (len_exact,
len_stems, chunk_id)``: what a serving process reads when it (re)loads a collection's
index is every chunk's row id, field lengths and chunk id, and from this index that is an
index-only scan in row-id order (about 95 bytes per chunk) instead of a scan of the wide
chunk rows and a sort. It is built inside the migration's transaction (not
``CONCURRENTLY``), seconds per 100k chunks, and the locks are ordered so that searches go
on meanwhile: the migration first takes ``EXCLUSIVE`` on ``plait_collections`` (which
blocks writers and ``SELECT … FOR UPDATE``, in the order the store's writers lock:
collection row first, then chunks; plain ``SELECT`` s are not blocked), then builds the
index (``SHARE`` on ``plait_chunks``: writes wait, reads do not), and only then adds the
column, the one statement needing ``ACCESS EXCLUSIVE`` on ``plait_collections`` — for a
moment, since a column with a constant default does not rewrite the table — before
replacing the functions and triggers. Every lock is held until the migration commits.
"""

from __future__ import annotations

__all__ = ["MIGRATION_9"]

MIGRATION_9 = r"""
LOCK TABLE plait_collections IN EXCLUSIVE MODE;
CREATE INDEX plait_chunks_lengths ON plait_chunks (collection_id, id) INCLUDE (len_exact, len_stems, chunk_id);
ALTER TABLE plait_collections ADD COLUMN generation bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION plait_lex_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'plait_chunks.lex_exact / lex_stems / chunk_id / collection_id'
        ' are never updated in place: delete the row and insert it again so the '
        'BM25 statistics and the collection''s generation follow';
END $$;
DROP TRIGGER plait_chunks_lex_immutable ON plait_chunks;
CREATE TRIGGER plait_chunks_lex_immutable
    BEFORE UPDATE OF lex_exact, lex_stems, chunk_id, collection_id ON plait_chunks
    FOR EACH ROW EXECUTE FUNCTION plait_lex_immutable();

CREATE FUNCTION plait_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'TRUNCATE % is refused: it would bypass the BM25 statistics and the '
        'collections'' generation; delete the collections (or their rows) instead', TG_TABLE_NAME;
END $$;
CREATE TRIGGER plait_chunks_no_truncate BEFORE TRUNCATE ON plait_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION plait_refuse_truncate();
CREATE TRIGGER plait_postings_no_truncate BEFORE TRUNCATE ON plait_postings
    FOR EACH STATEMENT EXECUTE FUNCTION plait_refuse_truncate();
CREATE TRIGGER plait_lex_terms_no_truncate BEFORE TRUNCATE ON plait_lex_terms
    FOR EACH STATEMENT EXECUTE FUNCTION plait_refuse_truncate();

CREATE OR REPLACE FUNCTION plait_lex_stats_add() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    INSERT INTO plait_lex_terms AS t (collection_id, key, df, max_tf, min_len, min_ratio)
        SELECT c.collection_id, p.key, count(*), max(p.tf),
               min(CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END),
               min((CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END)::float8 / p.tf)
        FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p
        GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (collection_id, key) DO UPDATE SET df = t.df + excluded.df,
        max_tf = greatest(t.max_tf, excluded.max_tf), min_len = least(t.min_len, excluded.min_len),
        min_ratio = least(t.min_ratio, excluded.min_ratio);
    INSERT INTO plait_postings (collection_id, term, chunk_row, tf, len)
        SELECT c.collection_id, t.id, c.id, p.tf,
               CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END
        FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p, plait_lex_terms AS t
        WHERE t.collection_id = c.collection_id AND t.key = p.key
        ORDER BY 1, 2, 3;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks + x.n,
            len_exact_total = p.len_exact_total + x.e,
            len_stems_total = p.len_stems_total + x.s,
            generation = p.generation + 1
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;

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
            len_stems_total = p.len_stems_total - x.s,
            generation = p.generation + 1
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;
"""
