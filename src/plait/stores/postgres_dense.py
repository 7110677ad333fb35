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
(One aggregated row of vectors, as the lexical loads read theirs, measured from 10 %
faster to 40 % slower than the ``COPY`` at 9k and 100k chunks on a busy machine:
``docs/postgres.md``; the ``COPY`` also serves the partial loads.)

Memory: :class:`DenseCache` holds at most ``budget`` bytes of matrices (row ids, float32
vectors, chunk ids; default :data:`DEFAULT_DENSE_BUDGET`) and at most ``max_entries``
collections, least recently searched dropped first. A collection whose matrix alone
would not fit is searched in SQL, as above the threshold: the estimate before loading
and the count of a loaded matrix are one function (:func:`matrix_bytes`), the chunk
ids as long as in the collection's last load, so a matrix loaded once and found too
large is not loaded again (its searches run the pgvector statement). Below the default threshold a matrix is at
most 20,000 × 384 × 4 B ≈ 31 MB (123 MB at 1,536 dimensions).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from plait.errors import StoreError
from plait.stores.base import Filters
from plait.stores.dense_bound import first_pass_bytes
from plait.stores.postgres_changes import CHANGES, changes_from, changes_params
from plait.stores.postgres_keys import CHUNKS, GENERATION_OF, REVISION
from plait.stores.postgres_lexcache import READ_SNAPSHOT, allowed_query, parse_allowed
from plait.stores.sqlite_snapshot import BOUNDED_FROM, DenseMatrix

__all__ = [
    "ADDED_IDS", "DEFAULT_DENSE_BUDGET", "DENSE_IDS", "ID_OVERHEAD", "DenseCache", "Key", "MatrixLoad", "advance_matrix", "dense_copy", "load_changes",
    "load_full", "matrix_bytes", "matrix_from",
]

#: Bytes of dense matrices one store keeps in process (all collections together).
DEFAULT_DENSE_BUDGET = 512 * 2**20

#: What a matrix is cached under: the collection's (generation, revision).
Key = tuple[int, int]
#: A load's result: the key it was read under, the matrix, a filter's allowed row ids.
MatrixLoad = tuple[Key, DenseMatrix, np.ndarray | None]

_KEY = f"SELECT {GENERATION_OF}, {REVISION} FROM plait_collections p WHERE p.id = %s"
#: The collection's chunks and chunks without a vector (the latter from its partial index).
_COUNTS = (
    f"SELECT {CHUNKS}, (SELECT count(*) FROM plait_chunks c WHERE c.collection_id = p.id AND c.vector IS NULL) "
    "FROM plait_collections p WHERE p.id = %(cid)s"
)

#: The matrix's chunks in row-id order: their count, row ids and chunk ids (one row of
#: ``bytea``, read in binary; the chunk ids joined by NUL, a byte no ``text`` holds).
DENSE_IDS = (
    "SELECT count(*), string_agg(int8send(c.id), ''::bytea ORDER BY c.id), "
    "string_agg(convert_to(c.chunk_id, 'UTF8'), '\\x00'::bytea ORDER BY c.id) "
    "FROM plait_chunks c WHERE c.collection_id = %(cid)s AND c.vector IS NOT NULL"
)

#: Of the rows ``%(ids)s``, those with a vector: their row ids and chunk ids, in order.
ADDED_IDS = (
    "SELECT string_agg(int8send(c.id), ''::bytea ORDER BY c.id), "
    "string_agg(convert_to(c.chunk_id, 'UTF8'), '\\x00'::bytea ORDER BY c.id) "
    "FROM plait_chunks c WHERE c.collection_id = %(cid)s AND c.vector IS NOT NULL AND c.id = ANY(%(ids)s::bigint[])"
)

_COPY = sql.SQL(
    "COPY (SELECT c.id, c.vector FROM plait_chunks c WHERE c.collection_id = {cid} "
    "AND c.vector IS NOT NULL) TO STDOUT (FORMAT binary)"
)

#: ``COPY … (FORMAT binary)``'s fixed header (signature, flags, extension length).
_COPY_HEADER = 19


