"""The store contract on PostgreSQL + pgvector, plus what only a server store has.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private server started once per
session by ``pgserver`` (PostgreSQL 16 with pgvector, from PyPI). Run as root,
pgserver creates and uses a system user ``pgserver`` for the server process; the
server listens only on a Unix socket inside its data folder. Each test gets fresh,
empty schemas (dropped afterwards).
"""

from __future__ import annotations

import math
import random
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from plait.analysis import analyse_query
from plait.embeddings.fake import FakeEmbedder
from plait.errors import StoreError, StoreUnavailableError
from plait.service import Plait
from plait.stores import open_store
from plait.stores.base import BM25Params, Filters
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_lexcache import POSTINGS
from plait.stores.postgres_queries import uses_hnsw, vector_query
from plait.stores.postgres_schema import LATEST_VERSION, migrate, schema_version
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import StoreContract, make_chunk
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.testing.pg import postgres_dsn
from plait.types import SearchResult


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN of a PostgreSQL server with the pgvector extension available."""
    with postgres_dsn("plait-pg-") as dsn:
        yield dsn


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[Callable[[], str]]:
    """Makes fresh schema names (``plait_t_<hex>``) and drops them after the test."""
    made: list[str] = []

    def make() -> str:
        name = f"plait_t_{uuid.uuid4().hex[:12]}"
        made.append(name)
        return name

    yield make
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


class TestPostgresContract(StoreContract):
    @pytest.fixture
    def store(self, pg_dsn: str, pg_schema: Callable[[], str]) -> Iterator[PostgresStore]:
        s = PostgresStore(pg_dsn, schema=pg_schema())
        yield s
        s.close()


# ---------------------------------------------------------------------------- helpers
def _open(dsn: str, schema: str, **kwargs: object) -> PostgresStore:
    return PostgresStore(dsn, schema=schema, **kwargs)  # type: ignore[arg-type]


def _rows(store: PostgresStore, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with store._tx() as conn:
        return conn.execute(query, params).fetchall()  # type: ignore[arg-type]


def _scalar(store: PostgresStore, query: str, params: tuple[object, ...] = ()) -> object:
    with store._tx() as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


@pytest.fixture
def pg(pg_dsn: str, pg_schema: Callable[[], str]) -> Iterator[PostgresStore]:
    s = _open(pg_dsn, pg_schema())
    yield s
    s.close()


# ------------------------------------------------------------------- identifiers whole
def test_identifiers_are_single_lexemes(pg: PostgresStore) -> None:
    """The default parser splits ``err-4012`` into ``err`` + ``-4012``; the generated
    lexical document keeps every analysed token whole, field-prefixed, tf as positions."""
    pg.ensure_collection("c")
    text = "ERR-4012 v3.11.2 SKU-88213-B resolve_tenant_db ERR-4012"
    pg.replace_source("c", "d", "docs", [make_chunk("a", text, source_id="d"), make_chunk("b", "err 4012 v3 sku", source_id="d")])
    lexemes = _scalar(pg, "SELECT tsvector_to_array(lex) FROM plait_chunks WHERE chunk_id = 'a'")
    assert {"e:err-4012", "e:v3.11.2", "e:sku-88213-b", "e:resolve_tenant_db"} <= set(lexemes)  # type: ignore[arg-type]
    assert "e:err" not in lexemes  # type: ignore[operator]
    assert _scalar(pg, "SELECT lex::text FROM plait_chunks WHERE chunk_id = 'a'").count("'e:err-4012':1,2") == 1  # type: ignore[union-attr]
    for term in ("err-4012", "v3.11.2", "sku-88213-b", "resolve_tenant_db"):
        assert [i for i, _ in pg.lexical_search("c", [term], [], limit=5)] == ["a"], term
    assert [i for i, _ in pg.lexical_search("c", ["4012"], [], limit=5)] == ["b"]


# ------------------------------------------------------------- BM25 parity with SQLite
_WORDS = ["checkout", "payment", "declined", "card", "token", "session", "inventory", "stock", "tenant", "routing", "retry", "timeout", "refund", "ledger", "ERR-4012", "SKU-88213-B", "v3.11.2", "resolve_tenant_db", "payments", "declining", "cards", "sessions", "routed"]


def _corpus(seed: int, n: int, prefix: str) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"{prefix}{i}", " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 14)))) for i in range(n)]


def _write_same(stores: list[Any]) -> None:
    """The same writes to every store: 4 sources, then an edit and a delete."""
    for store in stores:
        store.ensure_collection("c")
        for s in range(4):
            docs = _corpus(s, 8, f"s{s}-")
            store.replace_source("c", f"src{s}", "adr" if s == 3 else "docs", [
                make_chunk(cid, text, source_id=f"src{s}", scope="adr" if s == 3 else "docs", ordinal=i)
                for i, (cid, text) in enumerate(docs)
            ])
        edited = _corpus(10, 8, "s1-")[:5]
        store.replace_source("c", "src1", "docs", [make_chunk(cid, text, source_id="src1", ordinal=i) for i, (cid, text) in enumerate(edited)])
        store.delete_source("c", "src2")


@pytest.mark.parametrize(
    "params",
    [BM25Params(), BM25Params(k1=1.2, b=0.75, exact_weight=2.0, stems_weight=0.5), BM25Params(stems_weight=0.0)],
    ids=["default", "weighted", "exact-only"],
)
def test_bm25_equals_embedded_store(pg: PostgresStore, tmp_path: Path, params: BM25Params) -> None:
    """Same writes (inserts, an edit, a delete), same queries: same ids, same scores."""
    lite = SQLiteStore(tmp_path / "ref.db")
    _write_same([lite, pg])
    queries = ["ERR-4012 checkout", "declined payments", "resolve_tenant_db tenant routing", "v3.11.2", "refund ledger retry timeout card", "absent"]
    for text in queries:
        q = analyse_query(text)
        everything = lite.lexical_search("c", q.exact, q.stems, limit=None, params=params)
        for filters in (None, Filters(scopes=("adr",))):
            want = lite.lexical_search("c", q.exact, q.stems, limit=None, filters=filters, params=params)
            got = pg.lexical_search("c", q.exact, q.stems, limit=None, filters=filters, params=params)
            assert [i for i, _ in got] == [i for i, _ in want], (text, filters)
            assert got == want, (text, filters)  # bit for bit: same idf, same summation order
        top = pg.lexical_search("c", q.exact, q.stems, limit=3, params=params)
        assert [i for i, _ in top] == [i for i, _ in everything[:3]]
    lite.close()


def _stats_drift(store: PostgresStore) -> tuple[int, int]:
    """(term rows that disagree with a recount, collections whose totals disagree)."""
    terms = _scalar(store, """
        SELECT count(*) FROM (
            (SELECT collection_id, key, df FROM plait_lex_terms
             EXCEPT SELECT c.collection_id, k, count(*)::int FROM plait_chunks c, unnest(tsvector_to_array(c.lex)) k GROUP BY 1, 2)
            UNION ALL
            (SELECT c.collection_id, k, count(*)::int FROM plait_chunks c, unnest(tsvector_to_array(c.lex)) k GROUP BY 1, 2
             EXCEPT SELECT collection_id, key, df FROM plait_lex_terms)
        ) d""")
    totals = _scalar(store, """
        SELECT count(*) FROM plait_collections p LEFT JOIN (
            SELECT collection_id, count(*) n, sum(len_exact) e, sum(len_stems) s FROM plait_chunks GROUP BY 1
        ) x ON x.collection_id = p.id
        WHERE (p.n_chunks, p.len_exact_total, p.len_stems_total) <> (coalesce(x.n, 0), coalesce(x.e, 0), coalesce(x.s, 0))""")
    return int(terms), int(totals)  # type: ignore[arg-type]


def test_statistics_follow_every_write(pg: PostgresStore, tmp_path: Path) -> None:
    _write_same([pg])
    pg.ensure_collection("other")
    pg.replace_source("other", "x", "docs", [make_chunk("o1", "checkout card", source_id="x")])
    assert _stats_drift(pg) == (0, 0)
    assert _scalar(pg, "SELECT df FROM plait_lex_terms t JOIN plait_collections p ON p.id = t.collection_id WHERE p.name = 'other' AND key = 'e:checkout'") == 1
    pg.delete_collection("c")
    assert _stats_drift(pg) == (0, 0)
    assert _scalar(pg, "SELECT count(*) FROM plait_lex_terms") == 4  # e:checkout e:card s:checkout s:card
    with pytest.raises(StoreError, match="never updated in place"), pg._tx() as conn:
        conn.execute("UPDATE plait_chunks SET lex_exact = 'x'")


# ------------------------------------------------------------------------ concurrency
def test_concurrent_writers_lose_nothing(pg_dsn: str, pg_schema: Callable[[], str]) -> None:
    """Two stores (own pools) on one schema, started together on a fresh schema and
    writing different sources of one collection at once: every chunk is there once
    and the statistics equal a recount."""
    schema = pg_schema()
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            barrier.wait()
            store = _open(pg_dsn, schema)  # both migrate the empty schema at once
            store.ensure_collection("c")
            barrier.wait()
            for s in range(12):
                store.replace_source("c", f"{name}-{s}", "docs", [
                    make_chunk(f"{name}-{s}-{i}", f"shared words {name} n{s} part{i}", source_id=f"{name}-{s}", ordinal=i)
                    for i in range(3)
                ])
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    store = _open(pg_dsn, schema)
    ids = store.chunk_ids("c")
    assert len(ids) == 72 and len(set(ids)) == 72
    assert len(store.list_sources("c")) == 24
    assert _scalar(store, "SELECT array_agg(version ORDER BY version) FROM plait_schema_version") == list(range(1, LATEST_VERSION + 1))
    assert _scalar(store, "SELECT df FROM plait_lex_terms WHERE key = 'e:shared'") == 72
    assert _stats_drift(store) == (0, 0)
    # "left" appears in 36 of 72 chunks: idf = ln(1 + 36.5/36.5) = ln 2; every chunk
    # has 5 exact tokens (avgdl 5), so tf part = 1 and each score is ln 2.
    ranked = store.lexical_search("c", ["left"], [], limit=None, params=BM25Params(stems_weight=0))
    assert len(ranked) == 36 and ranked[0][1] == pytest.approx(math.log(2), rel=1e-9)
    store.close()


# ------------------------------------------------------------------------- migrations
def test_migrations_from_empty_schema(pg: PostgresStore) -> None:
    assert _scalar(pg, "SELECT array_agg(version ORDER BY version) FROM plait_schema_version") == list(range(1, LATEST_VERSION + 1))
    assert LATEST_VERSION == 14
    assert _scalar(pg, "SELECT to_regclass('plait_usage') IS NOT NULL") is True  # migration 7
    assert _scalar(pg, "SELECT to_regclass('plait_vector_claims') IS NOT NULL") is True
    assert _scalar(pg, "SELECT to_regclass('plait_chunks_lex')") is None  # dropped by migration 3


def test_migration_from_version_1_backfills_bm25_statistics(pg_dsn: str, pg_schema: Callable[[], str]) -> None:
    """A version-1 schema (no statistics) holding the contract's three documents is
    migrated on open; BM25 then gives the hand-computed ln(8/3) and ln(1.6)."""
    schema = pg_schema()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        assert migrate(conn, target=1) == 1
        assert schema_version(conn) == 1
        cid = conn.execute("INSERT INTO plait_collections (name, created_at) VALUES ('c', 'then') RETURNING id").fetchone()[0]  # type: ignore[index]
        for chunk_id, exact in (("d1", "err-4012 checkout"), ("d2", "checkout cart cart"), ("d3", "inventory")):
            conn.execute(
                "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                "content_hash, origin, metadata, lex_exact, lex_stems) VALUES (%s, %s, 'd', 'docs', 0, %s, "
                "%s, %s, '{}', %s, '')",
                (cid, chunk_id, exact, f"h-{exact}", Jsonb({"kind": "file", "sourcePath": "d"}), exact),
            )
    store = _open(pg_dsn, schema)
    assert _scalar(store, "SELECT array_agg(version ORDER BY version) FROM plait_schema_version") == list(range(1, LATEST_VERSION + 1))
    params = BM25Params(stems_weight=0.0)
    ranked = store.lexical_search("c", ["checkout"], [], limit=10, params=params)
    assert [i for i, _ in ranked] == ["d1", "d2"]
    assert ranked[0][1] == pytest.approx(math.log(1.6), rel=1e-9)
    assert ranked[1][1] == pytest.approx(math.log(1.6) * 1.9 / 2.08, rel=1e-9)
    store.replace_source("c", "e", "docs", [make_chunk("d4", "ERR-4012", source_id="e")])
    assert _stats_drift(store) == (0, 0)
    assert _scalar(store, "SELECT df FROM plait_lex_terms WHERE key = 'e:err-4012'") == 2
    store.close()


# ------------------------------------------------------------------- both indexes used
def _plan(store: PostgresStore, query: Any, args: dict[str, Any]) -> str:
    with store._tx() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")
        rows = conn.execute(sql.SQL("EXPLAIN ") + query, args).fetchall()
    return "\n".join(r[0] for r in rows)


def test_explain_uses_hnsw_per_dimension_and_postings(pg: PostgresStore) -> None:
    """Two collections with different dimensions each get a partial HNSW index the
    vector query uses; the lexical query reads the postings' primary key."""
    rng = np.random.default_rng(3)
    for name, dim in (("small", 3), ("large", 8)):
        pg.ensure_collection(name)
        pg.set_embedder(name, provider="fake", model=f"m{dim}", dimension=dim)
        vectors = rng.normal(size=(120, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        pg.replace_source(name, "d", "docs", [
            make_chunk(f"{name}{i}", f"word{i % 7} checkout" + (" zebra" if i == 9 else ""), source_id="d", vector=list(v), ordinal=i)
            for i, v in enumerate(vectors)
        ])
        with pg._tx() as conn:  # lexical-only filler, one statement: enough rows to plan for
            conn.execute(
                "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                "content_hash, origin, metadata, lex_exact, lex_stems) SELECT p.id, 'fill' || g, 'fill', "
                "'docs', g, 'filler', 'h' || g, '{}', '{}', 'filler text n' || g, 'filler' "
                "FROM plait_collections p, generate_series(1, 3000) g WHERE p.name = %s",
                (name,),
            )
            # What autovacuum does on a live server: analyse.
            conn.execute("ANALYZE plait_chunks")
            conn.execute("ANALYZE plait_postings")
        cid = int(_scalar(pg, "SELECT id FROM plait_collections WHERE name = %s", (name,)))  # type: ignore[arg-type]
        index = f"plait_chunks_hnsw_{cid}"
        assert _scalar(pg, "SELECT count(*) FROM pg_indexes WHERE indexname = %s AND schemaname = current_schema()", (index,)) == 1
        query, args = vector_query(cid, vectors[5], dimension=dim, limit=10, filters=None)
        assert index in _plan(pg, query, args)
        got = pg.vector_search(name, vectors[5], limit=10)
        assert got[0][0] == f"{name}5" and got[0][1] == pytest.approx(1.0, abs=1e-5)
        assert len(got) == 10
        # the lexical cache's postings load reads the postings' key
        assert "plait_postings_pkey" in _plan(pg, sql.SQL(POSTINGS), {"cid": cid, "keys": ["e:zebra"]})
        assert [i for i, _ in pg.lexical_search(name, ["zebra"], [], limit=10)] == [f"{name}9"]
    # filtered and unlimited requests scan exactly, never through the approximate index
    assert not uses_hnsw(8, 10, Filters(scopes=("docs",))) and not uses_hnsw(8, None, None)
    assert not uses_hnsw(3072, 10, None) and uses_hnsw(3072 // 2, 10, None)
    with pytest.raises(StoreError, match="3 dimensions"):
        pg.replace_source("large", "bad", "docs", [make_chunk("bad", "x", source_id="bad", vector=[1, 0, 0])])


# ------------------------------------------------------------------------------ errors
def test_unreachable_server_is_store_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}"):
        PostgresStore(f"postgresql://plait:secret@127.0.0.1:{port}/plait", connect_timeout=2)
    try:
        PostgresStore(f"postgresql://plait:secret@127.0.0.1:{port}/plait", connect_timeout=2)
    except StoreUnavailableError as exc:
        assert "secret" not in str(exc)


@contextmanager
def _fresh_database(pg_dsn: str, prefix: str) -> Iterator[str]:
    """A new, empty database's DSN (skips unless ``pg_dsn`` is a superuser's); dropped afterwards."""
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        if not _is_superuser(admin):
            pytest.skip("needs a superuser DSN to create a database")
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
    try:
        yield make_conninfo(pg_dsn, dbname=db)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))


