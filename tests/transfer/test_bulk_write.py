"""Issue 27 (copy throughput): the PostgreSQL write path inserts a batch's chunk rows with
one statement, so the statistics triggers run once per batch, not once per chunk; and
``replace_sources`` leaves every source exactly as ``replace_source`` would, atomically."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from plait.errors import StoreError
from plait.stores.base import BulkStore, ReplaceCounts, SourceWrite, StoredChunk
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_write import build_hnsw, lexical
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk

from .conftest import StoreFactory

_COUNTER = """
CREATE TABLE insert_statements (n integer NOT NULL);
INSERT INTO insert_statements VALUES (0);
CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE insert_statements SET n = n + 1; RETURN NULL; END $$;
CREATE TRIGGER count_inserts AFTER INSERT ON plait_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement();
"""


def _counted(store: PostgresStore) -> int:
    with store._tx() as conn:
        row = conn.execute("SELECT n FROM insert_statements").fetchone()
    assert row is not None
    return int(row[0])


def _source(name: str, n: int, *, words: str = "alpha beta") -> list[StoredChunk]:
    return [
        make_chunk(f"{name}-{i}", f"{words} {name} part{i}", source_id=name, vector=[1.0, float(i)], ordinal=i)
        for i in range(n)
    ]


def test_a_source_of_40_chunks_is_one_insert_statement(make_store: StoreFactory) -> None:
    pg = make_store("postgres")
    assert isinstance(pg, PostgresStore) and isinstance(pg, BulkStore)
    pg.ensure_collection("c")
    with pg._tx() as conn:
        conn.execute(_COUNTER)
    pg.replace_source("c", "a.md", "docs", _source("a.md", 40))
    assert _counted(pg) == 1  # was 40: executemany ran one INSERT (one trigger run) per chunk
    pg.replace_sources("c", [SourceWrite("b.md", "docs", _source("b.md", 30)), SourceWrite("c.md", "docs", _source("c.md", 30))])
    assert _counted(pg) == 2  # both sources: one more statement
    info = pg.get_collection("c")
    assert info is not None and (info.chunks, info.sources) == (100, 3)
    # the triggers saw every row: "part7" is in 3 chunks (a.md-7, b.md-7, c.md-7)
    hits = pg.lexical_search("c", ["part7"], ["part7"], limit=None)
    assert sorted(cid for cid, _ in hits) == ["a.md-7", "b.md-7", "c.md-7"]


def test_replace_sources_equals_replace_source_one_by_one(make_store: StoreFactory) -> None:
    pg, reference = make_store("postgres"), make_store("sqlite")
    assert isinstance(pg, PostgresStore) and isinstance(reference, SQLiteStore)
    for store in (pg, reference):
        store.ensure_collection("c")
        store.replace_source("c", "keep.md", "docs", _source("keep.md", 3))
        store.replace_source("c", "gone.md", "docs", _source("gone.md", 2))
    edited = _source("keep.md", 2)  # keep.md-0 unchanged, keep.md-1 edited, keep.md-2 removed
    edited[1] = make_chunk("keep.md-1", "gamma keep.md edited", source_id="keep.md", vector=[0.0, 1.0], ordinal=1)
    writes = [
        SourceWrite("keep.md", "adr", edited, root="/r"),
        SourceWrite("gone.md", "docs", []),
        SourceWrite("new.md", "docs", _source("new.md", 2)),
    ]
    counts = pg.replace_sources("c", writes)
    assert counts == [ReplaceCounts(0, 1, 1, 1), ReplaceCounts(0, 0, 0, 2), ReplaceCounts(2, 0, 0, 0)]
    expected = [reference.replace_source("c", w.source_id, w.scope, w.chunks, root=w.root) for w in writes]
    assert counts == expected
    assert [(s.source_id, s.scope, s.chunks, s.root) for s in pg.list_sources("c")] == [
        ("keep.md", "adr", 2, "/r"), ("new.md", "docs", 2, ""),
    ]
    ids = sorted(pg.chunk_ids("c"))
    assert ids == sorted(reference.chunk_ids("c")) == ["keep.md-0", "keep.md-1", "new.md-0", "new.md-1"]
    assert pg.get_chunks("c", ids) == reference.get_chunks("c", ids)
    for query in (["alpha"], ["gamma"], ["keep.md"]):
        assert [c for c, _ in pg.lexical_search("c", query, query, limit=None)] == [
            c for c, _ in reference.lexical_search("c", query, query, limit=None)
        ]
    info = pg.get_collection("c")
    assert info is not None and (info.chunks, info.sources, info.chunks_without_vector) == (4, 2, 0)


def test_replace_sources_is_all_or_nothing(make_store: StoreFactory) -> None:
    pg = make_store("postgres")
    assert isinstance(pg, PostgresStore)
    pg.ensure_collection("c")
    pg.set_embedder("c", provider="fake", model="m", dimension=2)
    bad = [make_chunk("b-0", "beta", source_id="b.md", vector=[1.0, 0.0, 0.0])]
    with pytest.raises(StoreError, match="vector has 3 dimensions"):
        pg.replace_sources("c", [SourceWrite("a.md", "docs", _source("a.md", 2)), SourceWrite("b.md", "docs", bad)])
    with pytest.raises(StoreError, match="more than once"):
        pg.replace_sources("c", [SourceWrite("a.md", "docs", _source("a.md", 1))] * 2)
    with pytest.raises(StoreError, match="duplicate key"):  # a chunk id held by another source
        pg.replace_sources("c", [SourceWrite("a.md", "docs", _source("a.md", 1)), SourceWrite("x.md", "docs", [
            make_chunk("a.md-0", "alpha", source_id="x.md", vector=[1.0, 0.0])
        ])])
    info = pg.get_collection("c")
    assert info is not None and (info.chunks, info.sources) == (0, 0)
    assert pg.list_sources("c") == [] and pg.replace_sources("c", []) == []
    with psycopg.connect(pg.dsn, autocommit=True) as conn:  # the statistics are untouched too
        conn.execute(f"SET search_path = {pg.schema}")
        assert conn.execute("SELECT count(*) FROM plait_postings").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM plait_lex_terms").fetchone() == (0,)


@pytest.mark.parametrize("bad", ["two words", "", "tab\there", "em\u2003space", "unit\x1fsep"])
def test_a_token_with_whitespace_is_refused(make_store: StoreFactory, bad: str) -> None:
    pg = make_store("postgres")
    pg.ensure_collection("c")
    item = make_chunk("a", "alpha", source_id="a.md")
    broken = StoredChunk(item.chunk, ["alpha", bad], list(item.stems))
    with pytest.raises(StoreError, match="is empty or contains whitespace"):
        pg.replace_source("c", "a.md", "docs", [broken])
    assert lexical(["alpha", "err-4012"]) == "alpha err-4012" and lexical([]) == ""
    info = pg.get_collection("c")
    assert info is not None and info.chunks == 0


def _hnsw(pg: PostgresStore, collection: str) -> list[tuple[str, bool]]:
    """(name, valid) of the collection's HNSW index, if there is one."""
    with pg._read() as conn:
        cid, _ = pg._collection(conn, collection)
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s AND c.relnamespace = %s::regnamespace",
            (f"plait_chunks_hnsw_{cid}", pg.schema),
        ).fetchall()
    return [(r[0], bool(r[1])) for r in rows]


