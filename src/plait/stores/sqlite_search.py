"""The SQLite store's two arms: BM25 over the postings, cosine over the vectors.

The lexical arm scores from the in-process snapshot of the postings and field lengths
(:mod:`plait.stores.sqlite_snapshot`, keyed by the collection's generation); the dense
arm is exact cosine over the cached matrix below ``ann_threshold`` vectors and an HNSW
graph persisted beside the file at or above it (:mod:`plait.stores.ann`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np

from plait.errors import NotFoundError, StoreError
from plait.stores.ann import (
    AnnIndex,
    hnswlib_available,
)
from plait.stores.base import (
    BM25Params,
    Filters,
)
from plait.stores.lexical_index import LexicalIndex
from plait.stores.sqlite_base import SQLiteBase
from plait.stores.sqlite_snapshot import (
    DenseMatrix,
    Snapshot,
    allowed_rowids,
    load_lexical,
    load_matrix,
    load_postings,
)

_DEFAULT_BM25 = BM25Params()



class SQLiteSearch(SQLiteBase):
    """Lexical and vector search over a :class:`SQLiteBase` connection."""

    # the two arms ----------------------------------------------------------------
    def _snapshot(self, collection: str) -> tuple[int, Snapshot]:
        row = self._collection_row(collection)
        if row is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        cid = int(row[0])
        return cid, self._snap_for(cid, int(row[6]))

    def _snap_for(self, cid: int, generation: int) -> Snapshot:
        snap = self._snapshots.get(cid)
        if snap is None or snap.generation != generation:
            if snap is not None:
                snap.retire()  # a write replaced it: stop its first-pass build
            snap = Snapshot(generation)
            self._snapshots[cid] = snap
        return snap

    def _lexical_index(self, cid: int, snap: Snapshot) -> LexicalIndex:
        """The generation's lexical index (loaded on first use; inside a read transaction)."""
        if snap.lexical is None:
            snap.lexical = load_lexical(self._db, cid)
        return snap.lexical

    def _dense(self, cid: int, snap: Snapshot) -> DenseMatrix:
        """The generation's vector matrix (loaded on first use; inside a read transaction)."""
        if snap.dense is None:
            snap.dense = load_matrix(self._db, cid)
        return snap.dense

    def lexical_search(
        self,
        collection: str,
        exact: Sequence[str],
        stems: Sequence[str],
        *,
        limit: int | None,
        filters: Filters | None = None,
        params: BM25Params | None = None,
    ) -> list[tuple[str, float]]:
        """BM25 over the generation's cached score rows (see :mod:`plait.stores.lexical_index`).

        When every query term's row is cached and no filter applies, no SQL runs but
        the one statement that reads the collection's generation.
        """
        bm25 = params or _DEFAULT_BM25
        terms = (exact, stems)
        if filters is None or filters.empty:
            with self._lock:
                _, snap = self._snapshot(collection)  # one statement: atomic on its own
                index = snap.lexical
                rows = None if index is None else index.rows(terms, bm25, None)
            if index is not None and rows is not None:
                return index.rank(rows, limit=limit)
        with self._read() as db:
            cid, snap = self._snapshot(collection)
            index = self._lexical_index(cid, snap)
            found = index.rows(terms, bm25, partial(load_postings, db, cid))
            allowed = allowed_rowids(db, cid, filters)
        return index.rank(found or [], limit=limit, allowed=allowed)

    def vector_search(
        self,
        collection: str,
        vector: np.ndarray,
        *,
        limit: int | None,
        filters: Filters | None = None,
    ) -> list[tuple[str, float]]:
        """Exact cosine over the generation's matrix, or the HNSW graph at or above the threshold.

        With the matrix cached and no filter, no SQL runs but the generation read.
        """
        dense: DenseMatrix | None = None
        allowed: np.ndarray | None = None
        if filters is None or filters.empty:
            with self._lock:
                cid, snap = self._snapshot(collection)  # one statement: atomic on its own
                dense = snap.dense
        if dense is None:
            with self._read() as db:
                cid, snap = self._snapshot(collection)
                dense = self._dense(cid, snap)
                allowed = allowed_rowids(db, cid, filters)
        rowids, matrix = dense.rowids, dense.matrix
        if rowids.size == 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if query.shape[0] != matrix.shape[1]:
            raise StoreError(
                f"query vector has {query.shape[0]} dimensions, collection {collection!r} "
                f"holds {matrix.shape[1]}-d vectors"
            )
        if limit is not None and rowids.size >= self.ann_settings.threshold:
            found = self._ann_search(cid, snap, rowids, matrix, query, limit, allowed)
            if found is not None:
                self.last_vector_path = "ann"
                return [(dense.id_of(r), s) for r, s in found]
        self.last_vector_path = "exact"
        return dense.rank(query, limit=limit, allowed=allowed)

    def _ann_index(
        self, cid: int, snap: Snapshot, rowids: np.ndarray, matrix: np.ndarray
    ) -> AnnIndex | None:
        """The collection's HNSW graph, synced with this generation (None: hnswlib missing)."""
        if not hnswlib_available():
            return None
        index = self._ann.get(cid)
        if index is None or index.dimension != matrix.shape[1]:
            if str(self.path) == ":memory:":
                path = Path(f"plait-memory.{id(self)}.{cid}.hnsw")  # never saved
            else:
                path = Path(f"{self.path}.{cid}.hnsw")
            index = AnnIndex(path, int(matrix.shape[1]), self.ann_settings)
            self._ann[cid] = index
        if not snap.ann_synced:
            if index.sync(rowids, matrix, snap.generation) and str(self.path) != ":memory:":
                index.save()
            snap.ann_synced = True
        return index

    def _ann_search(
        self,
        cid: int,
        snap: Snapshot,
        rowids: np.ndarray,
        matrix: np.ndarray,
        query: np.ndarray,
        limit: int,
        allowed: np.ndarray | None,
    ) -> list[tuple[int, float]] | None:
        """Top ``limit`` (rowid, score) from the graph, or None to answer exactly instead."""
        with self._lock:
            index = self._ann_index(cid, snap, rowids, matrix)
            if index is None:
                return None
            return index.search(query, rowids, matrix, limit=limit, allowed=allowed)
