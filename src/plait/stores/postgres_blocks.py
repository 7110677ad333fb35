"""Migration 8 of the PostgreSQL store: tighter pruning bounds, per term and per block.

The lexical arm's pruning (:mod:`plait.stores.postgres_lexical`) needs, for each query
term, an upper bound of any one posting's BM25 contribution. Schema 5 stored the largest
term frequency ``max_tf`` and the smallest field length ``min_len`` of each term's
postings, taken separately: the bound pairs a long chunk's ``tf`` with a short chunk's
length, so it was loose. BM25's term factor is

    tf·(k1 + 1) / (tf + k1·(1 − b + b·len/avgdl))
        = (k1 + 1) / (1 + k1·(1 − b)/tf + k1·b·(len/tf)/avgdl)

which, for ``k1`` ≥ 0 and 0 ≤ ``b`` ≤ 1, grows as ``1/tf`` and ``len/tf`` shrink. So the
largest ``tf`` and the smallest ratio ``len/tf`` among a set of postings bound every one of
them, for any ``k1``, ``b`` and mean length (``min_ratio``: for a posting with the largest
``tf`` that is also the shortest, the bound is its exact contribution).

Migration 8 stores ``min_ratio`` per term (``plait_lex_terms``) and adds
``plait_lex_blocks``: the same two bounds per (collection, term, block of
:data:`BLOCK_ROWS` consecutive chunk rows). A query sums, block by block, its terms'
block bounds: a block whose sum stays below the threshold holds no top-``n`` chunk, and
its postings are never read (block-max MaxScore). The statistics triggers keep the
blocks in the same transaction as the postings: an insert widens its blocks' bounds, a
delete leaves them (still bounds, only looser) until the term's last posting goes, and
then its blocks go with its row in ``plait_lex_terms``.
"""

from __future__ import annotations

__all__ = ["BLOCK_ROWS", "BLOCK_SHIFT", "MIGRATION_8"]

#: A block is the chunk rows ``block·2^BLOCK_SHIFT … (block + 1)·2^BLOCK_SHIFT − 1``.
BLOCK_SHIFT = 7
BLOCK_ROWS = 1 << BLOCK_SHIFT

MIGRATION_8 = r"""
ALTER TABLE plait_lex_terms ADD COLUMN min_ratio float8 NOT NULL DEFAULT 'Infinity';
CREATE TABLE plait_lex_blocks (
    collection_id integer NOT NULL,
    term integer NOT NULL,
    block integer NOT NULL,
    max_tf integer NOT NULL,
    min_ratio float8 NOT NULL
) WITH (autovacuum_vacuum_insert_scale_factor = 0.02,
        autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.02);
INSERT INTO plait_lex_blocks (collection_id, term, block, max_tf, min_ratio)
    SELECT collection_id, term, (chunk_row >> %(shift)s)::integer, max(tf), min(len::float8 / tf)
    FROM plait_postings GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
ALTER TABLE plait_lex_blocks ADD CONSTRAINT plait_lex_blocks_pkey
    PRIMARY KEY (collection_id, term, block) INCLUDE (max_tf, min_ratio);
UPDATE plait_lex_terms AS t SET min_ratio = x.r
    FROM (SELECT collection_id, term, min(min_ratio) AS r FROM plait_lex_blocks GROUP BY 1, 2) AS x
    WHERE t.collection_id = x.collection_id AND t.id = x.term;
ANALYZE plait_lex_blocks;
ANALYZE plait_lex_terms;

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
    WITH added AS (
        INSERT INTO plait_postings (collection_id, term, chunk_row, tf, len)
            SELECT c.collection_id, t.id, c.id, p.tf,
                   CASE p.field WHEN 0 THEN c.len_exact ELSE c.len_stems END
            FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p, plait_lex_terms AS t
            WHERE t.collection_id = c.collection_id AND t.key = p.key
            ORDER BY 1, 2, 3
        RETURNING collection_id, term, chunk_row, tf, len
    )
    INSERT INTO plait_lex_blocks AS k (collection_id, term, block, max_tf, min_ratio)
        SELECT collection_id, term, (chunk_row >> %(shift)s)::integer, max(tf), min(len::float8 / tf)
        FROM added GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (collection_id, term, block) DO UPDATE SET
        max_tf = greatest(k.max_tf, excluded.max_tf), min_ratio = least(k.min_ratio, excluded.min_ratio);
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks + x.n,
            len_exact_total = p.len_exact_total + x.e,
            len_stems_total = p.len_stems_total + x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;

-- A delete leaves max_tf / min_len / min_ratio and the blocks as they are: still bounds,
-- only looser; a term's blocks go with its last posting.
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
    WITH gone AS (
        DELETE FROM plait_lex_terms AS t
            USING (SELECT DISTINCT c.collection_id, p.key
                   FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p) AS x
            WHERE t.collection_id = x.collection_id AND t.key = x.key AND t.df <= 0
        RETURNING t.collection_id, t.id
    )
    DELETE FROM plait_lex_blocks AS k USING gone
        WHERE k.collection_id = gone.collection_id AND k.term = gone.id;
    UPDATE plait_collections AS p
        SET n_chunks = p.n_chunks - x.n,
            len_exact_total = p.len_exact_total - x.e,
            len_stems_total = p.len_stems_total - x.s
        FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
              FROM changed GROUP BY collection_id) AS x
        WHERE p.id = x.collection_id;
    RETURN NULL;
END $$;
""".replace("%(shift)s", str(BLOCK_SHIFT))
