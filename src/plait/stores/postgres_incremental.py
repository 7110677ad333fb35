"""The PostgreSQL store's lexical index after a write: only the changed rows read.

When a search finds the collection's generation moved past its cached
:class:`~plait.stores.lexical_index.LexicalIndex`, the store reads, in one
``REPEATABLE READ`` snapshot with the current generation (one round trip): the change
log since the cached generation (:data:`~plait.stores.postgres_changes.CHANGES`),
:data:`ADDED` — the row id, field lengths, chunk id and analysed fields of each chunk
row added since, in the layout of :data:`~plait.stores.postgres_lexcache.LENGTHS` — and
the postings of the query's terms the cached index does not hold. :func:`advance` then
derives the new generation's index (:meth:`LexicalIndex.apply`): the added rows'
postings of a term it holds are counted here (:class:`AddedRows`, when the term is next
queried) from their ``lex_exact`` / ``lex_stems`` exactly as the triggers'
``plait_lex_postings`` counts them (tokens split on single spaces, term frequency =
occurrences), so no posting is read again.

A change too large to be worth it falls back to the full reload: more row ids than
:func:`most_rows` (``share`` of the collection's chunks, at least :data:`MIN_ROWS`;
``share`` is the store's ``incremental_share``, default :data:`DEFAULT_SHARE`, capped at
:data:`LEXICAL_SHARE` for the lexical index), and so does a log that no longer reaches
back to the cached generation.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from plait.stores.lexical_index import LexicalIndex
from plait.stores.postgres_changes import Changes
from plait.stores.postgres_lexcache import index_from

__all__ = ["ADDED", "DEFAULT_SHARE", "LEXICAL_SHARE", "MIN_ROWS", "AddedRows", "advance", "most_rows"]

#: The store's default ``incremental_share``: the largest change (row ids added + removed)
#: applied to a cached index or matrix in place of a full load, as a share of its chunks.
DEFAULT_SHARE = 0.1
#: The lexical index's cap on that share, whatever ``incremental_share`` allows: at 100k
#: chunks a change of ~2 % of the row ids (1 % of the chunks re-indexed) was no faster than
#: the full reload (``benchmarks/results/postgres_after_write.md``), so 1 %.
LEXICAL_SHARE = 0.01
#: ... but never fewer rows than this (a small collection reloads cheaply either way).
MIN_ROWS = 1000

_LOG = "FROM plait_changes WHERE collection_id = %(cid)s AND generation > %(since)s"

#: The chunk rows added since generation ``%(since)s`` that the snapshot holds, as one
#: row (columns of :data:`~plait.stores.postgres_lexcache.LENGTHS`, then the analysed
#: fields as two ``text[]``), or nothing when the log names more than ``%(most)s`` ids.
ADDED = (
    "SELECT string_agg(int8send(c.id), ''::bytea ORDER BY c.id), "
    "string_agg(int4send(c.len_exact), ''::bytea ORDER BY c.id), "
    "string_agg(int4send(c.len_stems), ''::bytea ORDER BY c.id), "
    "string_agg(convert_to(c.chunk_id, 'UTF8'), '\\x00'::bytea ORDER BY c.id), "
    "array_agg(c.lex_exact ORDER BY c.id), array_agg(c.lex_stems ORDER BY c.id) "
    f"FROM plait_chunks c WHERE c.collection_id = %(cid)s AND c.id = ANY(ARRAY(SELECT unnest(added) {_LOG})) "
    "AND (SELECT coalesce(sum(cardinality(added) + cardinality(removed) + cardinality(updated)), 0) "
    f"{_LOG}) <= %(most)s"
)


def most_rows(size: int, share: float) -> int:
    """The largest change (row ids) applied to an index of ``size`` chunks."""
    return max(MIN_ROWS, int(share * size))


def _tokens(text: str) -> list[str]:
    # string_to_array(text, ' '): '' is no token at all, otherwise every space splits
    return text.split(" ") if text else []


class AddedRows:
    """The added chunk rows' postings, as :meth:`LexicalIndex.apply` asks for them: each
    row's term frequencies per field, counted on first use exactly as the triggers'
    ``plait_lex_postings`` counts them."""

    def __init__(self, rowids: np.ndarray, exact: Sequence[str], stems: Sequence[str]) -> None:
        self._rowids = rowids.tolist()
        self._texts = (list(exact), list(stems))
        self._counts: list[list[Counter[str]] | None] = [None, None]
        self._lock = threading.Lock()
        # the texts, and their counts once made (~3x the text)
        self.nbytes = int(rowids.nbytes + 4 * sum(len(t) for field in self._texts for t in field))

    def postings(self, field: int, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            counts = self._counts[field]
            if counts is None:
                counts = self._counts[field] = [Counter(_tokens(text)) for text in self._texts[field]]
        ids: list[int] = []
        tfs: list[int] = []
        for rowid, counted in zip(self._rowids, counts, strict=True):
            tf = counted.get(term)
            if tf:
                ids.append(rowid)
                tfs.append(tf)
        if not ids:
            return None
        return np.array(ids, dtype=np.int64), np.array(tfs, dtype=np.float64)


def advance(index: LexicalIndex, changes: Changes, row: Sequence[Any] | None) -> LexicalIndex:
    """The index of ``changes.generation`` from ``index`` (of ``changes.since``) and
    :data:`ADDED`'s row. Raises :class:`ValueError` when they disagree (the caller
    reloads in full)."""
    if not changes.added.size:
        if not changes.removed.size:
            return index  # nothing lexical changed: the same index serves the new generation
        empty = np.empty(0, dtype=np.int64)
        return index.apply(changes.removed, empty, np.zeros((0, 2)), [], None)
    if row is None or row[0] is None:
        raise ValueError("the change log names added rows the snapshot does not hold")
    added = index_from(row[:4], budget=0)
    if not np.array_equal(added.rowids, changes.added):
        raise ValueError("the change log names added rows the snapshot does not hold")
    return index.apply(
        changes.removed, added.rowids, added.lengths, added.chunk_ids, AddedRows(added.rowids, row[4], row[5])
    )