_COPY_SOME = sql.SQL(
    "COPY (SELECT c.id, c.vector FROM plait_chunks c WHERE c.collection_id = {cid} "
    "AND c.vector IS NOT NULL AND c.id = ANY({ids}::bigint[])) TO STDOUT (FORMAT binary)"
)


def dense_copy(cid: int, ids: np.ndarray | None = None) -> sql.Composed:
    """The ``COPY`` of collection ``cid``'s (row id, vector) pairs in binary, any order
    (only the rows ``ids`` when given)."""
    if ids is None:
        return _COPY.format(cid=sql.Literal(int(cid)))
    return _COPY_SOME.format(cid=sql.Literal(int(cid)), ids=sql.Literal([int(i) for i in ids.tolist()]))


def _copied(copied: bytes | bytearray, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, float32 vectors) of :func:`dense_copy`'s bytes, in the copy's order."""
    row = np.dtype([
        ("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("vec_len", ">i4"),
        ("dim", ">i2"), ("unused", ">i2"), ("values", ">f4", (dimension,)),
    ])
    if not copied:  # nothing was copied
        return np.empty(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32)
    n, extra = divmod(len(copied) - _COPY_HEADER - 2, row.itemsize)
    if extra or n < 0:
        raise StoreError(f"the collection's stored vectors do not all have {dimension} dimensions")
    rows = np.frombuffer(copied, dtype=row, count=n, offset=_COPY_HEADER)
    if not (rows["dim"] == dimension).all():
        raise StoreError(f"the collection's stored vectors do not all have {dimension} dimensions")
    return rows["id"].astype(np.int64), rows["values"].astype(np.float32)


def advance_matrix(
    old: DenseMatrix,
    removed: np.ndarray,
    added_row: Sequence[Any] | None,
    copied: bytes | bytearray,
    dimension: int,
    vectors: int,
) -> DenseMatrix | None:
    """The next key's matrix from ``old``: its rows but ``removed``, plus the added rows
    (:data:`ADDED_IDS`'s row: their row and chunk ids; :func:`dense_copy`'s bytes: their
    vectors), in row-id order; None when that is not ``vectors`` rows, or the copy and the
    ids disagree (load in full then)."""
    added_ids, added = _copied(copied, dimension)
    order = np.argsort(added_ids, kind="stable")
    added_ids, added = added_ids[order], added[order]
    named, added_names = np.empty(0, dtype=np.int64), []
    if added_row is not None and added_row[0] is not None:
        named = np.frombuffer(added_row[0], dtype=">i8").astype(np.int64)
        added_names = bytes(added_row[1]).decode("utf-8").split("\x00")
    if not np.array_equal(named, added_ids) or old.matrix.shape[1:] != (dimension,):
        return None
    kept = ~np.isin(old.rowids, removed)
    count = int(kept.sum())
    if count + added_ids.size != vectors or np.isin(added_ids, old.rowids[kept]).any():
        return None
    # one copy of the matrix: the kept rows, then the added ones, straight into place
    matrix = np.empty((vectors, dimension), dtype=np.float32)
    np.compress(kept, old.matrix, axis=0, out=matrix[:count])
    matrix[count:] = added
    ids = np.concatenate([old.rowids[kept], added_ids])
    names = [n for n, k in zip(old.chunk_ids, kept.tolist(), strict=True) if k] + added_names
    if count and added_ids.size and added_ids[0] < ids[count - 1]:  # added rows not all after the kept ones
        order = np.argsort(ids, kind="stable")
        ids, matrix, names = ids[order], matrix[order], [names[i] for i in order.tolist()]
    return DenseMatrix(ids, matrix, names)


def matrix_from(ids_row: Sequence[Any] | None, copied: bytes | bytearray, dimension: int) -> DenseMatrix:
    """The :class:`DenseMatrix` of :data:`DENSE_IDS`'s row and :func:`dense_copy`'s
    bytes (vectors of ``dimension``), rows in row-id order."""
    if ids_row is None or not ids_row[0]:
        return DenseMatrix(np.empty(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32), [])
    ids, values = _copied(copied, dimension)
    rowids = np.frombuffer(ids_row[1], dtype=">i8").astype(np.int64)
    order = np.argsort(ids, kind="stable")
    if not np.array_equal(ids[order], rowids):
        raise StoreError("the copied vectors are not the chunks the snapshot holds")
    matrix = np.ascontiguousarray(values[order], dtype=np.float32)
    chunk_ids = bytes(ids_row[2]).decode("utf-8").split("\x00")
    return DenseMatrix(rowids, matrix, chunk_ids)


def _copy(conn: psycopg.Connection, statement: sql.Composed) -> bytearray:
    copied = bytearray()
    with conn.cursor().copy(statement) as copy:
        for data in copy:
            copied += data
    return copied


def load_full(
    conn: psycopg.Connection, cid: int, dimension: int, filters: Filters | None, *, prepare: bool
) -> MatrixLoad | None:
    """Collection ``cid``'s whole matrix (and a filter's row ids), in one ``REPEATABLE
    READ`` snapshot with its key; None when the collection is gone."""
    with conn.transaction():
        with conn.pipeline():
            conn.execute(READ_SNAPSHOT)
            check = conn.execute(_KEY, (cid,), prepare=prepare)
            ids = conn.execute(DENSE_IDS, {"cid": cid}, prepare=prepare, binary=True)
            allowed = None if filters is None else conn.execute(*allowed_query(cid, filters), prepare=prepare)
        copied = _copy(conn, dense_copy(cid))
    now = check.fetchone()
    if now is None:
        return None
    matrix = matrix_from(ids.fetchone(), copied, dimension)
    return (int(now[0]), int(now[1])), matrix, None if allowed is None else parse_allowed(allowed.fetchone())


def load_changes(
    conn: psycopg.Connection,
    cid: int,
    held: tuple[Key, DenseMatrix],
    dimension: int,
    filters: Filters | None,
    *,
    most: int,
    prepare: bool,
) -> MatrixLoad | None:
    """The current key's matrix from ``held`` and the change log the lexical index uses
    (:mod:`plait.stores.postgres_changes`): the removed rows dropped, the added rows'
    row ids, chunk ids and vectors read (all in one snapshot with the key), so the cost
    follows the change, not the collection; the result must hold as many rows as the
    snapshot has chunks with a vector. None when it cannot be done — the revision moved
    too (in place updates are not in the log), the log does not reach back or names more
    than ``most`` rows, or the rows do not add up: load in full then."""
    (since, revision), old = held
    with conn.transaction():
        with conn.pipeline():
            conn.execute(READ_SNAPSHOT)
            check = conn.execute(_KEY, (cid,), prepare=prepare)
            logged = conn.execute(CHANGES, changes_params(cid, since, most), prepare=prepare)
            counted = conn.execute(_COUNTS, {"cid": cid}, prepare=prepare)
            allowed = None if filters is None else conn.execute(*allowed_query(cid, filters), prepare=prepare)
        now, counts = check.fetchone(), counted.fetchone()
        if now is None or counts is None or int(now[1]) != revision:
            return None
        changes = changes_from(logged.fetchone(), since=since, generation=int(now[0]))
        if changes is None or changes.updated.size:
            return None
        added_row: Sequence[Any] | None = None
        copied = bytearray()
        if changes.added.size:
            added_row = conn.execute(ADDED_IDS, {"cid": cid, "ids": changes.added.tolist()}, binary=True).fetchone()
            copied = _copy(conn, dense_copy(cid, changes.added))
    matrix = advance_matrix(old, changes.removed, added_row, copied, dimension, int(counts[0]) - int(counts[1]))
    if matrix is None:
        return None
    return (int(now[0]), revision), matrix, None if allowed is None else parse_allowed(allowed.fetchone())


#: Bytes counted per chunk id besides its characters: an ASCII ``str`` (49 B) and its
#: slot in the list (8 B); ``sys.getsizeof`` per string cost 110 ms at 40k chunks on a
#: busy machine.
ID_OVERHEAD = 49 + 8


def matrix_bytes(rows: int, dimension: int, id_chars: int, *, first_pass: bool = True) -> int:
    """Bytes a cached matrix of ``rows`` vectors of ``dimension`` holds: its row ids and
    float32 vectors, its int8 first pass (from ``BOUNDED_FROM`` rows, counted up front:
    :attr:`DenseMatrix.nbytes`) and its chunk ids (``id_chars`` characters in all). The
    one size both the estimate before a load (:meth:`DenseCache.fits`) and the cache's
    count of a loaded matrix (:meth:`DenseCache.keep`) use."""
    arrays = rows * (8 + 4 * dimension)
    bounded = first_pass_bytes(rows, dimension) if first_pass and rows >= BOUNDED_FROM else 0
    return int(arrays + bounded + ID_OVERHEAD * rows + id_chars)


def _size(matrix: DenseMatrix) -> int:
    """:func:`matrix_bytes` of a loaded matrix (its :attr:`DenseMatrix.nbytes`: the first
    pass as built, or as it will be)."""
    ids = matrix.chunk_ids
    return int(matrix.nbytes + ID_OVERHEAD * len(ids) + sum(map(len, ids)))


#: Collections whose chunk-id length :class:`DenseCache` remembers for its estimate.
_MAX_ID_STATS = 1024


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
        # collection id -> (chunk-id characters, rows) of its last loaded matrix, kept or not
        self._id_stats: OrderedDict[int, tuple[int, int]] = OrderedDict()
        # collection id -> (its load lock, threads holding or waiting for it)
        self._loads: dict[int, tuple[threading.Lock, int]] = {}
        self._epoch = 0  # the schema instance's epoch the matrices are of

    def flush(self, epoch: int) -> None:
        """Drop every matrix: from now on only matrices read in ``epoch`` are kept
        (:mod:`plait.stores.postgres_instances`)."""
        with self._lock:
            self._entries.clear()
            self._id_stats.clear()
            self._bytes = 0
            self._epoch = epoch

    @contextmanager
    def loading(self, cid: int) -> Iterator[None]:
        """Held while this thread loads ``cid``'s matrix: one load per collection at a
        time (the threads that wait look in the cache again once it is done)."""
        with self._lock:
            lock, waiting = self._loads.get(cid, (threading.Lock(), 0))
            self._loads[cid] = (lock, waiting + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, waiting = self._loads[cid]
                if waiting == 1:
                    del self._loads[cid]
                else:
                    self._loads[cid] = (lock, waiting - 1)

    @property
    def bytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def estimate(self, chunks: int, dimension: int, cid: int | None = None) -> int:
        """:func:`matrix_bytes` of (at most) ``chunks`` vectors, their chunk ids as long as
        in ``cid``'s last loaded matrix (none counted before a first load)."""
        with self._lock:
            stats = None if cid is None else self._id_stats.get(cid)
        id_chars = 0 if not stats or not stats[1] else -(-stats[0] * chunks // stats[1])
        return matrix_bytes(chunks, dimension, id_chars)

    def fits(self, chunks: int, dimension: int, cid: int | None = None) -> bool:
        """Whether a matrix of (at most) ``chunks`` vectors could be cached at all
        (:meth:`estimate`). A matrix :meth:`keep` refused for its size is not loaded again
        for as many chunks: the estimate then holds its real chunk ids."""
        return self.estimate(chunks, dimension, cid) <= self.budget

    def get(self, cid: int) -> tuple[Key, DenseMatrix] | None:
        with self._lock:
            found = self._entries.get(cid)
            if found is None:
                return None
            self._entries.move_to_end(cid)
            return found[0], found[1]

    def keep(self, cid: int, key: Key, matrix: DenseMatrix, *, epoch: int | None = None) -> None:
        """Cache ``matrix`` unless a newer key's matrix is cached already, or it was read
        in another ``epoch`` than the cache's; evict the least recently used until the
        budget holds (a matrix larger than it is not kept)."""
        size = _size(matrix)
        with self._lock:
            if epoch is not None and epoch != self._epoch:
                return
            self._id_stats[cid] = (sum(map(len, matrix.chunk_ids)), len(matrix.chunk_ids))
            self._id_stats.move_to_end(cid)
            while len(self._id_stats) > _MAX_ID_STATS:
                self._id_stats.popitem(last=False)
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
