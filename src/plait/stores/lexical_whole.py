"""Every posting of one collection generation in flat arrays (issue 26, the whole load).

A :class:`~plait.stores.lexical_index.LexicalIndex` normally reads a term's postings on
its first query. A collection small enough (the PostgreSQL store's ``whole_bytes``,
:mod:`plait.stores.postgres_whole`) is read *whole* instead: all its postings at once,
sorted by term and then by chunk position, as two flat arrays (``positions`` into the
index's row ids, ``tfs`` as float64) and, per ``(field, term)`` key, the start of its run
(``starts[i]:starts[i + 1]``). The index answers any term from them: a term the
collection holds gets views of its run (no copy), any other holds no postings, so a query
never needs a read from the server. The score rows are computed from those postings by
the same function as for postings read one term at a time, so the scores are the same to
the last bit.

Memory: 16 B per posting (8 for the position, 8 for the term frequency) plus about
:data:`KEY_OVERHEAD` bytes per key (:attr:`WholePostings.nbytes`, counted against the
index's budget).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["KEY_OVERHEAD", "POSTING_BYTES", "WholePostings", "whole_from"]

#: Bytes counted per posting: its position (intp) and term frequency (float64).
POSTING_BYTES = 16
#: Bytes counted per key besides its characters: its ``str``, tuple and dict slot.
KEY_OVERHEAD = 160

Key = tuple[int, str]

#: One posting as read from the server: term id, chunk row id, term frequency (big-endian).
RECORD = np.dtype([("term", ">i4"), ("row", ">i8"), ("tf", ">i4")])


class WholePostings:
    """Every ``(field, term)``'s postings of one generation (see the module's docstring)."""

    def __init__(self, keys: dict[Key, int], starts: np.ndarray, positions: np.ndarray, tfs: np.ndarray) -> None:
        self.keys = keys
        self.starts = starts
        self.positions = positions
        self.tfs = tfs
        self.nbytes = int(
            positions.nbytes + tfs.nbytes + starts.nbytes + sum(KEY_OVERHEAD + len(k[1]) for k in keys)
        )

    def get(self, key: Key) -> tuple[np.ndarray, np.ndarray] | None:
        """The key's (ascending positions, term frequencies), None when the collection
        holds no posting of it."""
        i = self.keys.get(key)
        if i is None:
            return None
        start, end = int(self.starts[i]), int(self.starts[i + 1])
        return self.positions[start:end], self.tfs[start:end]

    def __len__(self) -> int:
        return len(self.keys)


def whole_from(
    term_ids: np.ndarray, term_keys: Sequence[Key], records: bytes | bytearray | memoryview | None, rowids: np.ndarray
) -> WholePostings:
    """The :class:`WholePostings` of a collection: ``term_ids[i]`` is the id of the term
    whose key is ``term_keys[i]``; ``records`` its postings as :data:`RECORD` s in any
    order; ``rowids`` the index's ascending row ids (every posting's row must be one of
    them). Raises :class:`ValueError` when the postings name a term or row not given."""
    if not records:
        return WholePostings({}, np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float64))
    read = np.frombuffer(records, dtype=RECORD)
    terms = read["term"].astype(np.int64)
    rows = read["row"].astype(np.int64)
    order = np.lexsort((rows, terms))
    terms, rows = terms[order], rows[order]
    tfs = read["tf"][order].astype(np.float64)
    positions = np.searchsorted(rowids, rows).astype(np.intp, copy=False)
    if rowids.size == 0 or not np.array_equal(rowids[np.minimum(positions, rowids.size - 1)], rows):
        raise ValueError("postings name chunk rows the collection does not hold")
    bounds = np.flatnonzero(np.diff(terms)) + 1
    starts = np.concatenate([[0], bounds, [terms.size]]).astype(np.int64)
    run_terms = terms[starts[:-1]]
    id_order = np.argsort(term_ids, kind="stable")
    sorted_ids = term_ids[id_order]
    at = np.searchsorted(sorted_ids, run_terms)
    if sorted_ids.size == 0 or not np.array_equal(sorted_ids[np.minimum(at, sorted_ids.size - 1)], run_terms):
        raise ValueError("postings name terms the collection does not hold")
    names = id_order[at].tolist()
    keys = {term_keys[n]: i for i, n in enumerate(names)}
    return WholePostings(keys, starts, positions, tfs)
