"""The PostgreSQL lexical arm reads ``plait_postings``: they follow every write, a
version-2 database is backfilled on open, filters apply before the cut, and the
scores are the hand-computed BM25 ones, equal to the embedded store's.

A real PostgreSQL: ``PLAIT_PG_DSN`` when set, else a private ``pgserver`` started
once for this module (the pattern of ``test_postgres_store.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.analysis import analyse_query
from plait.errors import StoreError
from plait.stores.base import BM25Params, Filters, StoredChunk
from plait.stores.postgres import PostgresStore
from plait.stores.postgres_lexcache import LENGTHS, POSTINGS, index_from, postings_from
from plait.stores.postgres_schema import LATEST_VERSION, migrate, schema_version
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.testing.pg import postgres_dsn, throwaway_schema

EXACT = BM25Params(stems_weight=0.0)  # k1 = 0.9, b = 0.4, exact field only


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-postings-") as dsn:
        yield dsn


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_p_") as name:
        yield name


@pytest.fixture
def pg(pg_dsn: str, schema: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_dsn, schema=schema)
    yield store
    store.close()


def _rows(store: PostgresStore, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with store._tx() as conn:
        return conn.execute(query, params).fetchall()  # type: ignore[arg-type]


def _exact_postings(store: PostgresStore, collection: str = "c") -> set[tuple[str, str, int, int]]:
    """(key, chunk id, tf, len) of the exact-field postings of a collection."""
    return set(_rows(store, """
        SELECT t.key, c.chunk_id, p.tf, p.len FROM plait_postings p
        JOIN plait_collections k ON k.id = p.collection_id AND k.name = %s
        JOIN plait_lex_terms t ON t.collection_id = p.collection_id AND t.id = p.term
        JOIN plait_chunks c ON c.collection_id = p.collection_id AND c.id = p.chunk_row
        WHERE t.key LIKE 'e:%%'""", (collection,)))  # type: ignore[arg-type]


def _postings_drift(store: PostgresStore) -> int:
    """Postings rows that disagree with a recount from the chunk rows (both ways)."""
    recount = """SELECT c.collection_id, x.key, c.id, x.tf,
                        CASE x.field WHEN 0 THEN c.len_exact ELSE c.len_stems END
                 FROM plait_chunks c, plait_lex_postings(c.lex_exact, c.lex_stems) x"""
    stored = ("SELECT p.collection_id, t.key, p.chunk_row, p.tf, p.len FROM plait_postings p "
              "JOIN plait_lex_terms t ON t.collection_id = p.collection_id AND t.id = p.term")
    row = _rows(store, f"SELECT count(*) FROM (({stored} EXCEPT {recount}) UNION ALL ({recount} EXCEPT {stored})) d")
    return int(row[0][0])


def _same_as_sqlite(pg: PostgresStore, lite: SQLiteStore, texts: list[str]) -> None:
    """Both stores rank every query alike, to the last bit of every score, under both
    weightings (the idf is computed in Python and the sums run in query order)."""
    for params in (BM25Params(), EXACT):
        for text in texts:
            q = analyse_query(text)
            want = lite.lexical_search("c", q.exact, q.stems, limit=None, params=params)
            got = pg.lexical_search("c", q.exact, q.stems, limit=None, params=params)
            assert [i for i, _ in got] == [i for i, _ in want], text
            assert got == want, text  # the same floating-point values


def _norm(length: float, avgdl: float) -> float:
    return 0.9 * (0.6 + 0.4 * length / avgdl)


def test_postings_follow_add_replace_delete(pg: PostgresStore, tmp_path: Path) -> None:
    lite = SQLiteStore(tmp_path / "ref.db")
    queries = ["checkout", "stock", "err-4012 checkout cart", "zebra", "inventory"]
    for store in (pg, lite):
        store.ensure_collection("c")
        store.replace_source("c", "s1", "docs", [
            make_chunk("a", "checkout ERR-4012 checkout", source_id="s1"),
            make_chunk("b", "checkout cart", source_id="s1", ordinal=1),
        ])
        store.replace_source("c", "s2", "adr", [make_chunk("d", "inventory stock", source_id="s2", scope="adr")])
    # 1. a (len 3), b (2), d (2): N = 3, avgdl = 7/3; "checkout" df 2, idf = ln(1.6)
    assert _exact_postings(pg) == {
        ("e:checkout", "a", 2, 3), ("e:err-4012", "a", 1, 3), ("e:checkout", "b", 1, 2),
        ("e:cart", "b", 1, 2), ("e:inventory", "d", 1, 2), ("e:stock", "d", 1, 2),
    }
    ranked = pg.lexical_search("c", ["checkout"], [], limit=10, params=EXACT)
    assert [i for i, _ in ranked] == ["a", "b"]
    assert ranked[0][1] == pytest.approx(math.log(1.6) * 2 * 1.9 / (2 + _norm(3, 7 / 3)), rel=1e-12)
    assert ranked[1][1] == pytest.approx(math.log(1.6) * 1.9 / (1 + _norm(2, 7 / 3)), rel=1e-12)
    _same_as_sqlite(pg, lite, queries)

    # 2. a edited (now len 1, no "checkout"), b unchanged, c added (len 4):
    #    N = 4, avgdl = 9/4; "checkout" df 2 (b, c), idf = ln(1 + 2.5/2.5) = ln 2
    for store in (pg, lite):
        store.replace_source("c", "s1", "docs", [
            make_chunk("a", "ERR-4012", source_id="s1"),
            make_chunk("b", "checkout cart", source_id="s1", ordinal=1),
            make_chunk("c", "checkout checkout checkout stock", source_id="s1", ordinal=2),
        ])
    assert _exact_postings(pg) == {
        ("e:err-4012", "a", 1, 1), ("e:checkout", "b", 1, 2), ("e:cart", "b", 1, 2),
        ("e:checkout", "c", 3, 4), ("e:stock", "c", 1, 4), ("e:inventory", "d", 1, 2),
        ("e:stock", "d", 1, 2),
    }
    ranked = pg.lexical_search("c", ["checkout"], [], limit=10, params=EXACT)
    assert [i for i, _ in ranked] == ["c", "b"]
    assert ranked[0][1] == pytest.approx(math.log(2) * 3 * 1.9 / (3 + _norm(4, 9 / 4)), rel=1e-12)
    assert ranked[1][1] == pytest.approx(math.log(2) * 1.9 / (1 + _norm(2, 9 / 4)), rel=1e-12)
    _same_as_sqlite(pg, lite, queries)

    # 3. s2 deleted: N = 3 (a 1, b 2, c 4), avgdl = 7/3; "stock" df 1, idf = ln(8/3)
    for store in (pg, lite):
        store.delete_source("c", "s2")
    assert {(k, i) for k, i, _, _ in _exact_postings(pg) if i == "d"} == set()
    ranked = pg.lexical_search("c", ["stock"], [], limit=10, params=EXACT)
    assert ranked == [("c", pytest.approx(math.log(8 / 3) * 1.9 / (1 + _norm(4, 7 / 3)), rel=1e-12))]
    _same_as_sqlite(pg, lite, queries)

    # 4. a term repeated 300 times: the posting keeps tf = 300 (the tsvector's
    #    positions stop at 256), as the embedded store counts it.
    for store in (pg, lite):
        store.replace_source("c", "s3", "docs", [make_chunk("z", " ".join(["zebra"] * 300), source_id="s3")])
    assert ("e:zebra", "z", 300, 300) in _exact_postings(pg)
    _same_as_sqlite(pg, lite, queries)
    assert _postings_drift(pg) == 0
    lite.close()


def test_deleting_a_collection_removes_only_its_postings(pg: PostgresStore) -> None:
    for name in ("c", "other"):
        pg.ensure_collection(name)
        pg.replace_source(name, "s", "docs", [make_chunk(f"{name}1", "checkout card", source_id="s")])
    assert pg.delete_collection("c")
    assert _rows(pg, "SELECT count(*) FROM plait_postings")[0][0] == 4  # e:/s: checkout, card
    assert _exact_postings(pg, "other") == {("e:checkout", "other1", 1, 2), ("e:card", "other1", 1, 2)}
    assert _postings_drift(pg) == 0


def test_a_failed_write_leaves_the_old_postings(pg: PostgresStore) -> None:
    """Postings are written in the chunk rows' transaction: a replace that fails
    half-way (its second chunk has a token PostgreSQL cannot hold in a tsvector)
    leaves the source's old chunk and postings exactly as they were."""
    pg.ensure_collection("c")
    pg.replace_source("c", "s", "docs", [make_chunk("old", "checkout card", source_id="s")])
    before = _exact_postings(pg)
    good = make_chunk("new", "checkout", source_id="s")
    bad = make_chunk("bad", "card", source_id="s", ordinal=1)
    bad = StoredChunk(bad.chunk, ["y" * 3000], [], None)
    with pytest.raises(StoreError, match="too long"):
        pg.replace_source("c", "s", "docs", [good, bad])
    assert _exact_postings(pg) == before == {("e:checkout", "old", 1, 2), ("e:card", "old", 1, 2)}
    assert [i for i, _ in pg.lexical_search("c", ["checkout"], [], limit=5)] == ["old"]
    assert _postings_drift(pg) == 0


