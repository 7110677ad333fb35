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
term change with it). The store then either starts a fresh :class:`LexicalIndex` (the
next query reloads the chunk lengths, one scan of the collection's chunk rows, and each
distinct query term costs one postings read until it is cached again) or, knowing which
chunk rows the write added and removed, derives the next generation's index with
:meth:`LexicalIndex.apply`: the lengths of the added rows, the removed rows dropped, and
the postings of every term this index holds *carried* — merged on the term's first use
in the new generation (its row ids looked up among the new generation's, the removed
ones dropped, the added rows' postings of the term included), so a write costs the next
query O(chunks) array copies plus O(postings · log chunks) per term it uses, and no read
of the rows that did not change. Carried terms count against the budget (with the row
ids of each earlier generation they still refer to, once) and are evicted first. Score rows are always
recomputed in the new generation (N, avgdl and df moved), by the same function, so the
scores are those of an index built fresh.

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

import numpy as np

from plait.stores.base import BM25Params
from plait.stores.lexical import term_scores, top_k
from plait.stores.lexical_carry import (
    ENTRY_OVERHEAD,
    MAX_DEPTH,
    MAX_LAYERS,
    Added,
    Layer,
    ScoreRow,
    merge,
    position_map,
)
from plait.stores.lexical_carry import Term as _Term
from plait.stores.lexical_whole import WholePostings

__all__ = [
    "DEFAULT_BUDGET", "ENTRY_OVERHEAD", "MAX_LAYERS", "MAX_MISSES", "Added", "LexicalIndex", "Postings", "ScoreRow",
]

#: Bytes of postings and score rows one :class:`LexicalIndex` keeps by default.
DEFAULT_BUDGET = 256 * 2**20
#: Terms without postings remembered per index (least recently used dropped past it).
MAX_MISSES = 4096

#: A loader of one term's raw postings in one field: ``load(field, term)`` gives
#: (ascending chunk rowids, term frequencies).
Postings = Callable[[int, str], tuple[np.ndarray, np.ndarray]]


_EMPTY = ScoreRow(np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float64))
_NO_POSTINGS = (_EMPTY.positions, _EMPTY.scores)


#: Position maps one lazily composed map holds at most (longer chains are composed at once,
#: so the maps they hold stay few).
MAX_CHAIN = 4


def compose(chain: Sequence[np.ndarray]) -> np.ndarray:
    """The position map of ``chain``'s maps applied in order. Every map ends in a -1
    (:func:`~plait.stores.lexical_carry.position_map`), so a -1 indexes it and stays -1:
    one gather per step (a masked ``np.where`` took 0.86 ms at 100k rows, this 0.11)."""
    out = chain[0]
    for step in chain[1:]:
        out = np.take(step, out)
    return out


def _map_bytes(mapped: np.ndarray | tuple[np.ndarray, ...]) -> int:
    """Bytes a position map counts: its composed size (the first map's), however held."""
    return int(mapped[0].nbytes if isinstance(mapped, tuple) else mapped.nbytes)


