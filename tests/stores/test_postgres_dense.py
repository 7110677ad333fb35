"""The PostgreSQL store's dense arm in process below the ANN threshold (issue 26).

Below ``ann_threshold`` chunks the store ranks the collection's cached float32 matrix
with the SQLite store's class, so ids *and* scores equal the SQLite store's bit for bit;
the matrix is keyed by the collection's (generation, revision), so another process's
insert, delete or in-place vector update is seen by the next search. At or above the
threshold the pgvector HNSW statement runs as before.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from plait.errors import StoreError
from plait.stores.base import Filters, SourceWrite
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_dense import DenseCache, advance_matrix
from plait.stores.postgres_keys import REVISION
from plait.stores.sqlite import SQLiteStore
from plait.stores.sqlite_snapshot import DenseMatrix
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, store_opener, throwaway_schema
from plait.testing.pg_wire import round_trips

DIM = 16


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-dense-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_t_") as name:
        yield name


@pytest.fixture
def open_pg(pg_dsn: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    with store_opener(pg_dsn, schema) as make:
        yield make


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _fill(store: Any, n: int = 60, seed: int = 3) -> np.ndarray:
    """``n`` chunks in 3 sources (scope 'adr' for one, metadata ``lang`` alternating),
    unit vectors; two pairs of exact duplicates (ties broken by row id)."""
    vectors = _unit(np.random.default_rng(seed), n)
    vectors[7] = vectors[2]
    vectors[40] = vectors[11]
    store.ensure_collection("c")
    store.set_embedder("c", provider="fake", model="m", dimension=DIM)
    for s in range(3):
        ids = range(s, n, 3)
        store.replace_source("c", f"src{s}", "adr" if s == 2 else "docs", [
            make_chunk(f"k{i}", f"text {i}", source_id=f"src{s}", scope="adr" if s == 2 else "docs",
                       vector=vectors[i].tolist(), metadata={"lang": "en" if i % 2 else "de"}, ordinal=i)
            for i in ids
        ])
    return vectors


def _queries() -> list[np.ndarray]:
    return list(_unit(np.random.default_rng(11), 5))


def test_dense_top_k_equals_the_sqlite_store_bit_for_bit(open_pg: Callable[..., PostgresStore], tmp_path: Path) -> None:
    pg = open_pg()
    lite = SQLiteStore(tmp_path / "ref.db")
    vectors = _fill(pg)
    _fill(lite)
    queries = [*_queries(), vectors[2]]  # the last one ties k7 (source 1, written first) with k2
    for query in queries:
        for filters in (None, Filters(scopes=("adr",)), Filters(metadata={"lang": "en"})):
            for limit in (1, 5, None):
                want = lite.vector_search("c", query, limit=limit, filters=filters)
                got = pg.vector_search("c", query, limit=limit, filters=filters)
                assert pg.last_vector_path == "exact" and lite.last_vector_path == "exact"
                assert got == want, (limit, filters)  # ids and float scores, exactly
    tied = pg.vector_search("c", vectors[2], limit=2)
    assert [i for i, _ in tied] == ["k7", "k2"] and tied[0][1] == tied[1][1]
    adr = pg.vector_search("c", queries[0], limit=None, filters=Filters(scopes=("adr",)))
    assert sorted(i for i, _ in adr) == sorted(f"k{i}" for i in range(2, 60, 3))
    lite.close()


def test_a_warm_dense_arm_sends_no_dense_sql(open_pg: Callable[..., PostgresStore]) -> None:
    pg = open_pg()
    _fill(pg)
    query = _queries()[0]
    pg.vector_search("c", query, limit=5)
    with round_trips() as wire:
        pg.vector_search("c", query, limit=5)
    sent = wire.statements
    assert len(sent) == 1 and "FROM plait_collections" in sent[0], sent


def test_another_process_s_writes_are_seen_by_the_next_search(open_pg: Callable[..., PostgresStore]) -> None:
    """A vector updated in place (no insert, no delete: the generation stays) moves the
    revision; a new chunk moves the generation. Both reach a warm matrix."""
    reader, writer = open_pg(), open_pg()
    vectors = _fill(writer)
    target = vectors[5]
    assert [i for i, _ in reader.vector_search("c", target, limit=1)] == ["k5"]
    # k9's vector becomes k5's: the reader must see the tie (k9 of source 0 has the
    # smaller row id)
    assert writer.set_vectors("c", {"k9": target}) == 1
    got = reader.vector_search("c", target, limit=2)
    assert [i for i, _ in got] == ["k9", "k5"] and got[0][1] == got[1][1]
    # a kept chunk re-written with a new vector (replace_source's update in place)
    writer.replace_source("c", "src0", "docs", [
        make_chunk(f"k{i}", f"text {i}", source_id="src0", vector=(target if i == 9 else -target if i == 3 else vectors[i]).tolist(),
                   metadata={"lang": "en" if i % 2 else "de"}, ordinal=i)
        for i in range(0, 60, 3)
    ])
    worst = reader.vector_search("c", target, limit=None)
    assert worst[-1][0] == "k3"
    # a new chunk (generation)
    writer.replace_source("c", "new", "docs", [make_chunk("fresh", "x", source_id="new", vector=target.tolist())])
    assert [i for i, _ in reader.vector_search("c", target, limit=3)] == ["k9", "k5", "fresh"]
    writer.delete_source("c", "new")
    assert "fresh" not in {i for i, _ in reader.vector_search("c", target, limit=None)}
    assert reader.last_vector_path == "exact"


def test_the_revision_moves_once_per_transaction_and_not_for_unchanged_rows(open_pg: Callable[..., PostgresStore]) -> None:
    pg = open_pg()
    vectors = _fill(pg)

    def revision() -> int:
        with pg._read() as conn:
            # the column plus the revisions other SQL logged (migration 13)
            row = conn.execute(f"SELECT {REVISION} FROM plait_collections p WHERE p.name = 'c'").fetchone()
        assert row is not None
        return int(row[0])

    before = revision()
    pg.set_vectors("c", {f"k{i}": -vectors[i] for i in range(20)})  # 20 rows, one transaction
    assert revision() == before + 1
    pg.set_vectors("c", {f"k{i}": -vectors[i] for i in range(20)})  # the same values again
    assert revision() == before + 1
    with pg._tx() as conn:  # raw SQL, metadata only
        conn.execute("UPDATE plait_chunks SET metadata = '{\"lang\": \"fr\"}' WHERE chunk_id = 'k1'")
    assert revision() == before + 2


def test_at_or_above_the_threshold_the_hnsw_statement_runs(open_pg: Callable[..., PostgresStore], tmp_path: Path) -> None:
    small = open_pg(ann_threshold=61)
    _fill(small)  # 60 chunks: below
    query = _queries()[1]
    exact = small.vector_search("c", query, limit=5)
    assert small.last_vector_path == "exact"
    big = open_pg(ann_threshold=60)  # 60 chunks: at the threshold
    approx = big.vector_search("c", query, limit=5)
    assert big.last_vector_path == "hnsw"
    assert [i for i, _ in approx] == [i for i, _ in exact]  # HNSW finds these 60 exactly
    assert big.vector_search("c", query, limit=5, filters=Filters(scopes=("adr",)))
    assert big.last_vector_path == "scan"
    assert big._dense.bytes == 0


def test_a_matrix_past_the_budget_is_searched_in_sql(open_pg: Callable[..., PostgresStore]) -> None:
    pg = open_pg(dense_cache_bytes=60 * (4 * DIM + 8) - 1)  # one byte short of 60 chunks
    _fill(pg)
    pg.vector_search("c", _queries()[0], limit=5)
    assert pg.last_vector_path == "hnsw" and pg._dense.bytes == 0


def test_the_dense_cache_stays_within_its_budget_least_recently_used_first() -> None:
    def matrix(n: int) -> DenseMatrix:
        return DenseMatrix(np.arange(n, dtype=np.int64), np.zeros((n, 4), dtype=np.float32), [f"c{i}" for i in range(n)])

    one = matrix(10)
    cache = DenseCache(budget=3 * 1000, max_entries=2)
    cache.keep(1, (1, 0), one)
    size = cache.bytes
    assert 10 * (16 + 8) < size < 1000
    cache.keep(2, (1, 0), matrix(10))
    cache.get(1)  # 1 used last
    cache.keep(3, (1, 0), matrix(10))  # two entries at most: 2 goes
    assert cache.get(2) is None and cache.get(1) is not None and cache.get(3) is not None
    cache.keep(1, (0, 5), matrix(10))  # an older generation never replaces a newer one
    found = cache.get(1)
    assert found is not None and found[1] is one
    cache.keep(4, (1, 0), matrix(200))  # alone past the budget: not kept, nothing evicted
    assert cache.get(4) is None and cache.bytes == 2 * size
    cache.drop(1)
    assert cache.bytes == size


def test_the_matrix_is_loaded_in_one_snapshot_with_its_key(open_pg: Callable[..., PostgresStore]) -> None:
    """A search without a current matrix: the check's pipeline, then one REPEATABLE READ
    transaction reading the key, the row and chunk ids (one pipeline) and the vectors
    (``COPY``, binary)."""
    pg = open_pg()
    _fill(pg)
    pg.vector_search("c", _queries()[0], limit=3)  # learns the collection's id and size
    pg._dense.drop(pg._known["c"][0])
    with round_trips() as wire:
        got = pg.vector_search("c", _queries()[0], limit=3)
    pipelines = wire.trips
    assert len(pipelines) == 3, pipelines
    assert len(pipelines[0]) == 1 and "plait_collections" in pipelines[0][0]
    assert "REPEATABLE READ" in pipelines[1][0] and "revision" in pipelines[1][1] and "int8send" in pipelines[1][2]
    assert pipelines[2][0].startswith("COPY (SELECT c.id, c.vector") and "FORMAT binary" in pipelines[2][0]
    assert got == pg.vector_search("c", _queries()[0], limit=3) and len(got) == 3


def test_source_write_keeps_vectors_of_kept_chunks(open_pg: Callable[..., PostgresStore]) -> None:
    """A re-write without vectors keeps the stored ones: no revision, same matrix answers."""
    pg = open_pg()
    vectors = _fill(pg)
    first = pg.vector_search("c", vectors[4], limit=3)
    pg.replace_sources("c", [SourceWrite(source_id="src1", scope="docs", chunks=[
        make_chunk(f"k{i}", f"text {i}", source_id="src1", metadata={"lang": "en" if i % 2 else "de"}, ordinal=i)
        for i in range(1, 60, 3)
    ])])
    assert pg.vector_search("c", vectors[4], limit=3) == first


def test_vectors_of_mixed_dimensions_are_a_store_error(open_pg: Callable[..., PostgresStore]) -> None:
    """No recorded dimension: the first vector's decides; another length is refused, as
    pgvector's ``<=>`` refuses it (no row silently misread)."""
    pg = open_pg()
    pg.ensure_collection("c")
    pg.replace_source("c", "d", "docs", [
        make_chunk("a", "x", source_id="d", vector=[1.0, 0.0, 0.0]),
        make_chunk("b", "y", source_id="d", vector=[1.0, 0.0, 0.0, 0.0], ordinal=1),
    ])
    with pytest.raises(StoreError, match="dimensions"):
        pg.vector_search("c", np.array([1.0, 0.0, 0.0], dtype=np.float32), limit=2)


