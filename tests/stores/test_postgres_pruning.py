"""The PostgreSQL lexical arm (in process, over the cached postings) ranks exactly as the
embedded store on random corpora after adds, edits and deletes, at every limit and
with BM25 parameters the old SQL statement's pruning had to special-case; the stored
per-term bounds stay bounds; a database created at schema version 4 upgrades with its
data and its rankings intact; and both arms come back from one pipeline.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver`` started once
for this module.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.analysis import analyse_query
from plait.stores.base import BM25Params, Filters, StoredChunk, TwoArmStore
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_schema import LATEST_VERSION, migrate
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn

# A Zipf-like vocabulary: a few words in most chunks, many rare ones.
_VOCAB = [f"w{i}" for i in range(40)]
_WEIGHTS = [1.0 / (i + 1) for i in range(40)]


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-pruning-") as dsn:
        yield dsn


@pytest.fixture(scope="module")
def pg(pg_dsn: str) -> Iterator[PostgresStore]:
    schema = f"plait_prune_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(pg_dsn, schema=schema)
    yield store
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _text(rng: random.Random) -> str:
    return " ".join(rng.choices(_VOCAB, _WEIGHTS, k=rng.randint(1, 25)))


def _rank(store: PostgresStore, name: str, q: Any, limit: int | None, *, params: BM25Params) -> list[tuple[str, float]]:
    return store.lexical_search(name, q.exact, q.stems, limit=limit, params=params)


def _bounds_hold(store: PostgresStore) -> int:
    """Terms whose stored max_tf / min_len / min_ratio do not bound their postings."""
    with store._read() as conn:
        row = conn.execute(
            "SELECT count(*) FROM plait_lex_terms t JOIN (SELECT collection_id, term, max(tf) AS tf, "
            "min(len) AS len, min(len::float8 / tf) AS ratio FROM plait_postings GROUP BY 1, 2) p "
            "ON p.collection_id = t.collection_id AND p.term = t.id "
            "WHERE p.tf > t.max_tf OR p.len < t.min_len OR p.ratio < t.min_ratio"
        ).fetchone()
    return int(row[0]) if row else -1


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), limit=st.sampled_from([1, 3, 10]), k1=st.sampled_from([0.9, 1.5]), b=st.sampled_from([0.4, 0.0, 1.0, 3.0]))
def test_top_k_equals_the_embedded_store_after_writes(pg: PostgresStore, tmp_path_factory: pytest.TempPathFactory, seed: int, limit: int, k1: float, b: float) -> None:
    rng = random.Random(seed)
    name = f"c{seed}-{limit}-{k1}-{b}"
    lite = SQLiteStore(tmp_path_factory.mktemp("lite") / "ref.db")
    stores: list[Any] = [pg, lite]
    sources = {f"s{i}": [(f"s{i}-{j}", _text(rng)) for j in range(rng.randint(1, 8))] for i in range(8)}
    for store in stores:
        store.ensure_collection(name)
        for sid, docs in sources.items():
            store.replace_source(name, sid, "docs", [make_chunk(c, t, source_id=sid, ordinal=j) for j, (c, t) in enumerate(docs)])
    # edits (changed chunks are deleted and inserted again) and deletes
    for sid in rng.sample(sorted(sources), 3):
        docs = [(f"{sid}-{j}", _text(rng)) for j in range(rng.randint(1, 6))]
        for store in stores:
            store.replace_source(name, sid, "docs", [make_chunk(c, t, source_id=sid, ordinal=j) for j, (c, t) in enumerate(docs)])
    gone = rng.choice(sorted(sources))
    for store in stores:
        store.delete_source(name, gone)
    assert _bounds_hold(pg) == 0
    params = BM25Params(k1=k1, b=b)
    for _ in range(6):
        q = analyse_query(" ".join(rng.sample(_VOCAB, rng.randint(1, 8))))
        assert _rank(pg, name, q, limit, params=params) == lite.lexical_search(name, q.exact, q.stems, limit=limit, params=params)
        assert _rank(pg, name, q, None, params=params) == lite.lexical_search(name, q.exact, q.stems, limit=None, params=params)
    lite.close()


def _clustered(rng: random.Random, n: int) -> list[list[tuple[str, str]]]:
    """``n`` chunks in sources of 40 whose vocabulary drifts with their position: common
    words everywhere (Zipf-like), topic words only in a stretch of ~150 consecutive
    chunks, so chunk rows — and blocks of them — differ in what they hold."""
    sources = []
    for start in range(0, n, 40):
        docs = []
        for j in range(start, min(start + 40, n)):
            topic = j // 150
            words = rng.choices(_VOCAB[:12], _WEIGHTS[:12], k=rng.randint(1, 12))
            words += [f"t{topic}x{rng.randint(0, 9)}" for _ in range(rng.randint(0, 6))]
            if rng.random() < 0.05:
                words += [f"t{topic + 1}x{rng.randint(0, 9)}"] * rng.randint(1, 4)
            docs.append((f"k{j}", " ".join(words)))
        sources.append(docs)
    return sources


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), limit=st.sampled_from([1, 5, 20]), k1=st.sampled_from([0.9, 1.5]),
       b=st.sampled_from([0.4, 0.0, 1.0]))
def test_top_k_equals_the_embedded_store_on_larger_clustered_corpora(
    pg: PostgresStore, tmp_path_factory: pytest.TempPathFactory, seed: int, limit: int, k1: float, b: float
) -> None:
    """Larger corpora (400-800 chunks, topic words confined to stretches of them), after
    edits and a deleted source: the top k equals the embedded store's, ids and scores."""
    rng = random.Random(seed)
    name = f"b{seed}-{limit}-{k1}-{b}"
    lite = SQLiteStore(tmp_path_factory.mktemp("lite") / "ref.db")
    stores: list[Any] = [pg, lite]
    sources = _clustered(rng, rng.randint(400, 800))
    for store in stores:
        store.ensure_collection(name)
        for i, docs in enumerate(sources):
            store.replace_source(name, f"s{i}", "docs", [make_chunk(c, t, source_id=f"s{i}", ordinal=j) for j, (c, t) in enumerate(docs)])
    for i in rng.sample(range(len(sources)), 2):
        docs = [(c, t + " t0x1 w3") for c, t in sources[i][::2]]
        for store in stores:
            store.replace_source(name, f"s{i}", "docs", [make_chunk(c, t, source_id=f"s{i}", ordinal=j) for j, (c, t) in enumerate(docs)])
    gone = f"s{rng.randrange(len(sources))}"
    for store in stores:
        store.delete_source(name, gone)
    assert _bounds_hold(pg) == 0
    params = BM25Params(k1=k1, b=b)
    topics = len(sources) * 40 // 150 + 1
    for _ in range(5):
        words = [f"t{rng.randrange(topics)}x{rng.randint(0, 9)}" for _ in range(rng.randint(1, 4))]
        q = analyse_query(" ".join(words + rng.sample(_VOCAB[:12], rng.randint(0, 6))))
        assert _rank(pg, name, q, limit, params=params) == lite.lexical_search(name, q.exact, q.stems, limit=limit, params=params)
    lite.close()


