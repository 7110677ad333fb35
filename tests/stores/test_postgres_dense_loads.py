"""How often the PostgreSQL store loads a collection's dense matrix (review 5): a
matrix the budget cannot hold is loaded once, then searched in SQL (#1); concurrent
cold searches load it once (#4); a collection re-created with another dimension is
seen by the next vector search (#6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from plait.errors import StoreError
from plait.stores import postgres_search
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_dense import ID_OVERHEAD, DenseCache, matrix_bytes
from plait.stores.sqlite_snapshot import DenseMatrix
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, store_opener, throwaway_schema

DIM = 16
#: 55 characters; with the index, 56 or 57 per chunk id.
LONG = "a-fairly-long-chunk-identifier/docs/guide.md#section-"


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-loads-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_t_") as name:
        yield name


@pytest.fixture
def open_pg(pg_dsn: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    with store_opener(pg_dsn, schema) as make:
        yield make


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _fill(store: Any, n: int = 60, dim: int = DIM, prefix: str = "k", source: str = "src") -> np.ndarray:
    vectors = _unit(np.random.default_rng(3), n, dim)
    store.ensure_collection("c")
    store.set_embedder("c", provider="fake", model="m", dimension=dim)
    store.replace_source("c", source, "docs", [
        make_chunk(f"{prefix}{i}", f"text {i} word{i % 5}", source_id=source, vector=vectors[i].tolist(), ordinal=i)
        for i in range(n)
    ])
    return vectors


def _count_loads(monkeypatch: pytest.MonkeyPatch, *, slow: float = 0.0) -> list[int]:
    """Count the full matrix loads (each taking ``slow`` seconds longer)."""
    loads: list[int] = []
    real = postgres_search.load_full

    def counting(*a: Any, **k: Any) -> Any:
        loads.append(1)
        time.sleep(slow)  # every other thread arrives while this load runs
        return real(*a, **k)

    monkeypatch.setattr(postgres_search, "load_full", counting)
    return loads


def test_the_estimate_and_the_cached_size_are_the_same_bytes() -> None:
    ids = [f"{LONG}{i}" for i in range(60)]
    chars = 60 * len(LONG) + 10 + 50 * 2  # 'LONG0'..'LONG59'
    assert sum(map(len, ids)) == chars
    matrix = DenseMatrix(np.arange(60, dtype=np.int64), np.zeros((60, DIM), dtype=np.float32), ids)
    cache = DenseCache(budget=10**6)
    assert cache.estimate(60, DIM, 7) == matrix_bytes(60, DIM, 0) == 60 * (8 + 4 * DIM + ID_OVERHEAD)
    cache.keep(7, (1, 0), matrix)
    assert cache.bytes == matrix_bytes(60, DIM, chars) == 60 * (8 + 64 + 57) + chars
    assert cache.estimate(60, DIM, 7) == cache.bytes  # after a load: the real ids
    assert cache.estimate(30, DIM, 7) == 30 * (8 + 64 + 57) + chars // 2
    assert cache.estimate(60, DIM, 8) == 60 * (8 + 64 + 57)  # another collection: no ids known


def test_a_matrix_too_large_to_keep_is_loaded_once_then_searched_in_sql(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate without chunk ids fits, the loaded matrix (56-57 characters per id)
    does not: the first search ranks it in process, the next ones run the pgvector
    statement, and nothing is copied again (before: a full COPY on every search)."""
    budget = matrix_bytes(60, DIM, 0) + 1000  # 60 * 56 characters of ids do not fit
    pg = open_pg(dense_cache_bytes=budget)
    _fill(pg, prefix=LONG)
    sql_store = open_pg(dense_cache_bytes=0)  # always the pgvector statement
    loads = _count_loads(monkeypatch)
    queries = list(_unit(np.random.default_rng(9), 5))
    first = pg.vector_search("c", queries[0], limit=3)
    assert pg.last_vector_path == "exact" and len(loads) == 1 and pg._dense.bytes == 0
    for q in queries:
        got = pg.vector_search("c", q, limit=3)
        assert pg.last_vector_path in {"hnsw", "scan"}
        assert [i for i, _ in got] == [i for i, _ in sql_store.vector_search("c", q, limit=3)]
    assert [i for i, _ in first] == [i for i, _ in pg.vector_search("c", queries[0], limit=3)]
    _fill(pg, n=2, prefix=LONG + "x", source="more")  # a write moves the key: still too large
    pg.vector_search("c", queries[1], limit=3)
    assert len(loads) == 1 and pg.last_vector_path in {"hnsw", "scan"}


