"""Migration 11 of the PostgreSQL store: a per-collection revision for in-place updates.

``plait_collections.generation`` (:mod:`plait.stores.postgres_generation`) moves with
every insert or delete of chunk rows, not with updates in place: those leave the lexical
fields, lengths and postings alone, so the lexical cache needs nothing more. The dense
arm's in-process matrix (:mod:`plait.stores.postgres_dense`) holds the vectors, which
*are* updated in place (``set_vectors``, a re-index that brings a vector for a kept
chunk, a raw ``UPDATE``). ``plait_collections.revision`` counts those: a row trigger on
``plait_chunks`` bumps it in the transaction of every update that changes a chunk's
vector, scope, ordinal, origin, metadata, content, content hash or source (the columns
that may change in place; the lexical fields, ``chunk_id`` and ``collection_id`` are
refused by ``plait_chunks_lex_immutable``), so other processes see the new revision
exactly when they see the new values.

Once per transaction and collection, not per row: the first changed row of a transaction
bumps the revision and sets a transaction-local flag (``plait.revised_<collection id>``,
``set_config(…, true)``: gone at commit or rollback, and rolled back with a savepoint);
later rows see the flag and do nothing. A per-row bump would put one new version of the
collection's row per updated chunk in one transaction (thousands for a backfill), each
update walking the growing chain of versions before it. A snapshot sees either every
change of a transaction or none, so one bump is as good as many.

The cache key of the dense matrix is ``(generation, revision)``: both move only in
transactions that change what it holds.

Migration 13 (:mod:`plait.stores.postgres_keys`) replaces the function: the collection's
row is updated only by transactions that hold it already (the store's writers); other SQL
logs its revision in ``plait_revisions``, which takes no lock (this version's update of
the row, after the chunk rows were locked, deadlocked with the store's writers).
"""

from __future__ import annotations

__all__ = ["MIGRATION_11"]

MIGRATION_11 = r"""
LOCK TABLE plait_collections IN EXCLUSIVE MODE;
ALTER TABLE plait_collections ADD COLUMN revision bigint NOT NULL DEFAULT 0;

CREATE FUNCTION plait_chunks_revise() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    flag text := 'plait.revised_' || NEW.collection_id;
BEGIN
    IF current_setting(flag, true) IS DISTINCT FROM 'on' THEN
        UPDATE plait_collections SET revision = revision + 1 WHERE id = NEW.collection_id;
        PERFORM set_config(flag, 'on', true);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER plait_chunks_revision
    AFTER UPDATE OF vector, scope, ordinal, origin, metadata, content, content_hash, source_id
    ON plait_chunks FOR EACH ROW
    WHEN ((OLD.vector, OLD.scope, OLD.ordinal, OLD.origin, OLD.metadata, OLD.content,
           OLD.content_hash, OLD.source_id)
          IS DISTINCT FROM
          (NEW.vector, NEW.scope, NEW.ordinal, NEW.origin, NEW.metadata, NEW.content,
           NEW.content_hash, NEW.source_id))
    EXECUTE FUNCTION plait_chunks_revise();
"""
