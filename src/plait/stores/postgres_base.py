"""The PostgreSQL store's plumbing: the connection pool, the session settings, the
bootstrap (schema, pgvector, migrations) and the transaction helpers.

Pooled connections are in autocommit mode: a read is one statement, one round trip, in
its own snapshot; a write runs in :meth:`PostgresBase._tx`'s explicit transaction. Every
connection gets its settings once, when the pool opens it (search path, statement
timeout, the lexical arm's ``work_mem`` floor), so no query reads or sets them again.
Hot statements are prepared on the server (``prepare=False`` turns that off, for
PgBouncer older than 1.21 in transaction mode).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from plait.errors import NotFoundError, StoreConflictError, StoreError, StoreUnavailableError
from plait.stores.postgres_queries import LEXICAL_WORK_MEM
from plait.stores.postgres_schema import migrate
from plait.stores.postgres_standby import check_standby, in_recovery, read_only_error

logger = logging.getLogger(__name__)

__all__ = ["PostgresBase", "server_identity"]

_VECTOR_HINT = (
    "install pgvector on the server (https://github.com/pgvector/pgvector#installation, "
    "or enable it in your managed Postgres) and run `CREATE EXTENSION vector;` as a user "
    "allowed to create extensions, then retry"
)

# Once per connection: the lexical arm's work_mem floor (never lowering a larger one).
_WORK_MEM_FLOOR = sql.SQL(
    "SELECT set_config('work_mem', {m}, false) "
    "WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes({m})"
).format(m=sql.Literal(LEXICAL_WORK_MEM))


# The collection's row lock for a write, and the flag saying this transaction holds it.
# NO KEY UPDATE: it excludes the other writers but not a foreign-key check's KEY SHARE, so
# an insert of chunks from other SQL never waits for it (migration 14).
_LOCK = (
    "SELECT id, dimension, set_config('plait.locked_' || id, 'on', true) "
    "FROM plait_collections WHERE name = %s FOR NO KEY UPDATE"
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def safe_dsn(dsn: str) -> str:
    """The DSN without its password, for messages."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", re.sub(r"password=\S+", "password=***", dsn))


