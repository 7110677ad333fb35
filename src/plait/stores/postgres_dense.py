"""The PostgreSQL store's dense arm in process, below the ANN threshold.

The SQLite store ranks a collection of fewer than ``ann_threshold`` vectors
(:func:`~plait.stores.ann.resolve_ann_threshold`, default 20,000) exactly, in process,
from a cached float32 matrix (:class:`~plait.stores.sqlite_snapshot.DenseMatrix`), and
uses an ANN index at or above it. The PostgreSQL store follows the same rule with the
same class, so its exact scores are the SQLite store's to the last bit (one float32
``einsum`` per row, ties by row id): below the threshold it keeps the collection's
matrix in this process, keyed by the collection's ``(generation, revision)``
(:mod:`plait.stores.postgres_generation`, :mod:`plait.stores.postgres_revision`: every
insert, delete or in-place update of a chunk row moves one of them, in the writing
transaction), and a warm search sends no dense SQL at all; at or above it the pgvector
HNSW statement runs as before (:func:`~plait.stores.postgres_queries.vector_query`).

:func:`dense_copy` reads the vectors with ``COPY … TO STDOUT (FORMAT binary)``: fixed-size
rows (row id, pgvector's binary ``vector``: big-endian float32s, no text parsing) that
numpy reads in place, sorted here by row id; :data:`DENSE_IDS` reads the row ids and chunk
ids in row-id order as one row of ``bytea``. Both run in one ``REPEATABLE READ`` read-only
transaction with the read of the key, so a matrix is always exactly its key's snapshot.
(One aggregated row of vectors, as the lexical loads do, cost 2-3× as much at 9k chunks:
the server sorts 14 MB of rows and the client receives one 14 MB value.)

Memory: :class:`DenseCache` holds at most ``budget`` bytes of matrices (row ids, float32
vectors, chunk ids; default :data:`DEFAULT_DENSE_BUDGET`) and at most ``max_entries``
collections, least recently searched dropped first. A collection whose matrix alone
would not fit (``chunks × (4 × dimension + 8)`` is the estimate used before loading)
is searched in SQL, as above the threshold. Below the default threshold a matrix is at
most 20,000 × 384 × 4 B ≈ 31 MB (123 MB at 1,536 dimensions).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql

from plait.errors import StoreError
from plait.stores.sqlite_snapshot import DenseMatrix

__all__ = ["DEFAULT_DENSE_BUDGET", "DENSE_IDS", "DenseCache", "Key", "dense_copy", "matrix_from"]

#: Bytes of dense matrices one store keeps in process (all collections together).
DEFAULT_DENSE_BUDGET = 512 * 2**20

#: What a matrix is cached under: the collection's (generation, revision).
Key = tuple[int, int]

#: The matrix's chunks in row-id order: their count, row ids and chunk ids (one row of
#: ``bytea``, read in binary; the chunk ids joined by NUL, a byte no ``text`` holds).
DENSE_IDS = (
    "SELECT count(*), string_agg(int8send(c.id), ''::bytea ORDER BY c.id), "
    "string_agg(convert_to(c.chunk_id, 'UTF8'), '\\x00'::bytea ORDER BY c.id) "
    "FROM plait_chunks c WHERE c.collection_id = %(cid)s AND c.vector IS NOT NULL"
)

_COPY = sql.SQL(
    "COPY (SELECT c.id, c.vector FROM plait_chunks c WHERE c.collection_id = {cid} "
    "AND c.vector IS NOT NULL) TO STDOUT (FORMAT binary)"
)

#: ``COPY … (FORMAT binary)``'s fixed header (signature, flags, extension length).
_COPY_HEADER = 19


def dense_copy(cid: int) -> sql.Composed:
    """The ``COPY`` of collection ``cid``'s (row id, vector) pairs in binary, any order."""
    return _COPY.format(cid=sql.Literal(int(cid)))


def matrix_from(ids_row: Sequence[Any] | None, copied: bytes | bytearray, dimension: int) -> DenseMatrix:
    """The :class:`DenseMatrix` of :data:`DENSE_IDS`'s row and :func:`dense_copy`'s
    bytes (vectors of ``dimension``), rows in row-id order."""
    if ids_row is None or not ids_row[0]:
        return DenseMatrix(np.empty(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32), [])
    n = int(ids_row[0])
    row = np.dtype([
        ("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("vec_len", ">i4"),
        ("dim", ">i2"), ("unused", ">i2"), ("values", ">f4", (dimension,)),
    ])
    if len(copied) != _COPY_HEADER + n * row.itemsize + 2:
        raise StoreError(
            f"the collection's {n} stored vectors do not all have {dimension} dimensions "
            f"({len(copied)} bytes copied)"
        )
    rows = np.frombuffer(copied, dtype=row, count=n, offset=_COPY_HEADER)
    if not (rows["dim"] == dimension).all():
        raise StoreError(f"the collection's stored vectors do not all have {dimension} dimensions")
    rowids = np.frombuffer(ids_row[1], dtype=">i8").astype(np.int64)
    order = np.argsort(rows["id"], kind="stable")
    if not np.array_equal(rows["id"][order], rowids):
        raise StoreError("the copied vectors are not the chunks the snapshot holds")
    matrix = np.ascontiguousarray(rows["values"][order], dtype=np.float32)
    chunk_ids = bytes(ids_row[2]).decode("utf-8").split("\x00")
    return DenseMatrix(rowids, matrix, chunk_ids)


def _size(matrix: DenseMatrix) -> int:
    """Bytes a cached matrix holds (its arrays and its chunk-id strings)."""
    strings = sum(sys.getsizeof(s) for s in matrix.chunk_ids)
    return int(matrix.rowids.nbytes + matrix.matrix.nbytes + strings + 8 * len(matrix.chunk_ids))


class DenseCache:
    """Collection id -> (key, matrix), least recently used first; bounded in bytes and entries."""

    def __init__(self, *, budget: int = DEFAULT_DENSE_BUDGET, max_entries: int = 16) -> None:
        if budget < 0:
            raise StoreError(f"dense_cache_bytes must be >= 0, got {budget}")
        self.budget = budget
        self.max_entries = max_entries
        self._entries: OrderedDict[int, tuple[Key, DenseMatrix, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def fits(self, chunks: int, dimension: int) -> bool:
        """Whether a matrix of (at most) ``chunks`` vectors could be cached at all."""
        return chunks * (4 * dimension + 8) <= self.budget

    def get(self, cid: int) -> tuple[Key, DenseMatrix] | None:
        with self._lock:
            found = self._entries.get(cid)
            if found is None:
                return None
            self._entries.move_to_end(cid)
            return found[0], found[1]

    def keep(self, cid: int, key: Key, matrix: DenseMatrix) -> None:
        """Cache ``matrix`` unless a newer key's matrix is cached already; evict the least
        recently used until the budget holds (a matrix larger than it is not kept)."""
        size = _size(matrix)
        with self._lock:
            held = self._entries.get(cid)
            if held is not None:
                if held[0][0] > key[0] or held[0][1] > key[1]:
                    return
                self._bytes -= held[2]
                del self._entries[cid]
            if size > self.budget:
                return
            self._entries[cid] = (key, matrix, size)
            self._bytes += size
            while self._bytes > self.budget or len(self._entries) > self.max_entries:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def drop(self, cid: int, matrix: DenseMatrix | None = None) -> None:
        """Forget ``cid``'s matrix (only if it is ``matrix``, when given)."""
        with self._lock:
            held = self._entries.get(cid)
            if held is not None and (matrix is None or held[1] is matrix):
                self._bytes -= held[2]
                del self._entries[cid]
