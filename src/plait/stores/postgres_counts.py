"""Migration 14 of the PostgreSQL store: inserts and deletes of chunks from other SQL
without a lock on the collection's row (review 7, finding 7).

Migration 13 (:mod:`plait.stores.postgres_keys`) took the collection's row out of an
in-place ``UPDATE`` from other SQL. Inserts and deletes still took it, twice over, after
the chunk rows: the statistics triggers' bump (``n_chunks``, the length totals,
``generation``: migrations 9/10's ``_BUMP``) updated the row at the end of the statement,
and an ``INSERT`` also share-locked it for the foreign key of ``plait_chunks``. The store's
writers lock that row first (``SELECT … FOR UPDATE``), then the chunks: an operator's
transaction holding one chunk row and deleting or inserting another, while a store write
waited for the first, deadlocked.

Now both sides agree:

- The store's writers lock the row ``FOR NO KEY UPDATE``
  (:meth:`~plait.stores.postgres_base.PostgresBase._collection`), which still excludes
  every other writer but not the ``FOR KEY SHARE`` of a foreign-key check: an insert of
  chunks (or of a new term of ``plait_lex_terms``) no longer waits for a store write.
- The bump updates the row only in transactions flagged as holding it already
  (``plait.locked_<collection id>``, as in migration 13). Any other statement *inserts* one
  row into ``plait_counts`` per collection it changed: its chunk count and length totals,
  signed. That table has no unique key another transaction could hold and no foreign key,
  so the insert waits for nothing. A store writer's bump folds the rows committed so far
  into the columns (``generation`` moves by one per folded row, plus its own), in the same
  statement as its own bump (one snapshot: a row is either folded and deleted or left for
  the next fold).

Readers read the generation as :data:`~plait.stores.postgres_keys.GENERATION_OF` and the
chunk count as :data:`~plait.stores.postgres_keys.CHUNKS`: the column plus the rows not
folded yet, in the statement that reads the key, so the generation moves exactly when an
inserting or deleting transaction commits, whichever path it took, and never goes back.
A queued statement writes no ``plait_changes`` row (those are numbered by the generation,
which a transaction without the row lock cannot assign), so a reader whose cached
generation is older than a queued change finds a gap in the log and reloads that
collection in full (:func:`~plait.stores.postgres_changes.changes_from`): correct, only
slower, and only after other SQL wrote.

Safe on a populated database: a ``CREATE TABLE`` and two ``CREATE OR REPLACE FUNCTION``
s, no lock on an existing table. An older plait process reading ``generation`` /
``n_chunks`` alone would miss inserts and deletes by other SQL until the next store write
folds them: upgrade every serving process.
"""

from __future__ import annotations

__all__ = ["MIGRATION_14"]

# The live pieces of the statistics triggers as migration 14 left them (with ADD_STATS of
# postgres_changes and REMOVE_STATS of postgres_keys): a later migration that redefines the
# functions starts from them. MIGRATION_14 below is a frozen copy, not built from them.

