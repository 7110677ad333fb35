"""BM25 over postings held in memory: the scoring shared by stores that keep postings.

Okapi BM25 with Lucene's non-negative idf::

    idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
    score(d) = Σ_fields w_f Σ_t idf_f(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·|d|_f / avgdl_f))

Each stage is its own function: :func:`term_scores` is one term's weighted
contribution per posting (what :mod:`plait.stores.lexical_index` precomputes once per
collection generation), :func:`top_k` is the cut with ties broken by key, and
:func:`bm25_rank` the whole ranking over raw postings (the reference the cached path
is checked against). A chunk's score is the sum of its terms' contributions added in
query order (exact field first, then stems), starting from 0.0, so every path gives the
same floating-point value.

The work per query is proportional to the postings of the query's terms, never to
the size of the corpus: scores are accumulated only for the chunks those postings
name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plait.stores.base import BM25Params

__all__ = ["FIELDS", "bm25_rank", "idf", "term_scores", "top_k"]

FIELDS = ("exact", "stems")


def idf(n_docs: int, df: int) -> float:
    """Lucene's BM25 idf, never negative."""
    return float(np.log1p((n_docs - df + 0.5) / (df + 0.5)))


def term_scores(
    tfs: np.ndarray,
    doc_len: np.ndarray,
    *,
    n_docs: int,
    weight: float,
    mean_len: float,
    params: BM25Params,
) -> np.ndarray:
    """One term's weighted BM25 contribution to each chunk of its postings (float64).

    ``tfs`` are the term's frequencies in those chunks and ``doc_len`` their lengths in
    the term's field; the term's df is ``tfs.size``; ``mean_len`` is the field's mean
    length (0 counts as 1).
    """
    norm = params.k1 * (1.0 - params.b + params.b * doc_len / (mean_len or 1.0))
    term_idf = idf(n_docs, int(tfs.size))
    return weight * term_idf * tfs * (params.k1 + 1.0) / (tfs + norm)


def top_k(keys: np.ndarray, totals: np.ndarray, limit: int | None) -> np.ndarray:
    """Indices into ``totals`` of the best ``limit`` (all when None), best first.

    Ties break by ``keys`` ascending, at the cut too: of several chunks tied at the
    ``limit``-th score, the ones with the smallest keys are kept. ``keys`` are unique.
    Cost O(len(totals) + limit·log(limit)).
    """
    size = totals.size
    n = size if limit is None else min(limit, size)
    if n <= 0:
        return np.empty(0, dtype=np.intp)
    if n < size:
        kth = np.partition(totals, size - n)[size - n]
        chosen = np.flatnonzero(totals >= kth)  # n plus any further ties at the cut
    else:
        chosen = np.arange(size)
    order = chosen[np.lexsort((keys[chosen], -totals[chosen]))]
    return order[:n]


def bm25_rank(
    rowids: np.ndarray,
    lengths: np.ndarray,
    postings: Mapping[int, Sequence[tuple[np.ndarray, np.ndarray]]],
    params: BM25Params,
    *,
    limit: int | None,
    allowed: np.ndarray | None = None,
    avgdl: tuple[float, float] | None = None,
) -> list[tuple[int, float]]:
    """Rank chunks by BM25 from raw postings: the uncached reference (O(N) per call).

    ``rowids`` are the sorted ids of every chunk, ``lengths[i, f]`` the length of
    chunk ``rowids[i]`` in field ``f``; ``postings[f]`` holds, per query term of field
    ``f``, the (sorted chunk ids, term frequencies) arrays. ``allowed`` (sorted ids)
    restricts the result; ``avgdl`` (per field) saves recomputing the mean lengths on
    every query. Ties break by chunk id, ascending.
    """
    n_docs = rowids.size
    if n_docs == 0:
        return []
    weights = (params.exact_weight, params.stems_weight)
    if avgdl is None:
        avgdl = (float(lengths[:, 0].mean()), float(lengths[:, 1].mean()))
    totals = np.zeros(n_docs, dtype=np.float64)
    seen = np.zeros(n_docs, dtype=bool)
    for field, terms in postings.items():
        weight = weights[field]
        if weight == 0:
            continue
        for ids, tfs in terms:
            if ids.size == 0:
                continue
            positions = np.searchsorted(rowids, ids)
            totals[positions] += term_scores(
                np.asarray(tfs, dtype=np.float64),
                lengths[positions, field],
                n_docs=n_docs,
                weight=weight,
                mean_len=avgdl[field],
                params=params,
            )
            seen[positions] = True
    touched = np.flatnonzero(seen)
    if allowed is not None:
        touched = touched[np.isin(rowids[touched], allowed)]
    keys = rowids[touched]
    best = top_k(keys, totals[touched], limit)
    return [(int(keys[i]), float(totals[touched[i]])) for i in best]
