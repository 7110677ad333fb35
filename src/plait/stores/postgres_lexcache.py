"""The PostgreSQL store's lexical arm in process: what it reads to fill its cache.

The store keeps, per collection, the :class:`~plait.stores.lexical_index.LexicalIndex`
of one *generation* (``plait_collections.generation``, :mod:`plait.stores.postgres_generation`)
and scores BM25 in Python exactly as the SQLite store does (same class, same values to
the last bit). The statements here fill it:

* :data:`LENGTHS` — every chunk's row id, field lengths and chunk id, in row-id order,
  as one row of four ``bytea`` (big-endian integers; chunk ids joined by NUL, a byte no
  PostgreSQL ``text`` can hold), so 100k chunks cost one row to parse, not 100k;
* :data:`POSTINGS` — the postings of several field-prefixed keys at once, one row per key
  present (row ids and term frequencies as one ``bytea`` of 12-byte records), read from
  the postings' primary key ``(collection_id, term, chunk_row) INCLUDE (tf, len)``;
* :func:`allowed_query` — the row ids a filter lets through (the SQLite store's
  ``allowed_rowids``), evaluated in SQL on every filtered query.

The store reads them in one ``REPEATABLE READ`` read-only transaction together with the
collection's generation, so lengths and postings always come from the snapshot whose
generation they are cached under (see :mod:`plait.stores.postgres_search`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql

from plait.stores.base import BM25Params, Filters
from plait.stores.lexical_index import DEFAULT_BUDGET, LexicalIndex
from plait.stores.postgres_queries import FIELD_PREFIX, filter_sql

__all__ = [
    "LENGTHS",
    "POSTINGS",
    "READ_SNAPSHOT",
    "allowed_query",
    "index_from",
    "parse_allowed",
    "postings_from",
    "postings_keys",
    "query_terms",
]

#: The first statement of the loads' transaction: one snapshot for all of them.
READ_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"

LENGTHS = (
    "SELECT string_agg(int8send(c.id), ''::bytea ORDER BY c.id), "
    "string_agg(int4send(c.len_exact), ''::bytea ORDER BY c.id), "
    "string_agg(int4send(c.len_stems), ''::bytea ORDER BY c.id), "
    "string_agg(convert_to(c.chunk_id, 'UTF8'), '\\x00'::bytea ORDER BY c.id) "
    "FROM plait_chunks c WHERE c.collection_id = %(cid)s"
)

#: One ``bytea`` per key present: 12-byte records (row id ``int8``, term frequency
#: ``int4``, big-endian) in no promised order — :func:`postings_from` sorts them when the
#: scan did not (sorting in the aggregate was ~40 % of the statement: 91k postings, 43 ->
#: 23 ms at 100k chunks). One aggregate, so a row id and its frequency cannot part.
POSTINGS = (
    "SELECT x.i, string_agg(int8send(p.chunk_row) || int4send(p.tf), ''::bytea) "
    "FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS x(key, i) "
    "JOIN plait_lex_terms t ON t.collection_id = %(cid)s AND t.key = x.key "
    "JOIN plait_postings p ON p.collection_id = %(cid)s AND p.term = t.id "
    "GROUP BY x.i"
)

_NO_IDS = np.empty(0, dtype=np.int64)
_RECORD = np.dtype([("row", ">i8"), ("tf", ">i4")])
_NO_TFS = np.empty(0, dtype=np.float64)


def query_terms(
    exact: Sequence[str], stems: Sequence[str], params: BM25Params
) -> tuple[tuple[Sequence[str], Sequence[str]], list[tuple[int, str]]]:
    """The query's terms per field as :meth:`LexicalIndex.rows` takes them (a field of
    weight 0 contributes nothing, so it is left empty: no postings are read for it) and
    the distinct ``(field, term)`` pairs whose postings the ranking needs, in order."""
    weights = (params.exact_weight, params.stems_weight)
    fields = (exact if weights[0] else [], stems if weights[1] else [])
    pairs = [(f, t) for f, names in enumerate(fields) for t in dict.fromkeys(names)]
    return fields, pairs


def _ints(blob: bytes | None, dtype: str) -> np.ndarray:
    if not blob:
        return np.empty(0, dtype=dtype.replace(">", "="))
    return np.frombuffer(blob, dtype=dtype).astype(dtype.replace(">", "="))


def index_from(row: Sequence[Any] | None, *, budget: int = DEFAULT_BUDGET) -> LexicalIndex:
    """The :class:`LexicalIndex` (no postings yet, at most ``budget`` bytes cached) of
    :data:`LENGTHS`'s row."""
    if row is None or row[0] is None:
        return LexicalIndex(_NO_IDS, np.zeros((0, 2), dtype=np.float64), [], budget=budget)
    rowids = _ints(row[0], ">i8")
    lengths = np.column_stack((_ints(row[1], ">i4"), _ints(row[2], ">i4"))).astype(np.float64)
    chunk_ids = bytes(row[3]).decode("utf-8").split("\x00")
    return LexicalIndex(rowids, lengths, chunk_ids, budget=budget)


def postings_keys(pairs: Sequence[tuple[int, str]]) -> list[str]:
    """The field-prefixed keys ``plait_lex_terms`` holds for ``(field, term)`` pairs."""
    return [FIELD_PREFIX[f] + t for f, t in pairs]


def postings_from(
    rows: Sequence[Sequence[Any]], pairs: Sequence[tuple[int, str]]
) -> dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]:
    """Every pair's (ascending row ids, term frequencies) from :data:`POSTINGS`'s rows
    (a pair without a row, a term the collection does not hold, gets empty arrays)."""
    found = dict.fromkeys(pairs, (_NO_IDS, _NO_TFS))
    for i, blob in rows:
        records = np.frombuffer(blob, dtype=_RECORD) if blob else np.empty(0, dtype=_RECORD)
        ids, tfs = records["row"].astype(np.int64), records["tf"].astype(np.float64)
        if ids.size > 1 and not bool(np.all(ids[1:] > ids[:-1])):  # the scan's order is not promised
            order = np.argsort(ids, kind="stable")
            ids, tfs = ids[order], tfs[order]
        found[pairs[int(i) - 1]] = (ids, tfs)
    return found


def allowed_query(cid: int, filters: Filters) -> tuple[sql.Composed, dict[str, Any]]:
    """The ascending row ids of collection ``cid`` that ``filters`` lets through, as one
    ``bytea`` (read it with :func:`parse_allowed`)."""
    where, params = filter_sql(filters)
    query = sql.SQL(
        "SELECT string_agg(int8send(c.id), ''::bytea ORDER BY c.id) FROM plait_chunks c "
        "WHERE c.collection_id = %(cid)s{where}"
    ).format(where=where)
    return query, {"cid": cid, **params}


def parse_allowed(row: Sequence[Any] | None) -> np.ndarray:
    """The row ids of :func:`allowed_query`'s row."""
    return _ints(None if row is None else row[0], ">i8")