def test_both_arms_in_one_pipeline(pg: PostgresStore) -> None:
    name = "arms"
    pg.ensure_collection(name)
    pg.set_embedder(name, provider="fake", model="m3", dimension=3)
    pg.replace_source(name, "s", "docs", [
        make_chunk("a", "checkout declined", source_id="s", vector=[1.0, 0.0, 0.0]),
        make_chunk("b", "inventory stock", source_id="s", ordinal=1, vector=[0.0, 1.0, 0.0]),
    ])
    assert isinstance(pg, TwoArmStore)
    q = analyse_query("checkout")
    lexical, dense = pg.search_arms(name, q.exact, q.stems, np.array([0.0, 1.0, 0.0], dtype=np.float32), limit=5)
    assert lexical == pg.lexical_search(name, q.exact, q.stems, limit=5)
    assert [i for i, _ in lexical] == ["a"]
    assert [i for i, _ in dense] == ["b", "a"] and dense[0][1] == pytest.approx(1.0)
    # a collection re-created under the same name by "another process": the remembered id
    # is stale, the pipeline's check notices and the arms run again on the new one
    other = PostgresStore(pg.dsn, schema=pg.schema)
    other.delete_collection(name)
    other.ensure_collection(name)
    other.replace_source(name, "s", "docs", [make_chunk("z", "checkout", source_id="s")])
    other.close()
    assert [i for i, _ in pg.search_arms(name, q.exact, q.stems, None, limit=5)[0]] == ["z"]
    with pytest.raises(Exception, match="does not exist"):
        pg.search_arms("nope", q.exact, q.stems, None, limit=5)


