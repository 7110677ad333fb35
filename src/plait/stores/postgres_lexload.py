"""The PostgreSQL store's lexical index loads: the reads that fill or advance a collection's
cached :class:`~plait.stores.lexical_index.LexicalIndex` (see :mod:`plait.stores.postgres_search`,
which calls them, and :mod:`plait.stores.postgres_incremental` for the change log applied).

:meth:`LexicalLoads._advance` reads, in one ``REPEATABLE READ`` snapshot with the
current generation, the change log since the cached index's generation, the rows added
since and the postings the cached index lacks; a search that already knows the cached
index is stale (its scope read a newer generation) sends the same reads in its first
pipeline (:meth:`LexicalLoads._send_changes`), so the index advances in that one round
trip.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from plait.stores.base import Filters
from plait.stores.lexical_index import LexicalIndex
from plait.stores.postgres_base import PostgresBase
from plait.stores.postgres_changes import CHANGES, changes_from, changes_params
from plait.stores.postgres_incremental import ADDED, LEXICAL_SHARE, advance, most_rows
from plait.stores.postgres_instances import Instances
from plait.stores.postgres_keys import GENERATION as _GENERATION
from plait.stores.postgres_lexcache import (
    LENGTHS,
    POSTINGS,
    READ_SNAPSHOT,
    allowed_query,
    index_from,
    parse_allowed,
    postings_from,
    postings_keys,
)
from plait.stores.postgres_lexicons import MAX_INDEXES, Lexicons

__all__ = ["MAX_INDEXES", "LexicalLoads", "Loaded", "SentChanges"]

log = logging.getLogger(__name__)

Loaded = dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]


class _Lexical:
    """What one query's lexical reads returned (cursors of one pipeline)."""

    def __init__(self) -> None:
        self.lengths: psycopg.Cursor[Any] | None = None
        self.postings: psycopg.Cursor[Any] | None = None
        self.allowed: psycopg.Cursor[Any] | None = None


@dataclass
class SentChanges:
    """The change-log reads a search sent in its first pipeline (:meth:`LexicalLoads._send_changes`),
    the postings it read for ``unknown`` (in ``reads``) and what its check found."""

    logged: psycopg.Cursor[Any]
    added: psycopg.Cursor[Any]
    reads: _Lexical
    unknown: list[tuple[int, str]]
    generation: int = 0
    chunks: int = 0


