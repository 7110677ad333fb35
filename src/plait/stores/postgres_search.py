"""The PostgreSQL store's two arms: BM25 in process over cached postings, cosine in SQL.

A warm hybrid search is **one round trip** and no SQL for BM25: one pipeline holding the
check of the collection (id, dimension and generation, :mod:`plait.stores.postgres_generation`)
and the dense statement (:func:`plait.stores.postgres_queries.vector_query`, prepared on
the server); the lexical arm is then scored in this process from the collection's cached
:class:`~plait.stores.lexical_index.LexicalIndex` (the SQLite store's class: same scores
to the last bit, ties by row id) when the generation the check read is the index's.

What goes into the same pipeline when the cache lacks something, inside one
``REPEATABLE READ`` read-only transaction with the check (so all of it comes from the
snapshot whose generation the check reads): the chunk lengths (:data:`~plait.stores.postgres_lexcache.LENGTHS`,
when this process holds no index of the collection yet), the postings of the query's
terms not loaded yet (all of them in one statement, :data:`~plait.stores.postgres_lexcache.POSTINGS`)
and, for a filtered query, the row ids the filter lets through. When the check shows the
generation moved (another process, or this one, wrote), the index is dropped and a second
round trip reloads the lengths and the query's postings in one such transaction: a write
committed between two reads can never mix two generations in one index.

The collection's id and dimension are remembered per store; a collection deleted and
re-created, or given its dimension, by another process is caught by the same check and
the arms run again with the new values. :meth:`lexical_search` and :meth:`vector_search`
are the same pipeline with one arm.

Memory: each cached index keeps at most ``lexical_cache_bytes`` of postings and score
rows (default :data:`~plait.stores.lexical_index.DEFAULT_BUDGET`, least recently used
terms evicted and read again when queried), and the store keeps the indexes of the
:data:`MAX_INDEXES` collections it searched most recently, ``lexical_total_bytes`` in all
(:mod:`plait.stores.postgres_lexicons`). Every check also reads the schema's instance: a
re-created or restored schema drops every cache (:mod:`plait.stores.postgres_instances`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import psycopg

from plait.errors import NotFoundError, StoreError
from plait.stores.ann import resolve_ann_threshold
from plait.stores.base import BM25Params, Filters
from plait.stores.lexical_index import DEFAULT_BUDGET, LexicalIndex
from plait.stores.postgres_base import vec
from plait.stores.postgres_dense import (
    DEFAULT_DENSE_BUDGET,
    DenseCache,
    Key,
    MatrixLoad,
    load_changes,
    load_full,
)
from plait.stores.postgres_incremental import DEFAULT_SHARE, most_rows
from plait.stores.postgres_instances import Instances
from plait.stores.postgres_keys import CHECK as _CHECK
from plait.stores.postgres_lexcache import (
    READ_SNAPSHOT,
    parse_allowed,
    query_terms,
)
from plait.stores.postgres_lexicons import DEFAULT_TOTAL, MAX_INDEXES, Lexicons
from plait.stores.postgres_lexload import Loaded, SentChanges, _Lexical
from plait.stores.postgres_queries import uses_hnsw, vector_query
from plait.stores.postgres_scope import SearchScopes, Seen
from plait.stores.postgres_whole import DEFAULT_WHOLE_BYTES, WholeLoads
from plait.stores.sqlite_snapshot import DenseMatrix

__all__ = ["MAX_INDEXES", "PostgresSearch"]


Ranked = list[tuple[str, float]]

log = logging.getLogger(__name__)

#: :meth:`PostgresSearch._matrix`'s answer when another thread's load found the matrix
#: too large to keep: search with the pgvector statement.
SQL_PATH = "sql"




def _loader(index: LexicalIndex, read: Loaded, held: Loaded) -> Any:
    """The loader given to :meth:`LexicalIndex.rows`: the postings this query read, else
    the ones it found cached (held by the query, so an eviction since changes nothing)."""

    def load(field: int, term: str) -> tuple[np.ndarray, np.ndarray]:
        found = read.get((field, term))
        if found is not None:
            return found
        pinned = held.get((field, term))
        if pinned is None:  # pragma: no cover - every pair was either held or read
            raise StoreError(f"postings of {term!r} (field {field}) were not loaded")
        return index.rowids[pinned[0]], pinned[1]

    return load


class PostgresSearch(WholeLoads):
    """The arms of :class:`~plait.stores.postgres.PostgresStore`."""

    def __init__(
        self,
        dsn: str,
        *,
        lexical_cache_bytes: int = DEFAULT_BUDGET,
        lexical_total_bytes: int = DEFAULT_TOTAL,
        incremental_share: float = DEFAULT_SHARE,
        dense_cache_bytes: int = DEFAULT_DENSE_BUDGET,
        ann_threshold: int | None = None,
        whole_bytes: int = DEFAULT_WHOLE_BYTES,
        **options: Any,
    ) -> None:
        self._whole_init(whole_bytes)
        if min(lexical_cache_bytes, lexical_total_bytes) < 0:
            raise StoreError(f"lexical cache bytes must be >= 0, got {lexical_cache_bytes}, {lexical_total_bytes}")
        if not 0.0 <= incremental_share <= 1.0:
            raise StoreError(f"incremental_share must be between 0 and 1, got {incremental_share}")
        self._dense = DenseCache(budget=dense_cache_bytes, max_entries=MAX_INDEXES)
        self.ann_threshold = resolve_ann_threshold(ann_threshold)
        super().__init__(dsn, **options)
        self._lexical_budget = min(lexical_cache_bytes, lexical_total_bytes)  # one index within the total
        self._incremental_share = incremental_share
        self._known: dict[str, tuple[int, int | None]] = {}
        self._sizes: dict[int, int] = {}  # collection id -> chunks, as the last check read
        self._scopes = SearchScopes()
        #: How the last dense arm ran: "exact" (in process), "hnsw" or "scan" (SQL).
        self.last_vector_path = "exact"
        #: How the last dense matrix was loaded: "full", or "changes" (from the change log).
        self.last_matrix_load = ""
        self._ef: weakref.WeakKeyDictionary[psycopg.Connection, int] = weakref.WeakKeyDictionary()
        # collection id -> (generation, its lexical index), most recently used last
        self._lexicon = Lexicons(total_bytes=lexical_total_bytes, max_entries=MAX_INDEXES)
        self._instances = Instances(self._flush)

    def _flush(self, epoch: int) -> None:
        """Drop every cache: the schema was re-created or restored (:mod:`plait.stores.postgres_instances`)."""
        self._lexicon.flush(epoch)
        self._dense.flush(epoch)
        self._known.clear()
        self._sizes.clear()

    def _forget(self, name: str) -> None:
        known = self._known.pop(name, None)
        if known is not None:
            self._lexicon.drop(known[0])
            self._dense.drop(known[0])
            self._sizes.pop(known[0], None)

    def _saw(self, collection: str, cid: int, dimension: int | None, key: Key, chunks: int) -> None:
        """Remember what a read found, for this thread's open search scope (if any)."""
        seen = self._scopes.get(collection)
        if seen is not None:
            seen.saw(cid, dimension, key, chunks)

    def _in_process(self, cid: int, dimension: int | None) -> bool:
        """Whether the dense arm ranks ``cid`` in process: fewer chunks than the ANN
        threshold (as the last check read them) and a matrix that fits the budget."""
        size = self._sizes.get(cid)
        return (
            size is not None and dimension is not None and size < self.ann_threshold
            and self._dense.fits(size, dimension, cid)
        )

    def _cached(self, cid: int) -> tuple[int, LexicalIndex] | None:
        return self._lexicon.cached(cid)

    def search_arms(
        self,
        collection: str,
        exact: Sequence[str],
        stems: Sequence[str],
        vector: np.ndarray | None,
        *,
        limit: int | None,
        filters: Filters | None = None,
        params: BM25Params | None = None,
        lexical: bool = True,
    ) -> tuple[Ranked, Ranked]:
        """Both arms' candidates (lexical, dense) in one round trip: the dense list is
        empty when ``vector`` is None, the lexical one when ``lexical`` is False."""
        bm25 = params or BM25Params()
        query_vector = None if vector is None else vec(vector)
        terms, pairs = query_terms(exact, stems, bm25)
        lexical = lexical and bool(pairs)
        filtered = filters is not None and not filters.empty
        seen = self._scopes.get(collection)
        scope_generation = None if seen is None or seen.key is None else seen.key[0]
        if seen is not None and seen.cid is not None and seen.key is not None and not filtered:
            answered = self._from_scope(collection, seen, terms, pairs, bm25, query_vector, limit, lexical)
            if answered is not None:
                return answered
        for _ in range(3):
            epoch = self._instances.begin()
            known = self._known.get(collection)
            remembered = known is not None
            with self._read() as conn:
                if known is None:
                    row = conn.execute(_CHECK, (collection,), prepare=self._prepare).fetchone()
                    if row is None:
                        raise NotFoundError(f"collection {collection!r} does not exist")
                    known = (int(row[0]), row[1])
                    self._known[collection] = known
                    self._sizes[known[0]] = int(row[4])
                cid, dimension = known
                if query_vector is not None and dimension is None:
                    dimension = self._stored_dimension(conn, cid)
                    if dimension is None:  # no vector stored yet: nothing to rank
                        query_vector = None
                if query_vector is not None:
                    if remembered and query_vector.shape != (dimension,):
                        self._known.pop(collection, None)  # re-created with another dimension?
                        continue  # read it again before refusing the query
                    self._check_query(collection, query_vector, dimension)
                if lexical and self._cached(cid) is None:
                    self._whole_first(conn, cid, dimension)  # the check below reads its key
                held = self._cached(cid) if lexical else None
                pinned: Loaded = {} if held is None else held[1].held(pairs)
                missing = [pair for pair in pairs if pair not in pinned]
                local = query_vector is not None and self._in_process(cid, dimension)
                matrix = self._dense.get(cid) if local else None
                reads = _Lexical()
                if query_vector is not None and not local:
                    self._dense.drop(cid)  # grown past the threshold (or the budget)
                # the scope read a newer generation than the cached index's, or postings are
                # read anyway (a snapshot is taken): the changes since the cached index's
                # generation go in this round trip's snapshot (postgres_lexload), so a moved
                # generation costs no second round trip reading the same postings again
                stale = held is not None and self._incremental_share > 0 and (
                    scope_generation not in (None, held[0]) or (lexical and bool(missing))
                )
                snapshot = (lexical and (held is None or bool(missing) or stale)) or (filtered and (lexical or local))
                with conn.pipeline():
                    hnsw = query_vector is not None and not local and uses_hnsw(known[1], limit, filters)
                    ef = max(40, limit or 0)
                    if hnsw and self._ef.get(conn) != ef:
                        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))
                        self._ef[conn] = ef
                    with conn.transaction() if snapshot else nullcontext():
                        if snapshot:
                            conn.execute(READ_SNAPSHOT)
                        check = conn.execute(_CHECK, (collection,), prepare=self._prepare)
                        wanted = filters if filtered and (lexical or local) else None
                        self._send_reads(
                            conn, reads, cid, lexical and held is None, missing if lexical else [], wanted
                        )
                        changes = self._send_changes(conn, cid, held) if stale and held is not None else None
                        dense = None
                        if query_vector is not None and not local:
                            query, args = vector_query(
                                cid, query_vector, dimension=known[1], limit=limit, filters=filters
                            )
                            dense = conn.execute(query, args, prepare=self._prepare)
                now = check.fetchone()
                if now is None:
                    self._forget(collection)
                    raise NotFoundError(f"collection {collection!r} does not exist")
                if self._instances.observe((int(now[5]), now[6])) != epoch:
                    continue  # another schema instance: every cache was dropped, run again
                if (int(now[0]), now[1]) != known:
                    self._known[collection] = (int(now[0]), now[1])
                    continue  # re-created or given its dimension meanwhile: run again
                self._sizes[cid] = int(now[4])
                key: Key = (int(now[2]), int(now[3]))
                self._saw(collection, cid, now[1], key, int(now[4]))
                allowed = None if reads.allowed is None else parse_allowed(reads.allowed.fetchone())
                ranked: Ranked = []
                if lexical:
                    generation = key[0]
                    built = self._index_from(cid, generation, held, reads, missing)
                    lexical_allowed = allowed
                    if built is None:  # the generation moved: apply its changes, or reload
                        sent = None if changes is None else SentChanges(*changes, reads, missing, generation, int(now[4]))
                        loaded = self._advance(
                            conn, cid, held, pairs, filters if filtered else None, sent=sent, allowed=allowed
                        )
                        if loaded is None:
                            self._forget(collection)
                            continue  # deleted meanwhile: the check says so next time
                        (index, read, pinned), lexical_allowed = loaded
                    else:
                        index, read = built
                    rows = index.rows(terms, bm25, _loader(index, read, pinned)) or []
                    if read:  # postings cached: the indexes grew
                        self._lexicon.trim()
                    ranked = index.rank(rows, limit=limit, allowed=lexical_allowed)
                if query_vector is None:
                    return ranked, []
                if local:
                    found = self._matrix(conn, cid, key, matrix, dimension or 0, filters if filtered else None)
                    if found is None:
                        self._forget(collection)
                        continue
                    if isinstance(found, str):  # too large to keep: the pgvector statement
                        continue
                    current, dense_allowed = found
                    self.last_vector_path = "exact"
                    if current.rowids.size == 0:
                        return ranked, []
                    allowed = allowed if dense_allowed is None else dense_allowed
                    return ranked, current.rank(query_vector, limit=limit, allowed=allowed)
                dense_rows = [] if dense is None else dense.fetchall()
            self.last_vector_path = "hnsw" if hnsw else "scan"
            dense_rows.sort(key=lambda r: (-r[1], r[2]))
            return ranked, [(r[0], float(r[1])) for r in dense_rows]
        raise StoreError(f"collection {collection!r} kept changing while it was searched")

    def _from_scope(
        self,
        collection: str,
        seen: Seen,
        terms: tuple[Sequence[str], Sequence[str]],
        pairs: Sequence[tuple[int, str]],
        bm25: BM25Params,
        query_vector: np.ndarray | None,
        limit: int | None,
        lexical: bool,
    ) -> tuple[Ranked, Ranked] | None:
        """Both arms from the caches of the key the search scope read, with no statement;
        None when a cache lacks something (the arms then read it, with the check)."""
        cid, key = seen.cid, seen.key
        if cid is None or key is None:  # pragma: no cover - the caller checked
            return None
        if self._known.get(collection, (cid,))[0] != cid:
            self._forget(collection)  # re-created: the old id's caches go
        self._known[collection] = (cid, seen.dimension)
        self._sizes[cid] = seen.chunks
        matrix: tuple[Key, DenseMatrix] | None = None
        if query_vector is not None:
            if seen.dimension is None or not self._in_process(cid, seen.dimension):
                return None
            self._check_query(collection, query_vector, seen.dimension)
            matrix = self._dense.get(cid)
            if matrix is None or matrix[0] != key:
                return None
        ranked: Ranked = []
        if lexical:
            held = self._cached(cid)
            if held is None or held[0] != key[0]:
                return None
            index = held[1]
            pinned = index.held(pairs)
            if len(pinned) < len(pairs):
                return None
            ranked = index.rank(index.rows(terms, bm25, _loader(index, {}, pinned)) or [], limit=limit)
        if matrix is None or query_vector is None:
            return ranked, []
        self.last_vector_path = "exact"
        found = matrix[1]
        return ranked, [] if found.rowids.size == 0 else found.rank(query_vector, limit=limit)

    def _matrix(
        self,
        conn: psycopg.Connection,
        cid: int,
        key: Key,
        held: tuple[Key, DenseMatrix] | None,
        dimension: int,
        filters: Filters | None,
    ) -> tuple[DenseMatrix, np.ndarray | None] | str | None:
        """The cached matrix when it is of ``key`` (and None); else the current key's and
        the filter's row ids, read in one snapshot of their own (``COPY`` cannot join the
        check's pipeline): from the cached one and the change log when only rows were
        added or removed, else in full. One thread loads a collection's matrix at a time;
        the others wait and take it from the cache, or get :data:`SQL_PATH` when the
        loaded matrix was too large to keep (run the pgvector statement then). None: the
        collection is gone."""
        if held is not None and held[0] == key:
            return held[1], None
        with self._dense.loading(cid):  # one load per collection at a time
            again = self._dense.get(cid)  # loaded by the thread this one waited for?
            if again is not None and again[0] == key:
                return again[1], None
            if not self._in_process(cid, dimension):  # loaded meanwhile and too large to keep
                return SQL_PATH
            return self._load(conn, cid, key, again, dimension, filters)

    def _load(
        self,
        conn: psycopg.Connection,
        cid: int,
        key: Key,
        held: tuple[Key, DenseMatrix] | None,
        dimension: int,
        filters: Filters | None,
    ) -> tuple[DenseMatrix, np.ndarray | None] | None:
        """:meth:`_matrix`'s load, under the collection's load lock."""
        loaded: MatrixLoad | None = None
        if held is not None:
            self._dense.drop(cid, held[1])  # stale: never serve it again
            if held[0][1] == key[1] and held[0][0] < key[0] and self._incremental_share > 0:
                most = most_rows(held[1].rowids.size, self._incremental_share)
                loaded = load_changes(conn, cid, held, dimension, filters, most=most, prepare=self._prepare)
                if loaded is None:
                    log.info("loading the dense matrix of collection %s in full", cid)
        self.last_matrix_load = "full" if loaded is None else "changes"
        if loaded is None:
            loaded = load_full(conn, cid, dimension, filters, prepare=self._prepare)
        if loaded is None:
            return None
        found, matrix, allowed = loaded
        self._dense.keep(cid, found, matrix, epoch=self._instances.reading())
        return matrix, allowed

    @staticmethod
    def _stored_dimension(conn: psycopg.Connection, cid: int) -> int | None:
        row = conn.execute(
            "SELECT vector_dims(vector) FROM plait_chunks WHERE collection_id = %s "
            "AND vector IS NOT NULL LIMIT 1",
            (cid,),
        ).fetchone()
        return None if row is None else int(row[0])

    @staticmethod
    def _check_query(collection: str, vector: np.ndarray, stored: int | None) -> None:
        if vector.ndim != 1 or vector.shape[0] != stored:
            raise StoreError(
                f"query vector has {vector.shape[-1] if vector.ndim else 0} "
                f"dimensions, collection {collection!r} holds {stored}-d vectors"
            )

    def lexical_search(
        self,
        collection: str,
        exact: Sequence[str],
        stems: Sequence[str],
        *,
        limit: int | None,
        filters: Filters | None = None,
        params: BM25Params | None = None,
    ) -> Ranked:
        return self.search_arms(collection, exact, stems, None, limit=limit, filters=filters, params=params)[0]

    def vector_search(
        self,
        collection: str,
        vector: np.ndarray,
        *,
        limit: int | None,
        filters: Filters | None = None,
    ) -> Ranked:
        return self.search_arms(collection, [], [], vector, limit=limit, filters=filters, lexical=False)[1]
