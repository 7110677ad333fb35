"""Migration 14: an INSERT or DELETE of chunks from other SQL takes no lock on the
collection's row (review 7, finding 7: with migration 13 only an in-place UPDATE did not;
an operator's DELETE or INSERT still deadlocked with a store write, which locks that row
first). Its counts are queued in ``plait_counts``, a warm reader sees them at once, and
the next store write that inserts or deletes folds them into the columns.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from plait.stores.postgres import PostgresStore
from plait.stores.postgres_keys import CHUNKS, GENERATION_OF
from plait.stores.postgres_schema import LATEST_VERSION
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, store_opener, throwaway_schema

DIM = 16

#: An operator's statements: one deletes chunk k2, one inserts a copy of it as k9.
DELETE = "DELETE FROM plait_chunks WHERE chunk_id = 'k2'"
INSERT = (
    "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, content_hash, "
    "origin, metadata, vector, lex_exact, lex_stems) "
    "SELECT collection_id, 'k9', source_id, scope, 9, content, content_hash, origin, metadata, vector, "
    "lex_exact, lex_stems FROM plait_chunks WHERE chunk_id = 'k2'"
)


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-migration14-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_m14_") as name:
        yield name


@pytest.fixture
def open_pg(pg_dsn: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    with store_opener(pg_dsn, schema) as make:
        yield make


def _fill(store: PostgresStore, n: int = 6) -> np.ndarray:
    m = np.random.default_rng(3).standard_normal((n, DIM)).astype(np.float32)
    vectors = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    store.ensure_collection("c")
    store.set_embedder("c", provider="fake", model="m", dimension=DIM)
    store.replace_source("c", "src", "docs", [
        make_chunk(f"k{i}", f"text {i} word{i}", source_id="src", vector=vectors[i].tolist(), ordinal=i)
        for i in range(n)
    ])
    return vectors


def _raw(dsn: str, schema: str, *, autocommit: bool = False) -> psycopg.Connection:
    """An operator's session: its own transaction, plait's schema on the path."""
    conn = psycopg.connect(dsn, autocommit=autocommit)
    conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(schema)))
    conn.execute("SET lock_timeout = '20s'")
    return conn


def _counts(dsn: str, schema: str) -> tuple[int, int, int, int, int]:
    """(generation column, queued rows, generation as readers key by it, n_chunks column,
    chunks as readers count them) of collection 'c'."""
    with _raw(dsn, schema, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT p.generation, (SELECT count(*) FROM plait_counts q WHERE q.collection_id = p.id), "
            f"{GENERATION_OF}, p.n_chunks, {CHUNKS} FROM plait_collections p WHERE p.name = 'c'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4])


def _in_thread(run: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(run())
        except BaseException as error:  # reported by the test's assertions
            outcome.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


@pytest.mark.parametrize(("statement", "chunks"), [(DELETE, 5), (INSERT, 7)], ids=["delete", "insert"])
def test_a_raw_insert_or_delete_and_a_store_write_do_not_deadlock(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, schema: str, statement: str, chunks: int
) -> None:
    """The review's steps: an operator's transaction holds chunk k1; ``set_vectors`` locks
    the collection's row and waits for k1; the operator deletes k2 (or inserts k9). Before,
    the statistics trigger's bump (and, for the insert, the foreign-key check) waited for
    the collection's row: a deadlock, the operator's transaction aborted after
    deadlock_timeout (1 s). Now the statement returns at once and queues its counts."""
    assert LATEST_VERSION >= 14
    pg = open_pg()
    vectors = _fill(pg)
    generation, queued, key, column, _ = _counts(pg_dsn, schema)
    assert (queued, key, column) == (0, generation, 6)
    raw = _raw(pg_dsn, schema)
    try:
        raw.execute("SELECT 1 FROM plait_chunks WHERE chunk_id = 'k1' FOR UPDATE")
        writer, outcome = _in_thread(lambda: pg.set_vectors("c", {"k1": -vectors[1]}))
        time.sleep(1.0)
        assert writer.is_alive()  # waiting for k1
        started = time.monotonic()
        raw.execute(statement)
        took = time.monotonic() - started
        raw.commit()
    finally:
        raw.close()
    writer.join(30)
    assert outcome == [1]
    assert took < 0.5, took
    # set_vectors inserts and deletes nothing, so the operator's counts are still queued
    assert _counts(pg_dsn, schema) == (generation, 1, generation + 1, 6, chunks)
    info = pg.get_collection("c")
    assert info is not None and info.chunks == chunks


def test_queued_inserts_and_deletes_reach_a_warm_reader_and_are_folded_by_the_next_store_write(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, schema: str
) -> None:
    """A reader with warm lexical, dense and row caches; while another transaction holds
    the collection's row (as a store write in progress does), an operator deletes k2, then
    inserts a copy of k1 as k9: both are queued, and the reader sees each at once (its
    generation moved, and the change log has a gap there, so it reloads). A store write
    that inserts folds both queued rows: the generation column +3 (two queued, its own),
    n_chunks right, the queue empty."""
    pg = open_pg()
    vectors = _fill(pg)
    reader = open_pg()
    assert [cid for cid, _ in reader.lexical_search("c", ["word2"], [], limit=5)] == ["k2"]
    assert len(reader.lexical_search("c", ["text"], [], limit=10)) == 6
    assert [cid for cid, _ in reader.vector_search("c", vectors[2], limit=1)] == ["k2"]
    assert reader.get_chunks("c", ["k2"])["k2"].content == "text 2 word2"
    generation = _counts(pg_dsn, schema)[0]
    hold = _raw(pg_dsn, schema)
    hold.execute("SELECT 1 FROM plait_collections WHERE name = 'c' FOR NO KEY UPDATE")

    with _raw(pg_dsn, schema) as raw:
        raw.execute(DELETE)
        raw.commit()
    assert _counts(pg_dsn, schema) == (generation, 1, generation + 1, 6, 5)
    assert reader.lexical_search("c", ["word2"], [], limit=5) == []
    assert sorted(cid for cid, _ in reader.lexical_search("c", ["text"], [], limit=10)) == ["k0", "k1", "k3", "k4", "k5"]
    best = max((0, 1, 3, 4, 5), key=lambda i: float(vectors[i] @ vectors[2]))
    assert [cid for cid, _ in reader.vector_search("c", vectors[2], limit=1)] == [f"k{best}"]
    assert reader.get_chunks("c", ["k2"]) == {}
    info = reader.get_collection("c")
    assert info is not None and info.chunks == 5

    with _raw(pg_dsn, schema) as raw:
        raw.execute(INSERT.replace("WHERE chunk_id = 'k2'", "WHERE chunk_id = 'k1'"))
        raw.commit()
    assert _counts(pg_dsn, schema) == (generation, 2, generation + 2, 6, 6)
    hold.rollback()
    hold.close()
    assert [cid for cid, _ in reader.lexical_search("c", ["word1"], [], limit=5)] in (["k1", "k9"], ["k9", "k1"])
    assert reader.get_chunks("c", ["k9"])["k9"].content == "text 1 word1"
    info = reader.get_collection("c")
    assert info is not None and info.chunks == 6

    pg.replace_source("c", "other", "docs", [
        make_chunk("z0", "zebra", source_id="other", vector=vectors[0].tolist(), ordinal=0)
    ])
    assert _counts(pg_dsn, schema) == (generation + 3, 0, generation + 3, 7, 7)
    assert [cid for cid, _ in reader.lexical_search("c", ["zebra"], [], limit=5)] == ["z0"]
    assert len(reader.lexical_search("c", ["text"], [], limit=10)) == 6
    info = reader.get_collection("c")
    assert info is not None and info.chunks == 7
    # the folded columns are what counting the rows gives
    with _raw(pg_dsn, schema, autocommit=True) as conn:
        row = conn.execute(
            "SELECT p.n_chunks = (SELECT count(*) FROM plait_chunks c WHERE c.collection_id = p.id), "
            "p.len_exact_total = (SELECT sum(len_exact) FROM plait_chunks c WHERE c.collection_id = p.id), "
            "p.len_stems_total = (SELECT sum(len_stems) FROM plait_chunks c WHERE c.collection_id = p.id) "
            "FROM plait_collections p WHERE p.name = 'c'"
        ).fetchone()
    assert row == (True, True, True)


def test_deleting_a_collection_drops_its_queued_counts(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, schema: str
) -> None:
    pg = open_pg()
    _fill(pg)
    with _raw(pg_dsn, schema) as hold, _raw(pg_dsn, schema) as raw:
        hold.execute("SELECT 1 FROM plait_collections WHERE name = 'c' FOR NO KEY UPDATE")
        raw.execute(DELETE)
        raw.commit()
        hold.rollback()
    assert _counts(pg_dsn, schema)[1] == 1
    assert pg.delete_collection("c")
    with _raw(pg_dsn, schema, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM plait_counts").fetchone() == (0,)


def test_an_uncontended_raw_delete_bumps_the_row_and_logs_its_change(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, schema: str
) -> None:
    """No store write in progress: the operator's DELETE takes the collection's row without
    waiting and bumps it as before (nothing queued), and logs its change, so a warm
    reader's index advances by the change log instead of reloading."""
    pg = open_pg()
    _fill(pg)
    reader = open_pg()
    assert len(reader.lexical_search("c", ["text"], [], limit=10)) == 6
    generation = _counts(pg_dsn, schema)[0]
    with _raw(pg_dsn, schema) as raw:
        raw.execute(DELETE)
        raw.commit()
    assert _counts(pg_dsn, schema) == (generation + 1, 0, generation + 1, 5, 5)
    with _raw(pg_dsn, schema, autocommit=True) as conn:
        logged = conn.execute("SELECT generation, cardinality(removed) FROM plait_changes ORDER BY generation DESC LIMIT 1").fetchone()
    assert logged == (generation + 1, 1)
    assert sorted(cid for cid, _ in reader.lexical_search("c", ["text"], [], limit=10)) == ["k0", "k1", "k3", "k4", "k5"]
