"""The PostgreSQL store's write path: sources replaced inside one transaction.

:func:`write_sources` makes each given source hold exactly its chunks (what
:meth:`~plait.stores.postgres.PostgresStore.replace_source` promises for one source) on
a connection whose transaction already holds the collection's row lock. Whatever the
number of sources, it sends a fixed handful of statements: one read of the sources'
existing rows, one ``DELETE`` of the rows that go, the in-place updates of unchanged
chunks (one pipelined batch), one multi-row ``INSERT`` per :data:`ROWS_PER_STATEMENT`
new rows, and the source rows.

Why the multi-row ``INSERT``: the statistics triggers on ``plait_chunks``
(:mod:`plait.stores.postgres_schema`: document frequencies, postings, collection totals)
are statement-level, so their cost is per statement, not per row. Inserting a source's
chunks with ``executemany`` ran one ``INSERT`` — one trigger run, one upsert of every
term of that chunk and one update of the collection's row — per chunk; copying 10,000
chunks into PostgreSQL ran at 25 chunks/s (``benchmarks/results/copy_throughput.md``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.errors import StoreError
from plait.stores.base import ReplaceCounts, SourceWrite, replace_changes
from plait.stores.postgres_base import now, vec
from plait.stores.postgres_queries import hnsw_index

__all__ = ["ROWS_PER_STATEMENT", "VACUUMED", "build_hnsw", "check_dimension", "lexical", "write_sources"]

#: The tables :meth:`~plait.stores.postgres.PostgresStore.vacuum` visits: every table the
#: store's writes update or delete from. The three large ones gain all-visible pages
#: after a load; the small ones are churned on every write and bloat without a visit:
#: ``plait_collections`` (each write updates its collection's row: generation, counts,
#: revision, settings), ``plait_changes`` (one row per changing statement, older ones
#: pruned), ``plait_sources`` (upserted per source written), ``plait_usage`` (counters
#: upserted per write that used a provider), ``plait_scopes`` (upserted per index run),
#: ``plait_revisions`` and ``plait_counts`` (rows of other SQL's writes, deleted when a
#: store write folds them) and ``plait_vector_claims`` (claimed and released per
#: backfill batch). Only the record tables (runs, cards, keys, imports; written rarely)
#: are left to autovacuum.
VACUUMED = (
    "plait_postings", "plait_lex_terms", "plait_chunks", "plait_collections", "plait_changes",
    "plait_sources", "plait_usage", "plait_scopes", "plait_revisions", "plait_counts",
    "plait_vector_claims",
)

#: New chunk rows per ``INSERT`` statement: 12 parameters each, 24,000 in all
#: (PostgreSQL allows 65,535 per statement).
ROWS_PER_STATEMENT = 2000

_INSERT = (
    "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
    "content_hash, origin, metadata, vector, lex_exact, lex_stems) VALUES "
)
_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
_OTHER_SPACE = re.compile(r"[^\S ]")  # whitespace other than the space (str.isspace's set)


def check_dimension(collection: str, dimension: int | None, vector: np.ndarray) -> None:
    if vector.ndim != 1:
        raise StoreError(f"a vector must be one-dimensional, got shape {vector.shape}")
    if dimension is not None and vector.shape[0] != dimension:
        raise StoreError(
            f"vector has {vector.shape[0]} dimensions, collection {collection!r} "
            f"holds {dimension}-d vectors"
        )


def lexical(tokens: Sequence[str]) -> str:
    """The tokens as ``lex_exact`` / ``lex_stems`` hold them: joined by single spaces.
    Checked in C, not character by character in Python (that was 8 % of a copy's time):
    the joined text splits back into the same tokens only if none contains a space, and
    no token is empty or holds another whitespace character."""
    if not tokens:
        return ""
    joined = " ".join(tokens)
    if "" in tokens or _OTHER_SPACE.search(joined) is not None or len(joined.split(" ")) != len(tokens):
        bad = next(t for t in tokens if not t or any(c.isspace() for c in t))
        raise StoreError(f"lexical token {bad!r} is empty or contains whitespace")
    return joined


def write_sources(
    conn: psycopg.Connection,
    cid: int,
    dimension: int | None,
    collection: str,
    writes: Sequence[SourceWrite],
) -> tuple[list[ReplaceCounts], int]:
    """Replace the sources of ``writes`` (see the module docstring); returns their counts,
    in order, and how many chunk rows were inserted. ``conn`` is in a transaction that
    holds collection ``cid``'s row lock."""
    names = [w.source_id for w in writes]
    if len(set(names)) != len(names):
        raise StoreError("a source appears more than once in one write")
    existing: dict[str, dict[str, tuple[int, str]]] = {name: {} for name in names}
    for chunk_id, source_id, row_id, content_hash in conn.execute(
        "SELECT chunk_id, source_id, id, content_hash FROM plait_chunks "
        "WHERE collection_id = %s AND source_id = ANY(%s)",
        (cid, names),
    ):
        existing[source_id][chunk_id] = (row_id, content_hash)
    counts: list[ReplaceCounts] = []
    to_delete: list[int] = []
    updates: list[tuple[Any, ...]] = []
    inserts: list[tuple[Any, ...]] = []
    for write in writes:
        changes, gone, write_counts = replace_changes(existing[write.source_id], write.chunks, lambda row: row[1])
        for change in changes:
            item, chunk, old = change.item, change.item.chunk, change.kept
            vector = None if item.vector is None else vec(item.vector)
            if vector is not None:
                check_dimension(collection, dimension, vector)
            origin = Jsonb(chunk.origin.model_dump(mode="json", by_alias=True))
            metadata = Jsonb(chunk.metadata)
            if old is not None:
                updates.append((write.scope, chunk.ordinal, origin, metadata, vector, cid, old[0]))
                continue
            if change.replaced is not None:
                to_delete.append(change.replaced[0])
            inserts.append(
                (
                    cid, chunk.id, chunk.source_id, write.scope, chunk.ordinal, chunk.content,
                    chunk.content_hash, origin, metadata, vector,
                    lexical(item.exact), lexical(item.stems),
                )
            )
        to_delete.extend(row[0] for row in gone)
        counts.append(write_counts)
    if to_delete:
        conn.execute("DELETE FROM plait_chunks WHERE collection_id = %s AND id = ANY(%s)", (cid, to_delete))
    with conn.cursor() as cur:
        if updates:
            cur.executemany(
                "UPDATE plait_chunks SET scope = %s, ordinal = %s, origin = %s, "
                "metadata = %s, vector = coalesce(%s, vector) WHERE collection_id = %s AND id = %s",
                updates,
            )
        for start in range(0, len(inserts), ROWS_PER_STATEMENT):
            part = inserts[start : start + ROWS_PER_STATEMENT]
            cur.execute(_INSERT + ", ".join([_ROW] * len(part)), [value for row in part for value in row])
        at = now()
        kept = [(cid, w.source_id, w.scope, at, w.root) for w in writes if w.chunks]
        if kept:
            cur.executemany(
                "INSERT INTO plait_sources (collection_id, source_id, scope, indexed_at, root) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (collection_id, source_id) "
                "DO UPDATE SET scope = excluded.scope, indexed_at = excluded.indexed_at, "
                "root = excluded.root",
                kept,
            )
        emptied = [w.source_id for w in writes if not w.chunks]
        if emptied:
            cur.execute(
                "DELETE FROM plait_sources WHERE collection_id = %s AND source_id = ANY(%s)", (cid, emptied)
            )
    return counts, len(inserts)


def _memory_for(rows: int, dimension: int) -> str:
    """``maintenance_work_mem`` for building an HNSW graph of ``rows`` vectors in memory
    (pgvector builds on disk, much slower, once the graph outgrows it): the vectors plus
    ~512 bytes of neighbour lists each, between 64 MB and 1 GB."""
    need = rows * (4 * dimension + 512) // (1024 * 1024) + 1
    return f"{min(max(need, 64), 1024)}MB"


def build_hnsw(conn: psycopg.Connection, cid: int, dimension: int, *, timeout_ms: int) -> None:
    """Build collection ``cid``'s partial HNSW index once, after a bulk load.

    ``conn`` is in autocommit mode: ``CREATE INDEX CONCURRENTLY`` blocks no writer of any
    collection (a plain build would hold ``plait_chunks``'s write lock throughout). The
    build runs without the statement timeout (it may take minutes) and with
    ``maintenance_work_mem`` raised for this session so the graph fits in memory; both
    are restored afterwards. An invalid index left by an interrupted concurrent build is
    dropped first (``IF NOT EXISTS`` would keep it)."""
    name = hnsw_index(cid)
    found = conn.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", (name.as_string(conn),)
    ).fetchone()
    if found is not None and not found[0]:
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))
    elif found is not None:
        return
    rows = conn.execute(
        "SELECT count(*) FROM plait_chunks WHERE collection_id = %s AND vector IS NOT NULL", (cid,)
    ).fetchone()
    memory = _memory_for(int(rows[0]) if rows else 0, dimension)
    conn.execute("SELECT set_config('statement_timeout', '0', false)")
    conn.execute(
        "SELECT set_config('maintenance_work_mem', %s, false) "
        "WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%s)",
        (memory, memory),
    )
    try:
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON plait_chunks USING hnsw "
                "((vector::vector({})) vector_cosine_ops) WHERE collection_id = {}"
            ).format(name, sql.Literal(int(dimension)), sql.Literal(cid))
        )
    finally:
        conn.execute("RESET maintenance_work_mem")
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (str(timeout_ms),))
