"""The lexical index's cache is bounded: a byte budget with least-recently-used eviction
of term postings and score rows, and a bounded set of remembered misses (terms the
collection does not hold). An evicted term is read again and scores identically.

The index is the real :class:`LexicalIndex` over three chunks (exact lengths 2, 3, 1:
avgdl = 2) with a counting loader; scores are hand-computed with k1=0.9, b=0.4 and
Lucene's idf, the exact field only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from plait.stores.base import BM25Params
from plait.stores.lexical_index import ENTRY_OVERHEAD, LexicalIndex

EXACT_ONLY = BM25Params(stems_weight=0.0)
# term -> (rowids, tfs) in the exact field
POSTINGS = {"checkout": ([1, 2], [1, 1]), "cart": ([2], [2]), "inventory": ([3], [1])}


def _bm25(tf: float, length: float, avgdl: float, n: int, df: int) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * length / avgdl))


class _Loader:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, field: int, term: str) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append(term)
        ids, tfs = POSTINGS.get(term, ([], []))
        return np.asarray(ids, dtype=np.int64), np.asarray(tfs, dtype=np.float64)


def _index(**kw: int) -> LexicalIndex:
    lengths = np.array([[2, 2], [3, 3], [1, 1]], dtype=np.float64)
    return LexicalIndex(np.array([1, 2, 3], dtype=np.int64), lengths, ["d1", "d2", "d3"], **kw)


def _approx(hits: list[tuple[str, float]]) -> list[tuple[str, object]]:
    return [(cid, pytest.approx(score, rel=1e-12)) for cid, score in hits]


def _rank(index: LexicalIndex, load: _Loader, *terms: str) -> list[tuple[str, float]]:
    rows = index.rows([list(terms), []], EXACT_ONLY, load)
    assert rows is not None
    return index.rank(rows, limit=10)


def test_a_stream_of_unknown_terms_leaves_the_cache_bounded() -> None:
    """1,000 distinct words the collection does not hold: at most ``max_misses`` (8) are
    remembered, the most recent ones (not read again), and no bytes are counted."""
    index, load = _index(max_misses=8), _Loader()
    for i in range(1000):
        assert _rank(index, load, f"nowhere{i}") == []
    assert index.cached_terms == (0, 8)
    assert index.cached_bytes == 0
    assert len(load.calls) == 1000
    _rank(index, load, "nowhere999", "nowhere992")  # remembered: no read
    assert len(load.calls) == 1000
    _rank(index, load, "nowhere0")  # forgotten long ago: read again
    assert load.calls[-1] == "nowhere0" and len(load.calls) == 1001
    assert index.cached_terms == (0, 8)


def test_an_evicted_term_is_read_again_and_scores_identically() -> None:
    """A budget holding one term's postings and score row (2 postings: 16 + 16 bytes,
    score row 16, plus the per-term overhead): querying "cart" evicts "checkout", whose
    next query reads it again and gives the same scores, the hand-computed ones."""
    one_term = ENTRY_OVERHEAD + 48
    index, load = _index(budget=one_term), _Loader()
    first = _rank(index, load, "checkout")
    assert first == _approx([("d1", _bm25(1, 2, 2.0, 3, 2)), ("d2", _bm25(1, 3, 2.0, 3, 2))])
    assert index.cached_bytes == one_term
    assert _rank(index, load, "cart") == _approx([("d2", _bm25(2, 3, 2.0, 3, 1))])
    assert index.cached_terms == (1, 0)
    assert index.cached_bytes <= one_term
    assert index.held([(0, "checkout")]) == {}
    assert _rank(index, load, "checkout") == first  # bit for bit
    assert load.calls == ["checkout", "cart", "checkout"]
    _rank(index, load, "checkout")  # cached again: no read
    assert load.calls == ["checkout", "cart", "checkout"]


def test_a_query_larger_than_the_budget_still_ranks_exactly() -> None:
    """Budget 0: every term is evicted as soon as the next one loads, yet a three-term
    query sums all three rows (scores of "checkout cart" add in query order)."""
    index, load = _index(budget=0), _Loader()
    got = _rank(index, load, "checkout", "cart", "inventory")
    cart = _bm25(2, 3, 2.0, 3, 1)
    want = sorted(
        [("d1", _bm25(1, 2, 2.0, 3, 2)), ("d2", _bm25(1, 3, 2.0, 3, 2) + cart), ("d3", _bm25(1, 1, 2.0, 3, 1))],
        key=lambda hit: -hit[1],
    )
    assert got == _approx(want)
    assert index.cached_terms[0] == 1  # only the last one loaded


def test_many_parameter_sets_count_against_the_budget() -> None:
    """Score rows per BM25Params are counted: 50 parameter sets over one term keep the
    cache within a budget of two rows' worth, by evicting older terms."""
    budget = 2 * (ENTRY_OVERHEAD + 48)
    index, load = _index(budget=budget), _Loader()
    for i in range(50):
        params = BM25Params(k1=0.5 + i / 100, stems_weight=0.0)
        for term in ("checkout", "cart"):
            assert index.rows([[term], []], params, load) is not None
        assert index.cached_bytes <= budget
    assert index.cached_terms[0] <= 2


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="budget"):
        _index(budget=-1)
