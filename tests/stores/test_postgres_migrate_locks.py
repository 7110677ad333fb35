"""A migration that waits for a table lock never queues searches behind it for long
(review 5, finding 5): each attempt runs under a short ``lock_timeout``, is rolled back
when the lock is not granted and tried again after a pause; past the last attempt the
error says so and nothing was applied.

Migration 11 is the case: its ``ALTER TABLE plait_collections`` needs ``ACCESS
EXCLUSIVE``, so it waits for a reader's open ``REPEATABLE READ`` transaction (a search's
matrix load), and every new read of ``plait_collections`` queued behind it until that
reader finished.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from plait.errors import StoreConflictError
from plait.stores.postgres_schema import migrate, schema_version
from plait.testing.pg import postgres_dsn, throwaway_schema


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-migrate-locks-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_ml_") as name:
        yield name


def _connect(dsn: str, schema: str, *, autocommit: bool = True) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
    conn.autocommit = autocommit
    return conn


def _at_version_10_with_an_open_reader(dsn: str, schema: str) -> psycopg.Connection:
    """A schema at version 10 holding one collection, and a reader in an open
    ``REPEATABLE READ`` transaction that has read ``plait_collections`` (ACCESS SHARE)."""
    with _connect(dsn, schema) as setup:
        setup.execute("CREATE EXTENSION IF NOT EXISTS vector")
        assert migrate(setup, target=10) == 10
        setup.execute("INSERT INTO plait_collections (name, created_at) VALUES ('c', 'then')")
    reader = _connect(dsn, schema, autocommit=False)
    reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    assert reader.execute("SELECT id FROM plait_collections WHERE name = 'c'").fetchone() is not None
    return reader


def test_searches_go_on_while_a_migration_waits_for_an_open_reader(pg_dsn: str, schema: str) -> None:
    """Reads of plait_collections every 20 ms for 1.5 s while migration 11 waits for the
    reader: each answers within its 3 s statement timeout, the slowest within about one
    lock_timeout (0.3 s; measured < 1 s); once the reader ends, the migration completes."""
    reader = _at_version_10_with_an_open_reader(pg_dsn, schema)
    outcome: list[object] = []

    def upgrade() -> None:
        try:
            with _connect(pg_dsn, schema) as conn:
                outcome.append(migrate(conn, target=11, lock_timeout=0.3, attempts=40))
        except BaseException as error:  # reported by the assertion below
            outcome.append(error)

    migrator = threading.Thread(target=upgrade)
    migrator.start()
    slowest = 0.0
    try:
        time.sleep(0.3)
        with _connect(pg_dsn, schema) as search:
            search.execute("SET statement_timeout = '3s'")
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                started = time.monotonic()
                row = search.execute("SELECT id, generation FROM plait_collections WHERE name = 'c'").fetchone()
                slowest = max(slowest, time.monotonic() - started)
                assert row is not None
                time.sleep(0.02)
        assert migrator.is_alive() and outcome == []  # still waiting for the reader meanwhile
    finally:
        reader.rollback()
        reader.close()
        migrator.join(30)
    assert outcome == [11]
    assert slowest < 1.0, slowest
    with _connect(pg_dsn, schema) as conn:
        assert schema_version(conn) == 11
        assert conn.execute("SELECT revision FROM plait_collections").fetchall() == [(0,)]


def test_a_migration_that_never_gets_its_lock_gives_up_and_applies_nothing(pg_dsn: str, schema: str) -> None:
    """3 attempts of 0.2 s (pauses 0.25 + 0.5 s): StoreConflictError naming the migration
    and the reader's session; the schema stays at version 10, without the column."""
    reader = _at_version_10_with_an_open_reader(pg_dsn, schema)
    pid = reader.info.backend_pid
    watchdog = threading.Timer(15.0, reader.rollback)  # a migrate that would wait forever returns
    watchdog.start()
    try:
        with _connect(pg_dsn, schema) as conn:
            started = time.monotonic()
            with pytest.raises(StoreConflictError, match=r"migration 11 could not take its table locks within 0\.2 s, 3 times") as caught:
                migrate(conn, target=11, lock_timeout=0.2, attempts=3)
            took = time.monotonic() - started
            assert f"pid {pid} (idle in transaction" in str(caught.value)
            assert schema_version(conn) == 10
            columns = conn.execute(
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'plait_collections' AND column_name = 'revision'", (schema,)
            ).fetchone()
            assert columns == (0,)
        assert 1.3 <= took < 5.0, took  # 3 × 0.2 s waiting + 0.75 s of pauses
    finally:
        watchdog.cancel()
        reader.rollback()
        reader.close()
