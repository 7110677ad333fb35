"""The SQLite store's per-collection, per-generation caches and the reads that fill them.

A :class:`Snapshot` belongs to one generation of one collection. Every write bumps the
generation in the same transaction, and the store swaps in a fresh, empty snapshot when
it sees a new one (its own write or another process's), so nothing here is ever
patched: it is filled lazily by the first query that needs it.

What a write costs the next query, at SciFact size (9k chunks): the lexical arm reloads
the chunk lengths and ids (one scan of the collection's chunk rows) and reads each
distinct query term's postings once; the dense arm reloads the vector matrix (one scan
of the vector blobs) and, at or above the ANN threshold, syncs the HNSW graph with the
changed rows; the collection counts are recomputed on the next ``get_collection``.

All functions take an open connection and run inside the caller's read transaction.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from typing import Any

import numpy as np

from plait.stores.base import Filters
from plait.stores.dense_bound import BoundedScan, build_bounded_scan, first_pass_bytes
from plait.stores.lexical import top_k
from plait.stores.lexical_index import LexicalIndex

__all__ = [
    "BOUNDED_FROM",
    "LENGTHS_SQL",
    "DenseMatrix",
    "Snapshot",
    "allowed_rowids",
    "load_lexical",
    "load_matrix",
    "load_postings",
]


#: Rows from which the exact dense arm first rules rows out with an int8 copy of the
#: matrix (:mod:`plait.stores.dense_bound`); below it the full scan is as fast.
BOUNDED_FROM = 2048
#: Queries (with a limit) a matrix answers by the full scan before its first pass is
#: built: the build (tens of ms at 9k rows, up to 0.8 s at 20k) pays for itself only
#: after many queries, so a generation that a write soon replaces never pays it.
BUILD_AFTER = 16
_BOUNDED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

#: Every chunk's rowid, field lengths and id: answered from the covering index
#: ``chunks_lengths`` (schema migration 3), in that index's order.
LENGTHS_SQL = "SELECT rowid, len_exact, len_stems, chunk_id FROM chunks WHERE collection_id = ?"


class DenseMatrix:
    """The collection's vectors: ``matrix[i]`` is chunk ``chunk_ids[i]`` (rowid ``rowids[i]``).

    ``bounded_from`` (rows): at or above it, :meth:`rank` with a ``limit`` first asks an
    int8 copy of the matrix which rows can be in the top ``limit`` and scores only those
    exactly (:mod:`plait.stores.dense_bound`: same rows, scores and order as the full
    scan); None: always the full scan. The copy is built on a background thread once
    the matrix has answered ``build_after`` such queries; no search waits for it: until
    it is ready, searches use the full scan (same results by construction).
    """

    def __init__(
        self,
        rowids: np.ndarray,
        matrix: np.ndarray,
        chunk_ids: list[str],
        *,
        bounded_from: int | None = BOUNDED_FROM,
        build_after: int = BUILD_AFTER,
    ) -> None:
        self.rowids = rowids
        self.matrix = matrix
        self.chunk_ids = chunk_ids
        self._by_rowid: dict[int, str] | None = None
        self._bounded_from = bounded_from
        self._bounded: BoundedScan | None = None
        self._bounded_built = False
        self._build_after = build_after
        self._queries = 0  # answered by the full scan while no first pass was built
        self._builder: threading.Thread | None = None
        self._build_lock = threading.Lock()  # held by the build; searches never wait on it
        self._retired = threading.Event()  # replaced by a write: no first pass for it
        #: True when a first-pass build was stopped (or its result dropped) because the
        #: matrix had been retired: no stale pass is ever installed.
        self.first_pass_cancelled = False

    def rank(
        self, query: np.ndarray, *, limit: int | None, allowed: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        """Exact cosine (rows are normalised): the best ``limit`` (chunk id, score).

        ``allowed`` (ascending rowids) restricts the result; ties break by rowid.
        einsum, not BLAS, computes the scores: one thread by construction. A
        multi-threaded sgemv at this size (memory-bound, well under a millisecond) gains
        little on an idle machine and stalls for milliseconds when the other cores are
        busy; the scores also no longer depend on the BLAS thread count. With the int8
        first pass (``bounded_from``) only the rows it cannot rule out are scored, by
        the same einsum, so every score is the full scan's to the bit.
        """
        among = None if allowed is None else np.flatnonzero(np.isin(self.rowids, allowed))
        candidates = self._candidates(query, limit, among)
        if candidates is not None:
            sub = np.einsum("ij,j->i", self.matrix[candidates], query)
            order = top_k(candidates, sub, limit)
            best, best_scores = candidates[order], sub[order]
        else:
            scores = np.einsum("ij,j->i", self.matrix, query)
            if among is None:
                among = np.arange(self.rowids.size)
                sub = scores
            else:
                sub = scores[among]
            best = among[top_k(among, sub, limit)]
            best_scores = scores[best]
        ids = self.chunk_ids
        return [(ids[i], s) for i, s in zip(best.tolist(), best_scores.tolist(), strict=True)]

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays plus the int8 first pass: once built, what it holds; before,
        what it will hold if this matrix can build one (so a byte budget counted when the
        matrix is cached is never exceeded by the lazy build). Chunk ids not included."""
        size = int(self.rowids.nbytes + self.matrix.nbytes)
        if self._bounded_built:
            return size + (0 if self._bounded is None else self._bounded.nbytes)
        if self._may_bound() and self.matrix.ndim == 2:
            return size + first_pass_bytes(self.matrix.shape[0], self.matrix.shape[1])
        return size

    def _may_bound(self) -> bool:
        return (
            self._bounded_from is not None
            and self.rowids.size >= self._bounded_from
            and self.rowids.size > 0
            and self.matrix.dtype in _BOUNDED_DTYPES
        )

    def _candidates(
        self, query: np.ndarray, limit: int | None, among: np.ndarray | None
    ) -> np.ndarray | None:
        """The rows the first pass cannot rule out, ascending; None: scan them all."""
        if limit is None or self._bounded_from is None or self.rowids.size < self._bounded_from:
            return None
        if np.result_type(self.matrix.dtype, query.dtype) not in _BOUNDED_DTYPES:
            return None
        scan = self._bounded
        if scan is None:
            if not self._bounded_built:
                self._queries += 1
                if self._queries >= self._build_after:
                    self._start_build()
            return None
        return scan.candidates(query, limit, among)

    def retire(self) -> None:
        """This matrix was replaced (a write made a new generation, or its collection
        went): a first-pass build running for it stops at its next block of rows, and
        none is started or installed for it any more. Searches still holding it keep
        answering by the full scan."""
        self._retired.set()

    def _start_build(self) -> None:
        """Start the first pass's build on a daemon thread, once (never blocks). The
        thread holds the matrix only weakly: a matrix its cache dropped (nothing else
        holding it) stops its build as a retired one does."""
        if self._retired.is_set() or not self._build_lock.acquire(blocking=False):
            return  # retired, or a build is running
        try:
            if self._bounded_built or self._builder is not None:
                return
            self._builder = threading.Thread(
                target=_build_in_background,
                args=(weakref.ref(self), self._build_lock, self.matrix, self._retired),
                name="plait-dense-first-pass",
                daemon=True,
            )
        finally:
            self._build_lock.release()
        self._builder.start()

    def build_first_pass(self) -> BoundedScan | None:
        """Build the int8 first pass now, on this thread (once; later calls return it).
        Searches running meanwhile use the full scan. A retired matrix gets none."""
        with self._build_lock:
            if not self._bounded_built:
                self._install(build_bounded_scan(self.matrix, cancelled=self._retired.is_set))
        return self._bounded

    def _install(self, scan: BoundedScan | None) -> None:
        """Keep a finished build (the build lock held), unless the matrix was retired
        meanwhile: a stale pass is dropped, never installed."""
        if self._retired.is_set():
            self.first_pass_cancelled = True
            scan = None
        self._bounded = scan
        self._bounded_built = True

    def id_of(self, rowid: int) -> str:
        """The chunk id of a rowid that has a vector."""
        if self._by_rowid is None:
            self._by_rowid = dict(zip(self.rowids.tolist(), self.chunk_ids, strict=True))
        return self._by_rowid[rowid]


