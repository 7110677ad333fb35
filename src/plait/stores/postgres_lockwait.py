"""Migration 12 of the PostgreSQL store: the postings DELETE of a chunk delete reads only
that chunk's postings.

The statement trigger ``plait_lex_stats_remove`` (migration 10) deleted the postings of the
deleted chunks with ``DELETE … USING (SELECT … FROM changed, plait_lex_postings(…),
plait_lex_terms) WHERE t.collection_id = … AND t.term = … AND t.chunk_row = …``. PostgreSQL
planned it as a nested loop whose index condition on ``plait_postings_pkey`` used only
``(collection_id, term)``, filtering ``chunk_row`` afterwards: deleting one chunk read every
posting of each of its terms (a common term's document frequency). Re-indexing 1 % of a
100k-chunk collection took 181 s, past the 60 s statement timeout. Now the deleted chunks'
(collection, term id, row) triples are materialised first (``WITH x AS MATERIALIZED``; each
term id found by its ``(collection_id, key)`` key) and each posting is found by one probe of
the full primary key (a ``LATERAL … LIMIT 1`` subquery, which the planner cannot turn into a
hash join or a range scan whatever its row estimates) and deleted by its ``ctid``.

The function is otherwise the same as migration 10's (document-frequency updates, deletes
of terms no chunk holds any more, the generation bump and the change log). The other two
statements were checked with ``EXPLAIN``: without statistics for the transition table the
``UPDATE`` and ``DELETE`` of ``plait_lex_terms`` read it by a sequential scan and a hash join
(the whole vocabulary per deleting statement; not the df-sized cost above, left as it was).

Safe on a populated database without stopping anything: ``CREATE OR REPLACE FUNCTION``
takes no table lock, and the new function computes exactly what the old one did, so a
write in flight under the old definition is as correct as one under the new.

(Migration 11's ``ALTER TABLE`` needs ``ACCESS EXCLUSIVE`` and would stall new searches while
it waits for an open reader transaction; ``migrate`` runs every migration under a short
``lock_timeout`` with retries: :mod:`plait.stores.postgres_migrate`.)
"""

from __future__ import annotations

__all__ = ["MIGRATION_12", "REMOVE_POSTINGS"]

#: The postings DELETE of :sql:`plait_lex_stats_remove` (reads the transition table ``changed``).
REMOVE_POSTINGS = """WITH x AS MATERIALIZED (
        SELECT c.collection_id, l.term, c.id
        FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p, LATERAL (
            SELECT lt.id AS term FROM plait_lex_terms AS lt
            WHERE lt.collection_id = c.collection_id AND lt.key = p.key LIMIT 1) AS l)
    DELETE FROM plait_postings WHERE ctid = ANY(ARRAY(
        SELECT f.tid FROM x, LATERAL (
            SELECT t.ctid AS tid FROM plait_postings AS t
            WHERE t.collection_id = x.collection_id AND t.term = x.term AND t.chunk_row = x.id
            LIMIT 1) AS f));"""

#: Migration 12, frozen: the text as it was first released, written out in full (not
#: composed from the live pieces above, which a later migration may change). Never edit it:
#: a change of these functions is a new migration (tests/stores/test_postgres_frozen.py).
MIGRATION_12 = r"""
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
    DELETE FROM plait_lex_terms AS t
        USING (SELECT DISTINCT c.collection_id, p.key
               FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.key AND t.df <= 0;
    WITH bumped AS (
        UPDATE plait_collections AS p
            SET n_chunks = p.n_chunks - x.n,
                len_exact_total = p.len_exact_total - x.e,
                len_stems_total = p.len_stems_total - x.s,
                generation = p.generation + 1
            FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
                  FROM changed GROUP BY collection_id) AS x
            WHERE p.id = x.collection_id
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
"""