def test_deferred_index_builds_the_hnsw_index_once_at_the_end(make_store: StoreFactory) -> None:
    pg = make_store("postgres")
    assert isinstance(pg, PostgresStore)
    pg.ensure_collection("c")
    pg.set_embedder("c", provider="fake", model="m", dimension=2)
    with pg._read() as conn:
        cid, _ = pg._collection(conn, "c")
    name = f"plait_chunks_hnsw_{cid}"
    assert _hnsw(pg, "c") == [(name, True)]
    with pg.deferred_index("c"):
        assert _hnsw(pg, "c") == []  # not kept row by row during the load
        pg.replace_sources("c", [SourceWrite("a.md", "docs", _source("a.md", 30))])
        assert [c for c, _ in pg.vector_search("c", _vector(1.0, 29.0), limit=3)] == ["a.md-29", "a.md-28", "a.md-27"]
    assert _hnsw(pg, "c") == [(name, True)]
    with pytest.raises(RuntimeError, match="boom"), pg.deferred_index("c"):
        raise RuntimeError("boom")
    assert _hnsw(pg, "c") == [(name, True)]  # rebuilt after a failed block too
    with pg._read() as conn:  # an invalid index (an interrupted concurrent build) is rebuilt
        conn.execute(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{pg.schema}.{name}'::regclass")
    assert _hnsw(pg, "c") == [(name, False)]
    with pg._read() as conn:  # one connection: the build's session settings are back on it
        before = conn.execute("SHOW maintenance_work_mem").fetchone()
        build_hnsw(conn, cid, 2, timeout_ms=60_000)
        assert conn.execute("SHOW statement_timeout").fetchone() == ("1min",)
        assert conn.execute("SHOW maintenance_work_mem").fetchone() == before
    assert _hnsw(pg, "c") == [(name, True)]


def _vector(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)
