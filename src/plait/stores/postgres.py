"""PostgreSQL + pgvector: the same store behaviour on a server teams already run.

One row per chunk (:mod:`plait.stores.postgres_schema`) holds the content, origin,
metadata, content hash, the vector and the generated lexical document, so a write
touches both arms in one transaction. The two arms are two independent queries,
each on its own index (ADR 0080 §4):

* lexical — Okapi BM25 over the postings table (one primary-key range per query
  term, kept by triggers in the chunk rows' transaction), with the document
  frequencies and length totals read in the same snapshot, exactly as
  :mod:`plait.stores.lexical` scores them (``ts_rank`` ignores document frequency
  and ranks far worse; see ``docs/postgres.md``);
* dense — cosine through a per-collection partial HNSW index on
  ``(vector::vector(d))``, created when the collection's dimension becomes known;
  filtered, unlimited or very large requests (and dimensions past HNSW's 2,000) use
  an exact scan instead, so filters never starve the result.

Connections come from a ``psycopg_pool`` pool; every statement is parameterised and
runs under a statement timeout. Write transactions lock the collection's row first,
so concurrent writers of one collection queue instead of deadlocking on statistics.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import TypeAdapter

from plait.errors import NotFoundError, StoreError, StoreUnavailableError
from plait.stores.base import (
    BM25Params,
    ChunkState,
    Filters,
    ReplaceCounts,
    ScopeInfo,
    SourceInfo,
    StoredChunk,
)
from plait.stores.postgres_queries import (
    HNSW_MAX_DIMENSION,
    LEXICAL_WORK_MEM,
    hnsw_index,
    lexical_keys,
    lexical_query,
    term_stats,
    term_stats_query,
    uses_hnsw,
    vector_query,
)
from plait.stores.postgres_schema import migrate
from plait.types import Chunk, CollectionInfo, Origin

__all__ = ["PostgresStore"]

_ORIGIN = TypeAdapter(Origin)
_CHUNK_COLUMNS = "chunk_id, source_id, scope, ordinal, content, content_hash, origin, metadata"
_VECTOR_HINT = (
    "install pgvector on the server (https://github.com/pgvector/pgvector#installation, "
    "or enable it in your managed Postgres) and run `CREATE EXTENSION vector;` as a user "
    "allowed to create extensions, then retry"
)

# One round trip: the lexical arm's snapshot and its work_mem floor (never lowered).
_LEXICAL_TX = sql.SQL(
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY; "
    "SELECT set_config('work_mem', {m}, true) "
    "WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes({m})"
).format(m=sql.Literal(LEXICAL_WORK_MEM))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _safe_dsn(dsn: str) -> str:
    """The DSN without its password, for messages."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", re.sub(r"password=\S+", "password=***", dsn))