def _without(ids: list[str], positions: list[int]) -> list[str]:
    """``ids`` without the ascending ``positions``: a copy and a few deletions (no
    per-element work) when they are few, else slices."""
    if len(positions) <= 64:
        out = ids.copy()
        for position in reversed(positions):
            del out[position]
        return out
    out = []
    start = 0
    for position in positions:
        out.extend(ids[start:position])
        start = position + 1
    out.extend(ids[start:])
    return out


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
        copy_ids: bool = True,
        whole: WholePostings | None = None,
    ) -> None:
        if budget < 0 or max_misses < 0:
            raise ValueError(f"budget and max_misses must be >= 0, got {budget}, {max_misses}")
        self.rowids = rowids
        self.lengths = lengths
        # apply() hands over a list of its own (a copy of 100k ids costs ~0.3 ms)
        self.chunk_ids: list[str] = list(chunk_ids) if copy_ids or not isinstance(chunk_ids, list) else chunk_ids
        n = int(rowids.size)
        self.avgdl: tuple[float, float] = (
            (float(lengths[:, 0].mean()), float(lengths[:, 1].mean())) if n else (0.0, 0.0)
        )
        self.budget = budget
        self.max_misses = max_misses
        self._terms: OrderedDict[tuple[int, str], _Term] = OrderedDict()
        self._misses: OrderedDict[tuple[int, str], None] = OrderedDict()
        self._layers: list[Layer] = []  # changes applied, newest first (lexical_carry)
        # id(layer) -> its position map into this index, or the maps it is composed of (in
        # order; composed on first use: a change applied need not touch every layer)
        self._maps: dict[int, np.ndarray | tuple[np.ndarray, ...]] = {}
        #: Every posting of this generation (:mod:`plait.stores.lexical_whole`), or None:
        #: with it, a term it does not hold has none, and nothing is ever read.
        self.whole = whole
        self._bytes = 0 if whole is None else whole.nbytes
        self._lock = threading.Lock()
        self._free: list[tuple[np.ndarray, np.ndarray]] = []
        self._id_chars: int | None = None

    @property
    def id_chars(self) -> int:
        """The characters of all chunk ids (counted once; :meth:`apply` carries it over)."""
        if self._id_chars is None:
            self._id_chars = sum(map(len, self.chunk_ids))
        return self._id_chars

    @property
    def size(self) -> int:
        """The number of chunks."""
        return int(self.rowids.size)

    @property
    def cached_bytes(self) -> int:
        """Bytes the cached terms and carried layers count against the budget (misses not included)."""
        return self._bytes + sum(layer.nbytes for layer in self._layers)

    @property
    def cached_terms(self) -> tuple[int, int]:
        """(terms with postings cached, terms remembered as holding none)."""
        with self._lock:
            return len(self._terms), len(self._misses)

    @property
    def carried_terms(self) -> int:
        """Terms carried from earlier generations and not merged yet (layers' terms)."""
        with self._lock:
            return sum(len(layer.terms) for layer in self._layers)

    def _miss(self, key: tuple[int, str]) -> None:
        """Remember ``key`` as holding no postings. Under the lock."""
        self._misses[key] = None
        self._misses.move_to_end(key)
        while len(self._misses) > self.max_misses:
            self._misses.popitem(last=False)

    def _touch(self, key: tuple[int, str]) -> _Term | None:
        """The cached term (marked most recently used), :data:`None` if not cached;
        a remembered miss gives an empty term; a carried term is merged now. Called
        under the lock."""
        found = self._terms.get(key)
        if found is not None:
            self._terms.move_to_end(key)
            return found
        if key in self._misses:
            self._misses.move_to_end(key)
            return _Term(*_NO_POSTINGS)
        if self.whole is not None:  # every posting is here: views of the key's run
            hit = self.whole.get(key)
            if hit is None:
                return _Term(*_NO_POSTINGS)
            entry = _Term(*hit)
            entry.nbytes = ENTRY_OVERHEAD  # the arrays are counted in whole.nbytes
            self._terms[key] = entry
            self._bytes += entry.nbytes
            self._evict(key)
            return entry
        if not self._layers:
            return None
        merged = merge(self._layers, key, self.rowids, self._carried_map)
        if merged is None:
            return None
        positions, tfs = merged
        if positions.size == 0:
            self._miss(key)
            return _Term(*_NO_POSTINGS)
        entry = _Term(positions, tfs)
        entry.nbytes = positions.nbytes + tfs.nbytes + ENTRY_OVERHEAD
        self._terms[key] = entry
        self._bytes += entry.nbytes
        self._evict(key)
        return entry

    def _carried_map(self, layer: Layer) -> np.ndarray | None:
        """:meth:`_map`, or None for a layer past the newest :data:`MAX_LAYERS` (no map
        is kept of it: :func:`merge` looks its terms up by row id). Under the lock."""
        if id(layer) not in self._maps and not any(layer is mapped for mapped in self._layers[:MAX_LAYERS]):
            return None
        return self._map(layer)

    def _map(self, layer: Layer) -> np.ndarray:
        """The layer's position map into this index, made once. Under the lock."""
        found = self._maps.get(id(layer))
        if isinstance(found, tuple):  # counted as composed already
            found = self._maps[id(layer)] = compose(found)
        if found is None:
            found = self._maps[id(layer)] = position_map(layer.base, self.rowids)
            self._bytes += found.nbytes
        return found

    def _evict(self, keep: tuple[int, str] | None) -> None:
        """Drop the oldest carried layers, then least recently used terms, until within
        budget (never ``keep``). Under the lock."""
        carried = sum(layer.nbytes for layer in self._layers)
        while self._bytes + carried > self.budget and self._layers:
            dropped = self._layers.pop()
            carried -= dropped.nbytes
            mapped = self._maps.pop(id(dropped), None)
            if mapped is not None:
                self._bytes -= _map_bytes(mapped)
        while self._bytes + carried > self.budget and self._terms:
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

    def apply(
        self,
        removed: np.ndarray,
        rowids: np.ndarray,
        lengths: np.ndarray,
        chunk_ids: Sequence[str],
        added: Added | None,
    ) -> LexicalIndex:
        """The index of the next generation: this one's chunks without the row ids
        ``removed`` (ascending, all held here), plus the chunks of row ids ``rowids``
        (ascending, none held here) with their ``lengths`` (``(n, 2)``) and
        ``chunk_ids``; ``added`` answers for those chunks' postings (None: no chunk added).

        The terms this index holds (cached, or known to hold none) are carried into the
        new index at no cost per term and merged on their first use there
        (:mod:`plait.stores.lexical_carry`); the new index gives exactly the scores of
        one built from the new generation's rows (its lengths, mean lengths and score
        rows are computed as for a fresh index). This index is not changed: queries of
        its generation go on. Raises :class:`ValueError` if ``removed`` names a row not
        held or ``rowids`` one held already (the caller reloads in full). Nothing to
        apply gives this index.
        """
        if not removed.size and not rowids.size:
            return self
        cut = np.searchsorted(self.rowids, removed)
        if removed.size and (
            int(cut[-1]) >= self.size
            or not np.array_equal(self.rowids[cut], removed)
            or (removed.size > 1 and not bool(np.all(removed[1:] > removed[:-1])))
        ):
            raise ValueError("removed row ids the index does not hold")
        keep = np.ones(self.size, dtype=bool)
        keep[cut] = False
        # np.compress, not a boolean index: indexing the (n, 2) lengths with a mask took
        # 1.3-2.7 ms at 100k chunks (busy machine), compress 0.17 ms
        base_ids, base_lengths = np.compress(keep, self.rowids), np.compress(keep, self.lengths, axis=0)
        positions = cut.tolist()
        gone_chars = sum(len(self.chunk_ids[p]) for p in positions) if self._id_chars is not None else 0
        base_chunks = _without(self.chunk_ids, positions)
        new_ids = np.concatenate([base_ids, rowids.astype(np.int64, copy=False)])
        new_lengths = np.ascontiguousarray(
            np.concatenate([base_lengths, np.asarray(lengths, dtype=np.float64).reshape(-1, 2)])
        )
        base_chunks.extend(chunk_ids)
        reordered = bool(rowids.size and base_ids.size and rowids[0] <= base_ids[-1])
        if reordered:  # added amid the held rows
            order = np.argsort(new_ids, kind="stable")
            new_ids, new_lengths = new_ids[order], np.take(new_lengths, order, axis=0)
            base_chunks = [base_chunks[i] for i in order.tolist()]
        if new_ids.size > 1 and not bool(np.all(new_ids[1:] > new_ids[:-1])):
            raise ValueError("added row ids the index holds already")
        index = LexicalIndex(
            new_ids, new_lengths, base_chunks, budget=self.budget, max_misses=self.max_misses, copy_ids=False
        )
        index._free = self._free  # zeroed score buffers, shared (too short ones are dropped)
        if self._id_chars is not None:  # O(changed rows), not a pass over 100k ids
            index._id_chars = self._id_chars - gone_chars + sum(map(len, chunk_ids))
        with self._lock:
            layer = Layer(
                self.rowids, dict(self._terms), self._bytes, frozenset(self._misses),
                added if rowids.size else None, whole=self.whole,
            )
            index._layers = [layer, *self._layers][:MAX_DEPTH]
            older = dict(self._maps)
        with index._lock:
            if reordered:
                newest = index._map(layer)
            else:  # the kept rows keep their order at the front: position = kept before it
                newest = np.empty(keep.size + 1, dtype=np.intp)
                np.cumsum(keep, dtype=np.intp, out=newest[:-1])
                newest[:-1] -= 1
                newest[:-1][~keep] = -1
                newest[-1] = -1  # the sentinel of position_map
                index._maps[id(layer)] = newest
                index._bytes += newest.nbytes
            for kept_layer in index._layers[1:MAX_LAYERS]:  # maps of older layers: composed when used
                mapped = older.get(id(kept_layer))
                if mapped is not None:
                    chain = (*mapped, newest) if isinstance(mapped, tuple) else (mapped, newest)
                    index._maps[id(kept_layer)] = chain if len(chain) <= MAX_CHAIN else compose(chain)
                    index._bytes += _map_bytes(chain)
            index._evict(None)
        return index

    def _entry(self, field_: int, term: str, load: Postings) -> _Term:
        key = (field_, term)
        with self._lock:
            found = self._touch(key)
        if found is not None:
            return found
        ids, tfs = load(field_, term)
        if len(ids) == 0:
            with self._lock:
                self._miss(key)
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
        while True:
            try:
                found = self._free.pop()
            except IndexError:  # room for a few rows more: the next generations share it
                room = self.size + self.size // 16 + 16
                return np.zeros(room, dtype=np.float64), np.zeros(room, dtype=np.intp)
            if found[0].size >= self.size:
                return found

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
