"""The lexical arm's in-memory index for one collection generation: cached BM25 rows.

bm25s's trick, made incremental: a query's scores are the sum of per-term *score rows*
(the positions of the chunks holding the term and the term's weighted BM25
contribution to each, :func:`plait.stores.lexical.term_scores`), and a row is computed
once per collection generation, on the term's first query, then reused. Accumulation
goes into a dense score buffer indexed by row position, allocated once per generation
(one per concurrent query) and reset only at the positions a query touched, so a warm query
costs O(postings of its terms + k·log k): no SQL, no sort of concatenated ids, no work
proportional to the corpus.

Every write bumps the collection's generation (N, the mean lengths and the idf of every
term change with it), and the store then starts a fresh :class:`LexicalIndex`: the next
query reloads the chunk lengths (one scan of the collection's chunk rows) and each
distinct query term costs one postings read until it is cached again.

Results are the same floating-point values as :func:`plait.stores.lexical.bm25_rank`:
contributions are added in query-term order starting from 0.0, and ties break by chunk
rowid (positions are in rowid order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from plait.stores.base import BM25Params
from plait.stores.lexical import term_scores, top_k

__all__ = ["LexicalIndex", "Postings", "ScoreRow"]

#: A loader of one term's raw postings in one field: ``load(field, term)`` gives
#: (ascending chunk rowids, term frequencies).
Postings = Callable[[int, str], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One term's precomputed contribution: ``scores[i]`` goes to chunk position ``positions[i]``."""

    positions: np.ndarray
    scores: np.ndarray


_EMPTY = ScoreRow(np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float64))


class LexicalIndex:
    """Chunk lengths, term postings and BM25 score rows of one collection generation.

    ``rowids`` (ascending) and ``lengths`` (``(n, 2)``: exact, stems) describe every
    chunk; ``chunk_ids[i]`` is the id of the chunk at position ``i``. Postings are
    fetched through the loader given to :meth:`row` on first use and cached with the
    score rows computed from them (per field, term and :class:`BM25Params`).
    Safe to share between threads: the caches only grow (a race computes a row twice,
    with the same result) and each query accumulates into a buffer no other query holds.
    """

    def __init__(self, rowids: np.ndarray, lengths: np.ndarray, chunk_ids: Sequence[str]) -> None:
        self.rowids = rowids
        self.lengths = lengths
        self.chunk_ids: list[str] = list(chunk_ids)
        n = int(rowids.size)
        self.avgdl: tuple[float, float] = (
            (float(lengths[:, 0].mean()), float(lengths[:, 1].mean())) if n else (0.0, 0.0)
        )
        self._postings: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
        self._rows: dict[BM25Params, dict[tuple[int, str], ScoreRow]] = {}
        self._free: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def size(self) -> int:
        """The number of chunks."""
        return int(self.rowids.size)

    def missing(self, pairs: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
        """The ``(field, term)`` pairs of ``pairs`` whose postings are not loaded yet."""
        return [pair for pair in pairs if pair not in self._postings]

    def postings(self, field: int, term: str, load: Postings) -> tuple[np.ndarray, np.ndarray]:
        """The term's (positions, term frequencies as float64), loaded once."""
        key = (field, term)
        found = self._postings.get(key)
        if found is None:
            ids, tfs = load(field, term)
            positions = np.searchsorted(self.rowids, ids).astype(np.intp, copy=False)
            found = (positions, np.asarray(tfs, dtype=np.float64))
            self._postings[key] = found
        return found

    def row(self, field: int, term: str, params: BM25Params, load: Postings) -> ScoreRow:
        """The term's score row in ``field`` under ``params`` (computed once)."""
        table = self._rows.setdefault(params, {})
        found = table.get((field, term))
        if found is not None:
            return found
        weight = (params.exact_weight, params.stems_weight)[field]
        positions, tfs = self.postings(field, term, load)
        if weight == 0 or positions.size == 0:
            found = _EMPTY
        else:
            scores = term_scores(
                tfs,
                self.lengths[positions, field],
                n_docs=self.size,
                weight=weight,
                mean_len=self.avgdl[field],
                params=params,
            )
            found = ScoreRow(positions, scores)
        table[(field, term)] = found
        return found

    def rows(
        self, terms: Sequence[Sequence[str]], params: BM25Params, load: Postings | None
    ) -> list[ScoreRow] | None:
        """The score rows of ``terms[field]`` (each deduplicated), fields in order.

        With ``load`` None nothing is read: None unless every row is already cached.
        """
        table = self._rows.get(params, {})
        out: list[ScoreRow] = []
        for field, names in enumerate(terms):
            for term in dict.fromkeys(names):
                found = table.get((field, term))
                if found is None:
                    if load is None:
                        return None
                    found = self.row(field, term, params, load)
                out.append(found)
        return out

    def _acquire(self) -> tuple[np.ndarray, np.ndarray]:
        """A free (score buffer, stamp buffer) pair; the score buffer is all zeros.

        Pairs are pooled, not per thread: there are as many as queries ever ran at once
        on this generation, whatever the number of threads.
        """
        try:
            return self._free.pop()
        except IndexError:
            return np.zeros(self.size, dtype=np.float64), np.zeros(self.size, dtype=np.intp)

    def _accumulate(self, rows: list[ScoreRow]) -> tuple[np.ndarray, np.ndarray]:
        """Sum ``rows`` (two or more, in order) into (touched positions, their totals).

        Positions are unique within a row, so each row is one gather-add-scatter into
        the buffer. The touched positions are then deduplicated without sorting: every
        occurrence ``j`` of the concatenated positions writes ``j`` into the stamp buffer
        and exactly one occurrence per position reads its own ``j`` back.
        """
        scores, stamp = buffers = self._acquire()
        everything = np.concatenate([row.positions for row in rows])
        try:
            scores[rows[0].positions] = rows[0].scores  # 0.0 + x == x: the buffer is all zeros
            for row in rows[1:]:
                scores[row.positions] += row.scores
            occurrence = np.arange(everything.size)
            stamp[everything] = occurrence
            touched = everything[stamp[everything] == occurrence]
            return touched, scores[touched]
        finally:
            scores[everything] = 0.0  # reset only what this query touched
            self._free.append(buffers)

    def rank(
        self,
        rows: Sequence[ScoreRow],
        *,
        limit: int | None,
        allowed: np.ndarray | None = None,
    ) -> list[tuple[str, float]]:
        """Sum ``rows`` (in order) and return the best ``limit`` (chunk id, score).

        ``allowed`` (ascending rowids) restricts the result. Ties break by rowid.
        """
        rows = [r for r in rows if r.positions.size]
        if not rows:
            return []
        if len(rows) == 1:  # one term: its row is the answer, no accumulation
            touched, totals = rows[0].positions, rows[0].scores
        else:
            touched, totals = self._accumulate(rows)
        if allowed is not None:
            keep = np.isin(self.rowids[touched], allowed)
            touched, totals = touched[keep], totals[keep]
        best = top_k(touched, totals, limit)
        ids = self.chunk_ids
        return [(ids[p], s) for p, s in zip(touched[best].tolist(), totals[best].tolist(), strict=True)]