def test_upgrade_from_version_4_keeps_data_and_rankings(pg_dsn: str, tmp_path: Path) -> None:
    """A database created at schema version 4 (text-keyed postings) with two collections
    is upgraded on open: every chunk and posting kept, bounds backfilled, rankings
    (filtered and not) identical to the embedded store's on the same chunks, writes after
    the upgrade keep the statistics exact."""
    schema = f"plait_v4_{uuid.uuid4().hex[:10]}"
    rng = random.Random(4)
    lite = SQLiteStore(tmp_path / "ref.db")
    docs = {name: [(f"{name}{j}", _text(rng), "adr" if j % 3 == 0 else "docs") for j in range(30)] for name in ("c", "other")}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        assert migrate(conn, target=4) == 4
        for name, items in docs.items():
            cid = conn.execute("INSERT INTO plait_collections (name, created_at) VALUES (%s, 'then') RETURNING id", (name,)).fetchone()[0]  # type: ignore[index]
            lite.ensure_collection(name)
            stored: list[StoredChunk] = []
            # rows in the order the embedded store gets them (source by source): ties
            # break by row id in both
            ordered = sorted(enumerate(items), key=lambda item: item[1][2])
            for j, (chunk_id, text, scope) in ordered:
                chunk = make_chunk(chunk_id, text, source_id=f"src-{scope}", scope=scope, ordinal=j)
                stored.append(chunk)
                conn.execute(
                    "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                    "content_hash, origin, metadata, lex_exact, lex_stems) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, '{}', %s, %s)",
                    (cid, chunk_id, f"src-{scope}", scope, j, text, chunk.chunk.content_hash,
                     Jsonb({"kind": "file", "sourcePath": "d"}), " ".join(chunk.exact), " ".join(chunk.stems)),
                )
            for scope in ("adr", "docs"):
                lite.replace_source(name, f"src-{scope}", scope, [s for s in stored if s.chunk.scope == scope])
                conn.execute(
                    "INSERT INTO plait_sources (collection_id, source_id, scope, indexed_at) VALUES (%s, %s, %s, 'then')",
                    (cid, f"src-{scope}", scope),
                )
        before = conn.execute("SELECT count(*) FROM plait_chunks").fetchone()
        postings_before = conn.execute("SELECT collection_id, key, chunk_row, tf, len FROM plait_postings ORDER BY 1, 2, 3").fetchall()
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        with store._read() as conn:
            assert conn.execute("SELECT max(version) FROM plait_schema_version").fetchone() == (LATEST_VERSION,)
            assert conn.execute("SELECT count(*) FROM plait_chunks").fetchone() == before
            after = conn.execute(
                "SELECT p.collection_id, t.key, p.chunk_row, p.tf, p.len FROM plait_postings p JOIN plait_lex_terms t "
                "ON t.collection_id = p.collection_id AND t.id = p.term ORDER BY 1, 2, 3"
            ).fetchall()
        assert after == postings_before
        assert _bounds_hold(store) == 0
        for name in docs:
            for text in ("w0 w1", "w3 w17 w30", "w39", "w2 w5 w8 w11 w14"):
                q = analyse_query(text)
                for filters in (None, Filters(scopes=("adr",))):
                    for limit in (None, 5):
                        want = lite.lexical_search(name, q.exact, q.stems, limit=limit, filters=filters)
                        assert store.lexical_search(name, q.exact, q.stems, limit=limit, filters=filters) == want
        store.replace_source("c", "src-docs", "docs", [make_chunk("new", "w0 w39 w39", source_id="src-docs")])
        lite.replace_source("c", "src-docs", "docs", [make_chunk("new", "w0 w39 w39", source_id="src-docs")])
        q = analyse_query("w39 w0")
        assert store.lexical_search("c", q.exact, q.stems, limit=10) == lite.lexical_search("c", q.exact, q.stems, limit=10)
        assert _bounds_hold(store) == 0
        info = store.get_collection("c")
        assert info is not None and info.chunks == len(store.chunk_ids("c")) and info.sources == 2
    finally:
        store.close()
        lite.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