def test_filters_apply_before_the_cut(pg: PostgresStore) -> None:
    """Four "docs" chunks outscore two "adr" ones; limit 2 with a filter still gives
    two hits, the filtered ones, with the scores they have unfiltered."""
    pg.ensure_collection("c")
    pg.replace_source("c", "docs.md", "docs", [
        make_chunk(f"d{i}", "tenant tenant", source_id="docs.md", ordinal=i, metadata={"lang": "en"})
        for i in range(4)
    ])
    pg.replace_source("c", "adr.md", "adr", [
        make_chunk("a1", "tenant routing retry", source_id="adr.md", scope="adr", metadata={"lang": "pt"}),
        make_chunk("a2", "tenant routing", source_id="adr.md", scope="adr", ordinal=1, metadata={"lang": "en"}),
    ])
    everything = dict(pg.lexical_search("c", ["tenant"], [], limit=None, params=EXACT))
    # N = 6, df = 6: idf = ln(1 + 0.5/6.5); avgdl = (4·2 + 3 + 2)/6 = 13/6
    idf = math.log(1 + 0.5 / 6.5)
    assert everything["a2"] == pytest.approx(idf * 1.9 / (1 + _norm(2, 13 / 6)), rel=1e-12)
    assert everything["a1"] == pytest.approx(idf * 1.9 / (1 + _norm(3, 13 / 6)), rel=1e-12)
    top = pg.lexical_search("c", ["tenant"], [], limit=2, params=EXACT)
    assert [i for i, _ in top] == ["d0", "d1"]  # tied: row (insertion) order
    adr = pg.lexical_search("c", ["tenant"], [], limit=2, filters=Filters(scopes=("adr",)), params=EXACT)
    assert adr == [("a2", everything["a2"]), ("a1", everything["a1"])]
    pt = pg.lexical_search("c", ["tenant"], [], limit=2, filters=Filters(metadata={"lang": "pt"}), params=EXACT)
    assert pt == [("a1", everything["a1"])]
    both = Filters(scopes=("adr",), metadata={"lang": "en"})
    assert [i for i, _ in pg.lexical_search("c", ["tenant"], [], limit=None, filters=both)] == ["a2"]
    assert pg.lexical_search("c", ["tenant"], [], limit=5, filters=Filters(scopes=("nope",))) == []