def vec(vector: Any) -> np.ndarray:
    """A float32 array from an array-like or a pgvector ``Vector``."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float32)


class PostgresBase:
    """Connections to one PostgreSQL database (see :class:`~plait.stores.postgres.PostgresStore`)."""

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
    ) -> None:
        if statement_timeout <= 0 or connect_timeout <= 0:
            raise StoreError(
                f"timeouts must be positive seconds, got statement_timeout={statement_timeout}, "
                f"connect_timeout={connect_timeout}"
            )
        self.dsn = dsn
        self.schema = schema
        self._where = safe_dsn(dsn)
        self._timeout_ms = int(statement_timeout * 1000)
        self._connect_timeout = connect_timeout
        self._prepare = prepare
        #: True when the store was opened on a hot standby (a read replica): searches
        #: work, writes raise StoreError, the service skips a search's own writes.
        self.read_only = False
        self._bootstrap()
        self._pool = ConnectionPool(
            dsn,
            min_size=min_connections,
            max_size=max(min_connections, max_connections),
            kwargs={
                "connect_timeout": max(1, int(connect_timeout)),
                "prepare_threshold": None,
                "autocommit": True,
            },
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
        conn.execute(_WORK_MEM_FLOOR)
        if self._prepare:
            # Applies to prepared statements only: with prepare_threshold=None (above)
            # psycopg prepares none, so today this plans plait_info_v1 (prepared by hand,
            # postgres_ahead) once; every other statement is planned each time it runs.
            conn.execute("SELECT set_config('plan_cache_mode', 'force_generic_plan', false)")
        register_vector(conn)

    def _connect_error(self, exc: psycopg.Error) -> StoreError:
        if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
            return StoreUnavailableError(f"cannot reach PostgreSQL at {self._where}: {exc}".strip())
        return StoreError(f"PostgreSQL at {self._where} refused the connection: {exc}".strip())

    def _bootstrap(self) -> None:
        """Check the server, ensure the schema and the vector extension, migrate.

        Creating the schema and the extension races between processes starting at
        once (``IF NOT EXISTS`` is not atomic), so both happen under an advisory lock.
        On a hot standby nothing is written: the schema is checked instead
        (:mod:`plait.stores.postgres_standby`).
        """
        try:
            conn = psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
            )
        except psycopg.Error as exc:
            raise self._connect_error(exc) from exc
        try:
            with conn:
                if in_recovery(conn):
                    self._session(conn)
                    check_standby(conn, schema=self.schema, where=self._where)
                    self.read_only = True
                    return
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
        except psycopg.errors.ReadOnlySqlTransaction as exc:  # default_transaction_read_only
            raise read_only_error(self._where, exc) from exc
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
    def _errors(self) -> Iterator[None]:
        """Driver errors become :class:`StoreError` (:class:`StoreConflictError` for a deadlock,
        serialization failure or lock timeout, :class:`StoreUnavailableError` when
        the server is gone)."""
        try:
            yield
        except PoolTimeout as exc:
            raise StoreUnavailableError(
                f"no PostgreSQL connection from {self._where} within {self._connect_timeout}s: {exc}"
            ) from exc
        except psycopg.errors.QueryCanceled as exc:
            raise StoreError(
                f"a PostgreSQL statement exceeded the {self._timeout_ms / 1000:g}s statement "
                f"timeout: {exc}"
            ) from exc
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected, psycopg.errors.TransactionRollback,
                psycopg.errors.LockNotAvailable) as exc:
            # 40P01 deadlock, 40001 serialization failure, 55P03 lock_timeout: the server is
            # there and rolled the transaction back for a conflict with another one.
            raise StoreConflictError(
                f"PostgreSQL at {self._where} aborted the transaction for a conflict with another "
                f"one ({exc.sqlstate}); nothing of it was written, retry it: {exc}"
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(f"lost PostgreSQL at {self._where}: {exc}") from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise read_only_error(self._where, exc) from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error: {exc}") from exc

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """A pooled connection in a transaction, committed on success."""
        with self._errors(), self._pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection]:
        """A pooled connection in autocommit mode: each statement its own snapshot."""
        with self._errors(), self._pool.connection() as conn:
            yield conn

    @staticmethod
    def _collection(conn: psycopg.Connection, name: str, *, lock: bool = False) -> tuple[int, int | None]:
        """(id, dimension) of a collection; ``lock`` takes its row lock for a write, and
        tells the revision trigger that this transaction holds it (``plait.locked_<id>``:
        :mod:`plait.stores.postgres_keys`)."""
        query = _LOCK if lock else "SELECT id, dimension FROM plait_collections WHERE name = %s"
        row = conn.execute(query, (name,)).fetchone()
        if row is None:
            raise NotFoundError(f"collection {name!r} does not exist")
        return int(row[0]), row[1]

    def ping(self) -> None:
        """Readiness: a pooled connection answers ``SELECT 1``."""
        with self._tx() as conn:
            conn.execute("SELECT 1")

    def identity(self) -> tuple[str, str, str, str]:
        """Which storage this store is, however its DSN is spelt (:func:`server_identity`)."""
        with self._read() as conn:
            return server_identity(conn)

    def close(self) -> None:
        self._pool.close()


def server_identity(conn: psycopg.Connection) -> tuple[str, str, str, str]:
    """Which storage a connection reaches: (the server cluster's ``system_identifier``,
    the database, the schema plait's tables are in, the OIDs of the database and of the
    collections table). A physical replica shares all of them with its primary: the same
    data. A server that denies ``pg_control_system()`` is named by its postmaster's start
    time (so is one where that function fails any other way), which a replica does not share: the OIDs then tell two databases apart, never
    one from its replica (:func:`plait.store_identity.postgres_sameness`)."""
    row = conn.execute(
        "SELECT current_database(), current_schema(), "
        "(SELECT oid FROM pg_database WHERE datname = current_database())::text || ':' "
        "|| coalesce(to_regclass('plait_collections')::oid::text, '')"
    ).fetchone()
    database, schema, catalog = row or ("", "", "")
    try:
        with conn.transaction():
            found = conn.execute("SELECT system_identifier::text FROM pg_control_system()").fetchone()
        cluster = f"system:{found[0]}" if found else ""
    except psycopg.errors.Error as exc:  # denied, or not there / not supported / timed out (review 8 #5)
        logger.debug("pg_control_system() failed (%s): the server is named by its start time", exc)
        found = conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()
        cluster = f"started:{found[0]}" if found else ""
    return cluster, str(database), str(schema), str(catalog)