#: The statistics triggers' bump: a statement whose transaction holds the collection's row
#: or can take it without waiting (``SKIP LOCKED``) updates it, folding the queued counts;
#: a statement whose collection row another transaction holds queues its counts in
#: ``plait_counts``.
_BUMP = """
    WITH held AS (
        SELECT p.id FROM plait_collections AS p
            WHERE p.id IN (SELECT DISTINCT collection_id FROM changed)
            FOR NO KEY UPDATE SKIP LOCKED
    ), x AS (
        SELECT c.collection_id, count(*) AS n, coalesce(sum(c.len_exact), 0) AS e,
               coalesce(sum(c.len_stems), 0) AS s, bool_or(h.id IS NOT NULL) AS mine
        FROM changed AS c LEFT JOIN held AS h ON h.id = c.collection_id GROUP BY c.collection_id
    ), queued AS (
        INSERT INTO plait_counts (collection_id, n, e, s)
            SELECT collection_id, {sign}n, {sign}e, {sign}s FROM x WHERE NOT x.mine
    ), gone AS (
        DELETE FROM plait_counts AS q USING x
            WHERE x.mine AND q.collection_id = x.collection_id
            RETURNING q.collection_id, q.n, q.e, q.s
    ), folded AS (
        SELECT collection_id, count(*) AS k, sum(n) AS n, sum(e) AS e, sum(s) AS s
        FROM gone GROUP BY collection_id
    ), bumped AS (
        UPDATE plait_collections AS p
            SET n_chunks = p.n_chunks {sign} x.n + coalesce(f.n, 0),
                len_exact_total = p.len_exact_total {sign} x.e + coalesce(f.e, 0),
                len_stems_total = p.len_stems_total {sign} x.s + coalesce(f.s, 0),
                generation = p.generation + 1 + coalesce(f.k, 0)
            FROM x LEFT JOIN folded AS f ON f.collection_id = x.collection_id
            WHERE x.mine AND p.id = x.collection_id
            RETURNING p.id, p.generation
    ), logged AS (
        INSERT INTO plait_changes (collection_id, generation, {column})
            SELECT b.id, b.generation,
                   ARRAY(SELECT c.id FROM changed AS c WHERE c.collection_id = b.id ORDER BY c.id)
            FROM bumped AS b
            RETURNING collection_id, generation
    )
    DELETE FROM plait_changes AS l USING logged AS g
        WHERE l.collection_id = g.collection_id AND l.generation <= g.generation - {keep};
"""

_HEAD = r"""
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
"""
_TAIL = r"""    RETURN NULL;
END $$;
"""

