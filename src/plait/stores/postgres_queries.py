"""The two arms of the PostgreSQL store as SQL: one query each, each on its own index.

Both builders return ``(query, params)`` with named placeholders only; the store runs
them and tests ``EXPLAIN`` them.

Lexical: BM25 is scored in process (:mod:`plait.stores.postgres_search`); here are the
field prefix of the stored keys and the filter conditions its filtered reads share with
the dense statement (:func:`filter_sql`).

Dense (HNSW): ``ORDER BY (vector::vector(d)) <=> q LIMIT n`` matches the collection's
partial index ``… USING hnsw ((vector::vector(d)) vector_cosine_ops) WHERE
collection_id = X`` (``collection_id`` and ``d`` are literals in the statement's text,
so even a prepared statement's generic plan matches the partial index).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.stores.base import Filters

__all__ = [
    "EF_SEARCH_MAX",
    "FIELD_PREFIX",
    "HNSW_MAX_DIMENSION",
    "LEXICAL_WORK_MEM",
    "filter_sql",
    "hnsw_index",
    "uses_hnsw",
    "vector_query",
]

#: pgvector's HNSW indexes ``vector`` columns of at most 2,000 dimensions.
HNSW_MAX_DIMENSION = 2000
#: pgvector's upper bound for ``hnsw.ef_search``; larger limits scan exactly.
EF_SEARCH_MAX = 1000
#: The pooled connections' ``work_mem`` floor: the lexical loads aggregate a
#: collection's chunk lengths and a term's postings into one value each (several MB at
#: 100k chunks), which would spill to disk under PostgreSQL's 4 MB default.
LEXICAL_WORK_MEM = "32MB"
#: Lexemes are field-prefixed: ``e:`` exact, ``s:`` stems.
FIELD_PREFIX = ("e:", "s:")


def hnsw_index(cid: int) -> sql.Identifier:
    """The name of collection ``cid``'s partial HNSW index."""
    return sql.Identifier(f"plait_chunks_hnsw_{cid}")


def filter_sql(filters: Filters | None) -> tuple[sql.Composable, dict[str, Any]]:
    """``AND …`` conditions on alias ``c`` (scope in scopes, metadata key = value), with
    named placeholders ``f0``, ``f1``… and their values."""
    parts: list[sql.Composable] = []
    params: dict[str, Any] = {}

    def slot(value: Any) -> sql.Placeholder:
        name = f"f{len(params)}"
        params[name] = value
        return sql.Placeholder(name)

    if filters is not None and filters.scopes:
        parts.append(sql.SQL(" AND c.scope = ANY({})").format(slot(list(filters.scopes))))
    if filters is not None:
        for key, value in filters.metadata.items():
            parts.append(
                sql.SQL(" AND c.metadata -> {} = {}").format(slot(str(key)), slot(Jsonb(value)))
            )
    return sql.Composed(parts), params


def uses_hnsw(dimension: int | None, limit: int | None, filters: Filters | None) -> bool:
    """Whether a vector query goes through the HNSW index: the dimension is known and
    indexable, the limit fits ``ef_search`` and there is no filter (post-filtering an
    approximate top-n could return fewer than n; filtered queries scan exactly)."""
    return (
        dimension is not None
        and 0 < dimension <= HNSW_MAX_DIMENSION
        and limit is not None
        and limit <= EF_SEARCH_MAX
        and (filters is None or filters.empty)
    )


def vector_query(
    cid: int,
    vector: np.ndarray,
    *,
    dimension: int | None,
    limit: int | None,
    filters: Filters | None,
) -> tuple[sql.Composed, dict[str, Any]]:
    """Cosine similarity over collection ``cid`` (rows: chunk id, score, row id)."""
    if uses_hnsw(dimension, limit, filters):
        distance = sql.SQL("(c.vector::vector({d})) <=> %(q)s::vector({d})").format(
            d=sql.Literal(int(dimension or 0))
        )
        # The collection id is a literal: a prepared statement's generic plan must still
        # match the partial index's predicate.
        query = sql.SQL(
            "SELECT c.chunk_id, 1 - ({dist}) AS score, c.id FROM plait_chunks c "
            "WHERE c.collection_id = {cid} AND c.vector IS NOT NULL "
            "ORDER BY {dist} LIMIT %(limit)s"
        ).format(dist=distance, cid=sql.Literal(int(cid)))
        return query, {"q": vector, "limit": limit}
    where, where_params = filter_sql(filters)
    query = sql.SQL(
        "SELECT c.chunk_id, 1 - (c.vector <=> %(q)s) AS score, c.id "
        "FROM plait_chunks c WHERE c.collection_id = %(cid)s "
        "AND c.vector IS NOT NULL{where} ORDER BY score DESC, c.id LIMIT %(limit)s"
    ).format(where=where)
    return query, {"q": vector, "cid": cid, "limit": limit, **where_params}