def _is_superuser(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    return bool(row and row[0])


def _index_and_search(store: PostgresStore, *, index: bool = True) -> SearchResult:
    """ARTICLE_DOCS indexed (unless ``index`` is False) and searched with a fake 64-d embedder."""
    with Plait(store, embedder=FakeEmbedder(dimension=64)) as engine:
        if index:
            report = engine.index_documents(documents(ARTICLE_DOCS))
            assert report.chunks_added == 5 and report.complete
        return engine.search("what does ERR-4012 mean?", k=3)


def test_missing_vector_extension_names_the_fix(pg_dsn: str) -> None:
    """A database without the extension, opened by a user who may not create it."""
    role = f"plait_user_{uuid.uuid4().hex[:8]}"
    created = False
    try:
        with _fresh_database(pg_dsn, "plait_noext") as dsn:
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            created = True
            with pytest.raises(
                StoreError, match=r"(?s)extension 'vector' is missing.*permission denied.*CREATE EXTENSION vector;"
            ):
                PostgresStore(make_conninfo(dsn, user=role))
    finally:  # after the database is gone, so the role owns nothing
        if created:
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_vector_extension_in_another_schema(pg_dsn: str) -> None:
    """pgvector installed in its own schema (as managed services do: ``extensions``),
    off the search path: stores in any schema still find the type and its operators."""
    with _fresh_database(pg_dsn, "plait_extschema") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA extensions")
            conn.execute("CREATE EXTENSION vector SCHEMA extensions")
        for schema in ("app_one", None):
            result = _index_and_search(PostgresStore(dsn, schema=schema))
            assert result.vector_available and result.hits[0].metadata["docId"] == "kb-101"
            assert result.hits[0].ranks.dense is not None


def test_vector_extension_is_created_outside_plaits_schema(pg_dsn: str) -> None:
    """A store opened with ``schema=`` on a database without pgvector creates the
    extension in ``public``, not in its own schema: dropping that schema (a tenant
    removed) must not take the extension, and every other schema's vectors, with it."""
    with _fresh_database(pg_dsn, "plait_extplace") as dsn:
        # the first store's search path holds only its own schema: the extension it
        # creates in public must still be found, on the very connection that created it
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA tenant_only")
        only = _index_and_search(PostgresStore(make_conninfo(dsn, options="-csearch_path=tenant_only")))
        assert only.hits[0].ranks.dense is not None
        for schema in ("tenant_a", "tenant_b"):
            _index_and_search(PostgresStore(dsn, schema=schema))
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                " WHERE e.extname = 'vector'"
            ).fetchone()
            assert row == ("public",)
            conn.execute("DROP SCHEMA tenant_a CASCADE")
        result = _index_and_search(PostgresStore(dsn, schema="tenant_b"), index=False)
        assert result.vector_available and result.hits[0].ranks.dense is not None


# ------------------------------------------------------------------- selected by URL
def test_open_store_selects_postgres_and_the_engine_searches(pg_dsn: str, pg_schema: Callable[[], str]) -> None:
    schema = pg_schema()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = pg_dsn + ("&" if "?" in pg_dsn else "?") + f"options=-csearch_path%3D{schema},public"
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    with Plait(store, embedder=FakeEmbedder(dimension=64)) as engine:
        report = engine.index_documents(documents(ARTICLE_DOCS))
        assert report.chunks_added == 5 and report.complete
        result = engine.search("what does ERR-4012 mean?", k=3)
        assert result.vector_available
        assert result.hits[0].metadata["docId"] == "kb-101"
        assert result.hits[0].match in ("both", "lexical")
    assert _scalar_raw(pg_dsn, schema, "SELECT count(*) FROM plait_chunks") == 5


def _scalar_raw(dsn: str, schema: str, query: str) -> object:
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        row = conn.execute(query).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]
