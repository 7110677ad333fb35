"""Migration 8 of the PostgreSQL store: a tighter per-term pruning bound.

The SQL lexical statement's pruning (``benchmarks/postgres_lexical_sql.py``; the store's
lexical arm is in process since schema 9, and no query reads these bounds now) needs, for each query
term, an upper bound of any one posting's BM25 contribution. Schema 5 stored the largest
term frequency ``max_tf`` and the smallest field length ``min_len`` of each term's
postings, taken separately, so the bound pairs a long chunk's ``tf`` with a short chunk's
length. BM25's term factor is

    tf·(k1 + 1) / (tf + k1·(1 − b + b·len/avgdl))
        = (k1 + 1) / (1 + k1·(1 − b)/tf + k1·b·(len/tf)/avgdl)

which, for ``k1`` ≥ 0 and 0 ≤ ``b`` ≤ 1, grows as ``1/tf`` and ``len/tf`` shrink. So the
largest ``tf`` and the smallest ratio ``len/tf`` among a term's postings bound every one
of them, for any ``k1``, ``b`` and mean length; ``len/tf`` ≥ ``min_len/max_tf`` always, so
this bound is never looser than schema 5's. Migration 8 stores ``min_ratio`` (the smallest
``len/tf``) per term in ``plait_lex_terms``; the statistics triggers keep it like
``max_tf`` (an insert lowers it, a delete leaves it: still a bound, only looser).

Measured on SciFact ×11 (100,331 chunks), the bound is not where the time goes: at the
exact threshold (the true 50th score) term-level MaxScore with schema 5's bounds leaves
7,711 essential postings (median over 40 queries), with exact per-term maxima 7,453, so
the bounds are within 4 % of the best term-level bounds can do. Block-max bounds (the same
two figures per term and block of 128 chunk rows, tried in this migration first) took
5.9 M rows next to 16.0 M postings (+37 % disk) and made the statement slower (p50 220.8
against 155.2 ms term-level, same run, busy machine): see ``docs/postgres.md``.
"""

from __future__ import annotations

__all__ = ["MIGRATION_8"]

MIGRATION_8 = r"""
ALTER TABLE plait_lex_terms ADD COLUMN min_ratio float8 NOT NULL DEFAULT 'Infinity';
UPDATE plait_lex_terms AS t SET min_ratio = x.r
    FROM (SELECT collection_id, term, min(len::float8 / tf) AS r FROM plait_postings GROUP BY 1, 2) AS x
    WHERE t.collection_id = x.collection_id AND t.id = x.term;
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

-- Deletes keep migration 5's trigger: they leave max_tf / min_len / min_ratio as they are
-- (still bounds, only looser).
"""
