"""The lexical arm's per-generation cache (score rows) on the SQLite store.

Scores are hand-computed with k1=0.9, b=0.4 and Lucene's idf; the exact field only
(``stems_weight=0``) keeps the arithmetic short. Every test goes through a real
SQLiteStore file; the cached path is also checked against the uncached reference
:func:`plait.stores.lexical.bm25_rank`.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from plait.analysis import analyse
from plait.stores.base import BM25Params, Filters
from plait.stores.lexical import bm25_rank, top_k
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import make_chunk
from plait.testing.corpus import ARTICLE_DOCS

EXACT_ONLY = BM25Params(stems_weight=0.0)


def _bm25(tf: float, length: float, avgdl: float, n: int, df: int) -> float:
    """Hand formula: ln(1 + (N - df + 0.5)/(df + 0.5)) · tf·1.9 / (tf + 0.9·(0.6 + 0.4·len/avgdl))."""
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * length / avgdl))


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "plait.db")
    s.ensure_collection("c")
    # exact lengths 2, 3, 1: avgdl = 2
    s.replace_source("c", "a", "docs", [make_chunk("d1", "ERR-4012 checkout", source_id="a")])
    s.replace_source("c", "b", "docs", [make_chunk("d2", "checkout cart cart", source_id="b")])
    s.replace_source("c", "i", "adr", [make_chunk("d3", "inventory", source_id="i", scope="adr")])
    return s


def _search(store: SQLiteStore, *terms: str, limit: int | None = 10, **kw: object) -> list[tuple[str, float]]:
    return store.lexical_search("c", list(terms), [], limit=limit, params=EXACT_ONLY, **kw)  # type: ignore[arg-type]


def test_warm_cache_gives_the_hand_computed_scores(store: SQLiteStore) -> None:
    first = _search(store, "checkout", "cart")
    # d2: checkout (df 2, tf 1, len 3) + cart (df 1, tf 2, len 3); d1: checkout (len 2)
    d2 = _bm25(1, 3, 2, 3, 2) + _bm25(2, 3, 2, 3, 1)
    d1 = _bm25(1, 2, 2, 3, 2)
    assert [i for i, _ in first] == ["d2", "d1"]
    assert [s for _, s in first] == pytest.approx([d2, d1], rel=1e-12)
    assert _search(store, "checkout", "cart") == first  # served from the cached rows


def test_add_invalidates_the_cache(store: SQLiteStore) -> None:
    before = _search(store, "checkout")
    assert [s for _, s in before] == pytest.approx([_bm25(1, 2, 2, 3, 2), _bm25(1, 3, 2, 3, 2)])
    store.replace_source("c", "e", "docs", [make_chunk("d4", "checkout", source_id="e")])
    # N = 4, df = 3, avgdl = (2 + 3 + 1 + 1) / 4 = 1.75
    after = _search(store, "checkout")
    assert [i for i, _ in after] == ["d4", "d1", "d2"]
    expected = [_bm25(1, 1, 1.75, 4, 3), _bm25(1, 2, 1.75, 4, 3), _bm25(1, 3, 1.75, 4, 3)]
    assert [s for _, s in after] == pytest.approx(expected, rel=1e-12)


def test_delete_invalidates_the_cache(store: SQLiteStore) -> None:
    assert [i for i, _ in _search(store, "checkout")] == ["d1", "d2"]
    assert store.delete_source("c", "a") == 1
    # N = 2, df = 1, avgdl = (3 + 1) / 2 = 2
    after = _search(store, "checkout")
    assert [i for i, _ in after] == ["d2"]
    assert after[0][1] == pytest.approx(_bm25(1, 3, 2, 2, 1), rel=1e-12)
    assert _search(store, "err-4012") == []


def test_replace_invalidates_the_cache(store: SQLiteStore) -> None:
    assert [i for i, _ in _search(store, "inventory")] == ["d3"]
    store.replace_source("c", "i", "adr", [make_chunk("d3", "warehouse stock", source_id="i", scope="adr")])
    assert _search(store, "inventory") == []
    # lengths 2, 3, 2: avgdl 7/3; "warehouse" df 1
    found = _search(store, "warehouse")
    assert [i for i, _ in found] == ["d3"]
    assert found[0][1] == pytest.approx(_bm25(1, 2, 7 / 3, 3, 1), rel=1e-12)


def test_filters_apply_to_cached_rows(store: SQLiteStore) -> None:
    assert [i for i, _ in _search(store, "checkout", "inventory")] == ["d3", "d1", "d2"]
    adr = _search(store, "checkout", "inventory", filters=Filters(scopes=("adr",)))
    assert [i for i, _ in adr] == ["d3"]
    docs = _search(store, "checkout", "inventory", filters=Filters(scopes=("docs",)))
    assert [i for i, _ in docs] == ["d1", "d2"]
    assert _search(store, "checkout", "inventory", filters=Filters(scopes=("none",))) == []


def test_other_params_get_their_own_rows(store: SQLiteStore) -> None:
    default = _search(store, "checkout")
    doubled = store.lexical_search(
        "c", ["checkout"], [], limit=10, params=BM25Params(exact_weight=2.0, stems_weight=0.0)
    )
    assert [i for i, _ in doubled] == [i for i, _ in default]
    assert [s for _, s in doubled] == pytest.approx([2 * s for _, s in default], rel=1e-12)
    assert _search(store, "checkout") == default


def test_ties_break_by_insertion_order_at_the_cut(tmp_path: Path) -> None:
    """Five identical chunks score the same; the cut keeps the earliest rows, in order."""
    s = SQLiteStore(tmp_path / "t.db")
    s.ensure_collection("c")
    for name in ("e", "b", "d", "a", "c"):
        s.replace_source("c", name, "docs", [make_chunk(f"t{name}", "same words here", source_id=name)])
    assert [i for i, _ in s.lexical_search("c", ["same", "words"], [], limit=2)] == ["te", "tb"]
    assert [i for i, _ in s.lexical_search("c", ["words"], [], limit=3)] == ["te", "tb", "td"]
    assert [i for i, _ in s.lexical_search("c", ["same"], [], limit=None)] == ["te", "tb", "td", "ta", "tc"]
    vector = np.array([1.0, 0.0], np.float32)
    for name in ("e", "b", "d", "a", "c"):
        s.replace_source("c", name, "docs", [make_chunk(f"t{name}", "same words here", source_id=name, vector=[1, 0])])
    assert [i for i, _ in s.vector_search("c", vector, limit=2)] == ["te", "tb"]
    s.close()


def _article_store(path: Path) -> SQLiteStore:
    s = SQLiteStore(path)
    s.ensure_collection("c")
    for doc_id, text in ARTICLE_DOCS.items():
        s.replace_source("c", doc_id, "docs", [make_chunk(doc_id, text, source_id=doc_id)])
    return s


def _reference(store: SQLiteStore, exact: list[str], stems: list[str], limit: int | None) -> list[tuple[str, float]]:
    """The uncached reference ranking, read straight from the tables."""
    db = store._db
    rows = db.execute("SELECT rowid, len_exact, len_stems, chunk_id FROM chunks ORDER BY rowid").fetchall()
    rowids = np.array([r[0] for r in rows], dtype=np.int64)
    lengths = np.array([(r[1], r[2]) for r in rows], dtype=np.float64)
    ids = {r[0]: r[3] for r in rows}
    postings = {}
    for field, terms in enumerate((exact, stems)):
        postings[field] = []
        for term in dict.fromkeys(terms):
            found = db.execute(
                "SELECT p.chunk_rowid, p.tf FROM terms t JOIN postings p ON p.term_id = t.id "
                "WHERE t.field = ? AND t.term = ? ORDER BY p.chunk_rowid",
                (field, term),
            ).fetchall()
            postings[field].append((np.array([r[0] for r in found], dtype=np.int64), np.array([r[1] for r in found], dtype=np.float64)))
    return [(ids[r], s) for r, s in bm25_rank(rowids, lengths, postings, BM25Params(), limit=limit)]


QUERIES = ["payment declined", "ERR-4012 checkout", "tenant database routing", "the of and", "resolveTenantDB"]


def test_cached_ranking_equals_the_reference_and_survives_a_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    warm = _article_store(path)
    for query in QUERIES:
        a = analyse(query)
        for limit in (1, 3, None):
            first = warm.lexical_search("c", a.exact, a.stems, limit=limit)
            again = warm.lexical_search("c", a.exact, a.stems, limit=limit)  # warm rows
            cold = SQLiteStore(path)  # a new handle: every row rebuilt from the file
            rebuilt = cold.lexical_search("c", a.exact, a.stems, limit=limit)
            cold.close()
            assert first == again == rebuilt == _reference(warm, a.exact, a.stems, limit)
    warm.close()


def test_threads_share_the_cache(tmp_path: Path) -> None:
    """Four threads query at once (each on a pooled buffer): every answer is the serial one."""
    store = _article_store(tmp_path / "a.db")
    analysed = [analyse(q) for q in QUERIES]
    expected = [store.lexical_search("c", a.exact, a.stems, limit=5) for a in analysed] * 20

    def work() -> list[list[tuple[str, float]]]:
        return [store.lexical_search("c", a.exact, a.stems, limit=5) for a in analysed * 20]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = [f.result() for f in [pool.submit(work) for _ in range(4)]]
    assert results == [expected] * 4
    store.close()


def test_top_k_breaks_ties_by_key_at_the_cut() -> None:
    totals = np.array([1.0, 3.0, 2.0, 3.0, 2.0, 2.0])
    keys = np.array([60, 50, 40, 30, 20, 10])
    assert top_k(keys, totals, 3).tolist() == [3, 1, 5]  # the 3s (keys 30, 50), then key 10 of the 2s
    assert top_k(keys, totals, None).tolist() == [3, 1, 5, 4, 2, 0]
    assert top_k(keys, totals, 10).tolist() == [3, 1, 5, 4, 2, 0]
    assert top_k(keys, totals, 0).tolist() == []


def test_dense_filters_apply_to_the_cached_matrix(store: SQLiteStore) -> None:
    for name, vector in (("a", [1, 0]), ("b", [0.6, 0.8]), ("i", [0, 1])):
        chunk = {"a": ("d1", "ERR-4012 checkout"), "b": ("d2", "checkout cart cart"), "i": ("d3", "inventory")}[name]
        scope = "adr" if name == "i" else "docs"
        store.replace_source("c", name, scope, [make_chunk(chunk[0], chunk[1], source_id=name, scope=scope, vector=vector)])
    query = np.array([1.0, 0.0], np.float32)
    warm = store.vector_search("c", query, limit=3)  # loads the matrix
    assert [i for i, _ in warm] == ["d1", "d2", "d3"]
    assert [s for _, s in warm] == pytest.approx([1.0, 0.6, 0.0], abs=1e-6)
    assert [i for i, _ in store.vector_search("c", query, limit=3, filters=Filters(scopes=("adr",)))] == ["d3"]
    assert [i for i, _ in store.vector_search("c", query, limit=1, filters=Filters(scopes=("docs",)))] == ["d1"]


def test_lexical_terms_drop_stopwords_from_the_exact_field_only() -> None:
    from plait.search import lexical_terms

    assert lexical_terms("What is ERR-4012?") == (["err-4012"], ["err-4012"])
    assert lexical_terms("the of") == (["the", "of"], [])  # nothing but stopwords: kept


def test_length_load_reads_the_covering_index_not_the_chunk_rows(store: SQLiteStore) -> None:
    """Migration 3: after a write, reloading every chunk's lengths never touches content or vectors."""
    from plait.stores.sqlite_snapshot import LENGTHS_SQL

    plan = store._db.execute("EXPLAIN QUERY PLAN " + LENGTHS_SQL, (1,)).fetchall()
    assert "COVERING INDEX chunks_lengths" in " ".join(str(step[-1]) for step in plan)


def test_a_collection_recreated_by_another_handle_is_not_served_from_a_stale_cache(tmp_path: Path) -> None:
    path = tmp_path / "plait.db"
    reader, writer = SQLiteStore(path), SQLiteStore(path)
    reader.ensure_collection("c")
    reader.replace_source("c", "a", "docs", [make_chunk("old", "checkout refund", source_id="a")])
    assert [i for i, _ in _search(reader, "checkout")] == ["old"]  # cache filled
    # Another handle deletes it and creates it again with the same number of writes:
    # SQLite may hand out the same row id, so (id, write count) alone would collide.
    writer.delete_collection("c")
    writer.ensure_collection("c")
    writer.replace_source("c", "a", "docs", [make_chunk("new", "checkout invoice", source_id="a")])
    assert [i for i, _ in _search(reader, "checkout")] == ["new"]
    reader.close()
    writer.close()
