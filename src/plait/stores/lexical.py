"""BM25 over postings held in memory: the scoring shared by stores that keep postings.

Okapi BM25 with Lucene's non-negative idf::

    idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
    score(d) = Σ_fields w_f Σ_t idf_f(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·|d|_f / avgdl_f))

The work per query is proportional to the postings of the query's terms, never to
the size of the corpus: scores are accumulated only for the chunks those postings
name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plait.stores.base import BM25Params

__all__ = ["FIELDS", "bm25_rank", "idf"]

FIELDS = ("exact", "stems")


def idf(n_docs: int, df: int) -> float:
    """Lucene's BM25 idf, never negative."""
    return float(np.log1p((n_docs - df + 0.5) / (df + 0.5)))


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
    """Rank chunks by BM25.

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
    all_ids: list[np.ndarray] = []
    all_scores: list[np.ndarray] = []
    for field, terms in postings.items():
        weight = weights[field]
        if weight == 0:
            continue
        mean_len = avgdl[field] or 1.0
        for ids, tfs in terms:
            if ids.size == 0:
                continue
            positions = np.searchsorted(rowids, ids)
            doc_len = lengths[positions, field]
            norm = params.k1 * (1.0 - params.b + params.b * doc_len / mean_len)
            term_idf = idf(n_docs, ids.size)
            all_ids.append(ids)
            all_scores.append(weight * term_idf * tfs * (params.k1 + 1.0) / (tfs + norm))
    if not all_ids:
        return []
    ids = np.concatenate(all_ids)
    scores = np.concatenate(all_scores)
    unique, inverse = np.unique(ids, return_inverse=True)
    totals = np.bincount(inverse, weights=scores, minlength=unique.size)
    if allowed is not None:
        keep = np.isin(unique, allowed, assume_unique=False)
        unique, totals = unique[keep], totals[keep]
    if unique.size == 0:
        return []
    n = unique.size if limit is None else min(limit, unique.size)
    if n < unique.size:
        top = np.argpartition(-totals, n - 1)[:n]
    else:
        top = np.arange(unique.size)
    order = top[np.lexsort((unique[top], -totals[top]))]
    return [(int(unique[i]), float(totals[i])) for i in order]