def _build_in_background(
    owner: weakref.ref[DenseMatrix], lock: threading.Lock, matrix: np.ndarray, retired: threading.Event
) -> None:
    """The background first-pass build of :meth:`DenseMatrix._start_build`: stopped
    between blocks once the matrix is retired or dropped (only ``owner``, a weak
    reference, names it here)."""

    def stale() -> bool:
        return retired.is_set() or owner() is None

    with lock:
        held = owner()
        if held is None or held._bounded_built:
            return
        del held  # not kept alive by its own build
        scan = build_bounded_scan(matrix, cancelled=stale)
        held = owner()
        if held is not None:
            held._install(scan)


class Snapshot:
    """Per-collection, per-generation caches for the two arms (filled lazily)."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.lexical: LexicalIndex | None = None
        self.dense: DenseMatrix | None = None
        self.ann_synced = False  # the ANN graph was checked against this generation
        self.counts: tuple[Any, ...] | None = None  # (chunks, without vector, sources)

    def retire(self) -> None:
        """A newer generation replaced this one (or the collection went): its matrix's
        first-pass build, if any, stops (:meth:`DenseMatrix.retire`)."""
        if self.dense is not None:
            self.dense.retire()


def load_lexical(db: sqlite3.Connection, cid: int) -> LexicalIndex:
    """Every chunk's rowid, field lengths and id, in rowid order.

    Read from the covering index ``chunks_lengths`` (in its order, sorted here), never
    from the wide chunk rows.
    """
    rows = db.execute(LENGTHS_SQL, (cid,)).fetchall()
    rows.sort()
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    lengths = np.array([(r[1], r[2]) for r in rows], dtype=np.float64).reshape(-1, 2)
    return LexicalIndex(rowids, lengths, [r[3] for r in rows])


def load_postings(
    db: sqlite3.Connection, cid: int, field: int, term: str
) -> tuple[np.ndarray, np.ndarray]:
    """One term's postings in one field: (ascending chunk rowids, term frequencies)."""
    rows = db.execute(
        "SELECT p.chunk_rowid, p.tf FROM terms t JOIN postings p ON p.term_id = t.id "
        "WHERE t.collection_id = ? AND t.field = ? AND t.term = ? ORDER BY p.chunk_rowid",
        (cid, field, term),
    ).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    tfs = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
    return ids, tfs


