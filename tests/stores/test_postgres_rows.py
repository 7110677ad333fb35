"""The PostgreSQL store's chunk rows cached under the collection's (generation, revision):
another process's writes — new chunks, deletes, metadata / scope / ordinal / content
updated in place — are seen by the next ``get_chunks``; cached chunks cost no row read.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable, Iterator

import pytest

from plait.errors import NotFoundError
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_rows import CHUNK_OVERHEAD, RowCache, _deep_size
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, store_opener, throwaway_schema
from plait.testing.pg_wire import round_trips


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-rows-") as dsn:
        yield dsn


@pytest.fixture
def open_pg(pg_dsn: str) -> Iterator[Callable[..., PostgresStore]]:
    with throwaway_schema(pg_dsn, "plait_t_") as schema, store_opener(pg_dsn, schema) as make:
        yield make


def _write(store: PostgresStore, texts: dict[str, str], *, metadata: dict[str, object] | None = None) -> None:
    store.replace_source("c", "d", "docs", [
        make_chunk(cid, text, source_id="d", metadata=metadata, ordinal=i) for i, (cid, text) in enumerate(texts.items())
    ])


def _statements(run: Callable[[], object]) -> list[str]:
    """The statements ``run`` sends (from this thread: see :mod:`plait.testing.pg_wire`)."""
    with round_trips() as wire:
        run()
    return wire.statements


def test_cached_chunks_cost_only_the_key_check(open_pg: Callable[..., PostgresStore]) -> None:
    pg = open_pg()
    pg.ensure_collection("c")
    _write(pg, {"a": "alpha", "b": "beta", "c": "gamma"})
    first = pg.get_chunks("c", ["b", "a", "zz"])
    assert list(first) == ["b", "a"] and first["a"].content == "alpha"
    sent = _statements(lambda: pg.get_chunks("c", ["a", "b"]))
    assert len(sent) == 1 and "FROM plait_collections" in sent[0] and "c.content" not in sent[0]
    sent = _statements(lambda: pg.get_chunks("c", ["a", "c"]))  # c is new: only c is read
    assert len(sent) == 2
    assert pg.get_chunks("c", ["a", "c"])["c"].content == "gamma"


def test_another_process_s_writes_are_seen_by_the_next_read(open_pg: Callable[..., PostgresStore]) -> None:
    reader, writer = open_pg(), open_pg()
    writer.ensure_collection("c")
    _write(writer, {"a": "alpha", "b": "beta"}, metadata={"v": 1})
    assert reader.get_chunks("c", ["a", "b"])["a"].metadata == {"v": 1}
    # kept chunks (same id and hash) updated in place: metadata and ordinal (revision)
    writer.replace_source("c", "d", "docs", [
        make_chunk("b", "beta", source_id="d", metadata={"v": 2}, ordinal=0),
        make_chunk("a", "alpha", source_id="d", metadata={"v": 2}, ordinal=1),
    ])
    got = reader.get_chunks("c", ["a", "b"])
    assert got["a"].metadata == {"v": 2} and (got["a"].ordinal, got["b"].ordinal) == (1, 0)
    with writer._tx() as conn:  # raw SQL, in place
        conn.execute("UPDATE plait_chunks SET scope = 'adr', content = 'ALPHA' WHERE chunk_id = 'a'")
    got = reader.get_chunks("c", ["a"])
    assert (got["a"].scope, got["a"].content) == ("adr", "ALPHA")
    writer.delete_source("c", "d")  # deletes (generation)
    assert reader.get_chunks("c", ["a", "b"]) == {}
    writer.delete_collection("c")
    with pytest.raises(NotFoundError):
        reader.get_chunks("c", ["a"])
    writer.ensure_collection("c")  # re-created: another id, nothing of the old one served
    _write(writer, {"a": "new alpha"})
    assert reader.get_chunks("c", ["a"])["a"].content == "new alpha"


def test_the_row_cache_stays_within_its_budget() -> None:
    chunks = [make_chunk(f"k{i}", "x" * 100, source_id="d").chunk for i in range(10)]
    # the model, plus sys.getsizeof of 'k0' (51), 'd' (50), the content (149), 'h-' + content (151),
    # plus the origin and the empty metadata dict as held (review 5 #8)
    one = CHUNK_OVERHEAD + 51 + 50 + 149 + 151 + _deep_size(chunks[0].origin) + sys.getsizeof({})
    cache = RowCache(budget=3 * one)
    cache.add(1, (1, 0), chunks[:5])
    key, found = cache.lookup(1, [c.id for c in chunks])
    assert key == (1, 0) and cache.bytes == 3 * one
    assert set(found) == {"k2", "k3", "k4"}  # the least recently added went first
    cache.add(1, (0, 9), chunks[5:])  # an older generation's rows never replace newer ones
    assert cache.lookup(1, ["k9"])[1] == {}
    cache.add(1, (2, 0), chunks[9:])  # a newer key drops the collection's older rows
    assert cache.lookup(1, ["k4", "k9"]) == ((2, 0), {"k9": chunks[9]})


def test_metadata_and_origin_are_counted_as_held() -> None:
    """Each key and value of the metadata and the origin's fields count (a flat 1 KiB
    covered them before, whatever their size)."""
    small = make_chunk("k0", "x" * 100, source_id="d").chunk
    rich = make_chunk("k0", "x" * 100, source_id="d", metadata={"a": "xy", "n": [1, 2]}).chunk
    origin = small.origin
    assert _deep_size(origin) == sys.getsizeof(origin) + sys.getsizeof(origin.__dict__) + sum(
        sys.getsizeof(k) + _deep_size(v) for k, v in origin.__dict__.items()
    )
    assert _deep_size(["H"]) == sys.getsizeof(["H"]) + sys.getsizeof("H") == 56 + 8 + 50
    meta = rich.metadata
    expected = sys.getsizeof(meta) + 50 + 51 + 50 + sys.getsizeof(meta["n"]) + 2 * 28  # 'a' 'xy' 'n' [1, 2]
    assert _deep_size(meta) == expected
    one, two = RowCache(), RowCache()
    one.add(1, (1, 0), [small])
    two.add(1, (1, 0), [rich])
    assert two.bytes - one.bytes == expected - sys.getsizeof({})


def test_the_row_cache_budget_bounds_memory_with_rich_metadata() -> None:
    """1,000 chunks with about 55 kB of metadata each against a 2 MiB budget: the cache
    holds what fits in 2 MiB of memory (before: all 1,000 were kept, 68 MiB, counted as
    1.2 MiB)."""
    budget = 2 * 2**20
    big = {f"field{i}": "v" * 200 for i in range(250)}
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        cache = RowCache(budget=budget)
        chunks = [
            make_chunk(f"k{i}", "short text", source_id="d", metadata={k: v + str(i) for k, v in big.items()}).chunk
            for i in range(1000)
        ]
        cache.add(1, (1, 0), chunks)
        del chunks
        gc.collect()
        held = len(cache.lookup(1, [f"k{i}" for i in range(1000)])[1])
        traced = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert cache.bytes <= budget and 0 < held < 1000
    assert traced <= budget  # the count is an upper bound of what is held
    assert traced >= 0.7 * cache.bytes  # and not far above it
