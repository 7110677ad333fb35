"""Opening the PostgreSQL store on a hot standby (a streaming read replica).

A standby refuses every write, DDL included, so the bootstrap's ``CREATE SCHEMA IF
NOT EXISTS``, ``CREATE EXTENSION`` and migrations cannot run there. When
``pg_is_in_recovery()`` says the server is a standby, :func:`check_standby` only reads:
the schema must exist, pgvector must be installed and the schema version must be at
least the one this code needs, or it raises :class:`~plait.errors.StoreReadOnlyError`
asking to open the store on the primary first. The store then reports ``read_only``, and
the service skips the writes a search would otherwise make (usage metering, the ask gate's
calibration); a write asked for explicitly fails with :func:`read_only_error`
(:class:`~plait.errors.StoreReadOnlyError`, HTTP 409).
"""

from __future__ import annotations

import psycopg

from plait.errors import StoreReadOnlyError
from plait.stores.postgres_schema import LATEST_VERSION, schema_version

__all__ = ["check_standby", "in_recovery", "read_only_error"]


def in_recovery(conn: psycopg.Connection) -> bool:
    """True on a hot standby (the server is replaying WAL and refuses writes)."""
    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and row[0])


def check_standby(conn: psycopg.Connection, *, schema: str | None, where: str) -> int:
    """On a standby whose session (search path) is set: the plait schema version found,
    or :class:`StoreReadOnlyError` when the schema, pgvector or the latest migration is missing."""
    primary = (
        "open the store on the primary once (it creates and migrates the schema), wait for "
        "the replica to replay it, then open it here again"
    )
    if schema is not None:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if found is None:
            raise StoreReadOnlyError(
                f"PostgreSQL at {where} is a read-only hot standby and has no schema {schema!r}: {primary}"
            )
    vector = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    if vector is None:
        raise StoreReadOnlyError(
            f"PostgreSQL at {where} is a read-only hot standby without the 'vector' extension "
            f"(a standby cannot create it): {primary}"
        )
    version = schema_version(conn)
    if version < LATEST_VERSION:
        state = "no plait tables" if version == 0 else f"plait schema version {version}"
        raise StoreReadOnlyError(
            f"PostgreSQL at {where} is a read-only hot standby with {state}; this plait needs "
            f"version {LATEST_VERSION} and cannot migrate a standby: {primary}"
        )
    return version


def read_only_error(where: str, exc: psycopg.Error) -> StoreReadOnlyError:
    """The error for a write the server refused as read-only (SQLSTATE 25006)."""
    return StoreReadOnlyError(
        f"PostgreSQL at {where} is read-only (a hot standby / read replica, or "
        f"default_transaction_read_only): writes go to the primary; nothing of this one was "
        f"written ({exc.sqlstate}: {' '.join(str(exc).split())})"
    )
