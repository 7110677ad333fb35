"""The PostgreSQL store's in-process lexical index follows the database: every write path
bumps the collection's generation in its own transaction, another store (its own pool,
as another process would have) drops its cached index when it sees the new generation,
filters are evaluated on every query, and a write committed while a load is under way
never mixes two generations in one index.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver`` started once
for this module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from plait.analysis import analyse_query
from plait.stores.base import BM25Params, Filters, SourceWrite
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_lexcache import LENGTHS
from plait.stores.postgres_search import _Lexical
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-lexcache-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_l_") as name:
        yield name


def _generation(store: PostgresStore, name: str = "c") -> int:
    with store._read() as conn:
        row = conn.execute("SELECT generation FROM plait_collections WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def _search(store: Any, text: str, **kwargs: Any) -> list[tuple[str, float]]:
    q = analyse_query(text)
    return list(store.lexical_search("c", q.exact, q.stems, limit=kwargs.pop("limit", 10), **kwargs))


def test_every_write_path_bumps_the_generation(pg_dsn: str, schema: str) -> None:
    """Inserts, edits, deletes, bulk writes and raw SQL inserts each bump the generation
    once per statement that changes chunk rows; updates that leave the lexical fields
    alone (scope, vectors, embedder) do not."""
    pg = PostgresStore(pg_dsn, schema=schema)
    try:
        pg.ensure_collection("c")
        assert _generation(pg) == 0
        pg.replace_source("c", "s", "docs", [make_chunk("a", "checkout card", source_id="s")])
        assert _generation(pg) == 1  # one INSERT
        pg.replace_source("c", "s", "docs", [make_chunk("a", "checkout card declined", source_id="s")])
        assert _generation(pg) == 3  # the edit: one DELETE, one INSERT
        pg.replace_source("c", "s", "adr", [make_chunk("a", "checkout card declined", source_id="s", scope="adr")])
        assert _generation(pg) == 3  # same content, new scope: updated in place, postings untouched
        pg.replace_sources("c", [SourceWrite("t", "docs", [make_chunk("b", "refund", source_id="t")], ""),
                                 SourceWrite("u", "docs", [make_chunk("x", "ledger", source_id="u")], "")])
        assert _generation(pg) == 4  # both sources' rows in one INSERT
        pg.set_embedder("c", provider="fake", model="m", dimension=2)
        pg.set_vectors("c", {"b": [1.0, 0.0]})
        assert _generation(pg) == 4
        pg.delete_source("c", "u")
        assert _generation(pg) == 5
        with pg._tx() as conn:
            conn.execute(
                "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                "content_hash, origin, metadata, lex_exact, lex_stems) SELECT id, 'raw', 'raw', 'docs', 0, "
                "'raw', 'h', '{}', '{}', 'raw words', 'raw word' FROM plait_collections WHERE name = 'c'"
            )
        assert _generation(pg) == 6
        pg.ensure_collection("other")
        pg.replace_source("other", "s", "docs", [make_chunk("o", "checkout", source_id="s")])
        assert (_generation(pg), _generation(pg, "other")) == (6, 1)  # per collection
    finally:
        pg.close()


def test_a_write_by_another_store_reaches_the_cached_index(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """Regression: two stores on one schema (two pools: two processes). The reader caches
    the index; the writer deletes a chunk and adds one. The reader's next queries (a term
    it had cached, and one it had not) must not return the deleted chunk, must find the
    new one, and score exactly as the embedded store does after the same writes — a
    cache that ignored the generation returns ``gone`` with the old scores."""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = PostgresStore(pg_dsn, schema=schema)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        docs = [("gone", "checkout declined card"), ("kept", "checkout session"), ("other", "inventory stock")]
        for store in (writer, lite):
            store.ensure_collection("c")
            store.replace_source("c", "s1", "docs", [make_chunk("gone", docs[0][1], source_id="s1")])
            store.replace_source("c", "s2", "docs", [make_chunk(i, t, source_id="s2", ordinal=j) for j, (i, t) in enumerate(docs[1:])])
        before = _search(reader, "checkout")
        assert [i for i, _ in before] == ["kept", "gone"] and before == _search(lite, "checkout")
        cached = reader._lexicon[reader._known["c"][0]][0]
        assert cached == _generation(writer)
        for store in (writer, lite):
            store.delete_source("c", "s1")
            store.replace_source("c", "s3", "docs", [make_chunk("new", "checkout checkout refund", source_id="s3")])
        after = _search(reader, "checkout")
        assert [i for i, _ in after] == ["new", "kept"]
        assert after == _search(lite, "checkout")  # N, df and avgdl of the new generation
        assert _search(reader, "refund declined") == _search(lite, "refund declined")
        assert [i for i, _ in _search(reader, "refund declined")] == ["new"]
        assert reader._lexicon[reader._known["c"][0]][0] == _generation(writer) == cached + 2
    finally:
        writer.close()
        reader.close()
        lite.close()


def test_filters_follow_in_place_updates_without_a_new_generation(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """A chunk moved to another scope with the same content is updated in place (no new
    generation, the cached index is kept); filtered queries still see its new scope,
    equal to the embedded store's, because the allowed rows are read on every query."""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = PostgresStore(pg_dsn, schema=schema)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        for store in (writer, lite):
            store.ensure_collection("c")
            store.replace_source("c", "a", "adr", [make_chunk("a1", "tenant routing retry", source_id="a", scope="adr")])
            store.replace_source("c", "d", "docs", [make_chunk("d1", "tenant routing", source_id="d"),
                                                    make_chunk("d2", "tenant", source_id="d", ordinal=1)])
        adr = Filters(scopes=("adr",))
        assert [i for i, _ in _search(reader, "tenant routing", filters=adr)] == ["a1"]
        generation = _generation(writer)
        for store in (writer, lite):
            store.replace_source("c", "d", "adr", [make_chunk("d1", "tenant routing", source_id="d", scope="adr"),
                                                   make_chunk("d2", "tenant", source_id="d", ordinal=1, scope="adr")])
        assert _generation(writer) == generation  # scope only: no new generation
        for limit in (None, 1, 10):
            got = _search(reader, "tenant routing", filters=adr, limit=limit)
            assert got == _search(lite, "tenant routing", filters=adr, limit=limit)
        assert [i for i, _ in _search(reader, "tenant routing", filters=adr)] == ["d1", "a1", "d2"]
        assert _search(reader, "tenant", filters=Filters(scopes=("docs",))) == []
        assert reader._lexicon[reader._known["c"][0]][0] == generation  # the index was kept
    finally:
        writer.close()
        reader.close()
        lite.close()