def _concurrently(search: Callable[[], Any], threads: int = 4) -> list[Any]:
    barrier = threading.Barrier(threads)
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            results.append(search())
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    started = [threading.Thread(target=run) for _ in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    assert not errors
    return results


def test_concurrent_cold_searches_load_the_matrix_once(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four threads find no matrix of the current key at once: one loads it, the other
    three wait and rank from the cache (before: each ran its own COPY of the collection)."""
    writer = open_pg()
    _fill(writer, n=400)
    reader = open_pg(max_connections=4, whole_bytes=0)  # a whole load would read the matrix
    q = _unit(np.random.default_rng(9), 1)[0]
    reader.lexical_search("c", ["text"], [], limit=1)  # learns the id and size; no matrix yet
    expected = writer.vector_search("c", q, limit=3)
    loads = _count_loads(monkeypatch, slow=0.5)
    results = _concurrently(lambda: reader.vector_search("c", q, limit=3))
    assert len(loads) == 1
    assert results == [expected] * 4 and reader._dense.bytes > 0
    writer.set_vectors("c", {"k1": -_unit(np.random.default_rng(1), 1)[0]})  # revision moves: a new load
    results = _concurrently(lambda: reader.vector_search("c", q, limit=3))
    assert len(loads) == 2 and len({tuple(r) for r in results}) == 1


def test_concurrent_searches_of_a_matrix_too_large_to_keep_load_it_once(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threads that waited for a load the cache refused run the pgvector statement."""
    pg = open_pg(dense_cache_bytes=matrix_bytes(60, DIM, 0) + 1000, max_connections=4, whole_bytes=0)
    _fill(pg, prefix=LONG)
    q = _unit(np.random.default_rng(9), 1)[0]
    pg.lexical_search("c", ["text"], [], limit=1)
    expected = [i for i, _ in open_pg(dense_cache_bytes=0).vector_search("c", q, limit=3)]
    loads = _count_loads(monkeypatch, slow=0.5)
    results = _concurrently(lambda: [i for i, _ in pg.vector_search("c", q, limit=3)])
    assert len(loads) == 1 and pg._dense.bytes == 0
    assert results == [expected] * 4


def test_recreated_with_another_dimension_is_seen_by_the_next_vector_search(
    open_pg: Callable[..., PostgresStore],
) -> None:
    """The remembered dimension is read again before a query is refused (before: the
    16-d dimension remembered refused a valid 8-d query)."""
    reader, writer = open_pg(), open_pg()
    _fill(writer)
    reader.vector_search("c", _unit(np.random.default_rng(1), 1)[0], limit=3)
    writer.delete_collection("c")
    vectors = _fill(writer, dim=8)
    q8 = _unit(np.random.default_rng(2), 1, 8)[0]
    got = reader.vector_search("c", q8, limit=3)
    best = int(np.argmax(vectors @ q8))
    assert len(got) == 3 and got[0][0] == f"k{best}"
    assert got == writer.vector_search("c", q8, limit=3)
    with pytest.raises(StoreError, match="query vector has 16 dimensions, collection 'c' holds 8-d vectors"):
        reader.vector_search("c", _unit(np.random.default_rng(1), 1)[0], limit=3)  # still refused when wrong
