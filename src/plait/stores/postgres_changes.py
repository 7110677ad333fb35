"""Migration 10 of the PostgreSQL store: a change log of each collection's generations.

Every bump of ``plait_collections.generation`` (:mod:`plait.stores.postgres_generation`)
now writes one row of ``plait_changes`` in the same statement: the collection, the new
generation and the chunk row ids the statement inserted (``added``) or deleted
(``removed``), in ascending order. ``updated`` (row ids whose other columns changed) is
part of the table for caches of non-lexical columns; no trigger fills it yet, as
updates that leave the lexical fields alone do not move the generation. Written by
the statistics triggers, so in the same transaction as the chunk rows whatever issued
the write; a process holding a cache of generation ``g`` reads the rows after ``g``
(:data:`CHANGES`, :func:`changes_from`) in the snapshot in which it reads the current
generation and applies only those changes instead of reloading the whole collection.

The log is pruned in the same statement: a collection keeps the rows of its last
:data:`KEEP_GENERATIONS` generations (one row per changing statement; the store's writes
insert at most 2,000 chunk rows per statement, so at most about 16 MB of ids per
collection). A reader whose generation is older, or a reader of a database written by
code before this migration (no row), finds the log does not reach back to its
generation (:func:`changes_from` gives None) and reloads in full, as before.

Safe on a populated database: the migration creates a new, empty table and replaces
the two trigger functions. It first takes ``EXCLUSIVE`` on ``plait_collections``, as
migration 9 does (writers lock the collection's row first, so they wait; plain reads,
every search, go on), so no write commits between the functions' replacement and the
commit with a generation bump the log misses; had one done so anyway, readers would
see a gap in the log and reload in full. Nothing is backfilled: the log starts at each
collection's current generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ADD_STATS", "CHANGES", "KEEP_GENERATIONS", "MIGRATION_10", "Changes", "changes_from", "changes_params"]

#: Generations of change log each collection keeps.
KEEP_GENERATIONS = 1024

_BUMP = """
    WITH bumped AS (
        UPDATE plait_collections AS p
            SET n_chunks = p.n_chunks {sign} x.n,
                len_exact_total = p.len_exact_total {sign} x.e,
                len_stems_total = p.len_stems_total {sign} x.s,
                generation = p.generation + 1
            FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
                  FROM changed GROUP BY collection_id) AS x
            WHERE p.id = x.collection_id
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

#: The add trigger's statements before its bump: the terms' statistics and the postings.
ADD_STATS = """    INSERT INTO plait_lex_terms AS t (collection_id, key, df, max_tf, min_len, min_ratio)
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
        ORDER BY 1, 2, 3;"""

#: Migration 10, frozen: the text as it was first released, written out in full (not
#: composed from the live pieces above, which a later migration may change). Never edit it:
#: a change of these functions is a new migration (tests/stores/test_postgres_frozen.py).
MIGRATION_10 = r"""
LOCK TABLE plait_collections IN EXCLUSIVE MODE;
CREATE TABLE plait_changes (
    collection_id bigint NOT NULL REFERENCES plait_collections(id) ON DELETE CASCADE,
    generation bigint NOT NULL,
    added bigint[] NOT NULL DEFAULT '{}',
    removed bigint[] NOT NULL DEFAULT '{}',
    updated bigint[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (collection_id, generation)
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
    WITH bumped AS (
        UPDATE plait_collections AS p
            SET n_chunks = p.n_chunks + x.n,
                len_exact_total = p.len_exact_total + x.e,
                len_stems_total = p.len_stems_total + x.s,
                generation = p.generation + 1
            FROM (SELECT collection_id, count(*) AS n, sum(len_exact) AS e, sum(len_stems) AS s
                  FROM changed GROUP BY collection_id) AS x
            WHERE p.id = x.collection_id
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

_IDS = "(SELECT string_agg(int8send(x), ''::bytea ORDER BY x) FROM log, unnest(log.{column}) AS x)"

#: The change log of collection ``%(cid)s`` after generation ``%(since)s``, as one row:
#: its number of generations, the first of them, the number of row ids it names and
#: (only when that number is at most ``%(most)s``, so a large change costs no transfer)
#: the added, removed and updated row ids as ``bytea`` (read it with :func:`changes_from`,
#: in the snapshot that reads the current generation).
CHANGES = (
    "WITH log AS (SELECT generation, added, removed, updated FROM plait_changes "
    "WHERE collection_id = %(cid)s AND generation > %(since)s), "
    "total AS (SELECT count(*) AS entries, min(generation) AS first, coalesce(sum("
    "cardinality(added) + cardinality(removed) + cardinality(updated)), 0) AS ids FROM log) "
    "SELECT total.entries, total.first, total.ids, "
    + ", ".join(f"CASE WHEN total.ids <= %(most)s THEN {_IDS.format(column=c)} END" for c in ("added", "removed", "updated"))
    + " FROM total"
)


def changes_params(cid: int, since: int, most: int) -> dict[str, int]:
    """The parameters of :data:`CHANGES`."""
    return {"cid": cid, "since": since, "most": most}


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed in a collection from generation ``since`` to ``generation``, net:
    row ids ``added`` (present at ``generation``, not before ``since``; ascending),
    ``removed`` (present at ``since``, gone at ``generation``) and ``updated`` (present
    at both, other columns changed), all ascending ``int64``. A row added then removed
    in between is in ``removed`` only (it was never cached)."""

    since: int
    generation: int
    added: np.ndarray
    removed: np.ndarray
    updated: np.ndarray

    @property
    def empty(self) -> bool:
        return not (self.added.size or self.removed.size or self.updated.size)


def _ids(blob: bytes | None) -> np.ndarray:
    """Ascending, distinct row ids of a ``bytea`` of big-endian int8 (already sorted by SQL)."""
    if not blob:
        return np.empty(0, dtype=np.int64)
    ids = np.frombuffer(blob, dtype=">i8").astype(np.int64)
    if ids.size > 1:
        ids = ids[np.concatenate(([True], ids[1:] != ids[:-1]))]
    return ids


def _in(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``ascending`` (sorted arrays, no numpy set routine:
    those cost a lazy import on first use)."""
    if ascending.size == 0 or values.size == 0:
        return np.zeros(values.size, dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), ascending.size - 1)
    return np.asarray(ascending[at] == values)


def changes_from(row: Sequence[Any] | None, *, since: int, generation: int) -> Changes | None:
    """The :class:`Changes` in :data:`CHANGES`'s row, read in the snapshot whose generation
    is ``generation``; None when the log does not reach back to ``since`` (pruned, or
    written before migration 10) or named more row ids than the ``most`` asked for."""
    if generation == since:
        empty = np.empty(0, dtype=np.int64)
        return Changes(since, generation, empty, empty, empty)
    if row is None or generation < since:
        return None
    entries, first = int(row[0]), row[1]
    if entries != generation - since or first is None or int(first) != since + 1:
        return None  # a gap: pruned, or bumps the log never saw
    if int(row[2]) and all(blob is None for blob in row[3:6]):
        return None  # more ids than asked for
    added, removed, updated = (_ids(blob) for blob in row[3:6])
    net_added = added[~_in(added, removed)]
    net_removed = removed[~_in(removed, added)]
    net_updated = updated[~(_in(updated, added) | _in(updated, removed))]
    return Changes(since, generation, net_added, net_removed, net_updated)