class _SlowLoads(PostgresStore):
    """Sends a 1.5 s pause between the chunk lengths and the postings of one load, so a
    write can commit in between."""

    def _send_reads(
        self, conn: psycopg.Connection, reads: _Lexical, cid: int, lengths: bool,
        missing: Sequence[tuple[int, str]], filters: Filters | None,
    ) -> None:
        if lengths:
            reads.lengths = conn.execute(LENGTHS, {"cid": cid})
        conn.execute("SELECT pg_sleep(1.5)")
        super()._send_reads(conn, reads, cid, False, missing, filters)


def test_a_write_committed_during_a_load_does_not_mix_generations(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """Regression: the reader loads the lengths, then (1.5 s later) the postings; a writer
    commits a new chunk holding the query term in between. Read in one REPEATABLE READ
    snapshot, the load is the old generation's throughout: the answer is the embedded
    store's before the write, and the next query the one after it. (Read committed, the
    postings would name a chunk row the lengths never had.)"""
    writer = PostgresStore(pg_dsn, schema=schema)
    reader = _SlowLoads(pg_dsn, schema=schema)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        for store in (writer, lite):
            store.ensure_collection("c")
            store.replace_source("c", "s", "docs", [make_chunk("a", "checkout card", source_id="s"),
                                                    make_chunk("b", "checkout", source_id="s", ordinal=1)])
        want_before = _search(lite, "checkout")
        committed: list[float] = []

        def write() -> None:
            time.sleep(0.4)
            writer.replace_source("c", "t", "docs", [make_chunk("c", "checkout checkout", source_id="t")])
            committed.append(time.perf_counter())

        thread = threading.Thread(target=write)
        thread.start()
        got = _search(reader, "checkout")
        answered = time.perf_counter()
        thread.join()
        assert committed and committed[0] < answered, "the write did not land during the load"
        assert got == want_before
        lite.replace_source("c", "t", "docs", [make_chunk("c", "checkout checkout", source_id="t")])
        assert _search(reader, "checkout") == _search(lite, "checkout")
        assert [i for i, _ in _search(reader, "checkout")] == ["c", "b", "a"]
    finally:
        writer.close()
        reader.close()
        lite.close()


def test_weights_and_unlimited_queries_equal_the_embedded_store(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """One cached index serves several BM25 parameter sets (score rows per parameters)
    and a zero field weight reads no postings for that field (read per term: a whole
    load reads every posting, postgres_whole)."""
    pg = PostgresStore(pg_dsn, schema=schema, whole_bytes=0)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        for store in (pg, lite):
            store.ensure_collection("c")
            store.replace_source("c", "s", "docs", [
                make_chunk(f"d{i}", text, source_id="s", ordinal=i)
                for i, text in enumerate(["declined payments", "payment declined twice", "cards declining", "ledger"])
            ])
        q = analyse_query("declined payment cards")
        exact_only = BM25Params(stems_weight=0.0)
        assert _search(pg, "declined payment cards", params=exact_only) == _search(lite, "declined payment cards", params=exact_only)
        index = pg._lexicon[pg._known["c"][0]][1]
        assert sorted([*index._terms, *index._misses]) == sorted((0, t) for t in set(q.exact))  # no stems read
        for params in (BM25Params(), BM25Params(k1=1.5, b=1.0, exact_weight=2.0), exact_only):
            for limit in (None, 2):
                assert _search(pg, "declined payment cards", params=params, limit=limit) == _search(
                    lite, "declined payment cards", params=params, limit=limit)
        assert sorted([*index._terms, *index._misses]) == sorted({(0, t) for t in q.exact} | {(1, t) for t in q.stems})
        assert len({p for term in index._terms.values() for p in term.rows}) == 3  # score rows per parameter set
    finally:
        pg.close()
        lite.close()


def test_the_cache_stays_bounded_and_exact_under_a_tiny_budget(pg_dsn: str, schema: str, tmp_path: Path) -> None:
    """With ``lexical_cache_bytes=0`` every term is evicted as the next loads (so a query
    ranks partly from postings it found cached and no longer are): every ranking still
    equals the embedded store's; one query naming 3,000 unknown words leaves at most
    MAX_MISSES misses and no cached bytes beyond the last term; the store keeps the
    indexes of its MAX_INDEXES most recently searched collections."""
    from plait.stores.lexical_index import ENTRY_OVERHEAD, MAX_MISSES
    from plait.stores.postgres_search import MAX_INDEXES

    pg = PostgresStore(pg_dsn, schema=schema, lexical_cache_bytes=0)
    lite = SQLiteStore(tmp_path / "ref.db")
    try:
        texts = ["declined payments", "payment declined twice", "cards declining", "ledger card"]
        for store in (pg, lite):
            store.ensure_collection("c")
            store.replace_source("c", "s", "docs", [
                make_chunk(f"d{i}", text, source_id="s", ordinal=i) for i, text in enumerate(texts)
            ])
        for text in ("card", "declined card", "card payment ledger", "declined card", "twice ledger card"):
            assert _search(pg, text) == _search(lite, text)
        index = pg._lexicon[pg._known["c"][0]][1]
        assert index.cached_terms[0] == 1
        unknown = " ".join(f"zz{i}q" for i in range(3000))
        assert _search(pg, unknown) == []
        assert index.cached_terms[1] == MAX_MISSES  # 6,000 pairs (two fields), 4,096 kept
        assert index.cached_bytes <= ENTRY_OVERHEAD + 64
        assert _search(pg, "declined card") == _search(lite, "declined card")
        for i in range(MAX_INDEXES + 2):
            pg.ensure_collection(f"k{i}")
            pg.replace_source(f"k{i}", "s", "docs", [make_chunk(f"k{i}", "card", source_id="s")])
            q = analyse_query("card")
            assert [cid for cid, _ in pg.lexical_search(f"k{i}", q.exact, q.stems, limit=5)] == [f"k{i}"]
        assert len(pg._lexicon) == MAX_INDEXES
        assert pg._known["c"][0] not in pg._lexicon  # the least recently searched went first
        assert _search(pg, "declined card") == _search(lite, "declined card")  # reloaded
    finally:
        pg.close()
        lite.close()
