"""The PostgreSQL store's whole load (issue 26, :mod:`plait.stores.postgres_whole`): a
collection under ``whole_bytes`` is read whole on its first search, so a search with
terms and hits never seen before is one round trip (the statement sent ahead); after
writes by this store, another store or raw SQL the hits are a fresh store's, and the
scores the SQLite store's.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plait.analysis import analyse_query
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.stores.base import BM25Params
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, store_opener, throwaway_schema
from plait.testing.pg_wire import round_trips

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "ledger", "payment", "refund", "invoice"]


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-whole-") as dsn:
        yield dsn


@pytest.fixture
def open_pg(pg_dsn: str) -> Iterator[Callable[..., PostgresStore]]:
    with throwaway_schema(pg_dsn, "plait_t_") as schema, store_opener(pg_dsn, schema) as make:
        yield make


def _text(rng: np.random.Generator, n: int = 6) -> str:
    return " ".join(rng.choice(WORDS, size=n).tolist())


def _corpus(tmp_path: Path, name: str = "docs", count: int = 30, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)
    docs = tmp_path / name
    docs.mkdir()
    for i in range(count):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\n{_text(rng)} word{i}\n")
    return docs


def _new_query_trips(plait: Plait, monkeypatch: pytest.MonkeyPatch, queries: list[str]) -> list[int]:
    counts = []
    for query in queries:
        with round_trips() as wire:
            result = plait.search(query, collection="c", k=3)
        assert result.hits
        counts.append(len(wire.trips))
    return counts


def test_new_queries_after_the_whole_load_are_one_round_trip(
    open_pg: Callable[..., PostgresStore], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Plait(open_pg(), embedder="fake") as indexer:
        indexer.index(_corpus(tmp_path), collection="c")
    new = [f"{a} {b} word{i}" for i, (a, b) in enumerate(zip(WORDS[::2], WORDS[1::2], strict=False))][:8]
    whole, per_term = open_pg(), open_pg(whole_bytes=0)
    with Plait(whole) as a, Plait(per_term) as b:
        a.search("alpha", collection="c", k=3)  # the whole load
        b.search("alpha", collection="c", k=3)
        index = whole._lexicon[whole._known["c"][0]][1]
        assert index.whole is not None and per_term._lexicon[per_term._known["c"][0]][1].whole is None
        assert whole.last_matrix_load == "full"
        got = _new_query_trips(a, monkeypatch, new)
        base = _new_query_trips(b, monkeypatch, new)
        for query in new:  # the same hits and scores either way
            assert a.search(query, collection="c", k=5).hits == b.search(query, collection="c", k=5).hits
    assert got == [1] * len(new), got
    assert min(base) >= 2 and sum(base) > sum(got), base  # postings and rows read per term and hit


def test_a_collection_over_whole_bytes_is_read_per_term(open_pg: Callable[..., PostgresStore]) -> None:
    writer = open_pg()
    writer.ensure_collection("c")
    writer.replace_source("c", "s", "docs", [make_chunk(f"k{i}", f"alpha bravo {i}", source_id="s") for i in range(20)])
    small = open_pg(whole_bytes=1000)
    assert [i for i, _ in small.lexical_search("c", ["alpha"], [], limit=3)] == ["k0", "k1", "k2"]
    cid = small._known["c"][0]
    assert small._lexicon[cid][1].whole is None and small._whole_refused[cid] == 20
    budget = open_pg(lexical_cache_bytes=1000)  # the postings must fit the index's own budget too
    budget.lexical_search("c", ["alpha"], [], limit=3)
    assert budget._lexicon[cid][1].whole is None
    assert small.lexical_search("c", ["bravo"], [], limit=None) == writer.lexical_search("c", ["bravo"], [], limit=None)
    rowless = open_pg(row_cache_bytes=0)  # postings whole, chunk rows read per hit as before
    rowless.lexical_search("c", ["alpha"], [], limit=3)
    assert rowless._lexicon[cid][1].whole is not None and rowless._rows.bytes == 0
    assert rowless.get_chunks("c", ["k1"]) == writer.get_chunks("c", ["k1"])


def _hybrid(store: PostgresStore, text: str, vector: np.ndarray) -> tuple[list[tuple[str, float]], ...]:
    q = analyse_query(text)
    lexical, dense = store.search_arms("c", q.exact, q.stems, vector, limit=None)
    return lexical, dense


def test_after_writes_by_anyone_the_hits_are_a_fresh_store_s(open_pg: Callable[..., PostgresStore]) -> None:
    """Inserts, deletes and an in-place update by this store, another store and raw SQL,
    each followed by searches (old and new terms) of the whole-loaded store: the same
    ranked lists and chunk rows as a store opened afresh."""
    embedder = FakeEmbedder(dimension=16, model="hash-16")
    reader, other = open_pg(), open_pg()
    rng = np.random.default_rng(3)
    reader.ensure_collection("c")

    def chunks(prefix: str, n: int) -> list[Any]:
        out = []
        for i in range(n):
            text = f"{_text(rng)} {prefix}{i}"
            out.append(make_chunk(f"{prefix}{i}", text, source_id=prefix, ordinal=i,
                                  vector=embedder.embed_query(text).tolist()))
        return out

    reader.replace_source("c", "a", "docs", chunks("a", 25))
    queries = ["alpha bravo", "ledger refund", "zulu a3", "b1 c2 payment", "victor d0 e4"]
    vector = embedder.embed_query("alpha ledger")
    _hybrid(reader, "alpha", vector)  # the whole load
    assert reader._lexicon[reader._known["c"][0]][1].whole is not None

    def same() -> None:
        fresh = open_pg()
        for text in queries:
            got, want = _hybrid(reader, text, vector), _hybrid(fresh, text, vector)
            assert got == want, text
            ids = [i for i, _ in got[0][:5] + got[1][:5]]
            assert reader.get_chunks("c", ids) == fresh.get_chunks("c", ids)
        fresh.close()

    same()
    reader.replace_source("c", "b", "docs", chunks("b", 5))  # this store inserts
    same()
    other.replace_source("c", "c", "docs", chunks("c", 4))  # another store inserts
    other.delete_source("c", "a")  # ... and deletes
    same()
    with other._tx() as conn:  # raw SQL: an insert, an update in place, a delete
        conn.execute(
            "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, content_hash, "
            "origin, metadata, lex_exact, lex_stems) SELECT collection_id, 'd0', 'd', scope, 0, "
            "'victor raw', 'h', origin, metadata, 'victor raw', 'victor raw' FROM plait_chunks WHERE chunk_id = 'b0'"
        )
        conn.execute("UPDATE plait_chunks SET metadata = '{\"k\": 1}' WHERE chunk_id = 'b1'")
        conn.execute("DELETE FROM plait_chunks WHERE chunk_id = 'c2'")
    same()
    reader.replace_source("c", "e", "docs", chunks("e", 1200))  # too large for the change log: loaded whole again
    same()
    assert reader._lexicon[reader._known["c"][0]][1].whole is not None


def test_whole_loaded_scores_are_the_sqlite_store_s(open_pg: Callable[..., PostgresStore], tmp_path: Path) -> None:
    pg, lite = open_pg(), SQLiteStore(tmp_path / "ref.db")
    rng = np.random.default_rng(11)
    try:
        texts = [_text(rng, 8) for _ in range(40)]
        for store in (pg, lite):
            store.ensure_collection("c")
            store.replace_source("c", "s", "docs", [
                make_chunk(f"k{i}", text, source_id="s", ordinal=i) for i, text in enumerate(texts)
            ])
        params = (BM25Params(), BM25Params(k1=1.5, b=1.0, exact_weight=2.0), BM25Params(stems_weight=0.0))
        for text in ("payments refunded", "alpha bravo charlie", "zulu", "nothing here", "ledger invoice mike"):
            q = analyse_query(text)
            for bm25 in params:
                for limit in (None, 3):
                    assert pg.lexical_search("c", q.exact, q.stems, limit=limit, params=bm25) == lite.lexical_search(
                        "c", q.exact, q.stems, limit=limit, params=bm25
                    ), (text, bm25, limit)
        assert pg._lexicon[pg._known["c"][0]][1].whole is not None
        # after a write the next index answers new terms from the carried whole postings
        for store in (pg, lite):
            store.replace_source("c", "t", "docs", [make_chunk("t0", "payments ledger quebec", source_id="t")])
        for text in ("payments", "quebec romeo", "sierra ledger"):
            q = analyse_query(text)
            assert pg.lexical_search("c", q.exact, q.stems, limit=None) == lite.lexical_search("c", q.exact, q.stems, limit=None)
    finally:
        lite.close()


def test_whole_loaded_indexes_stay_within_the_lexical_total(open_pg: Callable[..., PostgresStore]) -> None:
    """``lexical_total_bytes`` bounds whole-loaded indexes as it bounds the others: past
    it the least recently searched collection's index is dropped."""
    writer = open_pg()
    for name in "abc":
        writer.ensure_collection(name)
        writer.replace_source(name, "s", "docs", [
            make_chunk(f"k{i}", f"card alpha bravo {i} {name}", source_id="s") for i in range(30)
        ])
    probe = open_pg()
    probe.lexical_search("a", ["card"], [], limit=3)
    one = probe._lexicon.bytes
    assert probe._lexicon[probe._known["a"][0]][1].whole is not None and one > 0
    pg = open_pg(lexical_total_bytes=2 * one + one // 2)
    for name in "abc":
        assert pg.lexical_search(name, ["card"], [], limit=3) == writer.lexical_search(name, ["card"], [], limit=3)
    assert list(pg._lexicon) == [pg._known["b"][0], pg._known["c"][0]]
    assert pg._lexicon.bytes <= pg._lexicon.total_bytes
    assert all(entry[1].whole is not None for entry in pg._lexicon.values())
