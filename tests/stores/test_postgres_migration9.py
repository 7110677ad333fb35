"""Migration 9 (the collections' generation) on a database holding data: plain reads of
``plait_collections`` go on while its index is built, and raw SQL cannot change what the
in-process lexical cache holds without moving the generation (an in-place update of a
cached column or a ``TRUNCATE`` is refused).

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver`` started once
for this module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.analysis import analyse_query
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_schema import LATEST_VERSION, migrate
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-migration9-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_m9_") as name:
        yield name


def _connect(dsn: str, schema: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
    return conn


def _version_8_with_data(dsn: str, schema: str) -> None:
    """A schema at version 8 with one collection of three chunks (inserted by raw SQL, as
    version 8's code did: its triggers keep the postings and totals)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        assert migrate(conn, target=8) == 8
        row = conn.execute("INSERT INTO plait_collections (name, created_at) VALUES ('c', 'then') RETURNING id").fetchone()
        assert row is not None
        for j, (chunk_id, text) in enumerate((("a", "checkout card"), ("b", "refund ledger"), ("d", "card declined"))):
            chunk = make_chunk(chunk_id, text, source_id="s")
            conn.execute(
                "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                "content_hash, origin, metadata, lex_exact, lex_stems) VALUES (%s, %s, 's', 'docs', %s, %s, %s, %s, '{}', %s, %s)",
                (row[0], chunk_id, j, text, chunk.chunk.content_hash, Jsonb({"kind": "file", "sourcePath": "d"}),
                 " ".join(chunk.exact), " ".join(chunk.stems)),
            )
        conn.execute("INSERT INTO plait_sources (collection_id, source_id, scope, indexed_at) VALUES (%s, 's', 'docs', 'then')", (row[0],))


def test_reads_of_collections_go_on_while_migration_9_builds_its_index(pg_dsn: str, schema: str) -> None:
    """A v8 database with data is upgraded while a writer holds ``plait_chunks`` for 1.5 s
    (so the index build waits, as a long build over millions of chunks would) and another
    connection with ``lock_timeout = 200ms`` reads ``plait_collections`` in a loop: no read
    times out (before the fix the ``ALTER TABLE`` held ACCESS EXCLUSIVE on the collections
    during the build: every read waited), and the upgraded data is searchable."""
    _version_8_with_data(pg_dsn, schema)
    holder = _connect(pg_dsn, schema)
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE plait_chunks IN ROW EXCLUSIVE MODE")  # an uncommitted writer's lock
    done = threading.Event()
    errors: list[BaseException] = []
    reads_during: list[int] = [0]

    def read() -> None:
        with _connect(pg_dsn, schema) as conn:
            conn.execute("SET lock_timeout = '200ms'")
            while not done.is_set():
                try:
                    row = conn.execute("SELECT id, name, n_chunks FROM plait_collections WHERE name = 'c'").fetchone()
                    assert row is not None and row[2] == 3
                    reads_during[0] += 1
                except BaseException as error:
                    errors.append(error)
                    return
                time.sleep(0.01)

    def upgrade() -> None:
        try:
            with _connect(pg_dsn, schema) as conn:
                assert migrate(conn) == LATEST_VERSION
        except BaseException as error:
            errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.2)
    migrator = threading.Thread(target=upgrade)
    migrator.start()
    time.sleep(1.5)
    before_release = reads_during[0]
    holder.execute("COMMIT")
    holder.close()
    migrator.join(30)
    done.set()
    reader.join(30)
    assert errors == []
    assert before_release >= 20  # 1.7 s of reads every ~10 ms, the migration waiting meanwhile
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        with store._read() as conn:
            assert conn.execute("SELECT max(version) FROM plait_schema_version").fetchone() == (LATEST_VERSION,)
            assert conn.execute("SELECT generation FROM plait_collections").fetchall() == [(0,)]
        q = analyse_query("card")
        assert [cid for cid, _ in store.lexical_search("c", q.exact, q.stems, limit=10)] == ["a", "d"]
    finally:
        store.close()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE plait_chunks SET chunk_id = 'renamed' WHERE chunk_id = 'a'",
        "UPDATE plait_chunks SET collection_id = collection_id",
        "UPDATE plait_chunks SET lex_stems = 'x'",
        "TRUNCATE plait_chunks",
        "TRUNCATE plait_postings",
        "TRUNCATE plait_lex_terms",
        "TRUNCATE plait_collections CASCADE",
    ],
)
def test_raw_sql_cannot_change_what_the_lexical_cache_holds_behind_the_generation(
    pg_dsn: str, schema: str, statement: str
) -> None:
    """An in-place update of a column the cache holds (``chunk_id``, ``collection_id``, the
    lexical fields) and a TRUNCATE of the chunks, postings or terms fire no generation
    bump, so they are refused: the row stays, the generation and a warm search's
    results too."""
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        store.ensure_collection("c")
        store.replace_source("c", "s", "docs", [make_chunk("a", "checkout card", source_id="s"),
                                                 make_chunk("b", "card declined twice", source_id="s")])
        q = analyse_query("card")
        warm = store.lexical_search("c", q.exact, q.stems, limit=10)
        assert [cid for cid, _ in warm] == ["a", "b"]
        with _connect(pg_dsn, schema) as conn:
            generation = conn.execute("SELECT generation FROM plait_collections").fetchone()
            with pytest.raises(psycopg.errors.RaiseException, match="never updated in place|is refused"):
                conn.execute(statement)
            assert conn.execute("SELECT generation FROM plait_collections").fetchone() == generation
            assert conn.execute("SELECT chunk_id FROM plait_chunks ORDER BY id").fetchall() == [("a",), ("b",)]
            assert conn.execute("SELECT count(*) FROM plait_postings").fetchone() == (10,)  # (2 + 3 words) x 2 fields
        assert store.lexical_search("c", q.exact, q.stems, limit=10) == warm
    finally:
        store.close()