#: Migration 14, frozen: the text as it was first released, written out in full (not
#: composed from the live pieces above, which a later migration may change). Never edit it:
#: a change of these functions is a new migration (tests/stores/test_postgres_frozen.py).
MIGRATION_14 = r"""
CREATE TABLE plait_counts (
    collection_id bigint NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    n bigint NOT NULL,
    e bigint NOT NULL,
    s bigint NOT NULL,
    PRIMARY KEY (collection_id, id)
);

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
    WITH held AS (
        SELECT p.id FROM plait_collections AS p
            WHERE p.id IN (SELECT DISTINCT collection_id FROM changed)
            FOR NO KEY UPDATE SKIP LOCKED
    ), x AS (
        SELECT c.collection_id, count(*) AS n, coalesce(sum(c.len_exact), 0) AS e,
               coalesce(sum(c.len_stems), 0) AS s, bool_or(h.id IS NOT NULL) AS mine
        FROM changed AS c LEFT JOIN held AS h ON h.id = c.collection_id GROUP BY c.collection_id
    ), queued AS (
        INSERT INTO plait_counts (collection_id, n, e, s)
            SELECT collection_id, +n, +e, +s FROM x WHERE NOT x.mine
    ), gone AS (
        DELETE FROM plait_counts AS q USING x
            WHERE x.mine AND q.collection_id = x.collection_id
            RETURNING q.collection_id, q.n, q.e, q.s
    ), folded AS (
        SELECT collection_id, count(*) AS k, sum(n) AS n, sum(e) AS e, sum(s) AS s
        FROM gone GROUP BY collection_id
    ), bumped AS (
        UPDATE plait_collections AS p
            SET n_chunks = p.n_chunks + x.n + coalesce(f.n, 0),
                len_exact_total = p.len_exact_total + x.e + coalesce(f.e, 0),
                len_stems_total = p.len_stems_total + x.s + coalesce(f.s, 0),
                generation = p.generation + 1 + coalesce(f.k, 0)
            FROM x LEFT JOIN folded AS f ON f.collection_id = x.collection_id
            WHERE x.mine AND p.id = x.collection_id
            RETURNING p.id, p.generation
    ), logged AS (
        INSERT INTO plait_changes (collection_id, generation, added)
            SELECT b.id, b.generation,
                   ARRAY(SELECT c.id FROM changed AS c WHERE c.collection_id = b.id ORDER BY c.id)
            FROM bumped AS b
            RETURNING collection_id, generation
    )
    DELETE FROM plait_changes AS l USING logged AS g
        WHERE l.collection_id = g.collection_id AND l.generation <= g.generation - 1024;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION plait_lex_stats_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    WITH x AS MATERIALIZED (
        SELECT c.collection_id, l.term, c.id
        FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p, LATERAL (
            SELECT lt.id AS term FROM plait_lex_terms AS lt
            WHERE lt.collection_id = c.collection_id AND lt.key = p.key LIMIT 1) AS l)
    DELETE FROM plait_postings WHERE ctid = ANY(ARRAY(
        SELECT f.tid FROM x, LATERAL (
            SELECT t.ctid AS tid FROM plait_postings AS t
            WHERE t.collection_id = x.collection_id AND t.term = x.term AND t.chunk_row = x.id
            LIMIT 1) AS f));
    UPDATE plait_lex_terms AS t SET df = t.df - x.n
        FROM (SELECT c.collection_id, p.key, count(*) AS n
              FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p
              GROUP BY 1, 2 ORDER BY 1, 2) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.key;
    WITH x AS MATERIALIZED (
        SELECT DISTINCT c.collection_id, p.key FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p)
    DELETE FROM plait_lex_terms WHERE ctid = ANY(ARRAY(
        SELECT f.tid FROM x, LATERAL (
            SELECT t.ctid AS tid FROM plait_lex_terms AS t
            WHERE t.collection_id = x.collection_id AND t.key = x.key AND t.df <= 0 LIMIT 1) AS f));
    WITH held AS (
        SELECT p.id FROM plait_collections AS p
            WHERE p.id IN (SELECT DISTINCT collection_id FROM changed)
            FOR NO KEY UPDATE SKIP LOCKED
    ), x AS (
        SELECT c.collection_id, count(*) AS n, coalesce(sum(c.len_exact), 0) AS e,
               coalesce(sum(c.len_stems), 0) AS s, bool_or(h.id IS NOT NULL) AS mine
        FROM changed AS c LEFT JOIN held AS h ON h.id = c.collection_id GROUP BY c.collection_id
    ), queued AS (
        INSERT INTO plait_counts (collection_id, n, e, s)
            SELECT collection_id, -n, -e, -s FROM x WHERE NOT x.mine
    ), gone AS (
        DELETE FROM plait_counts AS q USING x
            WHERE x.mine AND q.collection_id = x.collection_id
            RETURNING q.collection_id, q.n, q.e, q.s
    ), folded AS (
        SELECT collection_id, count(*) AS k, sum(n) AS n, sum(e) AS e, sum(s) AS s
        FROM gone GROUP BY collection_id
    ), bumped AS (
        UPDATE plait_collections AS p
            SET n_chunks = p.n_chunks - x.n + coalesce(f.n, 0),
                len_exact_total = p.len_exact_total - x.e + coalesce(f.e, 0),
                len_stems_total = p.len_stems_total - x.s + coalesce(f.s, 0),
                generation = p.generation + 1 + coalesce(f.k, 0)
            FROM x LEFT JOIN folded AS f ON f.collection_id = x.collection_id
            WHERE x.mine AND p.id = x.collection_id
            RETURNING p.id, p.generation
    ), logged AS (
        INSERT INTO plait_changes (collection_id, generation, removed)
            SELECT b.id, b.generation,
                   ARRAY(SELECT c.id FROM changed AS c WHERE c.collection_id = b.id ORDER BY c.id)
            FROM bumped AS b
            RETURNING collection_id, generation
    )
    DELETE FROM plait_changes AS l USING logged AS g
        WHERE l.collection_id = g.collection_id AND l.generation <= g.generation - 1024;
    RETURN NULL;
END $$;

-- CREATE OR REPLACE resets the function's settings: migration 13's again.
ALTER FUNCTION plait_lex_stats_remove() SET enable_hashjoin = off;
ALTER FUNCTION plait_lex_stats_remove() SET enable_mergejoin = off;
"""
