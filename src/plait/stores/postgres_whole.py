"""The PostgreSQL store's whole load: a small collection read at once (issue 26).

A search of a collection the store holds no lexical index of reads, by default, the
chunk lengths and the postings of the query's terms; every later query with a term not
read yet costs one more round trip, and every hit not cached one more for its chunk row.
A collection whose postings and chunk rows are estimated under the store's
``whole_bytes`` (default :data:`DEFAULT_WHOLE_BYTES`; 0: never) is instead read **whole**
on that first search, in one ``REPEATABLE READ`` read-only snapshot with its key:

* every posting, as one ``bytea`` of fixed 16-byte records (:data:`ALL_POSTINGS`: term
  id, chunk row id, term frequency; one row to parse, where a binary ``COPY`` of the same
  postings took 3.4 s at SciFact size, psycopg reading it row by row) and the keys of the
  term ids (:data:`TERMS`), into :class:`~plait.stores.lexical_whole.WholePostings`: the
  index then answers every term with no read (same scores as postings read per term);
* every chunk row, into the row cache (:mod:`plait.stores.postgres_rows`), when they fit
  its budget;
* the dense matrix (:func:`~plait.stores.postgres_dense.matrix_from`), when the collection
  is below the ANN threshold and the matrix fits the dense budget.

Each goes into its cache under the key the snapshot read, with the same bookkeeping as
the per-part loads (epochs, newer keys win), so after a write each follows the change
log as before (:mod:`plait.stores.postgres_incremental`, :func:`~plait.stores.postgres_dense.load_changes`):
the next lexical index carries the whole postings as a layer
(:mod:`plait.stores.lexical_carry`), so a new term still needs no read until that layer
is dropped (:data:`~plait.stores.lexical_carry.MAX_DEPTH` changes later, or by the
budget); a change too large for the log loads whole again. Chunk rows are dropped
on a write (their key moved) and read per hit again, as before.

The estimate (:data:`SIZES`, read in the same snapshot first) counts 16 B per posting,
the keys, and per chunk its texts, its JSON and :data:`ROW_BYTES`; postings and rows
together must be under ``whole_bytes`` and the postings within the lexical index's own
budget (``lexical_cache_bytes``, ``lexical_total_bytes``); the rows are cached only when
they fit the row cache's budget (``row_cache_bytes``; else read per hit, as before). A
collection over the bounds keeps the per-term reads (remembered until its chunk count
halves): SciFact (9k chunks) is about 90 MB estimated, 100k chunks of it over 256 MiB.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from plait.errors import StoreError
from plait.stores.base import Filters
from plait.stores.lexical_index import LexicalIndex
from plait.stores.lexical_whole import KEY_OVERHEAD, POSTING_BYTES, whole_from
from plait.stores.postgres_dense import DENSE_IDS, DenseCache, Key, dense_copy, matrix_from
from plait.stores.postgres_keys import GENERATION
from plait.stores.postgres_lexcache import LENGTHS, READ_SNAPSHOT, allowed_query, index_from, parse_allowed
from plait.stores.postgres_lexload import LexicalLoads, Loaded
from plait.stores.postgres_queries import FIELD_PREFIX

__all__ = ["ALL_POSTINGS", "DEFAULT_WHOLE_BYTES", "ROW_BYTES", "SIZES", "TERMS", "Whole", "WholeLoads", "term_keys"]

log = logging.getLogger(__name__)

#: The store's default ``whole_bytes``: collections estimated under it are loaded whole.
DEFAULT_WHOLE_BYTES = 256 * 2**20
#: Bytes estimated per cached chunk besides its texts and JSON (the model, its strings'
#: headers: :data:`~plait.stores.postgres_rows.CHUNK_OVERHEAD` + 4 × 49).
ROW_BYTES = 1024 + 4 * 49
#: JSON is held as Python dicts and lists: about this many times its text.
JSON_FACTOR = 3

#: What the estimate counts: postings and keys (with their characters), chunks, the
#: chunks' texts and their JSON (as text).
SIZES = (
    "SELECT t.postings, t.keys, t.chars, c.chunks, c.text, c.json FROM "
    "(SELECT coalesce(sum(df), 0) AS postings, count(*) AS keys, coalesce(sum(octet_length(key)), 0) AS chars "
    "FROM plait_lex_terms WHERE collection_id = %(cid)s) AS t, "
    "(SELECT count(*) AS chunks, coalesce(sum(octet_length(content) + octet_length(chunk_id) "
    "+ octet_length(source_id) + octet_length(content_hash)), 0) AS text, "
    "coalesce(sum(octet_length(origin::text) + octet_length(metadata::text)), 0) AS json "
    "FROM plait_chunks WHERE collection_id = %(cid)s) AS c"
)

#: The collection's term ids and their field-prefixed keys, in id order (one row of ``bytea``).
TERMS = (
    "SELECT string_agg(int4send(t.id), ''::bytea ORDER BY t.id), "
    "string_agg(convert_to(t.key, 'UTF8'), '\\x00'::bytea ORDER BY t.id) "
    "FROM plait_lex_terms t WHERE t.collection_id = %(cid)s"
)

#: Every posting of the collection as one ``bytea`` of 16-byte records (term id int4,
#: chunk row int8, term frequency int4; big-endian), in no particular order.
ALL_POSTINGS = (
    "SELECT string_agg(int4send(p.term) || int8send(p.chunk_row) || int4send(p.tf), ''::bytea) "
    "FROM plait_postings p WHERE p.collection_id = %(cid)s"
)


@dataclass(frozen=True)
class Whole:
    """What a whole load read: the key, the lexical index and a filter's row ids."""

    key: Key
    chunks: int
    index: LexicalIndex
    allowed: np.ndarray | None