def test_migration_from_version_2_backfills_postings(pg_dsn: str, schema: str) -> None:
    """A version-2 database (statistics, no postings) holding two collections is
    migrated on open: postings for every chunk, the hand-computed BM25, and later
    writes keep them exact."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        assert migrate(conn, target=2) == 2 and schema_version(conn) == 2
        assert conn.execute("SELECT to_regclass('plait_postings')").fetchone() == (None,)
        for name, docs in (
            ("c", (("d1", "err-4012 checkout"), ("d2", "checkout cart cart"), ("d3", "inventory"))),
            ("other", (("o1", "checkout"),)),
        ):
            cid = conn.execute(
                "INSERT INTO plait_collections (name, created_at) VALUES (%s, 'then') RETURNING id", (name,)
            ).fetchone()[0]  # type: ignore[index]
            for chunk_id, exact in docs:
                conn.execute(
                    "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
                    "content_hash, origin, metadata, lex_exact, lex_stems) VALUES (%s, %s, 'd', 'docs', 0, %s, "
                    "%s, %s, '{}', %s, %s)",
                    (cid, chunk_id, exact, f"h-{exact}", Jsonb({"kind": "file", "sourcePath": "d"}), exact, exact),
                )
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        assert _rows(store, "SELECT array_agg(version ORDER BY version) FROM plait_schema_version")[0][0] == list(
            range(1, LATEST_VERSION + 1)
        )
        assert LATEST_VERSION == 14  # 4: backfill claims, 5: term ids and bounds, 6: records, 7: usage, 8: min_ratio, 9: generation, 10: change log, 11: revision, 12: postings delete by the full key, 13: revision log and instance, 14: queued counts
        assert _exact_postings(store) == {
            ("e:err-4012", "d1", 1, 2), ("e:checkout", "d1", 1, 2), ("e:checkout", "d2", 1, 3),
            ("e:cart", "d2", 2, 3), ("e:inventory", "d3", 1, 1),
        }
        assert _exact_postings(store, "other") == {("e:checkout", "o1", 1, 1)}
        assert _postings_drift(store) == 0
        # migration 8 backfilled the smallest len/tf per term: checkout (tf 1, len 2) and
        # (1, 3) -> 2.0; cart (tf 2, len 3) -> 1.5
        assert _rows(store, "SELECT t.key, t.max_tf, t.min_ratio FROM plait_lex_terms t JOIN plait_collections c "
                     "ON c.id = t.collection_id WHERE c.name = 'c' AND t.key IN ('e:checkout', 'e:cart') ORDER BY 1") == [
            ("e:cart", 2, 1.5), ("e:checkout", 1, 2.0)]
        # N = 3, avgdl = 2, "checkout" df 2: d1 scores ln(1.6), d2 ln(1.6)·1.9/2.08
        ranked = store.lexical_search("c", ["checkout"], [], limit=10, params=EXACT)
        assert [i for i, _ in ranked] == ["d1", "d2"]
        assert ranked[0][1] == pytest.approx(math.log(1.6), rel=1e-12)
        assert ranked[1][1] == pytest.approx(math.log(1.6) * 1.9 / 2.08, rel=1e-12)
        # d1 and d2 both hold "checkout" in the stems field too (weight 1 each):
        both = store.lexical_search("c", ["checkout"], ["checkout"], limit=10)
        assert [s for _, s in both] == pytest.approx([2 * s for _, s in ranked], rel=1e-12)
        store.replace_source("c", "d", "docs", [make_chunk("d4", "ERR-4012", source_id="d")])  # d1-d3 go
        assert _exact_postings(store) == {("e:err-4012", "d4", 1, 1)}
        assert _postings_drift(store) == 0
    finally:
        store.close()


def test_lexical_loads_read_the_postings_key_and_the_lengths_index(pg: PostgresStore) -> None:
    """With statistics of a few thousand chunks, the lexical cache's loads read each
    term's postings through the postings' primary key and the chunk lengths index-only
    (never the wide chunk rows), and parse back to the hand-written values."""
    pg.ensure_collection("c")
    with pg._tx() as conn:
        conn.execute(
            "INSERT INTO plait_chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
            "content_hash, origin, metadata, lex_exact, lex_stems) SELECT p.id, 'fill' || g, 'fill', "
            "'docs', g, 'filler', 'h' || g, '{}', '{}', 'filler text n' || g || "
            "CASE WHEN g = 7 THEN ' zebra zebra' ELSE '' END, 'filler' "
            "FROM plait_collections p, generate_series(1, 3000) g WHERE p.name = 'c'"
        )
        cid = conn.execute("SELECT id FROM plait_collections WHERE name = 'c'").fetchone()[0]  # type: ignore[index]
    pg.vacuum()  # what autovacuum does on a live server: visibility map and statistics
    args = {"cid": cid, "keys": ["e:zebra", "e:absent", "e:text"]}
    with pg._tx() as conn:
        plans = ["\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + sql.SQL(q), a).fetchall())
                 for q, a in ((POSTINGS, args), (LENGTHS, {"cid": cid}))]
        found = postings_from(conn.execute(POSTINGS, args).fetchall(), [(0, "zebra"), (0, "absent"), (0, "text")])
        index = index_from(conn.execute(LENGTHS, {"cid": cid}).fetchone())
        first = conn.execute("SELECT min(id) FROM plait_chunks WHERE collection_id = %s", (cid,)).fetchone()[0]  # type: ignore[index]
    assert "plait_postings_pkey" in plans[0] and "Seq Scan" not in plans[0], plans[0]
    assert "Index Only Scan using plait_chunks_lengths" in plans[1] and "Seq Scan" not in plans[1], plans[1]
    ids, tfs = found[(0, "zebra")]
    assert ids.tolist() == [first + 6] and tfs.tolist() == [2.0]
    assert found[(0, "absent")][0].size == 0 and found[(0, "text")][0].size == 3000
    assert index.size == 3000 and index.chunk_ids[:2] == ["fill1", "fill2"] and index.chunk_ids[6] == "fill7"
    assert index.lengths[6].tolist() == [5.0, 1.0] and index.lengths[0].tolist() == [3.0, 1.0]
    assert index.rowids.tolist() == list(range(first, first + 3000))
    assert [i for i, _ in pg.lexical_search("c", ["zebra"], [], limit=10)] == ["fill7"]


def test_lexical_settings_stay_in_their_transaction(pg: PostgresStore) -> None:
    """The lexical arm's REPEATABLE READ snapshot and work_mem floor are SET LOCAL:
    the pooled connection comes back with the server's settings."""
    pg.ensure_collection("c")
    pg.replace_source("c", "s", "docs", [make_chunk("a", "checkout", source_id="s")])
    before = _rows(pg, "SELECT current_setting('work_mem'), current_setting('transaction_isolation')")
    assert [i for i, _ in pg.lexical_search("c", ["checkout"], ["checkout"], limit=5)] == ["a"]
    assert _rows(pg, "SELECT current_setting('work_mem'), current_setting('transaction_isolation')") == before
    assert before[0][1] == "read committed"


def test_postings_from_decodes_records_and_sorts_what_the_scan_left_unsorted() -> None:
    """:data:`POSTINGS` promises no order (its aggregate no longer sorts): 12-byte records,
    row id int8 then tf int4, big-endian; a key's rows come back ascending either way."""
    def blob(records: list[tuple[int, int]]) -> bytes:
        return b"".join(r.to_bytes(8, "big") + t.to_bytes(4, "big") for r, t in records)

    pairs = [(0, "a"), (1, "b"), (0, "c")]
    found = postings_from([(2, blob([(30, 1), (10, 3), (2**40, 2)])), (3, blob([(5, 7), (9, 1)]))], pairs)
    assert found[(1, "b")][0].tolist() == [10, 30, 2**40] and found[(1, "b")][1].tolist() == [3.0, 1.0, 2.0]
    assert found[(0, "c")][0].tolist() == [5, 9] and found[(0, "c")][1].tolist() == [7.0, 1.0]
    assert found[(0, "a")][0].size == 0 and found[(1, "b")][0].dtype == np.int64
