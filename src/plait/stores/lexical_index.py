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

The cache is bounded: each index holds at most ``budget`` bytes of postings and score
rows (default :data:`DEFAULT_BUDGET`, 256 MiB; 16 bytes per posting for the postings
plus 8 per posting per :class:`BM25Params` for the score rows, and about
:data:`ENTRY_OVERHEAD` bytes per term) and evicts the least recently used terms past it;
terms a collection does not hold (no postings) are remembered in a separate LRU of at
most :data:`MAX_MISSES` entries, so a stream of unknown query words costs no memory past
it. An evicted term is simply read again on its next query (the same postings, so the
same scores).

Results are the same floating-point values as :func:`plait.stores.lexical.bm25_rank`:
contributions are added in query-term order starting from 0.0, and ties break by chunk
rowid (positions are in rowid order).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from plait.stores.base import BM25Params
from plait.stores.lexical import term_scores, top_k

__all__ = ["DEFAULT_BUDGET", "ENTRY_OVERHEAD", "MAX_MISSES", "LexicalIndex", "Postings", "ScoreRow"]

#: Bytes of postings and score rows one :class:`LexicalIndex` keeps by default.
DEFAULT_BUDGET = 256 * 2**20
#: Bytes counted per cached term on top of its arrays (dict entry, tuple, array headers).
ENTRY_OVERHEAD = 400
#: Terms without postings remembered per index (least recently used dropped past it).
MAX_MISSES = 4096

#: A loader of one term's raw postings in one field: ``load(field, term)`` gives
#: (ascending chunk rowids, term frequencies).
Postings = Callable[[int, str], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One term's precomputed contribution: ``scores[i]`` goes to chunk position ``positions[i]``."""

    positions: np.ndarray
    scores: np.ndarray


_EMPTY = ScoreRow(np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float64))
_NO_POSTINGS = (_EMPTY.positions, _EMPTY.scores)


@dataclass(slots=True)
class _Term:
    """One cached term: its postings (positions, tfs) and score rows per parameter set."""

    positions: np.ndarray
    tfs: np.ndarray
    rows: dict[BM25Params, ScoreRow] = field(default_factory=dict)
    nbytes: int = 0


