"""Real stores for the copy / export / backup tests: SQLite, PostgreSQL (pgserver), milvus-lite."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from plait.stores.base import Store
from plait.testing.pg import postgres_dsn

StoreFactory = Callable[[str], Store]


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-transfer-") as dsn:
        yield dsn


@pytest.fixture
def make_store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """``make_store(kind)`` opens a fresh, empty store of that kind; all closed afterwards."""
    opened: list[Store] = []
    schemas: list[str] = []

    def make(kind: str) -> Store:
        name = uuid.uuid4().hex[:10]
        if kind == "sqlite":
            from plait.stores.sqlite import SQLiteStore

            store: Store = SQLiteStore(tmp_path / f"{name}.db")
        elif kind == "postgres":
            from plait.stores.postgres import PostgresStore

            dsn = request.getfixturevalue("pg_dsn")
            schemas.append(f"plait_c_{name}")
            store = PostgresStore(dsn, schema=schemas[-1])
        elif kind == "milvus":
            pytest.importorskip("milvus_lite")
            from plait.stores.milvus import MilvusStore

            store = MilvusStore(str(tmp_path / "milvus.db"), prefix=f"t{name}")
        else:  # pragma: no cover
            raise ValueError(kind)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
    if schemas:
        with psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=True) as conn:
            for schema in schemas:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