def _same_matrix(a: DenseMatrix, b: DenseMatrix) -> None:
    assert np.array_equal(a.rowids, b.rowids) and a.chunk_ids == b.chunk_ids
    assert a.matrix.dtype == b.matrix.dtype == np.float32 and np.array_equal(a.matrix, b.matrix)


def test_after_inserts_and_deletes_the_matrix_follows_the_change_log(open_pg: Callable[..., PostgresStore]) -> None:
    """Another store adds a source and deletes one: the reader's warm matrix is advanced
    from the change log (only the added vectors copied), equal to a fresh full load."""
    reader, writer = open_pg(), open_pg()
    vectors = _fill(writer)
    query = _queries()[2]
    reader.vector_search("c", query, limit=5)
    assert reader.last_matrix_load == "full"
    extra = _unit(np.random.default_rng(99), 4)
    writer.replace_source("c", "more", "docs", [
        make_chunk(f"m{i}", f"more {i}", source_id="more", vector=extra[i].tolist(), ordinal=i) for i in range(4)
    ])
    writer.delete_source("c", "src1")
    copies: list[str] = []
    copy = psycopg.Cursor.copy

    def spy_copy(self: psycopg.Cursor[Any], statement: Any, *a: Any, **k: Any) -> Any:
        copies.append(statement.as_string(self.connection))
        return copy(self, statement, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(psycopg.Cursor, "copy", spy_copy)
        got = reader.vector_search("c", extra[1], limit=None)
    assert reader.last_matrix_load == "changes"
    assert len(copies) == 1 and "c.id = ANY('{61,62,63,64}'" in copies[0]  # the added rows only
    fresh = open_pg()
    want = fresh.vector_search("c", extra[1], limit=None)
    assert fresh.last_matrix_load == "full"
    assert got == want and got[0][0] == "m1" and not {i for i, _ in got} & {f"k{i}" for i in range(1, 60, 3)}
    assert len(got) == 60 - 20 + 4
    held, fresh_held = reader._dense.get(reader._known["c"][0]), fresh._dense.get(fresh._known["c"][0])
    assert held is not None and fresh_held is not None and held[0] == fresh_held[0]
    _same_matrix(held[1], fresh_held[1])
    # only deletes: nothing copied
    writer.delete_source("c", "more")
    with pytest.MonkeyPatch.context() as mp:
        copies.clear()
        mp.setattr(psycopg.Cursor, "copy", spy_copy)
        after = reader.vector_search("c", vectors[0], limit=3, filters=Filters(scopes=("adr",)))
    assert reader.last_matrix_load == "changes" and copies == []
    assert [i for i, _ in after] == [i for i, _ in open_pg().vector_search("c", vectors[0], limit=3, filters=Filters(scopes=("adr",)))]


def test_an_update_in_place_or_a_disabled_log_loads_in_full(open_pg: Callable[..., PostgresStore]) -> None:
    reader, writer = open_pg(), open_pg()
    vectors = _fill(writer)
    reader.vector_search("c", vectors[0], limit=3)
    writer.replace_source("c", "x", "docs", [make_chunk("x", "x", source_id="x", vector=vectors[0].tolist())])
    writer.set_vectors("c", {"k0": -vectors[0]})  # the revision moves too: not in the log
    got = reader.vector_search("c", vectors[0], limit=2)
    assert reader.last_matrix_load == "full" and [i for i, _ in got] == ["x", got[1][0]] and got[1][0] != "k0"
    off = open_pg(incremental_share=0.0)
    off.vector_search("c", vectors[0], limit=3)
    writer.delete_source("c", "x")
    off.vector_search("c", vectors[0], limit=3)
    assert off.last_matrix_load == "full"


def _copy_bytes(ids: list[int], vectors: np.ndarray) -> bytes:
    """What ``COPY (SELECT id, vector …) TO STDOUT (FORMAT binary)`` sends for these rows."""
    d = vectors.shape[1]
    row = np.dtype([("f", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"), ("dim", ">i2"), ("u", ">i2"), ("v", ">f4", (d,))])
    rows = np.zeros(len(ids), dtype=row)
    rows["f"], rows["l1"], rows["id"], rows["l2"], rows["dim"], rows["v"] = 2, 8, ids, 4 + 4 * d, d, vectors
    return b"PGCOPY\n\xff\r\n\x00" + bytes(8) + rows.tobytes() + b"\xff\xff"


def test_advancing_keeps_row_id_order_when_added_rows_land_between_kept_ones() -> None:
    old = DenseMatrix(np.array([1, 2, 5], dtype=np.int64), np.eye(3, 4, dtype=np.float32), ["a", "b", "e"])
    added = np.array([[0, 0, 0, 1], [0, 1, 1, 0]], dtype=np.float32)
    row = (np.array([3, 7], dtype=">i8").tobytes(), b"c\x00g")
    got = advance_matrix(old, np.array([2]), row, _copy_bytes([7, 3], added[::-1]), 4, 4)
    assert got is not None
    assert got.rowids.tolist() == [1, 3, 5, 7] and got.chunk_ids == ["a", "c", "e", "g"]
    assert got.matrix.tolist() == [[1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 1, 0]]
    assert advance_matrix(old, np.array([2]), row, _copy_bytes([7, 3], added[::-1]), 4, 5) is None  # 5 expected
    assert advance_matrix(old, np.array([2]), (row[0][:8], b"c"), _copy_bytes([7, 3], added[::-1]), 4, 4) is None
