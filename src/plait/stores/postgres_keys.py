"""Migration 13 of the PostgreSQL store: the cache key without a lock on the collection's
row, and the schema's instance identity.

**The revision without the collection's row lock** (review 5, finding 2). Migration 11's
row trigger bumped ``plait_collections.revision`` at the end of every updating statement,
after the chunk rows were locked, while the store's writers lock the collection's row
first: an in-place ``UPDATE plait_chunks`` from other SQL (an operator's metadata fix)
racing a store write deadlocked. Now the trigger (``plait_chunks_revise``, still once per
transaction and collection) takes the collection's row only in transactions that already
hold it: the store's writers say so with a transaction-local flag set in the statement
that locks the row (``plait.locked_<collection id>``,
:meth:`~plait.stores.postgres_base.PostgresBase._collection`). Any other transaction
*inserts* a row into ``plait_revisions`` instead, keyed by a sequence: an insert waits for
no lock (the table has no unique key another transaction could hold, and no foreign key,
whose check would share-lock the collection's row), so it cannot take part in a deadlock.
A store writer's bump folds the rows committed so far into the column, in one statement
(``WITH gone AS (DELETE … RETURNING) UPDATE … + count(gone)``: one snapshot, so a row is
either counted and deleted or left for the next fold).

The revision a reader keys its caches by is :data:`REVISION`: the column plus the rows
of the log, read in the same statement — so it moves exactly when a revising transaction
commits, whichever path it took, and never goes back.

**The instance** (review 5, finding 7). Collection ids, generations and revisions restart
when a schema is dropped and created again, or a dump is restored, under a running
process: its caches, keyed by ``(id, generation, revision)``, matched the new content and
served the old. ``plait_instance`` holds one random UUID, written when the schema is
created (or migrated to 13); :data:`INSTANCE` reads it with the table's OID
(``tableoid``: a restore creates the table again, so it has a new OID even where the dump
carried the old UUID along) in the statement that reads the key, and a serving process
that sees another value drops every cache it holds
(:meth:`~plait.stores.postgres_search.PostgresSearch._observe`).

**The vocabulary probed by key on deletes.** ``plait_lex_stats_remove`` (migration 12)
decrements the document frequencies of the deleted chunks' terms and deletes the terms left
at 0, each an ``UPDATE`` / ``DELETE … FROM (the terms of the transition table)`` joined with
``plait_lex_terms`` on ``(collection_id, key)``. Without statistics for the transition table
PostgreSQL planned both over a sequential scan of ``plait_lex_terms`` (a hash join, or, with
statistics saying few terms have df 0, a scan filtering ``df <= 0``): the whole vocabulary
of every collection read per deleting statement (about 5 ms at 20k terms). The function now
runs with ``enable_hashjoin`` and ``enable_mergejoin`` off (``ALTER FUNCTION … SET``: only
while it runs), so the ``UPDATE`` is a nested loop probing ``plait_lex_terms_pkey`` once per
term (the join stays on the key, so a concurrent update of the same term is re-checked as
before), and the ``DELETE`` is :data:`REMOVE_TERMS`: one probe per term, deleted by ``ctid``
(the shape of migration 12's postings delete). The postings ``DELETE`` and the generation
bump are as in migration 12.

Safe on a populated database: two ``CREATE TABLE`` s, ``CREATE OR REPLACE FUNCTION`` s and
``ALTER FUNCTION`` s, no lock on an existing table; the new remove function computes what
the old one did. A process of an older plait still reading
``plait_collections.revision`` alone would miss revisions logged by other SQL until the
next store write folds them: upgrade every serving process.
"""

from __future__ import annotations

from plait.stores.postgres_changes import _BUMP, KEEP_GENERATIONS
from plait.stores.postgres_lockwait import REMOVE_POSTINGS

__all__ = [
    "CHECK", "CHUNKS", "GENERATION", "GENERATION_OF", "INSTANCE", "MIGRATION_13", "REMOVE_STATS", "REMOVE_TERMS",
    "REVISION", "ROWS_CHECK",
]

#: The revision of collection ``p`` (a ``plait_collections`` alias): the column plus the
#: log rows not folded into it yet (an index-only range of ``plait_revisions_pkey``).
REVISION = "p.revision + (SELECT count(*) FROM plait_revisions r WHERE r.collection_id = p.id)"

#: The generation of collection ``p``: the column plus the inserting / deleting statements
#: of other SQL queued in ``plait_counts`` and not folded into it yet (migration 14,
#: :mod:`plait.stores.postgres_counts`; an index-only range of ``plait_counts_pkey``).
GENERATION_OF = "p.generation + (SELECT count(*) FROM plait_counts q WHERE q.collection_id = p.id)"

