"""``LexicalIndex.apply``: the next generation's index from this one and the changed rows.

Each case builds a corpus of token lists, an index of it with some terms cached, applies
a change (rows removed, rows added — also amid the held row ids, as another id sequence
could give), possibly several generations in a row without using the carried terms, and
checks that every query ranks exactly (ids and float scores) as a fresh index of the
final corpus, and as the uncached reference :func:`plait.stores.lexical.bm25_rank`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from plait.stores.base import BM25Params
from plait.stores.lexical import bm25_rank
from plait.stores.lexical_carry import MAX_DEPTH, MAX_LAYERS
from plait.stores.lexical_index import LexicalIndex

Corpus = dict[int, tuple[list[str], list[str]]]  # row id -> (exact tokens, stems tokens)
QUERIES = [(["card", "checkout"], ["card"]), (["zebra"], ["zebr"]), (["refund", "card", "ledger"], []), (["nothing"], ["x"])]


def _corpus() -> Corpus:
    texts = ["card checkout", "checkout checkout session", "refund ledger card", "card card card", "zebra",
             "inventory stock", "checkout refund", "ledger"]
    return {10 * (i + 1): (t.split(), [w[:4] for w in t.split()]) for i, t in enumerate(texts)}


def _postings(corpus: Corpus, field: int, term: str) -> tuple[np.ndarray, np.ndarray]:
    ids = [r for r in sorted(corpus) if term in corpus[r][field]]
    tfs = [Counter(corpus[r][field])[term] for r in ids]
    return np.array(ids, dtype=np.int64), np.array(tfs, dtype=np.float64)


def _index(corpus: Corpus, budget: int = 2**30) -> LexicalIndex:
    rows = sorted(corpus)
    lengths = np.array([[len(corpus[r][0]), len(corpus[r][1])] for r in rows], dtype=np.float64).reshape(-1, 2)
    return LexicalIndex(np.array(rows, dtype=np.int64), lengths, [f"c{r}" for r in rows], budget=budget)


def _rank(index: LexicalIndex, corpus: Corpus, query: tuple[list[str], list[str]], params: BM25Params) -> list[tuple[str, float]]:
    rows = index.rows(query, params, lambda f, t: _postings(corpus, f, t)) or []
    return index.rank(rows, limit=None)


def _reference(corpus: Corpus, query: tuple[list[str], list[str]], params: BM25Params) -> list[tuple[str, float]]:
    index = _index(corpus)
    postings = {f: [_postings(corpus, f, t) for t in dict.fromkeys(query[f])] for f in (0, 1)}
    return [(f"c{r}", s) for r, s in bm25_rank(index.rowids, index.lengths, postings, params, limit=None)]


class _Rows:
    """The added rows' postings as ``LexicalIndex.apply`` asks for them."""

    nbytes = 100

    def __init__(self, added: Corpus) -> None:
        self.added = added
        self.asked: list[tuple[int, str]] = []

    def postings(self, field: int, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        self.asked.append((field, term))
        ids, tfs = _postings(self.added, field, term)
        return (ids, tfs) if ids.size else None


def _apply(index: LexicalIndex, corpus: Corpus, removed: list[int], added: Corpus) -> LexicalIndex:
    """Apply the change to ``index`` and to ``corpus`` (in place)."""
    for r in removed:
        del corpus[r]
    corpus.update(added)
    rows = sorted(added)
    lengths = np.array([[len(added[r][0]), len(added[r][1])] for r in rows], dtype=np.float64).reshape(-1, 2)
    return index.apply(np.array(sorted(removed), dtype=np.int64), np.array(rows, dtype=np.int64), lengths,
                       [f"c{r}" for r in rows], _Rows(dict(added)))


def _check(index: LexicalIndex, corpus: Corpus) -> None:
    fresh = _index(corpus)
    assert index.size == fresh.size and index.avgdl == fresh.avgdl
    assert np.array_equal(index.rowids, fresh.rowids) and np.array_equal(index.lengths, fresh.lengths)
    assert index.chunk_ids == fresh.chunk_ids and index.id_chars == fresh.id_chars  # carried by apply, not recounted
    for params in (BM25Params(), BM25Params(k1=1.5, b=1.0, exact_weight=2.0)):
        for query in QUERIES:
            got = _rank(index, corpus, query, params)
            assert got == _rank(fresh, corpus, query, params) == _reference(corpus, query, params), query


@pytest.mark.parametrize("amid", [False, True])
def test_removed_and_added_rows_rank_as_a_fresh_index(amid: bool) -> None:
    corpus = _corpus()
    index = _index(corpus)
    _check(index, corpus)  # every query term cached (and "nothing"/"x" remembered as misses)
    first = 15 if amid else 100
    added = {first: (["card", "zebra", "nothing"], ["card"]), first + 60: (["refund", "refund"], ["refu"])}
    nxt = _apply(index, corpus, [20, 50], added)
    assert nxt.carried_terms > 0 and index.size == 8  # the old index is left as it was
    _check(nxt, corpus)
    assert nxt.carried_terms == 0


def test_several_generations_without_using_the_carried_terms() -> None:
    """Terms carried through six generations unused (six layers) merge every later
    change on first use: the added rows of each layer, the removals of all."""
    corpus = _corpus()
    index = _index(corpus)
    _check(index, corpus)
    carried = index.cached_terms[0]
    for g in range(6):
        index = _apply(index, corpus, [sorted(corpus)[g % 3]], {200 + g: (["card", "ledger"] * (g + 1), ["card"])})
        assert index.carried_terms == carried and len(index._layers) == g + 1  # nothing merged yet
        assert len(index._maps) == g + 1  # the older layers' position maps composed, not searched again
        assert index.cached_terms == (0, 0)
    _check(index, corpus)
    assert index.carried_terms == 0


def test_terms_unused_for_more_changes_than_mapped_layers_are_still_carried() -> None:
    """Regression: an index kept only 8 layers, so a term not queried for 8 changes was
    read from the database again (at 100k chunks on PostgreSQL the first query after the
    9th write re-read every term: 47 ms). Past MAX_LAYERS a layer keeps no position map
    and its terms are looked up by row id; nothing is read, the ranking stays exact; past
    MAX_DEPTH the oldest layer goes and its terms are read again."""
    corpus = _corpus()
    index = _index(corpus)
    _check(index, corpus)
    carried = index.cached_terms[0]
    for g in range(MAX_LAYERS + 5):
        index = _apply(index, corpus, [sorted(corpus)[g % 3]], {200 + g: (["card", "ledger"] * (g + 1), ["card"])})
    assert len(index._layers) == MAX_LAYERS + 5 and index.carried_terms == carried
    assert len(index._maps) <= MAX_LAYERS  # no map is kept of the deeper layers
    reads: list[tuple[int, str]] = []

    def load(field: int, term: str) -> tuple[np.ndarray, np.ndarray]:
        reads.append((field, term))
        return _postings(corpus, field, term)

    for params in (BM25Params(), BM25Params(k1=1.5, b=1.0, exact_weight=2.0)):
        for query in QUERIES:
            assert index.rank(index.rows(query, params, load) or [], limit=None) == _reference(corpus, query, params)
    assert reads == []  # every term carried, the misses ("nothing", "x") too
    for g in range(MAX_DEPTH + 1):
        index = _apply(index, corpus, [sorted(corpus)[g % 3]], {400 + g: (["card"], ["card"])})
    assert len(index._layers) == MAX_DEPTH
    for query in QUERIES:
        assert index.rank(index.rows(query, BM25Params(), load) or [], limit=None) == _reference(corpus, query, BM25Params())
    assert set(reads) == {(f, t) for q in QUERIES for f in (0, 1) for t in q[f]}  # the oldest layer went: read again


def test_nothing_to_apply_keeps_the_index_and_bad_changes_raise() -> None:
    corpus = _corpus()
    index = _index(corpus)
    empty = np.empty(0, dtype=np.int64)
    assert index.apply(empty, empty, np.zeros((0, 2)), [], None) is index
    with pytest.raises(ValueError, match="does not hold"):
        index.apply(np.array([11]), empty, np.zeros((0, 2)), [], None)
    with pytest.raises(ValueError, match="holds already"):
        index.apply(empty, np.array([10]), np.ones((1, 2)), ["again"], _Rows({}))


def test_carried_terms_count_against_the_budget() -> None:
    """A tiny budget: carried terms are dropped first, then read again on use; still exact."""
    corpus = _corpus()
    index = _index(corpus, budget=0)
    _check(index, corpus)
    nxt = _apply(index, corpus, [10], {90: (["card"], ["card"])})
    assert nxt._layers == [] and nxt.carried_terms == 0  # over the budget: dropped at once
    _check(nxt, corpus)


def test_many_removals_growth_past_the_shared_buffers_and_long_map_chains() -> None:
    """More than 64 rows removed at once (the slice path of the chunk list), an index grown
    past the score buffers it shares with the one before (they hold 16 rows of room:
    dropped, new ones made) and twelve generations (position maps composed lazily,
    chains of more than four composed at once) still rank as a fresh index."""
    corpus = {r: v for i, v in enumerate(_corpus().values()) for r in [1000 + 10 * i]}
    for k in range(100):
        corpus[2000 + k] = (["card", "filler", f"w{k % 7}"], ["card"])
    index = _index(corpus)
    _check(index, corpus)  # buffers of 108 + 6 + 16 rows made, every query term cached
    removed = [2000 + k for k in range(0, 100, 1)][:80]
    index = _apply(index, corpus, removed, {3000: (["zebra", "card"], ["zebr"])})
    _check(index, corpus)
    grown = {4000 + k: (["checkout", "card"] * (1 + k % 3), ["chec"]) for k in range(200)}
    index = _apply(index, corpus, [], grown)
    assert index.size == 229
    _check(index, corpus)
    for g in range(12):
        index = _apply(index, corpus, [sorted(corpus)[g]], {5000 + g: (["ledger", "card"], ["ledg"])})
        assert all(not isinstance(m, tuple) or len(m) <= 4 for m in index._maps.values())
    _check(index, corpus)
