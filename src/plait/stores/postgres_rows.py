"""The PostgreSQL store's chunk rows (``get_chunks``), cached per collection key.

A search ends by reading the chunks of its page (and of a rerank pool, or of the
candidates ``max_per_source`` looks at); the same chunks come back query after query.
:class:`RowCache` keeps the :class:`~plait.types.Chunk` objects read, per collection,
under the collection's ``(generation, revision)``: every insert, delete or in-place update
of a chunk row moves one of them in the writing transaction (migrations 9 and 10,
:mod:`plait.stores.postgres_revision`), and every ``get_chunks`` reads the key again — the
check statement, in one pipeline with the read of the rows not cached — so a write by any
process is seen by the next read. What saves: the rows' statement (the chunks' text and
JSON from the heap), and building the ``Chunk`` models, for the chunks already cached.

Freshness without a snapshot: the check goes before the rows' statement in the pipeline,
so rows read after it are at least as new as the key they are cached under; had a write
landed between the two, the key moved with it and the next check drops them.

Memory: at most ``budget`` bytes in all (default :data:`DEFAULT_ROW_BUDGET`; counted as
each chunk's content and ids, its origin and metadata as they are held, plus
:data:`CHUNK_OVERHEAD` bytes for the model), least recently read chunks dropped first.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from pydantic import BaseModel, TypeAdapter, ValidationError

from plait.errors import NotFoundError, StoreError
from plait.stores.postgres_instances import Instance
from plait.stores.postgres_keys import ROWS_CHECK
from plait.stores.postgres_search import PostgresSearch
from plait.types import Chunk, Origin

__all__ = [
    "ALL_ROWS", "CHECK", "CHUNK_COLUMNS", "CHUNK_OVERHEAD", "DEFAULT_ROW_BUDGET", "ROWS", "PostgresRows", "RowCache", "chunk_from", "read_chunks",
]

#: Bytes of cached chunks one store keeps (all collections together).
DEFAULT_ROW_BUDGET = 64 * 2**20
#: Bytes counted per cached chunk for the model itself (its origin and metadata are
#: counted as they are: :func:`_size`).
CHUNK_OVERHEAD = 1024

CHUNK_COLUMNS = "c.chunk_id, c.source_id, c.scope, c.ordinal, c.content, c.content_hash, c.origin, c.metadata"
ROWS = (
    "SELECT " + CHUNK_COLUMNS + " FROM plait_collections p JOIN plait_chunks c "
    "ON c.collection_id = p.id WHERE p.name = %s AND c.chunk_id = ANY(%s)"
)
#: Every chunk row of collection ``%(cid)s`` (a whole load: :mod:`plait.stores.postgres_whole`).
ALL_ROWS = "SELECT " + CHUNK_COLUMNS + " FROM plait_chunks c WHERE c.collection_id = %(cid)s"
#: The collection's id, key and schema instance, read before its rows in the same pipeline.
CHECK = ROWS_CHECK

_ORIGIN: TypeAdapter[Origin] = TypeAdapter(Origin)

Key = tuple[int, int]


def chunk_from(row: Sequence[Any]) -> Chunk:
    """The :class:`Chunk` of a row of :data:`CHUNK_COLUMNS`."""
    return Chunk(
        id=row[0], source_id=row[1], scope=row[2], ordinal=row[3], content=row[4],
        content_hash=row[5], origin=_ORIGIN.validate_python(row[6]), metadata=row[7],
    )


def _deep_size(value: Any, depth: int = 0) -> int:
    """``sys.getsizeof`` of ``value`` and, recursively, of what it holds (JSON values:
    dicts, lists, strings, numbers; a model's fields). Shared objects (small ints, None,
    repeated keys) are counted each time: an upper bound, so the budget bounds memory."""
    size = sys.getsizeof(value)
    if depth > 64:  # deeper than any JSON the rows hold: counted flat
        return size
    if isinstance(value, dict):
        return size + sum(_deep_size(k, depth + 1) + _deep_size(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return size + sum(_deep_size(v, depth + 1) for v in value)
    if isinstance(value, BaseModel):
        return size + _deep_size(value.__dict__, depth + 1)
    return size


def _size(chunk: Chunk) -> int:
    """Bytes one cached chunk holds: :data:`CHUNK_OVERHEAD` for the model, its strings,
    its origin and its metadata (:func:`_deep_size`)."""
    strings = sum(sys.getsizeof(s) for s in (chunk.id, chunk.source_id, chunk.content, chunk.content_hash))
    return CHUNK_OVERHEAD + strings + _deep_size(chunk.origin) + _deep_size(chunk.metadata)


class RowCache:
    """(collection id, chunk id) -> chunk of the collection's key, least recently read first."""

    def __init__(self, *, budget: int = DEFAULT_ROW_BUDGET) -> None:
        if budget < 0:
            raise StoreError(f"row_cache_bytes must be >= 0, got {budget}")
        self.budget = budget
        self._keys: dict[int, Key] = {}
        self._chunks: OrderedDict[tuple[int, str], tuple[Chunk, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._epoch = 0  # the schema instance's epoch the chunks are of

    def flush(self, epoch: int) -> None:
        """Drop every chunk: from now on only chunks read in ``epoch`` are kept
        (:mod:`plait.stores.postgres_instances`)."""
        with self._lock:
            self._keys.clear()
            self._chunks.clear()
            self._bytes = 0
            self._epoch = epoch

    @property
    def bytes(self) -> int:
        return self._bytes

    def lookup(self, cid: int, ids: Sequence[str]) -> tuple[Key | None, dict[str, Chunk]]:
        """The key ``cid``'s chunks are cached under and those of ``ids`` cached."""
        with self._lock:
            found: dict[str, Chunk] = {}
            for chunk_id in ids:
                entry = self._chunks.get((cid, chunk_id))
                if entry is not None:
                    self._chunks.move_to_end((cid, chunk_id))
                    found[chunk_id] = entry[0]
            return self._keys.get(cid), found

    def add(self, cid: int, key: Key, chunks: Sequence[Chunk], *, epoch: int | None = None) -> None:
        """Cache ``chunks`` under ``key``: the collection's chunks of another key go first
        (a newer key's are never replaced by an older one's); nothing when they were read
        in another ``epoch`` than the cache's."""
        with self._lock:
            if epoch is not None and epoch != self._epoch:
                return
            held = self._keys.get(cid)
            if held is not None and held != key:
                if held[0] > key[0] or held[1] > key[1]:
                    return
                self._drop(cid)
            self._keys[cid] = key
            for chunk in chunks:
                old = self._chunks.pop((cid, chunk.id), None)
                if old is not None:
                    self._bytes -= old[1]
                size = _size(chunk)
                if size > self.budget:
                    continue
                self._chunks[(cid, chunk.id)] = (chunk, size)
                self._bytes += size
            while self._bytes > self.budget:
                _, (_, dropped) = self._chunks.popitem(last=False)
                self._bytes -= dropped

    def drop(self, cid: int) -> None:
        """Forget ``cid``'s chunks (stale, or the collection is gone)."""
        with self._lock:
            self._drop(cid)

    def _drop(self, cid: int) -> None:
        self._keys.pop(cid, None)
        for entry in [k for k in self._chunks if k[0] == cid]:
            self._bytes -= self._chunks.pop(entry)[1]


def read_chunks(
    conn: psycopg.Connection,
    cache: RowCache,
    cid: int | None,
    collection: str,
    ids: Sequence[str],
    *,
    prepare: bool,
    observe: Callable[[Instance], int] | None = None,
    epoch: int | None = None,
) -> tuple[int, dict[str, Chunk]] | None:
    """The chunks of ``ids`` that exist (cached ones when the collection's key is still
    the one they are cached under; the others read and cached) and the collection's id;
    None when the collection does not exist. ``cid`` is the id last seen, or None.
    ``observe`` is given the schema instance the check read and returns the epoch (a
    change drops the caches); the rows read are cached only while it is ``epoch``."""
    held, found = (None, {}) if cid is None else cache.lookup(cid, ids)
    want = [i for i in ids if i not in found]
    with conn.pipeline():
        check = conn.execute(CHECK, (collection,), prepare=prepare)
        rows = conn.execute(ROWS, (collection, want), prepare=prepare) if want else None
    now = check.fetchone()
    if now is None:
        if cid is not None:
            cache.drop(cid)
        return None
    read = [] if rows is None else rows.fetchall()
    current, key = int(now[0]), (int(now[1]), int(now[2]))
    if observe is not None and observe((int(now[3]), now[4])) != epoch:
        held = None  # another schema instance: what was found cached is not of it
    if current != cid or held != key:  # another collection now, or written since: read them again
        if cid is not None:
            cache.drop(cid)
        if found:
            read += conn.execute(ROWS, (collection, list(found)), prepare=prepare).fetchall()
        found = {}
    fresh = [chunk_from(r) for r in read]
    cache.add(current, key, fresh, epoch=epoch)
    found.update((c.id, c) for c in fresh)
    return current, found


class PostgresRows(PostgresSearch):
    """:meth:`get_chunks` of :class:`~plait.stores.postgres.PostgresStore`, from the row cache."""

    def __init__(self, dsn: str, *, row_cache_bytes: int = DEFAULT_ROW_BUDGET, **options: Any) -> None:
        self._rows = RowCache(budget=row_cache_bytes)
        self._row_ids: dict[str, int] = {}  # collection name -> id, as get_chunks last read it
        super().__init__(dsn, **options)

    def _flush(self, epoch: int) -> None:
        super()._flush(epoch)
        self._rows.flush(epoch)
        self._row_ids.clear()

    # a whole load's rows (postgres_whole) ---------------------------------------------------
    def _rows_room(self) -> int:
        return self._rows.budget

    def _rows_statement(self) -> str:
        return ALL_ROWS

    def _keep_rows(self, cid: int, key: Key, rows: Sequence[Sequence[Any]], epoch: int) -> None:
        chunks: list[Chunk] = []
        for row in rows:
            try:
                chunks.append(chunk_from(row))
            except ValidationError:  # not cached: get_chunks reads it, and reports it, itself
                continue
        self._rows.add(cid, key, chunks, epoch=epoch)
        for name, known in list(self._known.items()):
            if known[0] == cid:
                self._row_ids[name] = cid

    def get_chunks(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        """The chunks of ``chunk_ids`` that exist, from the row cache when the collection's
        key is still the one they were cached under (inside a search scope: the key the
        search's first read found, with no statement)."""
        ids = list(dict.fromkeys(chunk_ids))
        seen = self._scopes.get(collection)
        if seen is not None and seen.cid is not None and seen.key is not None:
            held, found = self._rows.lookup(seen.cid, ids)
            if held == seen.key and len(found) == len(ids):
                return {i: found[i] for i in ids}
        epoch = self._instances.begin()
        with self._read() as conn:
            got = read_chunks(
                conn, self._rows, self._row_ids.get(collection), collection, ids,
                prepare=self._prepare, observe=self._instances.observe, epoch=epoch,
            )
        if got is None:
            self._row_ids.pop(collection, None)
            raise NotFoundError(f"collection {collection!r} does not exist")
        self._row_ids[collection], found = got
        return {i: found[i] for i in ids if i in found}
