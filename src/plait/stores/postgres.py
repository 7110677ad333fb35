"""PostgreSQL + pgvector: the same store behaviour on a server teams already run.

One row per chunk (:mod:`plait.stores.postgres_schema`) holds the content, origin,
metadata, content hash, the vector and the generated lexical document, so a write
touches both arms in one transaction. The two arms are independent, each on its own
index (ADR 0080 §4):

* lexical — Okapi BM25 over the postings table (one primary-key range per query
  term, kept by triggers in the chunk rows' transaction), scored in this process by
  the SQLite store's :class:`~plait.stores.lexical_index.LexicalIndex`, cached per
  collection generation and reloaded in one snapshot when the generation moves
  (:mod:`plait.stores.postgres_search`; ``ts_rank`` ignores document frequency and
  ranks far worse; see ``docs/postgres.md``);
* dense — below ``ann_threshold`` chunks, exact cosine in this process over the
  collection's cached float32 matrix (the SQLite store's class and scores), keyed by
  the collection's generation and revision (:mod:`plait.stores.postgres_dense`); at or
  above it, cosine through a per-collection partial HNSW index on
  ``(vector::vector(d))``, created when the collection's dimension becomes known;
  there, filtered, unlimited or very large requests (and dimensions past HNSW's 2,000)
  use an exact scan in SQL instead, so filters never starve the result.

Connections come from a ``psycopg_pool`` pool; every statement is parameterised and
runs under a statement timeout. Write transactions lock the collection's row first,
so concurrent writers of one collection queue instead of deadlocking on statistics.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.errors import NotFoundError, StoreError
from plait.stores.base import (
    ChunkState,
    ReplaceCounts,
    ScopeInfo,
    SourceInfo,
    SourceWrite,
    StoredChunk,
)
from plait.stores.lexical_index import DEFAULT_BUDGET
from plait.stores.postgres_ahead import PostgresInfo
from plait.stores.postgres_base import now as _now
from plait.stores.postgres_base import vec as _vec
from plait.stores.postgres_dense import DEFAULT_DENSE_BUDGET
from plait.stores.postgres_incremental import DEFAULT_SHARE
from plait.stores.postgres_info import INFO, INFO_SETTINGS, info_of
from plait.stores.postgres_lexicons import DEFAULT_TOTAL
from plait.stores.postgres_queries import HNSW_MAX_DIMENSION, hnsw_index
from plait.stores.postgres_records import PgRecords
from plait.stores.postgres_rows import DEFAULT_ROW_BUDGET
from plait.stores.postgres_whole import DEFAULT_WHOLE_BYTES
from plait.stores.postgres_write import VACUUMED, build_hnsw, check_dimension, write_sources
from plait.stores.records import Records
from plait.stores.records_import import import_side_files
from plait.types import CollectionInfo
from plait.usage import USAGE_COLUMNS, UsageRow, usage_counts, usage_key, usage_row

__all__ = ["PostgresStore"]

log = logging.getLogger(__name__)



class PostgresStore(PostgresInfo):
    """A :class:`~plait.stores.base.Store` in a PostgreSQL database with pgvector.

    ``dsn`` is a libpq URL or key/value string. ``schema`` (created if missing) puts
    plait's tables in their own schema; otherwise they go to the first schema of the
    server's search path. ``statement_timeout`` bounds every statement (seconds);
    ``prepare`` False keeps every statement unprepared (PgBouncer before 1.21 in
    transaction mode). ``vacuum_after`` chunks written through this store (default
    5,000) make the next :meth:`mark_scope_indexed` (the end of an index run) run
    ``VACUUM (ANALYZE)`` (:meth:`vacuum`: the lexical tables, so their index-only scans
    need no heap visits right after a large load, and the small tables every write
    churns); None leaves it to autovacuum.
    ``lexical_cache_bytes`` bounds each collection's in-process lexical cache (postings
    and score rows; default 256 MiB, least recently used terms evicted and read again),
    ``lexical_total_bytes`` all of them (default 1 GiB; least recently searched dropped).
    ``incremental_share``: after a write of at most this share of a collection's chunks
    (rows added + removed; default 0.1, at least 1,000 rows; the lexical index caps it at
    0.01), a search applies the
    change log to its cached lexical index instead of reloading it (0: always reload).
    ``ann_threshold`` (default ``PLAIT_ANN_THRESHOLD`` or 20,000, as the SQLite store) is
    the number of chunks from which the dense arm uses pgvector's HNSW index; below it
    the collection's vectors are ranked exactly in this process from a cached matrix
    (:mod:`plait.stores.postgres_dense`), all collections' matrices together bounded by
    ``dense_cache_bytes`` (default 512 MiB). ``row_cache_bytes`` (default 64 MiB) bounds
    the chunks :meth:`get_chunks` keeps (:mod:`plait.stores.postgres_rows`).
    ``whole_bytes`` (default 256 MiB; 0: never): a collection whose postings and chunk rows
    are estimated under it is read whole on its first search, in one snapshot with its
    dense matrix (:mod:`plait.stores.postgres_whole`), so later searches read no postings
    and no chunk rows, whatever their terms and hits.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        statement_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        min_connections: int = 1,
        max_connections: int = 4,
        prepare: bool = True,
        vacuum_after: int | None = 5000,
        lexical_cache_bytes: int = DEFAULT_BUDGET,
        lexical_total_bytes: int = DEFAULT_TOTAL,
        incremental_share: float = DEFAULT_SHARE,
        ann_threshold: int | None = None,
        dense_cache_bytes: int = DEFAULT_DENSE_BUDGET,
        row_cache_bytes: int = DEFAULT_ROW_BUDGET,
        whole_bytes: int = DEFAULT_WHOLE_BYTES,
    ) -> None:
        super().__init__(
            dsn,
            whole_bytes=whole_bytes,
            lexical_cache_bytes=lexical_cache_bytes,
            lexical_total_bytes=lexical_total_bytes,
            incremental_share=incremental_share,
            ann_threshold=ann_threshold,
            dense_cache_bytes=dense_cache_bytes,
            row_cache_bytes=row_cache_bytes,
            schema=schema,
            statement_timeout=statement_timeout,
            connect_timeout=connect_timeout,
            min_connections=min_connections,
            max_connections=max_connections,
            prepare=prepare,
        )
        self._records: PgRecords | None = None
        self._vacuum_after = vacuum_after
        self._written = 0

    # collections -------------------------------------------------------------------
    # One statement (plait.stores.postgres_info): the chunk count the statistics
    # triggers keep, chunks without a vector from their partial index, sources from
    # their table (counted once per collection key).
    _INFO = INFO
    _INFO_SETTINGS = INFO_SETTINGS
    _info = staticmethod(info_of)

    def ensure_collection(self, name: str) -> CollectionInfo:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO plait_collections (name, created_at) VALUES (%s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (name, _now()),
            )
            row = conn.execute(self._INFO + " WHERE p.name = %s", (name,)).fetchone()
            assert row is not None  # just inserted, or already there
            return self._info(row)

    def list_collections(self) -> list[CollectionInfo]:
        with self._read() as conn:
            rows = conn.execute(self._INFO + " ORDER BY p.name").fetchall()
        return [self._info(r) for r in rows]

    def delete_collection(self, name: str) -> bool:
        with self._tx() as conn:
            try:
                cid, _ = self._collection(conn, name, lock=True)
            except NotFoundError:
                return False
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(hnsw_index(cid)))
            # The statistics go with the collection: skip the per-row bookkeeping.
            conn.execute("SELECT set_config('plait.skip_stats', 'on', true)")
            conn.execute("DELETE FROM plait_chunks WHERE collection_id = %s", (cid,))
            conn.execute("SELECT set_config('plait.skip_stats', 'off', true)")
            conn.execute("DELETE FROM plait_postings WHERE collection_id = %s", (cid,))
            conn.execute("DELETE FROM plait_revisions WHERE collection_id = %s", (cid,))
            conn.execute("DELETE FROM plait_counts WHERE collection_id = %s", (cid,))
            conn.execute("DELETE FROM plait_collections WHERE id = %s", (cid,))
        self._forget(name)
        return True

    def set_embedder(
        self, name: str, *, provider: str, model: str, dimension: int | None
    ) -> CollectionInfo:
        with self._tx() as conn:
            cid, old_dimension = self._collection(conn, name, lock=True)
            if dimension is not None:
                bad = conn.execute(
                    "SELECT vector_dims(vector) FROM plait_chunks WHERE collection_id = %s "
                    "AND vector IS NOT NULL AND vector_dims(vector) <> %s LIMIT 1",
                    (cid, dimension),
                ).fetchone()
                if bad:
                    raise StoreError(
                        f"collection {name!r} holds {bad[0]}-d vectors; cannot record "
                        f"dimension {dimension}"
                    )
            conn.execute(
                "UPDATE plait_collections SET provider = %s, model = %s, dimension = %s WHERE id = %s",
                (provider, model, dimension, cid),
            )
            if old_dimension != dimension:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(hnsw_index(cid)))
            if dimension is not None and 0 < dimension <= HNSW_MAX_DIMENSION:
                conn.execute(
                    sql.SQL(
                        "CREATE INDEX IF NOT EXISTS {} ON plait_chunks USING hnsw "
                        "((vector::vector({})) vector_cosine_ops) WHERE collection_id = {}"
                    ).format(hnsw_index(cid), sql.Literal(int(dimension)), sql.Literal(cid))
                )
            row = conn.execute(self._INFO + " WHERE p.id = %s", (cid,)).fetchone()
            assert row is not None
        self._forget(name)
        return self._info(row)

    def get_settings(self, name: str) -> dict[str, Any]:
        with self._read() as conn:
            row = conn.execute(
                "SELECT settings FROM plait_collections WHERE name = %s", (name,), prepare=self._prepare
            ).fetchone()
        if row is None:
            raise NotFoundError(f"collection {name!r} does not exist")
        return dict(row[0])

    def update_settings(self, name: str, settings: Mapping[str, Any], *, remove: Sequence[str] = ()) -> dict[str, Any]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, name, lock=True)
            row = conn.execute(
                "UPDATE plait_collections SET settings = (settings || %s) - %s::text[] WHERE id = %s RETURNING settings",
                (Jsonb(dict(settings)), list(remove), cid),
            ).fetchone()
            assert row is not None
            return dict(row[0])

    def increment_settings(
        self, name: str, increments: Mapping[str, int], *, settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """One UPDATE adding each increment to the stored value (``x = x + n`` in jsonb,
        under the row's lock): concurrent writers never lose a count."""
        added = sql.SQL("").join(
            sql.SQL(
                " || jsonb_build_object({key}::text, CASE WHEN jsonb_typeof(settings -> {key}::text) = 'number' "
                "THEN trunc((settings ->> {key}::text)::numeric)::bigint ELSE 0 END + {amount}::bigint)"
            ).format(key=sql.Literal(key), amount=sql.Literal(int(amount)))
            for key, amount in increments.items()
        )
        query = sql.SQL("UPDATE plait_collections SET settings = settings || %s{} WHERE id = %s RETURNING settings")
        with self._tx() as conn:
            cid, _ = self._collection(conn, name, lock=True)
            row = conn.execute(query.format(added), (Jsonb(dict(settings or {})), cid)).fetchone()
            assert row is not None
            return dict(row[0])

    # usage -------------------------------------------------------------------------
    def add_usage(
        self, collection: str, rows: Sequence[UsageRow], *, settings: Mapping[str, Any] | None = None
    ) -> None:
        if not rows and not settings:
            return
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection, lock=bool(settings))
            self._write_usage(conn, cid, rows)
            if settings:
                conn.execute(
                    "UPDATE plait_collections SET settings = settings || %s WHERE id = %s", (Jsonb(dict(settings)), cid)
                )

    @staticmethod
    def _write_usage(conn: psycopg.Connection, cid: int, rows: Sequence[UsageRow]) -> None:
        if rows:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO plait_usage AS u (collection_id, bucket, kind, purpose, provider, model, "
                    "estimated, calls, texts, characters, input_tokens, output_tokens) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                    "ON CONFLICT (collection_id, bucket, kind, purpose, provider, model, estimated) DO UPDATE SET "
                    "calls = u.calls + excluded.calls, texts = u.texts + excluded.texts, "
                    "characters = u.characters + excluded.characters, "
                    "input_tokens = u.input_tokens + excluded.input_tokens, "
                    "output_tokens = u.output_tokens + excluded.output_tokens",
                    [(cid, *usage_key(r), *usage_counts(r)) for r in rows],
                )

    def usage(self, collection: str, *, since: str | None = None) -> list[UsageRow]:
        with self._read() as conn:
            cid, _ = self._collection(conn, collection)
            found = conn.execute(
                f"SELECT {USAGE_COLUMNS} FROM plait_usage WHERE collection_id = %s AND bucket >= %s "
                "ORDER BY bucket, kind, purpose, provider, model, estimated",
                (cid, since or ""),
            ).fetchall()
        return [usage_row(r) for r in found]

    # writes ------------------------------------------------------------------------
    def chunk_states(self, collection: str, source_id: str) -> dict[str, ChunkState]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT chunk_id, content_hash, vector IS NOT NULL FROM plait_chunks "
                "WHERE collection_id = %s AND source_id = %s",
                (cid, source_id),
            ).fetchall()
        return {r[0]: ChunkState(r[0], r[1], bool(r[2])) for r in rows}

    def vectors_by_hash(self, collection: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT DISTINCT ON (content_hash) content_hash, vector FROM plait_chunks "
                "WHERE collection_id = %s AND vector IS NOT NULL AND content_hash = ANY(%s) "
                "ORDER BY content_hash, id",
                (cid, list(dict.fromkeys(hashes))),
            ).fetchall()
        order = {h: i for i, h in enumerate(dict.fromkeys(hashes))}
        rows.sort(key=lambda r: order[r[0]])
        return {r[0]: _vec(r[1]) for r in rows}

    def replace_source(
        self,
        collection: str,
        source_id: str,
        scope: str,
        chunks: Sequence[StoredChunk],
        *,
        root: str = "",
        claim: bool = False,
    ) -> ReplaceCounts:
        with self._tx() as conn:
            cid, dimension = self._collection(conn, collection, lock=True)  # writers queue here
            if claim:
                owner = conn.execute(
                    "SELECT root FROM plait_sources WHERE collection_id = %s AND source_id = %s",
                    (cid, source_id),
                ).fetchone()
                if owner is not None and owner[0] and owner[0] != root:
                    return ReplaceCounts(conflict=str(owner[0]))
            counts, inserted = write_sources(
                conn, cid, dimension, collection, [SourceWrite(source_id, scope, chunks, root)]
            )
        self._written += inserted
        return counts[0]

    def replace_sources(self, collection: str, writes: Sequence[SourceWrite]) -> list[ReplaceCounts]:
        """Many sources in one transaction (:class:`~plait.stores.base.BulkStore`): one
        lock, one ``DELETE``, one multi-row ``INSERT`` per 2,000 new chunks, so the
        statistics triggers run once per statement (:mod:`plait.stores.postgres_write`)."""
        if not writes:
            return []
        with self._tx() as conn:
            cid, dimension = self._collection(conn, collection, lock=True)
            counts, inserted = write_sources(conn, cid, dimension, collection, writes)
        self._written += inserted
        return counts

    @contextmanager
    def deferred_index(self, collection: str, *, lock_timeout: float = 5.0) -> Iterator[None]:
        """Bulk writes without row-by-row HNSW maintenance
        (:class:`~plait.stores.base.BulkStore`): the collection's HNSW index is dropped,
        then built once at the end (:func:`~plait.stores.postgres_write.build_hnsw`,
        concurrently, in memory) — inserting into the graph row by row was three
        quarters of a copy's time. Searches inside the block scan exactly.

        The drop is ``DROP INDEX CONCURRENTLY`` on an autocommit connection: it never
        takes ``plait_chunks``'s exclusive lock, so no search or write of any collection
        queues behind it. It waits at most ``lock_timeout`` seconds for transactions
        already using the table; past that the index is kept (maintained row by row, or
        left invalid and rebuilt at the end) and a warning logged. After an error inside
        the block the index is built again; after ``KeyboardInterrupt`` / ``SystemExit``
        it is not (the process is stopping: the next copy, or :meth:`build_index`,
        builds it)."""
        with self._read() as conn:
            cid, _ = self._collection(conn, collection)
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (str(int(lock_timeout * 1000)),))
            try:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(hnsw_index(cid)))
            except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled):
                log.warning(
                    "kept the HNSW index of %r: other transactions held plait_chunks for %.1f s "
                    "(the bulk write maintains it row by row)", collection, lock_timeout,
                )
            finally:
                conn.execute("RESET lock_timeout")
        try:
            yield
        except Exception:
            try:
                self.build_index(collection)
            except Exception:  # the block's own error is the one to report
                log.warning("could not rebuild the HNSW index of %r after a failed bulk write", collection, exc_info=True)
            raise
        self.build_index(collection)

    def build_index(self, collection: str) -> None:
        """Create the collection's HNSW index if it is missing (after :meth:`deferred_index`,
        or a process killed inside one); a no-op without a dimension HNSW can index."""
        with self._read() as conn:
            cid, dimension = self._collection(conn, collection)
            if dimension is not None and 0 < dimension <= HNSW_MAX_DIMENSION:
                build_hnsw(conn, cid, dimension, timeout_ms=self._timeout_ms)

    def delete_source(self, collection: str, source_id: str) -> int:
        return self.replace_source(collection, source_id, "", []).deleted

    def set_vectors(
        self, collection: str, vectors: Mapping[str, np.ndarray], *, usage: Sequence[UsageRow] = ()
    ) -> int:
        count = 0
        with self._tx() as conn:
            cid, dimension = self._collection(conn, collection, lock=True)
            self._write_usage(conn, cid, usage)
            for chunk_id, vector in vectors.items():
                value = _vec(vector)
                check_dimension(collection, dimension, value)
                cur = conn.execute(
                    "UPDATE plait_chunks SET vector = %s WHERE collection_id = %s AND chunk_id = %s",
                    (value, cid, chunk_id),
                )
                count += max(cur.rowcount, 0)
        return count

    def mark_scope_indexed(self, collection: str, scope: str, at: str) -> None:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            conn.execute(
                "INSERT INTO plait_scopes (collection_id, scope, last_indexed_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (collection_id, scope) DO UPDATE SET last_indexed_at = excluded.last_indexed_at",
                (cid, scope, at),
            )
        if self._vacuum_after is not None and self._written >= self._vacuum_after:
            self.vacuum()

    def vacuum(self) -> None:
        """``VACUUM (ANALYZE)`` the tables writes churn (:data:`VACUUMED`): marks the pages
        of a large load all-visible (the postings' index-only scans then skip the heap),
        recycles the dead row versions every write leaves in the small tables (each write
        updates its collection's row) and refreshes the planner's statistics. Cost grows
        with the pages changed since the last vacuum (the visibility map skips the rest)."""
        self._written = 0
        with self._read() as conn:
            for table in VACUUMED:
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))

    # backfill claims -----------------------------------------------------------------
    def claim_without_vector(
        self, collection: str, *, owner: str, limit: int, lease_seconds: float
    ) -> list[tuple[str, str]]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            # one claimer per collection at a time; writers are not blocked
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('plait.claims', %s))", (cid,))
            conn.execute(
                "DELETE FROM plait_vector_claims WHERE collection_id = %s "
                "AND (expires_at <= now() OR owner = %s)",
                (cid, owner),
            )
            rows = conn.execute(
                "SELECT c.chunk_id, c.content FROM plait_chunks c WHERE c.collection_id = %(cid)s "
                "AND c.vector IS NULL AND NOT EXISTS (SELECT 1 FROM plait_vector_claims v "
                "WHERE v.collection_id = c.collection_id AND v.chunk_id = c.chunk_id) "
                "ORDER BY c.id LIMIT %(limit)s",
                {"cid": cid, "limit": limit},
            ).fetchall()
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO plait_vector_claims (collection_id, chunk_id, owner, expires_at) "
                        "VALUES (%s, %s, %s, now() + make_interval(secs => %s)) "
                        "ON CONFLICT DO NOTHING",
                        [(cid, r[0], owner, float(lease_seconds)) for r in rows],
                    )
        return [(r[0], r[1]) for r in rows]

    def release_claims(self, collection: str, owner: str) -> int:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            cur = conn.execute(
                "DELETE FROM plait_vector_claims WHERE collection_id = %s AND owner = %s",
                (cid, owner),
            )
            return max(cur.rowcount, 0)

    def claim_owners(self, collection: str) -> dict[str, int]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT v.owner, count(*) FROM plait_vector_claims v JOIN plait_chunks c "
                "ON c.collection_id = v.collection_id AND c.chunk_id = v.chunk_id "
                "WHERE v.collection_id = %s AND v.expires_at > now() AND c.vector IS NULL "
                "GROUP BY v.owner ORDER BY v.owner",
                (cid,),
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def without_vector(self, collection: str, chunk_ids: Sequence[str]) -> set[str]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT c.chunk_id FROM plait_collections p JOIN plait_chunks c ON c.collection_id = p.id "
                "WHERE p.name = %s AND c.vector IS NULL AND c.chunk_id = ANY(%s)",
                (collection, list(dict.fromkeys(chunk_ids))),
                prepare=self._prepare,
            ).fetchall()
            if not rows:
                self._collection(conn, collection)  # NotFoundError when it does not exist
        return {r[0] for r in rows}

    # reads -------------------------------------------------------------------------
    def list_sources(
        self, collection: str, scope: str | None = None, *, root: str | None = None
    ) -> list[SourceInfo]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT s.source_id, s.scope, count(c.id), count(c.id) FILTER "
                "(WHERE c.vector IS NULL), s.indexed_at, s.root FROM plait_sources s "
                "LEFT JOIN plait_chunks c ON c.collection_id = s.collection_id "
                "AND c.source_id = s.source_id WHERE s.collection_id = %(cid)s "
                "AND (%(scope)s::text IS NULL OR s.scope = %(scope)s) "
                "AND (%(root)s::text IS NULL OR s.root = %(root)s) "
                "GROUP BY s.source_id, s.scope, s.indexed_at, s.root ORDER BY s.source_id",
                {"cid": cid, "scope": scope, "root": root},
            ).fetchall()
        return [SourceInfo(*r) for r in rows]

    def scopes(self, collection: str) -> list[ScopeInfo]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT c.scope, count(DISTINCT c.source_id), count(*), "
                "count(*) FILTER (WHERE c.vector IS NULL), s.last_indexed_at "
                "FROM plait_chunks c LEFT JOIN plait_scopes s ON s.collection_id = c.collection_id "
                "AND s.scope = c.scope WHERE c.collection_id = %s "
                "GROUP BY c.scope, s.last_indexed_at ORDER BY c.scope",
                (cid,),
            ).fetchall()
        return [ScopeInfo(*r) for r in rows]

    def chunks_without_vector(
        self, collection: str, *, limit: int | None = None
    ) -> list[tuple[str, str]]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT chunk_id, content FROM plait_chunks WHERE collection_id = %s "
                "AND vector IS NULL ORDER BY id LIMIT %s",
                (cid, limit),
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def chunk_ids(self, collection: str, source_id: str | None = None) -> list[str]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            if source_id is None:
                rows = conn.execute(
                    "SELECT chunk_id FROM plait_chunks WHERE collection_id = %s ORDER BY id", (cid,)
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT chunk_id FROM plait_chunks WHERE collection_id = %s AND source_id = %s "
                    "ORDER BY ordinal, id",
                    (cid, source_id),
                ).fetchall()
        return [r[0] for r in rows]

    # records -----------------------------------------------------------------------
    def records(self) -> Records:
        """Refinery runs and cards, API keys in this database (migration 6); the former
        ``./.plait/refinery.db`` / ``keys.db`` are imported on first use."""
        if self._records is None:
            records = PgRecords(self._tx, self._where, legacy_dir=Path(".plait"))
            if not self.read_only:  # a hot standby cannot store the import: the primary's first use does
                import_side_files(records, collections=[c.name for c in self.list_collections()], once=True)
            self._records = records
        return self._records