class LexicalIndex:
    """Chunk lengths, term postings and BM25 score rows of one collection generation.

    ``rowids`` (ascending) and ``lengths`` (``(n, 2)``: exact, stems) describe every
    chunk; ``chunk_ids[i]`` is the id of the chunk at position ``i``. Postings are
    fetched through the loader given to :meth:`row` on first use and cached with the
    score rows computed from them (per field, term and :class:`BM25Params`), within
    ``budget`` bytes (least recently used terms evicted; see the module's docstring).
    Safe to share between threads: the cache's bookkeeping is under a lock, rows are
    computed outside it (a race computes a row twice, with the same result), a row
    handed out stays valid when its term is evicted, and each query accumulates into
    a buffer no other query holds.
    """

    def __init__(
        self,
        rowids: np.ndarray,
        lengths: np.ndarray,
        chunk_ids: Sequence[str],
        *,
        budget: int = DEFAULT_BUDGET,
        max_misses: int = MAX_MISSES,
    ) -> None:
        if budget < 0 or max_misses < 0:
            raise ValueError(f"budget and max_misses must be >= 0, got {budget}, {max_misses}")
        self.rowids = rowids
        self.lengths = lengths
        self.chunk_ids: list[str] = list(chunk_ids)
        n = int(rowids.size)
        self.avgdl: tuple[float, float] = (
            (float(lengths[:, 0].mean()), float(lengths[:, 1].mean())) if n else (0.0, 0.0)
        )
        self.budget = budget
        self.max_misses = max_misses
        self._terms: OrderedDict[tuple[int, str], _Term] = OrderedDict()
        self._misses: OrderedDict[tuple[int, str], None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._free: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def size(self) -> int:
        """The number of chunks."""
        return int(self.rowids.size)

    @property
    def cached_bytes(self) -> int:
        """Bytes the cached terms count against the budget (misses not included)."""
        return self._bytes

    @property
    def cached_terms(self) -> tuple[int, int]:
        """(terms with postings cached, terms remembered as holding none)."""
        with self._lock:
            return len(self._terms), len(self._misses)

    def _touch(self, key: tuple[int, str]) -> _Term | None:
        """The cached term (marked most recently used), :data:`None` if not cached;
        a remembered miss gives an empty term. Called under the lock."""
        found = self._terms.get(key)
        if found is not None:
            self._terms.move_to_end(key)
            return found
        if key in self._misses:
            self._misses.move_to_end(key)
            return _Term(*_NO_POSTINGS)
        return None

    def _evict(self, keep: tuple[int, str] | None) -> None:
        """Drop least recently used terms until within budget (never ``keep``). Under the lock."""
        while self._bytes > self.budget and self._terms:
            key, victim = next(iter(self._terms.items()))
            if key == keep:
                if len(self._terms) == 1:
                    return
                self._terms.move_to_end(key)
                continue
            del self._terms[key]
            self._bytes -= victim.nbytes

    def held(self, pairs: Sequence[tuple[int, str]]) -> dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]:
        """The cached (positions, term frequencies) of those ``pairs`` that are cached
        (a term known to hold none gives empty arrays). A caller holding them can
        rank without the cache even if they are evicted meanwhile."""
        out: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
        with self._lock:
            for pair in pairs:
                found = self._touch(pair)
                if found is not None:
                    out[pair] = (found.positions, found.tfs)
        return out

    def missing(self, pairs: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
        """The ``(field, term)`` pairs of ``pairs`` whose postings are not loaded yet."""
        held = self.held(pairs)
        return [pair for pair in pairs if pair not in held]

    def _entry(self, field_: int, term: str, load: Postings) -> _Term:
        key = (field_, term)
        with self._lock:
            found = self._touch(key)
        if found is not None:
            return found
        ids, tfs = load(field_, term)
        if len(ids) == 0:
            with self._lock:
                self._misses[key] = None
                self._misses.move_to_end(key)
                while len(self._misses) > self.max_misses:
                    self._misses.popitem(last=False)
            return _Term(*_NO_POSTINGS)
        positions = np.searchsorted(self.rowids, ids).astype(np.intp, copy=False)
        entry = _Term(positions, np.asarray(tfs, dtype=np.float64))
        entry.nbytes = positions.nbytes + entry.tfs.nbytes + ENTRY_OVERHEAD
        with self._lock:
            raced = self._terms.get(key)
            if raced is not None:  # another thread loaded it meanwhile: keep one
                return raced
            self._terms[key] = entry
            self._bytes += entry.nbytes
            self._evict(key)
        return entry

    def postings(self, field: int, term: str, load: Postings) -> tuple[np.ndarray, np.ndarray]:
        """The term's (positions, term frequencies as float64), loaded once while cached."""
        entry = self._entry(field, term, load)
        return entry.positions, entry.tfs

    def row(self, field: int, term: str, params: BM25Params, load: Postings) -> ScoreRow:
        """The term's score row in ``field`` under ``params`` (computed once while cached)."""
        entry = self._entry(field, term, load)
        found = entry.rows.get(params)
        if found is not None:
            return found
        weight = (params.exact_weight, params.stems_weight)[field]
        if weight == 0 or entry.positions.size == 0:
            return _EMPTY
        scores = term_scores(
            entry.tfs,
            self.lengths[entry.positions, field],
            n_docs=self.size,
            weight=weight,
            mean_len=self.avgdl[field],
            params=params,
        )
        found = ScoreRow(entry.positions, scores)
        with self._lock:
            if params not in entry.rows:
                entry.rows[params] = found
                entry.nbytes += scores.nbytes
                if self._terms.get((field, term)) is entry:  # still cached: counts
                    self._bytes += scores.nbytes
                    self._evict((field, term))
        return found

    def rows(
        self, terms: Sequence[Sequence[str]], params: BM25Params, load: Postings | None
    ) -> list[ScoreRow] | None:
        """The score rows of ``terms[field]`` (each deduplicated), fields in order.

        With ``load`` None nothing is read: None unless every row is already cached.
        """
        out: list[ScoreRow] = []
        for field_, names in enumerate(terms):
            weight = (params.exact_weight, params.stems_weight)[field_]
            for term in dict.fromkeys(names):
                found: ScoreRow | None = None
                with self._lock:
                    entry = self._touch((field_, term))
                if entry is not None:
                    found = entry.rows.get(params)
                    if found is None and (weight == 0 or entry.positions.size == 0):
                        found = _EMPTY
                if found is None:
                    if load is None:
                        return None
                    found = self.row(field_, term, params, load)
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
