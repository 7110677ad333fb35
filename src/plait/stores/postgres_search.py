"""The PostgreSQL store's two arms, each one statement, both in one round trip.

:meth:`PostgresSearch.search_arms` sends, in one pipeline (one network round trip), a
check of the collection's id and dimension, the lexical statement
(:mod:`plait.stores.postgres_lexical`) and the dense statement
(:func:`plait.stores.postgres_queries.vector_query`), all prepared on the server. The
collection's id and dimension are remembered per store; the check in the same pipeline
catches a collection deleted and re-created, or given its dimension, by another process,
and then the arms run again with the new values. :meth:`lexical_search` and
:meth:`vector_search` are the same pipeline with one arm.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from plait.errors import NotFoundError, StoreError
from plait.stores.base import BM25Params, Filters
from plait.stores.postgres_base import PostgresBase, vec
from plait.stores.postgres_lexical import lexical_query, rescore
from plait.stores.postgres_queries import uses_hnsw, vector_query

__all__ = ["PRUNE_FROM_CHUNKS", "PostgresSearch"]

Ranked = list[tuple[str, float]]
_CHECK = "SELECT id, dimension, n_chunks FROM plait_collections WHERE name = %s"
#: Collections with at least this many chunks get the pruned lexical statement; smaller
#: ones the exhaustive one (where the pruning's own reads cost more than they save).
PRUNE_FROM_CHUNKS = 50_000


class PostgresSearch(PostgresBase):
    """The arms of :class:`~plait.stores.postgres.PostgresStore`."""

    def __init__(self, dsn: str, **options: Any) -> None:
        super().__init__(dsn, **options)
        self._known: dict[str, tuple[int, int | None]] = {}
        self._sizes: dict[str, int] = {}
        self._ef: weakref.WeakKeyDictionary[psycopg.Connection, int] = weakref.WeakKeyDictionary()

    def _forget(self, name: str) -> None:
        self._known.pop(name, None)

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
        for _ in range(3):
            known = self._known.get(collection)
            with self._read() as conn:
                if known is None:
                    row = conn.execute(_CHECK, (collection,), prepare=self._prepare).fetchone()
                    if row is None:
                        raise NotFoundError(f"collection {collection!r} does not exist")
                    known = (int(row[0]), row[1])
                    self._known[collection] = known
                    self._sizes[collection] = int(row[2])
                cid, dimension = known
                if query_vector is not None and dimension is None:
                    dimension = self._stored_dimension(conn, cid)
                    if dimension is None:  # no vector stored yet: nothing to rank
                        query_vector = None
                if query_vector is not None:
                    self._check_query(collection, query_vector, dimension)
                large = self._sizes.get(collection, 0) >= PRUNE_FROM_CHUNKS
                built = (
                    lexical_query(cid, exact, stems, limit=limit, filters=filters, params=bm25, large=large)
                    if lexical
                    else None
                )
                with conn.pipeline():
                    check = conn.execute(_CHECK, (collection,), prepare=self._prepare)
                    lex = None if built is None else conn.execute(*built, prepare=self._prepare)
                    dense = None
                    if query_vector is not None:
                        hnsw = uses_hnsw(known[1], limit, filters)
                        ef = max(40, limit or 0)
                        if hnsw and self._ef.get(conn) != ef:
                            conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))
                            self._ef[conn] = ef
                        query, args = vector_query(
                            cid, query_vector, dimension=known[1], limit=limit, filters=filters
                        )
                        dense = conn.execute(query, args, prepare=self._prepare)
                now = check.fetchone()
                if now is None:
                    self._forget(collection)
                    raise NotFoundError(f"collection {collection!r} does not exist")
                self._sizes[collection] = int(now[2])
                if (int(now[0]), now[1]) != known:
                    self._known[collection] = (int(now[0]), now[1])
                    continue  # re-created or given its dimension meanwhile: run again
                lexical_rows = [] if lex is None else lex.fetchall()
                dense_rows = [] if dense is None else dense.fetchall()
            ranked = rescore(lexical_rows, exact, stems, limit=limit, params=bm25) if lexical_rows else []
            dense_rows.sort(key=lambda r: (-r[1], r[2]))
            return ranked, [(r[0], float(r[1])) for r in dense_rows]
        raise StoreError(f"collection {collection!r} kept changing while it was searched")

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
