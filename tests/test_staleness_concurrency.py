"""``chunkChanges`` (plait.staleness) counted by writers at once: two index runs ending
together on one collection must both count. The counter was read, then written (a
read-modify-write: the later write dropped the earlier run's chunks); it is now one
atomic store step (``Store.increment_settings``). Each writer has its own store (its own
connection, as two processes would), on SQLite and on a real PostgreSQL (pgserver)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from plait.collection_settings import read_settings, write_settings
from plait.staleness import record_changes
from plait.stores.base import Store
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.pg import postgres_dsn

WRITERS = 4
RUNS = 25  # each writer records 25 runs of 3 chunks: 4 * 25 * 3 = 300 in all


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-counter-") as dsn:
        yield dsn


def _count_at_once(open_store: Callable[[], Store]) -> tuple[int, list[int]]:
    stores = [open_store() for _ in range(WRITERS)]
    start = threading.Barrier(WRITERS)
    seen: list[int] = []
    errors: list[BaseException] = []

    def writer(store: Store) -> None:
        try:
            start.wait()
            for _ in range(RUNS):
                seen.append(record_changes(store, "kb", 3))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert not errors, errors
        return read_settings(stores[0], "kb").chunk_changes, seen
    finally:
        for s in stores:
            s.close()


def test_concurrent_runs_all_count_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    first = SQLiteStore(path)
    first.ensure_collection("kb")
    write_settings(first, "kb", chunk_changes=10)
    first.close()
    total, seen = _count_at_once(lambda: SQLiteStore(path))
    assert total == 10 + WRITERS * RUNS * 3 == 310
    # every run saw the counter it left: 100 distinct values 13, 16, ..., 310
    assert sorted(seen) == list(range(13, 311, 3))


def test_concurrent_runs_all_count_on_postgres(pg_dsn: str) -> None:
    schema = f"plait_t_{uuid.uuid4().hex[:12]}"
    try:
        first = PostgresStore(pg_dsn, schema=schema)
        first.ensure_collection("kb")
        first.close()
        total, seen = _count_at_once(lambda: PostgresStore(pg_dsn, schema=schema))
        assert total == WRITERS * RUNS * 3 == 300
        assert sorted(seen) == list(range(3, 301, 3))
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_increment_keeps_other_settings_and_counts_from_a_missing_or_odd_value(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    store.ensure_collection("kb")
    assert record_changes(store, "kb", 0) == 0  # nothing written for an unchanged run
    assert store.get_settings("kb") == {}
    store.update_settings("kb", {"embedder": "fake", "chunkChanges": "odd"})
    assert record_changes(store, "kb", 5) == 5
    assert store.get_settings("kb") == {"embedder": "fake", "chunkChanges": 5, "settingsVersion": 1}
    store.close()