class LexicalLoads(PostgresBase):
    """The lexical loads of :class:`~plait.stores.postgres_search.PostgresSearch`."""

    _lexical_budget: int
    _incremental_share: float
    _lexicon: Lexicons
    _instances: Instances

    def _keep(self, cid: int, generation: int, index: LexicalIndex) -> None:
        """Cache ``index`` (:meth:`Lexicons.keep`) if the caches were not dropped since this read began."""
        self._lexicon.keep(cid, generation, index, epoch=self._instances.reading())

    def _send_reads(
        self,
        conn: psycopg.Connection,
        reads: _Lexical,
        cid: int,
        lengths: bool,
        missing: Sequence[tuple[int, str]],
        filters: Filters | None,
    ) -> None:
        """Queue the lexical reads the cache needs on ``conn``'s pipeline."""
        if lengths:
            reads.lengths = conn.execute(LENGTHS, {"cid": cid}, prepare=self._prepare)
        if missing:
            reads.postings = conn.execute(
                POSTINGS, {"cid": cid, "keys": postings_keys(missing)}, prepare=self._prepare
            )
        if filters is not None:
            reads.allowed = conn.execute(*allowed_query(cid, filters), prepare=self._prepare)

    def _index_from(
        self,
        cid: int,
        generation: int,
        held: tuple[int, LexicalIndex] | None,
        reads: _Lexical,
        missing: Sequence[tuple[int, str]],
    ) -> tuple[LexicalIndex, Loaded] | None:
        """The index of ``generation`` (the cached one, or one from ``reads``' lengths)
        and the postings of ``missing`` ``reads`` holds (the ranking caches them); None
        when the cached index is of another generation."""
        if reads.lengths is not None:
            index = index_from(reads.lengths.fetchone(), budget=self._lexical_budget)
        elif held is not None and held[0] == generation:
            index = held[1]
        else:
            self._lexicon.drop(cid, held)  # stale: never serve it again
            return None
        found = postings_from(reads.postings.fetchall() if reads.postings else [], missing) if missing else {}
        self._keep(cid, generation, index)
        return index, found

    def _reload(
        self,
        conn: psycopg.Connection,
        cid: int,
        pairs: Sequence[tuple[int, str]],
        filters: Filters | None,
    ) -> tuple[tuple[LexicalIndex, Loaded], np.ndarray | None] | None:
        """A fresh index of the collection's current generation with ``pairs`` loaded
        (and the filter's row ids), all read in one snapshot; None if it is gone."""
        reads = _Lexical()
        with conn.pipeline(), conn.transaction():
            conn.execute(READ_SNAPSHOT)
            check = conn.execute(_GENERATION, (cid,), prepare=self._prepare)
            self._send_reads(conn, reads, cid, True, pairs, filters)
        now = check.fetchone()
        if now is None:
            return None
        built = self._index_from(cid, int(now[0]), None, reads, pairs)
        if built is None:  # pragma: no cover - lengths were read, so an index is built
            return None
        allowed = None if reads.allowed is None else parse_allowed(reads.allowed.fetchone())
        return built, allowed

    def _send_changes(self, conn: psycopg.Connection, cid: int, stale: tuple[int, LexicalIndex]) -> tuple[
        psycopg.Cursor[Any], psycopg.Cursor[Any]
    ]:
        """Queue the change log since ``stale``'s generation and the rows it added on
        ``conn``'s pipeline (in a snapshot that also reads the current generation)."""
        since, old = stale
        most = most_rows(old.size, min(self._incremental_share, LEXICAL_SHARE))
        logged = conn.execute(CHANGES, changes_params(cid, since, most), prepare=self._prepare)
        added = conn.execute(ADDED, changes_params(cid, since, most), prepare=self._prepare)
        return logged, added

    def _advance(
        self,
        conn: psycopg.Connection,
        cid: int,
        stale: tuple[int, LexicalIndex] | None,
        pairs: Sequence[tuple[int, str]],
        filters: Filters | None,
        *,
        sent: SentChanges | None = None,
        allowed: np.ndarray | None = None,
    ) -> tuple[tuple[LexicalIndex, Loaded, Loaded], np.ndarray | None] | None:
        """The index of the collection's current generation with ``pairs`` available (read
        or held), and the filter's row ids, all from one snapshot: ``stale`` (the index
        of an older generation) with only the changes since applied
        (:mod:`plait.stores.postgres_incremental`), else a full :meth:`_reload`; None if
        the collection is gone. ``sent``: the reads were sent in the caller's snapshot
        already (``allowed``: the filter's row ids it read there)."""
        if stale is None or self._incremental_share <= 0:
            return self._full(conn, cid, pairs, filters)
        since, old = stale
        if sent is None:
            unknown = old.missing(pairs)  # the rest are held or carried by the new index
            reads = _Lexical()
            with conn.pipeline(), conn.transaction():
                conn.execute(READ_SNAPSHOT)
                check = conn.execute(_GENERATION, (cid,), prepare=self._prepare)
                logged, added = self._send_changes(conn, cid, stale)
                self._send_reads(conn, reads, cid, False, unknown, filters)
            now = check.fetchone()
            if now is None:
                return None
            generation, chunks = int(now[0]), int(now[2])
        else:
            logged, added, reads, unknown = sent.logged, sent.added, sent.reads, sent.unknown
            generation, chunks = sent.generation, sent.chunks
        changes = changes_from(logged.fetchone(), since=since, generation=generation)
        added_row = added.fetchone()
        if changes is None:  # the log does not reach back, or the change is large
            return self._full(conn, cid, pairs, filters)
        try:
            index = advance(old, changes, added_row)
        except ValueError as error:
            log.warning("reloading the lexical index of collection %s in full: %s", cid, error)
            return self._full(conn, cid, pairs, filters)
        if index.size != chunks:
            log.warning(
                "reloading the lexical index of collection %s in full: %s chunks after the change log, %s counted",
                cid, index.size, chunks,
            )
            return self._full(conn, cid, pairs, filters)
        read = postings_from(reads.postings.fetchall() if reads.postings else [], unknown) if unknown else {}
        pinned = index.held([pair for pair in pairs if pair not in read])
        if any(pair not in read and pair not in pinned for pair in pairs):  # evicted meanwhile
            return self._full(conn, cid, pairs, filters)
        self._keep(cid, generation, index)
        if sent is None:
            allowed = None if reads.allowed is None else parse_allowed(reads.allowed.fetchone())
        return (index, read, pinned), allowed

    def _full(
        self,
        conn: psycopg.Connection,
        cid: int,
        pairs: Sequence[tuple[int, str]],
        filters: Filters | None,
    ) -> tuple[tuple[LexicalIndex, Loaded, Loaded], np.ndarray | None] | None:
        loaded = self._reload(conn, cid, pairs, filters)
        if loaded is None:
            return None
        (index, read), allowed = loaded
        return (index, read, {}), allowed

