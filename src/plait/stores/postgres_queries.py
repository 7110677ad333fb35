"""The two arms of the PostgreSQL store as SQL: one query each, each on its own index.

Both builders return ``(query, params)`` with named placeholders only; the store runs
them and tests ``EXPLAIN`` them.

Lexical (GIN + BM25): the ``WHERE c.lex @@ tsquery`` condition is answered by the GIN
index on the generated ``lex`` column; each candidate's term frequencies are the
position counts of the query's lexemes in its ``lex`` (``setweight`` marks exactly
those lexemes, by binary search, and ``ts_filter`` keeps them), document frequencies
come from ``plait_lex_terms`` and the length totals from ``plait_collections``. The
formula is the one in :mod:`plait.stores.lexical` (Lucene idf, ``k1``/``b``, two
weighted fields), so the embedded and the server store rank alike.

Dense (HNSW): ``ORDER BY (vector::vector(d)) <=> q LIMIT n`` matches the collection's
partial index ``… USING hnsw ((vector::vector(d)) vector_cosine_ops) WHERE
collection_id = X`` (the planner sees ``collection_id``'s value because the store
never uses server-side prepared statements, so every plan is a custom plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.stores.base import BM25Params, Filters

__all__ = [
    "EF_SEARCH_MAX",
    "FIELD_PREFIX",
    "HNSW_MAX_DIMENSION",
    "filter_sql",
    "hnsw_index",
    "lexical_keys",
    "lexical_query",
    "tsquery",
    "vector_query",
]

#: pgvector's HNSW indexes ``vector`` columns of at most 2,000 dimensions.
HNSW_MAX_DIMENSION = 2000
#: pgvector's upper bound for ``hnsw.ef_search``; larger limits scan exactly.
EF_SEARCH_MAX = 1000
#: Lexemes are field-prefixed: ``e:`` exact, ``s:`` stems.
FIELD_PREFIX = ("e:", "s:")


def tsquery(keys: Sequence[str]) -> str:
    """An OR tsquery of whole lexemes (quoted, so no parser ever splits them)."""
    quoted = ("'" + k.replace("\\", "\\\\").replace("'", "''") + "'" for k in keys)
    return " | ".join(quoted)


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


def lexical_keys(
    exact: Sequence[str], stems: Sequence[str], params: BM25Params
) -> tuple[list[str], list[int]]:
    """The prefixed lexemes of a query and their field numbers; a field whose weight
    is 0 contributes nothing (as in the embedded store)."""
    keys: list[str] = []
    fields: list[int] = []
    weights = (params.exact_weight, params.stems_weight)
    for field, terms in enumerate((exact, stems)):
        if weights[field] == 0:
            continue
        for term in dict.fromkeys(terms):
            keys.append(FIELD_PREFIX[field] + term)
            fields.append(field)
    return keys, fields


_LEXICAL = """
WITH stats AS (
    SELECT n_chunks::float8 AS n,
           coalesce(nullif(len_exact_total::float8 / nullif(n_chunks, 0), 0), 1) AS avg_e,
           coalesce(nullif(len_stems_total::float8 / nullif(n_chunks, 0), 0), 1) AS avg_s
    FROM plait_collections WHERE id = %(cid)s
), q AS (
    SELECT t.key, qt.field,
           CASE qt.field WHEN 0 THEN %(we)s ELSE %(ws)s END
               * ln(1 + (s.n - t.df + 0.5) / (t.df + 0.5)) AS idf,
           CASE qt.field WHEN 0 THEN s.avg_e ELSE s.avg_s END AS avgdl
    FROM unnest(%(keys)s::text[], %(fields)s::int[]) AS qt(key, field)
    JOIN plait_lex_terms t ON t.collection_id = %(cid)s AND t.key = qt.key
    CROSS JOIN stats s
    WHERE t.df > 0
)
SELECT c.chunk_id,
       sum(q.idf * m.tf * (%(k1)s + 1) / (m.tf + %(k1)s * (1 - %(b)s + %(b)s
           * (CASE q.field WHEN 0 THEN c.len_exact ELSE c.len_stems END) / q.avgdl)))
           AS score
FROM plait_chunks c
CROSS JOIN LATERAL (
    SELECT x.lexeme, cardinality(x.positions)::float8 AS tf
    FROM unnest(ts_filter(setweight(c.lex, 'A', %(keys)s::text[]), '{{a}}')) AS x
) AS m
JOIN q ON q.key = m.lexeme
WHERE c.collection_id = %(cid)s AND c.lex @@ %(tsq)s::tsquery{where}
GROUP BY c.id, c.chunk_id
ORDER BY score DESC, c.id
LIMIT %(limit)s
"""


def lexical_query(
    cid: int,
    exact: Sequence[str],
    stems: Sequence[str],
    *,
    limit: int | None,
    filters: Filters | None,
    params: BM25Params,
) -> tuple[sql.Composed, dict[str, Any]] | None:
    """BM25 over collection ``cid`` (rows: chunk id, score), or None for no terms."""
    keys, fields = lexical_keys(exact, stems, params)
    if not keys:
        return None
    where, where_params = filter_sql(filters)
    args: dict[str, Any] = {
        "cid": cid,
        "keys": keys,
        "fields": fields,
        "tsq": tsquery(keys),
        "we": float(params.exact_weight),
        "ws": float(params.stems_weight),
        "k1": float(params.k1),
        "b": float(params.b),
        "limit": limit,
        **where_params,
    }
    return sql.SQL(_LEXICAL).format(where=where), args  # type: ignore[arg-type]


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
        query = sql.SQL(
            "SELECT c.chunk_id, 1 - ({dist}) AS score, c.id FROM plait_chunks c "
            "WHERE c.collection_id = %(cid)s AND c.vector IS NOT NULL "
            "ORDER BY {dist} LIMIT %(limit)s"
        ).format(dist=distance)
        return query, {"q": vector, "cid": cid, "limit": limit}
    where, where_params = filter_sql(filters)
    query = sql.SQL(
        "SELECT c.chunk_id, 1 - (c.vector <=> %(q)s) AS score, c.id "
        "FROM plait_chunks c WHERE c.collection_id = %(cid)s "
        "AND c.vector IS NOT NULL{where} ORDER BY score DESC, c.id LIMIT %(limit)s"
    ).format(where=where)
    return query, {"q": vector, "cid": cid, "limit": limit, **where_params}