def term_keys(row: Sequence[Any] | None) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """(term ids, ``(field, term)`` keys) of :data:`TERMS`'s row (a key of no known field
    gets field -1: no query asks for it)."""
    if row is None or row[0] is None:
        return np.empty(0, dtype=np.int64), []
    ids = np.frombuffer(row[0], dtype=">i4").astype(np.int64)
    keys: list[tuple[int, str]] = []
    for text in bytes(row[1]).decode("utf-8").split("\x00"):
        field = next((f for f, prefix in enumerate(FIELD_PREFIX) if text.startswith(prefix)), -1)
        keys.append((field, text[len(FIELD_PREFIX[field]):] if field >= 0 else text))
    if len(keys) != ids.size:
        raise StoreError("the collection's term ids and keys do not match")
    return ids, keys


def _copy(conn: psycopg.Connection, statement: Any) -> bytearray:
    copied = bytearray()
    with conn.cursor().copy(statement) as copy:
        for data in copy:
            copied += data
    return copied


class WholeLoads(LexicalLoads):
    """The whole load of :class:`~plait.stores.postgres_search.PostgresSearch` (see the
    module's docstring); the row cache's part is given by the subclass that holds it."""

    _whole_bytes: int
    _sizes: dict[int, int]
    _dense: DenseCache
    ann_threshold: int
    last_matrix_load: str

    def _whole_init(self, whole_bytes: int) -> None:
        if whole_bytes < 0:
            raise StoreError(f"whole_bytes must be >= 0, got {whole_bytes}")
        self._whole_bytes = whole_bytes
        self._whole_refused: dict[int, int] = {}  # collection id -> chunks when it was found too large

    # the row cache's part (postgres_rows) -------------------------------------------------
    def _rows_room(self) -> int:
        """Bytes of chunk rows a whole load may cache (0: none)."""
        return 0

    def _rows_statement(self) -> str:  # pragma: no cover - only called when _rows_room > 0
        raise NotImplementedError

    def _keep_rows(self, cid: int, key: Key, rows: Sequence[Sequence[Any]], epoch: int) -> None:
        """Cache the chunk rows a whole load read (:meth:`_rows_statement`'s rows)."""

    # the load ---------------------------------------------------------------------------
    def _whole_wanted(self, cid: int, chunks: int | None) -> bool:
        """Whether a whole load of ``cid`` (``chunks`` as last read) may fit."""
        if self._whole_bytes <= 0 or self._lexical_budget <= 0:
            return False
        refused = self._whole_refused.get(cid)
        return refused is None or chunks is None or chunks * 2 <= refused

    def _whole_first(self, conn: psycopg.Connection, cid: int, dimension: int | None) -> None:
        """A search found no lexical index of ``cid``: load it whole if it may fit (one
        thread at a time per collection; the others then find it cached)."""
        if not self._whole_wanted(cid, self._sizes.get(cid)):
            return
        with self._dense.loading(cid):
            if self._lexicon.cached(cid) is None:
                self._load_whole(conn, cid, dimension, None)

    def _full(
        self,
        conn: psycopg.Connection,
        cid: int,
        pairs: Sequence[tuple[int, str]],
        filters: Filters | None,
    ) -> tuple[tuple[LexicalIndex, Loaded, Loaded], np.ndarray | None] | None:
        """The full reload of a stale index: whole when the collection fits, else per term."""
        if self._whole_wanted(cid, None):
            whole = self._load_whole(conn, cid, None, filters)
            if whole is not None:
                return (whole.index, {}, whole.index.held(pairs)), whole.allowed
        return super()._full(conn, cid, pairs, filters)

    def _load_whole(
        self, conn: psycopg.Connection, cid: int, dimension: int | None, filters: Filters | None
    ) -> Whole | None:
        """Collection ``cid`` read whole in one snapshot (its dense matrix too when
        ``dimension`` is given and it fits) and cached; None when it is gone or
        estimated too large (nothing cached then: read per term)."""
        epoch = self._instances.reading()
        with conn.transaction():
            with conn.pipeline():
                conn.execute(READ_SNAPSHOT)
                check = conn.execute(GENERATION, (cid,), prepare=self._prepare)
                sized = conn.execute(SIZES, {"cid": cid}, prepare=self._prepare)
            now, sizes = check.fetchone(), sized.fetchone()
            if now is None or sizes is None:
                return None
            chunks = int(now[2])
            postings = POSTING_BYTES * int(sizes[0]) + KEY_OVERHEAD * int(sizes[1]) + int(sizes[2])
            rows = ROW_BYTES * int(sizes[3]) + int(sizes[4]) + JSON_FACTOR * int(sizes[5])
            with_rows = 0 < rows <= self._rows_room()
            if postings + rows > self._whole_bytes or postings > self._lexical_budget:
                log.info("collection %s is read per term: postings and rows estimated at %s + %s bytes", cid, postings, rows)
                self._whole_refused[cid] = max(chunks, 1)
                return None
            self._whole_refused.pop(cid, None)
            dense = (
                dimension is not None and chunks < self.ann_threshold and self._dense.fits(chunks, dimension, cid)
            )
            with conn.pipeline():
                lengths = conn.execute(LENGTHS, {"cid": cid}, prepare=self._prepare)
                terms = conn.execute(TERMS, {"cid": cid}, prepare=self._prepare, binary=True)
                everything = conn.execute(ALL_POSTINGS, {"cid": cid}, prepare=self._prepare, binary=True)
                chunk_rows = conn.execute(self._rows_statement(), {"cid": cid}, prepare=self._prepare) if with_rows else None
                ids = conn.execute(DENSE_IDS, {"cid": cid}, prepare=self._prepare, binary=True) if dense else None
                allowed = None if filters is None else conn.execute(*allowed_query(cid, filters), prepare=self._prepare)
            copied = _copy(conn, dense_copy(cid)) if dense else None
            read_rows = [] if chunk_rows is None else chunk_rows.fetchall()
            base = index_from(lengths.fetchone())
            term_ids, keys = term_keys(terms.fetchone())
            blob = everything.fetchone()
            ids_row = None if ids is None else ids.fetchone()
        key: Key = (int(now[0]), int(now[1]))
        try:
            whole = whole_from(term_ids, keys, None if blob is None else blob[0], base.rowids)
        except ValueError as error:  # pragma: no cover - one snapshot: they always agree
            raise StoreError(f"collection {cid}'s postings read whole do not match its chunks: {error}") from error
        index = LexicalIndex(
            base.rowids, base.lengths, base.chunk_ids, budget=self._lexical_budget, copy_ids=False, whole=whole
        )
        self._keep(cid, key[0], index)
        if copied is not None and dimension is not None:
            matrix = matrix_from(ids_row, copied, dimension)
            self.last_matrix_load = "full"
            self._dense.keep(cid, key, matrix, epoch=epoch)
        if with_rows:
            self._keep_rows(cid, key, read_rows, epoch)
        log.info("collection %s read whole: %s chunks, %s postings", cid, chunks, int(whole.positions.size))
        return Whole(key, chunks, index, None if allowed is None else parse_allowed(allowed.fetchone()))