#: The chunks of collection ``p``: the column plus the queued statements' counts.
CHUNKS = "p.n_chunks + (SELECT coalesce(sum(q.n), 0) FROM plait_counts q WHERE q.collection_id = p.id)"

#: The schema's identity, two columns: the OID of ``plait_collections`` and the instance UUID.
INSTANCE = "p.tableoid::bigint, (SELECT i.id FROM plait_instance i)"

#: The search's check of a collection by name: id, dimension, generation, revision, chunks, instance.
CHECK = (
    f"SELECT p.id, p.dimension, {GENERATION_OF}, {REVISION}, {CHUNKS}, {INSTANCE} "
    "FROM plait_collections p WHERE p.name = %s"
)
#: A load's read of the key by collection id: generation, revision, chunks.
GENERATION = f"SELECT {GENERATION_OF}, {REVISION}, {CHUNKS} FROM plait_collections p WHERE p.id = %s"
#: The chunk rows' check by name: id, generation, revision, instance.
ROWS_CHECK = f"SELECT p.id, {GENERATION_OF}, {REVISION}, {INSTANCE} FROM plait_collections p WHERE p.name = %s"


#: The term DELETE of :sql:`plait_lex_stats_remove`: the deleted chunks' terms left at df 0,
#: each found by one probe of ``plait_lex_terms_pkey`` and deleted by its ``ctid`` (this
#: transaction's df UPDATE just locked every one of them, so the ``ctid`` stays theirs).
REMOVE_TERMS = """WITH x AS MATERIALIZED (
        SELECT DISTINCT c.collection_id, p.key FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p)
    DELETE FROM plait_lex_terms WHERE ctid = ANY(ARRAY(
        SELECT f.tid FROM x, LATERAL (
            SELECT t.ctid AS tid FROM plait_lex_terms AS t
            WHERE t.collection_id = x.collection_id AND t.key = x.key AND t.df <= 0 LIMIT 1) AS f));"""

#: The remove trigger's statements before its bump: the postings, the terms' df and the
#: terms left at df 0.
REMOVE_STATS = (
    REMOVE_POSTINGS
    + r"""
    UPDATE plait_lex_terms AS t SET df = t.df - x.n
        FROM (SELECT c.collection_id, p.key, count(*) AS n
              FROM changed AS c, plait_lex_postings(c.lex_exact, c.lex_stems) AS p
              GROUP BY 1, 2 ORDER BY 1, 2) AS x
        WHERE t.collection_id = x.collection_id AND t.key = x.key;
    """
    + REMOVE_TERMS
)

REMOVE_FUNCTION = (
    r"""
CREATE OR REPLACE FUNCTION plait_lex_stats_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('plait.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
    """
    + REMOVE_STATS
    + _BUMP.format(sign="-", column="removed", keep=KEEP_GENERATIONS)
    + r"""    RETURN NULL;
END $$;
"""
)

#: Migration 13, frozen: the text as it was first released, written out in full (not
#: composed from the live pieces above, which a later migration may change). Never edit it:
#: a change of these functions is a new migration (tests/stores/test_postgres_frozen.py).
MIGRATION_13 = r"""
CREATE TABLE plait_revisions (
    collection_id bigint NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (collection_id, id)
);
CREATE TABLE plait_instance (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    id uuid NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO plait_instance DEFAULT VALUES;

CREATE OR REPLACE FUNCTION plait_chunks_revise() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    flag text := 'plait.revised_' || NEW.collection_id;
BEGIN
    IF current_setting(flag, true) IS DISTINCT FROM 'on' THEN
        IF current_setting('plait.locked_' || NEW.collection_id, true) = 'on' THEN
            -- a store writer: the collection's row is this transaction's already
            WITH gone AS (DELETE FROM plait_revisions WHERE collection_id = NEW.collection_id RETURNING 1)
            UPDATE plait_collections SET revision = revision + 1 + (SELECT count(*) FROM gone)
                WHERE id = NEW.collection_id;
        ELSE
            INSERT INTO plait_revisions (collection_id) VALUES (NEW.collection_id);
        END IF;
        PERFORM set_config(flag, 'on', true);
    END IF;
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

-- The df UPDATE joins the deleted chunks' terms with the vocabulary by key: one index
-- probe each, never a hash or merge join over every term.
ALTER FUNCTION plait_lex_stats_remove() SET enable_hashjoin = off;
ALTER FUNCTION plait_lex_stats_remove() SET enable_mergejoin = off;
"""
