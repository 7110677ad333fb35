"""Migration 10 (the change log) on a database holding data: it waits for a writer in
flight (so no write commits between the trigger functions' replacement and its commit
unlogged), plain reads of the collections go on meanwhile, and afterwards a write is
applied to a cached index incrementally with the embedded store's scores.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver`` started once
for this module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.analysis import analyse_query
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_schema import LATEST_VERSION, migrate
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema

TEXTS = (("a", "checkout card"), ("b", "refund ledger"), ("d", "card declined"))


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-migration10-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_m10_") as name:
        yield name


def _connect(dsn: str, schema: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
    return conn


def _version_9_with_data(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        assert migrate(conn, target=9) == 9
        row = conn.execute("INSERT INTO plait_collections (name, created_at) VALUES ('c', 'then') RETURNING id").fetchone()
        assert row is not None
        for j, (chunk_id, text) in enumerate(TEXTS):
            chunk = make_chunk(chunk_id, text, source_id="s")
            conn.execute(
                "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                "content_hash, origin, metadata, lex_exact, lex_stems) VALUES (%s, %s, 's', 'docs', %s, %s, %s, %s, '{}', %s, %s)",
                (row[0], chunk_id, j, text, chunk.chunk.content_hash, Jsonb({"kind": "file", "sourcePath": "d"}),
                 " ".join(chunk.exact), " ".join(chunk.stems)),
            )
        conn.execute("INSERT INTO plait_sources (collection_id, source_id, scope, indexed_at) VALUES (%s, 's', 'docs', 'then')", (row[0],))


def _search(store: Any, text: str) -> list[tuple[str, float]]:
    q = analyse_query(text)
    return list(store.lexical_search("c", q.exact, q.stems, limit=10))


def test_migration_10_waits_for_a_writer_while_reads_go_on(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """A writer holds the collection's row (``FOR UPDATE``, as the store's writers lock
    first) for 1.5 s: the migration does not commit before it (it takes EXCLUSIVE on the
    collections first), a reader with ``lock_timeout = 200ms`` reads the collections
    throughout, and once upgraded a cached index follows a write without a reload."""
    _version_9_with_data(pg_dsn, schema)
    holder = _connect(pg_dsn, schema)
    holder.execute("BEGIN")
    holder.execute("SELECT id FROM plait_collections WHERE name = 'c' FOR UPDATE")
    done = threading.Event()
    errors: list[BaseException] = []
    reads: list[int] = [0]
    migrated: list[float] = []

    def read() -> None:
        with _connect(pg_dsn, schema) as conn:
            conn.execute("SET lock_timeout = '200ms'")
            while not done.is_set():
                try:
                    row = conn.execute("SELECT n_chunks, generation FROM plait_collections WHERE name = 'c'").fetchone()
                    assert row == (3, 3)
                    reads[0] += 1
                except BaseException as error:
                    errors.append(error)
                    return
                time.sleep(0.01)

    def upgrade() -> None:
        try:
            with _connect(pg_dsn, schema) as conn:
                assert migrate(conn) == LATEST_VERSION
            migrated.append(time.perf_counter())
        except BaseException as error:
            errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    migrator = threading.Thread(target=upgrade)
    migrator.start()
    time.sleep(1.5)
    released = time.perf_counter()
    holder.execute("COMMIT")
    holder.close()
    migrator.join(30)
    done.set()
    reader.join(30)
    assert errors == []
    assert migrated and migrated[0] > released  # waited for the writer
    assert reads[0] >= 20
    store = PostgresStore(pg_dsn, schema=schema)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        lite.ensure_collection("c")
        lite.replace_source("c", "s", "docs", [make_chunk(i, t, source_id="s", ordinal=j) for j, (i, t) in enumerate(TEXTS)])
        with store._read() as conn:
            assert conn.execute("SELECT count(*) FROM plait_changes").fetchone() == (0,)  # nothing backfilled
        assert _search(store, "card") == _search(lite, "card")
        held = store._lexicon[store._known["c"][0]]
        for s in (store, lite):
            s.replace_source("c", "t", "docs", [make_chunk("e", "card card refund", source_id="t")])
        assert _search(store, "card") == _search(lite, "card")
        assert _search(store, "refund ledger") == _search(lite, "refund ledger")
        now = store._lexicon[store._known["c"][0]]
        assert now[0] == held[0] + 1 and now[1].carried_terms == 0 and now[1] is not held[1]
        assert now[1].cached_terms[0] >= 2  # "card" was carried and merged, not read again
    finally:
        store.close()
        lite.close()
