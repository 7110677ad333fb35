"""The two arms of the PostgreSQL store as SQL: one query each, each on its own index.

Both builders return ``(query, params)`` with named placeholders only; the store runs
them and tests ``EXPLAIN`` them.

Lexical: the statement itself is :func:`plait.stores.postgres_lexical.lexical_query`;
here are the pieces it shares with the tests — the query's field-prefixed keys
(:func:`lexical_keys`), the statistics (:func:`term_stats_query`, :class:`TermStats`)
and the weighted idf and mean lengths computed in Python exactly as
:mod:`plait.stores.lexical` computes them (:func:`term_weights`).

Dense (HNSW): ``ORDER BY (vector::vector(d)) <=> q LIMIT n`` matches the collection's
partial index ``… USING hnsw ((vector::vector(d)) vector_cosine_ops) WHERE
collection_id = X`` (``collection_id`` and ``d`` are literals in the statement's text,
so even a prepared statement's generic plan matches the partial index).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from plait.stores.base import BM25Params, Filters
from plait.stores.lexical import idf

__all__ = [
    "EF_SEARCH_MAX",
    "FIELD_PREFIX",
    "HNSW_MAX_DIMENSION",
    "LEXICAL_WORK_MEM",
    "TermStats",
    "filter_sql",
    "hnsw_index",
    "lexical_keys",
    "term_stats",
    "term_stats_query",
    "term_weights",
    "tsquery",
    "uses_hnsw",
    "vector_query",
]

#: pgvector's HNSW indexes ``vector`` columns of at most 2,000 dimensions.
HNSW_MAX_DIMENSION = 2000
#: pgvector's upper bound for ``hnsw.ef_search``; larger limits scan exactly.
EF_SEARCH_MAX = 1000
#: The pooled connections' ``work_mem`` floor: the lexical statement aggregates the
#: query's postings (several MB for a long query over 100k chunks), which would spill
#: to disk under PostgreSQL's 4 MB default.
LEXICAL_WORK_MEM = "32MB"
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


@dataclass(frozen=True, slots=True)
class TermStats:
    """What BM25 needs beyond the postings, read in the query's snapshot: the number
    of chunks, the per-field length totals and the document frequency of each query
    key that occurs (keys absent from the collection are missing)."""

    n_chunks: int
    len_totals: tuple[int, int]
    df: Mapping[str, int]


def term_stats_query(cid: int, keys: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The collection's totals and the df of ``keys`` (rows: n, exact total, stems
    total, key or NULL, df or NULL); read them with :func:`term_stats`."""
    query = (
        "SELECT p.n_chunks, p.len_exact_total, p.len_stems_total, t.key, t.df "
        "FROM plait_collections p LEFT JOIN plait_lex_terms t ON t.collection_id = p.id "
        "AND t.key = ANY(%(keys)s::text[]) AND t.df > 0 WHERE p.id = %(cid)s"
    )
    return query, {"cid": cid, "keys": list(keys)}


def term_stats(rows: Sequence[Sequence[Any]]) -> TermStats:
    """:class:`TermStats` from the rows of :func:`term_stats_query`."""
    if not rows:
        return TermStats(0, (0, 0), {})
    first = rows[0]
    df = {str(r[3]): int(r[4]) for r in rows if r[3] is not None}
    return TermStats(int(first[0]), (int(first[1]), int(first[2])), df)


def term_weights(
    keys: Sequence[str], fields: Sequence[int], stats: TermStats, params: BM25Params
) -> tuple[list[str], list[float], list[float]]:
    """Per query key that occurs, in query order: the key, its weighted idf and its
    field's mean length — computed in Python with :func:`plait.stores.lexical.idf`,
    the very floating-point values the embedded store uses."""
    if stats.n_chunks == 0:
        return [], [], []
    weights = (params.exact_weight, params.stems_weight)
    avgdl = tuple((total / stats.n_chunks) or 1.0 for total in stats.len_totals)
    out_keys: list[str] = []
    out_idf: list[float] = []
    out_avgdl: list[float] = []
    for key, field in zip(keys, fields, strict=True):
        df = stats.df.get(key, 0)
        if df <= 0 or weights[field] == 0:
            continue
        out_keys.append(key)
        out_idf.append(weights[field] * idf(stats.n_chunks, df))
        out_avgdl.append(avgdl[field])
    return out_keys, out_idf, out_avgdl


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
