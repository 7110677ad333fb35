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

Safe on a populated database: two ``CREATE TABLE`` s and a ``CREATE OR REPLACE FUNCTION``,
no lock on an existing table. A process of an older plait still reading
``plait_collections.revision`` alone would miss revisions logged by other SQL until the
next store write folds them: upgrade every serving process.
"""

from __future__ import annotations

__all__ = ["CHECK", "GENERATION", "INSTANCE", "MIGRATION_13", "REVISION", "ROWS_CHECK"]

#: The revision of collection ``p`` (a ``plait_collections`` alias): the column plus the
#: log rows not folded into it yet (an index-only range of ``plait_revisions_pkey``).
REVISION = "p.revision + (SELECT count(*) FROM plait_revisions r WHERE r.collection_id = p.id)"

#: The schema's identity, two columns: the OID of ``plait_collections`` and the instance UUID.
INSTANCE = "p.tableoid::bigint, (SELECT i.id FROM plait_instance i)"

#: The search's check of a collection by name: id, dimension, generation, revision, chunks, instance.
CHECK = (
    f"SELECT p.id, p.dimension, p.generation, {REVISION}, p.n_chunks, {INSTANCE} "
    "FROM plait_collections p WHERE p.name = %s"
)
#: A load's read of the key by collection id: generation, revision, chunks.
GENERATION = f"SELECT p.generation, {REVISION}, p.n_chunks FROM plait_collections p WHERE p.id = %s"
#: The chunk rows' check by name: id, generation, revision, instance.
ROWS_CHECK = f"SELECT p.id, p.generation, {REVISION}, {INSTANCE} FROM plait_collections p WHERE p.name = %s"


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
"""