def load_matrix(db: sqlite3.Connection, cid: int) -> DenseMatrix:
    """Every vector of the collection, in rowid order, as one float32 matrix."""
    rows = db.execute(
        "SELECT rowid, chunk_id, vector FROM chunks "
        "WHERE collection_id = ? AND vector IS NOT NULL ORDER BY rowid",
        (cid,),
    ).fetchall()
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if rows:
        matrix = np.vstack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
    else:
        matrix = np.zeros((0, 0), dtype=np.float32)
    return DenseMatrix(rowids, matrix, [r[1] for r in rows])


def allowed_rowids(db: sqlite3.Connection, cid: int, filters: Filters | None) -> np.ndarray | None:
    """Ascending rowids of the chunks ``filters`` lets through; None when it has no condition."""
    if filters is None or filters.empty:
        return None
    sql = "SELECT rowid FROM chunks WHERE collection_id = ?"
    params: list[Any] = [cid]
    if filters.scopes:
        sql += f" AND scope IN ({','.join('?' * len(filters.scopes))})"
        params.extend(filters.scopes)
    for key, value in filters.metadata.items():
        sql += " AND json_extract(metadata, '$.' || ?) = ?"
        params.extend([key, value])
    sql += " ORDER BY rowid"
    rows = db.execute(sql, params).fetchall()
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