def _vec(vector: Any) -> np.ndarray:
    """A float32 array from an array-like or a pgvector ``Vector``."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float32)


class PostgresStore:
    """A :class:`~plait.stores.base.Store` in a PostgreSQL database with pgvector.

    ``dsn`` is a libpq URL or key/value string. ``schema`` (created if missing) puts
    plait's tables in their own schema; otherwise they go to the first schema of the
    server's search path. ``statement_timeout`` bounds every statement (seconds).
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
    ) -> None:
        if statement_timeout <= 0 or connect_timeout <= 0:
            raise StoreError(
                f"timeouts must be positive seconds, got statement_timeout={statement_timeout}, "
                f"connect_timeout={connect_timeout}"
            )
        self.dsn = dsn
        self.schema = schema
        self._where = _safe_dsn(dsn)
        self._timeout_ms = int(statement_timeout * 1000)
        self._connect_timeout = connect_timeout
        self._bootstrap()
        self._pool = ConnectionPool(
            dsn,
            min_size=min_connections,
            max_size=max(min_connections, max_connections),
            kwargs={"connect_timeout": max(1, int(connect_timeout)), "prepare_threshold": None},
            configure=self._configure,
            timeout=connect_timeout,
            name="plait",
            open=True,
        )

    # plumbing ----------------------------------------------------------------------
    def _session(self, conn: psycopg.Connection) -> None:
        """Search path (plait's schema first; pgvector's schema appended when it is not on
        the path, as with managed services that keep extensions in ``extensions``) and
        the statement timeout."""
        if self.schema is not None:
            conn.execute(
                "SELECT set_config('search_path', %s || ', ' || current_setting('search_path'), false)",
                (sql.Identifier(self.schema).as_string(conn),),
            )
        self._find_vector(conn)
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (str(self._timeout_ms),))

    @staticmethod
    def _find_vector(conn: psycopg.Connection) -> None:
        """Append pgvector's schema to the search path if it is not on it (no-op when the
        extension is missing)."""
        conn.execute(
            "SELECT set_config('search_path', current_setting('search_path') || ', ' || quote_ident(n.nspname), false)"
            " FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'vector' AND NOT n.nspname = ANY(current_schemas(false))"
        )

    def _configure(self, conn: psycopg.Connection) -> None:
        self._session(conn)
        register_vector(conn)
        conn.commit()

    def _connect_error(self, exc: psycopg.Error) -> StoreError:
        if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
            return StoreUnavailableError(f"cannot reach PostgreSQL at {self._where}: {exc}".strip())
        return StoreError(f"PostgreSQL at {self._where} refused the connection: {exc}".strip())

    def _bootstrap(self) -> None:
        """Check the server, ensure the schema and the vector extension, migrate.

        Creating the schema and the extension races between processes starting at
        once (``IF NOT EXISTS`` is not atomic), so both happen under an advisory lock.
        """
        try:
            conn = psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
            )
        except psycopg.Error as exc:
            raise self._connect_error(exc) from exc
        try:
            with conn:
                conn.execute("SELECT pg_advisory_lock(hashtextextended('plait.bootstrap', 0))")
                try:
                    if self.schema is not None:
                        conn.execute(
                            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
                        )
                    self._session(conn)
                    if self._ensure_vector(conn):
                        self._find_vector(conn)  # just created, maybe off the search path
                finally:
                    conn.execute("SELECT pg_advisory_unlock(hashtextextended('plait.bootstrap', 0))")
                # A migration (or waiting for another process's) may take longer than
                # one query is allowed to.
                conn.execute("SET statement_timeout = 0")
                migrate(conn)
        except psycopg.OperationalError as exc:
            raise self._connect_error(exc) from exc
        except psycopg.Error as exc:
            raise StoreError(f"cannot prepare the plait schema at {self._where}: {exc}") from exc

    def _ensure_vector(self, conn: psycopg.Connection) -> bool:
        """Create pgvector if missing (True when this call created it): in ``public`` when
        there is one, so that dropping plait's own schema (a tenant removed) cannot drop
        the extension and with it the vector columns of every other schema; where plait
        may not create in ``public``, in the first schema of the search path."""
        row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        if row:
            return False
        public = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'public'").fetchone()
        try:
            if public:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                    return True
                except psycopg.errors.InsufficientPrivilege:
                    pass  # e.g. a trusted-extension user without CREATE on public
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            return True
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split())
            raise StoreError(
                f"the PostgreSQL extension 'vector' is missing in {self._where} and plait could "
                f"not create it ({exc.sqlstate}: {detail}): {_VECTOR_HINT}"
            ) from exc

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """A pooled connection in a transaction, committed on success; driver errors
        become :class:`StoreError` (:class:`StoreUnavailableError` when the server is gone)."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailableError(
                f"no PostgreSQL connection from {self._where} within {self._connect_timeout}s: {exc}"
            ) from exc
        except psycopg.errors.QueryCanceled as exc:
            raise StoreError(
                f"a PostgreSQL statement exceeded the {self._timeout_ms / 1000:g}s statement "
                f"timeout: {exc}"
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(f"lost PostgreSQL at {self._where}: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error: {exc}") from exc

    @staticmethod
    def _collection(conn: psycopg.Connection, name: str, *, lock: bool = False) -> tuple[int, int | None]:
        """(id, dimension) of a collection; ``lock`` takes its row lock for a write."""
        query = "SELECT id, dimension FROM plait_collections WHERE name = %s"
        row = conn.execute(query + (" FOR UPDATE" if lock else ""), (name,)).fetchone()
        if row is None:
            raise NotFoundError(f"collection {name!r} does not exist")
        return int(row[0]), row[1]

    # collections -------------------------------------------------------------------
    @staticmethod
    def _info(conn: psycopg.Connection, row: Sequence[Any]) -> CollectionInfo:
        cid = row[0]
        counts = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE vector IS NULL), count(DISTINCT source_id) "
            "FROM plait_chunks WHERE collection_id = %s",
            (cid,),
        ).fetchone()
        last = conn.execute(
            "SELECT max(last_indexed_at) FROM plait_scopes WHERE collection_id = %s", (cid,)
        ).fetchone()
        assert counts is not None and last is not None  # aggregates always return a row
        return CollectionInfo(
            name=row[1],
            embedder_provider=row[2],
            embedder_model=row[3],
            dimension=row[4],
            chunks=counts[0],
            chunks_without_vector=counts[1],
            sources=counts[2],
            created_at=row[5],
            last_indexed_at=last[0],
        )

    _INFO_ROW = "SELECT id, name, provider, model, dimension, created_at FROM plait_collections"

    def ensure_collection(self, name: str) -> CollectionInfo:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO plait_collections (name, created_at) VALUES (%s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (name, _now()),
            )
            row = conn.execute(self._INFO_ROW + " WHERE name = %s", (name,)).fetchone()
            assert row is not None  # just inserted, or already there
            return self._info(conn, row)

    def get_collection(self, name: str) -> CollectionInfo | None:
        with self._tx() as conn:
            row = conn.execute(self._INFO_ROW + " WHERE name = %s", (name,)).fetchone()
            return self._info(conn, row) if row else None

    def list_collections(self) -> list[CollectionInfo]:
        with self._tx() as conn:
            rows = conn.execute(self._INFO_ROW + " ORDER BY name").fetchall()
            return [self._info(conn, r) for r in rows]

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
            conn.execute("DELETE FROM plait_collections WHERE id = %s", (cid,))
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
            row = conn.execute(self._INFO_ROW + " WHERE id = %s", (cid,)).fetchone()
            assert row is not None
            return self._info(conn, row)

    def get_settings(self, name: str) -> dict[str, Any]:
        with self._tx() as conn:
            row = conn.execute("SELECT settings FROM plait_collections WHERE name = %s", (name,)).fetchone()
        if row is None:
            raise NotFoundError(f"collection {name!r} does not exist")
        return dict(row[0])

    def update_settings(self, name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, name, lock=True)
            row = conn.execute(
                "UPDATE plait_collections SET settings = settings || %s WHERE id = %s RETURNING settings",
                (Jsonb(dict(settings)), cid),
            ).fetchone()
            assert row is not None
            return dict(row[0])

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

    @staticmethod
    def _check_dimension(collection: str, dimension: int | None, vector: np.ndarray) -> None:
        if vector.ndim != 1:
            raise StoreError(f"a vector must be one-dimensional, got shape {vector.shape}")
        if dimension is not None and vector.shape[0] != dimension:
            raise StoreError(
                f"vector has {vector.shape[0]} dimensions, collection {collection!r} "
                f"holds {dimension}-d vectors"
            )

    @staticmethod
    def _lexical(tokens: Sequence[str]) -> str:
        for token in tokens:
            if not token or any(c.isspace() for c in token):
                raise StoreError(f"lexical token {token!r} is empty or contains whitespace")
        return " ".join(tokens)

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
        added = updated = unchanged = 0
        with self._tx() as conn:
            cid, dimension = self._collection(conn, collection, lock=True)  # writers queue here
            if claim:
                owner = conn.execute(
                    "SELECT root FROM plait_sources WHERE collection_id = %s AND source_id = %s",
                    (cid, source_id),
                ).fetchone()
                if owner is not None and owner[0] and owner[0] != root:
                    return ReplaceCounts(conflict=str(owner[0]))
            existing = {
                r[0]: (r[1], r[2], r[3])
                for r in conn.execute(
                    "SELECT chunk_id, id, content_hash, vector IS NOT NULL FROM plait_chunks "
                    "WHERE collection_id = %s AND source_id = %s",
                    (cid, source_id),
                )
            }
            keep: set[str] = set()
            to_delete: list[int] = []
            inserts: list[tuple[Any, ...]] = []
            for item in chunks:
                chunk = item.chunk
                vector = None if item.vector is None else _vec(item.vector)
                if vector is not None:
                    self._check_dimension(collection, dimension, vector)
                origin = Jsonb(chunk.origin.model_dump(mode="json", by_alias=True))
                metadata = Jsonb(chunk.metadata)
                old = existing.get(chunk.id)
                if old is not None and old[1] == chunk.content_hash:
                    keep.add(chunk.id)
                    unchanged += 1
                    conn.execute(
                        "UPDATE plait_chunks SET scope = %s, ordinal = %s, origin = %s, "
                        "metadata = %s, vector = coalesce(%s, vector) WHERE collection_id = %s AND id = %s",
                        (scope, chunk.ordinal, origin, metadata, vector, cid, old[0]),
                    )
                    continue
                if old is not None:
                    updated += 1
                    keep.add(chunk.id)
                    to_delete.append(old[0])
                else:
                    added += 1
                inserts.append(
                    (
                        cid, chunk.id, chunk.source_id, scope, chunk.ordinal, chunk.content,
                        chunk.content_hash, origin, metadata, vector,
                        self._lexical(item.exact), self._lexical(item.stems),
                    )
                )
            deleted = [v[0] for k, v in existing.items() if k not in keep]
            to_delete.extend(deleted)
            if to_delete:
                conn.execute(
                    "DELETE FROM plait_chunks WHERE collection_id = %s AND id = ANY(%s)",
                    (cid, to_delete),
                )
            if inserts:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, "
                        "ordinal, content, content_hash, origin, metadata, vector, lex_exact, "
                        "lex_stems) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        inserts,
                    )
            if chunks:
                conn.execute(
                    "INSERT INTO plait_sources (collection_id, source_id, scope, indexed_at, root) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (collection_id, source_id) "
                    "DO UPDATE SET scope = excluded.scope, indexed_at = excluded.indexed_at, "
                    "root = excluded.root",
                    (cid, source_id, scope, _now(), root),
                )
            else:
                conn.execute(
                    "DELETE FROM plait_sources WHERE collection_id = %s AND source_id = %s",
                    (cid, source_id),
                )
        return ReplaceCounts(added, updated, unchanged, len(deleted))

    def delete_source(self, collection: str, source_id: str) -> int:
        return self.replace_source(collection, source_id, "", []).deleted

    def set_vectors(self, collection: str, vectors: Mapping[str, np.ndarray]) -> int:
        count = 0
        with self._tx() as conn:
            cid, dimension = self._collection(conn, collection, lock=True)
            for chunk_id, vector in vectors.items():
                value = _vec(vector)
                self._check_dimension(collection, dimension, value)
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
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT chunk_id FROM plait_chunks WHERE collection_id = %s AND vector IS NULL "
                "AND chunk_id = ANY(%s)",
                (cid, list(dict.fromkeys(chunk_ids))),
            ).fetchall()
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

    def get_chunks(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        with self._tx() as conn:
            cid, _ = self._collection(conn, collection)
            rows = conn.execute(
                "SELECT " + _CHUNK_COLUMNS + " FROM plait_chunks "
                "WHERE collection_id = %s AND chunk_id = ANY(%s)",
                (cid, list(dict.fromkeys(chunk_ids))),
            ).fetchall()
        found = {
            r[0]: Chunk(
                id=r[0], source_id=r[1], scope=r[2], ordinal=r[3], content=r[4],
                content_hash=r[5], origin=_ORIGIN.validate_python(r[6]), metadata=r[7],
            )
            for r in rows
        }
        return {i: found[i] for i in dict.fromkeys(chunk_ids) if i in found}

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

    # the two arms ------------------------------------------------------------------
    def lexical_search(
        self,
        collection: str,
        exact: Sequence[str],
        stems: Sequence[str],
        *,
        limit: int | None,
        filters: Filters | None = None,
        params: BM25Params | None = None,
    ) -> list[tuple[str, float]]:
        bm25 = params or BM25Params()
        keys, _ = lexical_keys(exact, stems, bm25)
        with self._tx() as conn:
            # The statistics and the postings are read in one snapshot; the postings'
            # sort stays in memory (never lowering a larger work_mem).
            conn.execute(_LEXICAL_TX)
            cid, _ = self._collection(conn, collection)
            if not keys:
                return []
            stats = term_stats(conn.execute(*term_stats_query(cid, keys)).fetchall())
            built = lexical_query(
                cid, exact, stems, stats=stats, limit=limit, filters=filters, params=bm25
            )
            if built is None:
                return []
            rows = conn.execute(*built).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def vector_search(
        self,
        collection: str,
        vector: np.ndarray,
        *,
        limit: int | None,
        filters: Filters | None = None,
    ) -> list[tuple[str, float]]:
        query_vector = _vec(vector)
        with self._tx() as conn:
            cid, dimension = self._collection(conn, collection)
            stored = dimension
            if stored is None:
                row = conn.execute(
                    "SELECT vector_dims(vector) FROM plait_chunks WHERE collection_id = %s "
                    "AND vector IS NOT NULL LIMIT 1",
                    (cid,),
                ).fetchone()
                if row is None:
                    return []
                stored = int(row[0])
            if query_vector.ndim != 1 or query_vector.shape[0] != stored:
                raise StoreError(
                    f"query vector has {query_vector.shape[-1] if query_vector.ndim else 0} "
                    f"dimensions, collection {collection!r} holds {stored}-d vectors"
                )
            if uses_hnsw(dimension, limit, filters):
                # ef_search bounds what one HNSW scan returns: at least the limit.
                ef = str(max(40, limit or 0))
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (ef,))
            query, args = vector_query(
                cid, query_vector, dimension=dimension, limit=limit, filters=filters
            )
            rows = conn.execute(query, args).fetchall()
        rows.sort(key=lambda r: (-r[1], r[2]))
        return [(r[0], float(r[1])) for r in rows]

    def close(self) -> None:
        self._pool.close()
