"""The embedded default store: one SQLite file holds everything.

Chunks, metadata, vectors (float32 blobs) and the lexical index (a postings table
with per-term document frequencies and per-chunk field lengths) live in the same
file, and every write of a source's chunks touches both arms in one transaction —
they cannot drift. Each collection carries a ``generation`` counter bumped by every
write in that same transaction; the in-process caches (BM25 score rows, document
lengths, the vector matrix: :mod:`plait.stores.sqlite_snapshot`) are keyed by it, so a
process sees another process's writes on its next query. The schema's migrations are
in :mod:`plait.stores.sqlite_schema`.

The lexical arm is BM25 computed from the postings (see :class:`BM25Params`); the
dense arm is exact cosine over the cached matrix below ``ann_threshold`` vectors and an
HNSW graph persisted beside the file at or above it (:mod:`plait.stores.ann`), kept in
line with the rows on every generation change.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from plait.errors import NotFoundError, StoreUnavailableError
from plait.stores.base import (
    BM25Params,
    ChunkState,
    ReplaceCounts,
    ScopeInfo,
    SourceInfo,
    StoredChunk,
    add_count,
    replace_changes,
)
from plait.stores.records import SQLITE_STORE_TABLES, Records, SqliteRecords
from plait.stores.records_import import import_side_files
from plait.stores.sqlite_search import SQLiteSearch
from plait.types import Chunk, CollectionInfo, Origin
from plait.usage import USAGE_COLUMNS, UsageRow, usage_counts, usage_key, usage_row

__all__ = ["SQLiteStore"]

_DEFAULT_BM25 = BM25Params()

_ORIGIN = TypeAdapter(Origin)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


_UNREAD: Any = object()  # _info's ``last`` not read by the caller


class SQLiteStore(SQLiteSearch):
    """A :class:`~plait.stores.base.Store` in one SQLite file (WAL mode).

    ``ann_threshold`` (default ``PLAIT_ANN_THRESHOLD`` or 20 000) is the number of vectors
    from which the dense arm answers from an HNSW graph instead of exactly; it needs the
    optional ``hnswlib`` (``plait[ann]``) and stays exact without it. ``last_vector_path``
    says which path the latest dense query took (``"exact"`` or ``"ann"``).
    """

    # collections -----------------------------------------------------------------
    def _info(self, row: tuple[Any, ...], last: Any = _UNREAD) -> CollectionInfo:
        """The collection of a ``collections`` row; ``last`` its scopes' latest index
        time when the caller's statement read it."""
        cid = row[0]
        snap = self._snap_for(int(cid), int(row[6]))
        counts = snap.counts  # a full scan of the chunks: once per generation, not per search
        if counts is None:
            counts = snap.counts = self._query(
                "SELECT COUNT(*), COALESCE(SUM(vector IS NULL), 0), COUNT(DISTINCT source_id) "
                "FROM chunks WHERE collection_id = ?",
                (cid,),
            )[0]
        if last is _UNREAD:
            last = self._query(
                "SELECT MAX(last_indexed_at) FROM scopes WHERE collection_id = ?", (cid,)
            )[0][0]
        return CollectionInfo(
            name=row[1],
            embedder_provider=row[2],
            embedder_model=row[3],
            dimension=row[4],
            chunks=counts[0],
            chunks_without_vector=counts[1],
            sources=counts[2],
            created_at=row[5],
            last_indexed_at=last,
        )

    def ensure_collection(self, name: str) -> CollectionInfo:
        with self._tx() as db:
            # A new collection's generation starts at a random value, not 0: SQLite may
            # give a recreated collection the row id of a deleted one, and another
            # handle's caches are keyed by (id, generation).
            db.execute(
                "INSERT OR IGNORE INTO collections (name, created_at, generation) VALUES (?, ?, ?)",
                (name, _now(), secrets.randbits(62)),
            )
        info = self.get_collection(name)
        assert info is not None  # just inserted
        return info

    def get_collection(self, name: str) -> CollectionInfo | None:
        row = self._collection_row(name)
        return self._info(row) if row else None

    def collection_with_settings(self, name: str) -> tuple[CollectionInfo, dict[str, Any]] | None:
        """``(get_collection(name), get_settings(name))`` in one statement (a search's first
        read; :class:`~plait.stores.base.CollectionReadStore`)."""
        rows = self._query(
            "SELECT c.id, c.name, c.provider, c.model, c.dimension, c.created_at, c.generation, "
            "(SELECT MAX(s.last_indexed_at) FROM scopes s WHERE s.collection_id = c.id), c.settings "
            "FROM collections c WHERE c.name = ?",
            (name,),
        )
        if not rows:
            return None
        row = rows[0]
        return self._info(row[:7], row[7]), dict(json.loads(row[8]))

    def list_collections(self) -> list[CollectionInfo]:
        rows = self._query(
            "SELECT id, name, provider, model, dimension, created_at, generation "
            "FROM collections ORDER BY name"
        )
        return [self._info(r) for r in rows]

    def delete_collection(self, name: str) -> bool:
        row = self._collection_row(name)
        if row is None:
            return False
        cid = row[0]
        with self._tx() as db:
            db.execute(
                "DELETE FROM postings WHERE term_id IN (SELECT id FROM terms WHERE collection_id = ?)",
                (cid,),
            )
            db.execute("DELETE FROM terms WHERE collection_id = ?", (cid,))
            db.execute("DELETE FROM chunks WHERE collection_id = ?", (cid,))
            db.execute("DELETE FROM collections WHERE id = ?", (cid,))
        gone = self._snapshots.pop(cid, None)
        if gone is not None:
            gone.retire()
        self._ann.pop(cid, None)
        for suffix in (".hnsw", ".hnsw.npz"):
            Path(f"{self.path}.{cid}{suffix}").unlink(missing_ok=True)
        return True

    def set_embedder(
        self, name: str, *, provider: str, model: str, dimension: int | None
    ) -> CollectionInfo:
        cid = self._cid(name)
        with self._tx() as db:
            db.execute(
                "UPDATE collections SET provider = ?, model = ?, dimension = ? WHERE id = ?",
                (provider, model, dimension, cid),
            )
            self._bump(db, cid)
        info = self.get_collection(name)
        assert info is not None
        return info

    def get_settings(self, name: str) -> dict[str, Any]:
        rows = self._query("SELECT settings FROM collections WHERE name = ?", (name,))
        if not rows:
            raise NotFoundError(f"collection {name!r} does not exist")
        return dict(json.loads(rows[0][0]))

    def update_settings(self, name: str, settings: Mapping[str, Any], *, remove: Sequence[str] = ()) -> dict[str, Any]:
        cid = self._cid(name)
        with self._tx() as db:
            return self._merge_settings(db, cid, settings, remove=remove)

    def increment_settings(
        self, name: str, increments: Mapping[str, int], *, settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        cid = self._cid(name)
        with self._tx() as db:  # BEGIN IMMEDIATE: the read and the write hold the write lock
            return self._merge_settings(db, cid, settings or {}, increments)

    @staticmethod
    def _merge_settings(
        db: sqlite3.Connection, cid: int, settings: Mapping[str, Any], increments: Mapping[str, int] | None = None,
        remove: Sequence[str] = (),
    ) -> dict[str, Any]:
        current = json.loads(db.execute("SELECT settings FROM collections WHERE id = ?", (cid,)).fetchone()[0])
        current.update(settings)
        for key in remove:
            current.pop(key, None)
        for key, amount in (increments or {}).items():
            current[key] = add_count(current.get(key), amount)
        db.execute("UPDATE collections SET settings = ? WHERE id = ?", (json.dumps(current, sort_keys=True), cid))
        return dict(current)

    # usage -----------------------------------------------------------------------
    def add_usage(
        self, collection: str, rows: Sequence[UsageRow], *, settings: Mapping[str, Any] | None = None
    ) -> None:
        if not rows and not settings:
            return
        cid = self._cid(collection)
        with self._tx() as db:
            self._write_usage(db, cid, rows)
            if settings:
                self._merge_settings(db, cid, settings)

    @staticmethod
    def _write_usage(db: sqlite3.Connection, cid: int, rows: Sequence[UsageRow]) -> None:
        if rows:
            db.executemany(
                "INSERT INTO usage (collection_id, bucket, kind, purpose, provider, model, estimated, "
                "calls, texts, characters, input_tokens, output_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (collection_id, bucket, kind, purpose, provider, model, estimated) DO UPDATE SET "
                "calls = calls + excluded.calls, texts = texts + excluded.texts, "
                "characters = characters + excluded.characters, "
                "input_tokens = input_tokens + excluded.input_tokens, "
                "output_tokens = output_tokens + excluded.output_tokens",
                [(cid, *usage_key(r), *usage_counts(r)) for r in rows],
            )

    def usage(self, collection: str, *, since: str | None = None) -> list[UsageRow]:
        cid = self._cid(collection)
        found = self._query(
            f"SELECT {USAGE_COLUMNS} FROM usage WHERE collection_id = ? AND bucket >= ? "
            "ORDER BY bucket, kind, purpose, provider, model, estimated",
            (cid, since or ""),
        )
        return [usage_row(r) for r in found]

    # writes ----------------------------------------------------------------------
    def chunk_states(self, collection: str, source_id: str) -> dict[str, ChunkState]:
        cid = self._cid(collection)
        rows = self._query(
            "SELECT chunk_id, content_hash, vector IS NOT NULL FROM chunks "
            "WHERE collection_id = ? AND source_id = ?",
            (cid, source_id),
        )
        return {r[0]: ChunkState(r[0], r[1], bool(r[2])) for r in rows}

    def vectors_by_hash(self, collection: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        cid = self._cid(collection)
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for i in range(0, len(unique), 500):
            batch = unique[i : i + 500]
            marks = ",".join("?" * len(batch))
            rows = self._query(
                f"SELECT content_hash, vector FROM chunks WHERE collection_id = ? "
                f"AND vector IS NOT NULL AND content_hash IN ({marks})",
                (cid, *batch),
            )
            for content_hash, blob in rows:
                found.setdefault(content_hash, np.frombuffer(blob, dtype=np.float32).copy())
        return found

    def _term_ids(self, db: sqlite3.Connection, cid: int, field: int, terms: Sequence[str]) -> dict[str, int]:
        db.executemany(
            "INSERT OR IGNORE INTO terms (collection_id, field, term, df) VALUES (?, ?, ?, 0)",
            [(cid, field, t) for t in terms],
        )
        ids: dict[str, int] = {}
        for i in range(0, len(terms), 500):
            batch = list(terms[i : i + 500])
            marks = ",".join("?" * len(batch))
            for term_id, term in db.execute(
                f"SELECT id, term FROM terms WHERE collection_id = ? AND field = ? "
                f"AND term IN ({marks})",
                (cid, field, *batch),
            ):
                ids[term] = term_id
        return ids

    def _delete_rows(self, db: sqlite3.Connection, rowids: Sequence[int]) -> None:
        for i in range(0, len(rowids), 500):
            batch = list(rowids[i : i + 500])
            marks = ",".join("?" * len(batch))
            db.execute(
                f"UPDATE terms SET df = df - (SELECT COUNT(*) FROM postings p "
                f"WHERE p.term_id = terms.id AND p.chunk_rowid IN ({marks})) "
                f"WHERE id IN (SELECT term_id FROM postings WHERE chunk_rowid IN ({marks}))",
                (*batch, *batch),
            )
            db.execute(f"DELETE FROM postings WHERE chunk_rowid IN ({marks})", batch)
            db.execute(f"DELETE FROM chunks WHERE rowid IN ({marks})", batch)

    def _insert(self, db: sqlite3.Connection, cid: int, scope: str, item: StoredChunk) -> None:
        chunk = item.chunk
        blob = None if item.vector is None else np.asarray(item.vector, np.float32).tobytes()
        cur = db.execute(
            "INSERT INTO chunks (collection_id, chunk_id, source_id, scope, ordinal, content, "
            "content_hash, origin, metadata, vector, len_exact, len_stems) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cid,
                chunk.id,
                chunk.source_id,
                scope,
                chunk.ordinal,
                chunk.content,
                chunk.content_hash,
                chunk.origin.model_dump_json(by_alias=True),
                json.dumps(chunk.metadata, sort_keys=True, ensure_ascii=False),
                blob,
                len(item.exact),
                len(item.stems),
            ),
        )
        rowid = cur.lastrowid
        for field, tokens in enumerate((item.exact, item.stems)):
            counts = Counter(tokens)
            if not counts:
                continue
            ids = self._term_ids(db, cid, field, list(counts))
            db.executemany(
                "INSERT INTO postings (term_id, chunk_rowid, tf) VALUES (?, ?, ?)",
                [(ids[t], rowid, n) for t, n in counts.items()],
            )
            db.executemany("UPDATE terms SET df = df + 1 WHERE id = ?", [(ids[t],) for t in counts])

    def replace_source(
        self,
        collection: str,
        source_id: str,
        scope: str,
        chunks: Sequence[StoredChunk],
        *,
        root: str = "",
        claim: bool = False,
    ) -> ReplaceCounts:
        cid = self._cid(collection)
        with self._tx() as db:
            if claim:
                owner = db.execute(
                    "SELECT root FROM sources WHERE collection_id = ? AND source_id = ?",
                    (cid, source_id),
                ).fetchone()
                if owner is not None and owner[0] and owner[0] != root:
                    return ReplaceCounts(conflict=str(owner[0]))
            existing = {
                r[0]: (r[1], r[2])
                for r in db.execute(
                    "SELECT chunk_id, rowid, content_hash FROM chunks "
                    "WHERE collection_id = ? AND source_id = ?",
                    (cid, source_id),
                )
            }
            changes, gone, counts = replace_changes(existing, chunks, lambda row: row[1])
            to_delete: list[int] = []
            to_insert: list[StoredChunk] = []
            for change in changes:
                item, chunk, old = change.item, change.item.chunk, change.kept
                if old is not None:
                    params: list[Any] = [
                        scope,
                        chunk.ordinal,
                        chunk.origin.model_dump_json(by_alias=True),
                        json.dumps(chunk.metadata, sort_keys=True, ensure_ascii=False),
                    ]
                    sql = "UPDATE chunks SET scope = ?, ordinal = ?, origin = ?, metadata = ?"
                    if item.vector is not None:  # a given vector replaces the stored one
                        sql += ", vector = ?"
                        params.append(np.asarray(item.vector, np.float32).tobytes())
                    db.execute(sql + " WHERE rowid = ?", (*params, old[0]))
                    continue
                if change.replaced is not None:
                    to_delete.append(change.replaced[0])
                to_insert.append(item)
            to_delete.extend(row[0] for row in gone)
            self._delete_rows(db, to_delete)
            for item in to_insert:
                self._insert(db, cid, scope, item)
            if chunks:
                db.execute(
                    "INSERT INTO sources (collection_id, source_id, scope, indexed_at, root) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (collection_id, source_id) "
                    "DO UPDATE SET scope = excluded.scope, indexed_at = excluded.indexed_at, "
                    "root = excluded.root",
                    (cid, source_id, scope, _now(), root),
                )
            else:
                db.execute(
                    "DELETE FROM sources WHERE collection_id = ? AND source_id = ?",
                    (cid, source_id),
                )
            self._bump(db, cid)
        return counts

    def delete_source(self, collection: str, source_id: str) -> int:
        return self.replace_source(collection, source_id, "", []).deleted

    def set_vectors(
        self, collection: str, vectors: Mapping[str, np.ndarray], *, usage: Sequence[UsageRow] = ()
    ) -> int:
        cid = self._cid(collection)
        with self._tx() as db:
            self._write_usage(db, cid, usage)
            count = 0
            for chunk_id, vector in vectors.items():
                cur = db.execute(
                    "UPDATE chunks SET vector = ? WHERE collection_id = ? AND chunk_id = ?",
                    (np.asarray(vector, np.float32).tobytes(), cid, chunk_id),
                )
                count += cur.rowcount
            self._bump(db, cid)
        return count

    def mark_scope_indexed(self, collection: str, scope: str, at: str) -> None:
        cid = self._cid(collection)
        with self._tx() as db:
            db.execute(
                "INSERT INTO scopes (collection_id, scope, last_indexed_at) VALUES (?, ?, ?) "
                "ON CONFLICT (collection_id, scope) DO UPDATE SET last_indexed_at = excluded.last_indexed_at",
                (cid, scope, at),
            )

    # backfill claims -----------------------------------------------------------------
    def claim_without_vector(
        self, collection: str, *, owner: str, limit: int, lease_seconds: float
    ) -> list[tuple[str, str]]:
        cid = self._cid(collection)
        now = time.time()
        with self._tx() as db:  # BEGIN IMMEDIATE: one claimer at a time, across processes
            db.execute(
                "DELETE FROM vector_claims WHERE collection_id = ? AND (expires_at <= ? OR owner = ?)",
                (cid, now, owner),
            )
            rows = db.execute(
                "SELECT c.chunk_id, c.content FROM chunks c WHERE c.collection_id = ? "
                "AND c.vector IS NULL AND NOT EXISTS (SELECT 1 FROM vector_claims v "
                "WHERE v.collection_id = c.collection_id AND v.chunk_id = c.chunk_id) "
                "ORDER BY c.rowid LIMIT ?",
                (cid, limit),
            ).fetchall()
            db.executemany(
                "INSERT INTO vector_claims (collection_id, chunk_id, owner, expires_at) "
                "VALUES (?, ?, ?, ?)",
                [(cid, r[0], owner, now + lease_seconds) for r in rows],
            )
        return [(r[0], r[1]) for r in rows]

    def release_claims(self, collection: str, owner: str) -> int:
        cid = self._cid(collection)
        with self._tx() as db:
            cur = db.execute(
                "DELETE FROM vector_claims WHERE collection_id = ? AND owner = ?", (cid, owner)
            )
            return cur.rowcount

    def claim_owners(self, collection: str) -> dict[str, int]:
        cid = self._cid(collection)
        rows = self._query(
            "SELECT v.owner, COUNT(*) FROM vector_claims v JOIN chunks c "
            "ON c.collection_id = v.collection_id AND c.chunk_id = v.chunk_id "
            "WHERE v.collection_id = ? AND v.expires_at > ? AND c.vector IS NULL "
            "GROUP BY v.owner ORDER BY v.owner",
            (cid, time.time()),
        )
        return {r[0]: int(r[1]) for r in rows}

    def without_vector(self, collection: str, chunk_ids: Sequence[str]) -> set[str]:
        cid = self._cid(collection)
        ids = list(dict.fromkeys(chunk_ids))
        out: set[str] = set()
        for i in range(0, len(ids), 500):
            batch = ids[i : i + 500]
            marks = ",".join("?" * len(batch))
            rows = self._query(
                f"SELECT chunk_id FROM chunks WHERE collection_id = ? AND vector IS NULL "
                f"AND chunk_id IN ({marks})",
                (cid, *batch),
            )
            out.update(r[0] for r in rows)
        return out

    # reads -----------------------------------------------------------------------
    def list_sources(
        self, collection: str, scope: str | None = None, *, root: str | None = None
    ) -> list[SourceInfo]:
        cid = self._cid(collection)
        sql = (
            "SELECT s.source_id, s.scope, COUNT(c.rowid), COALESCE(SUM(c.vector IS NULL), 0), "
            "s.indexed_at, s.root FROM sources s LEFT JOIN chunks c "
            "ON c.collection_id = s.collection_id AND c.source_id = s.source_id "
            "WHERE s.collection_id = ?"
        )
        params: list[Any] = [cid]
        if scope is not None:
            sql += " AND s.scope = ?"
            params.append(scope)
        if root is not None:
            sql += " AND s.root = ?"
            params.append(root)
        sql += " GROUP BY s.source_id, s.scope, s.indexed_at, s.root ORDER BY s.source_id"
        return [SourceInfo(*r) for r in self._query(sql, params)]

    def scopes(self, collection: str) -> list[ScopeInfo]:
        cid = self._cid(collection)
        rows = self._query(
            "SELECT c.scope, COUNT(DISTINCT c.source_id), COUNT(*), COALESCE(SUM(c.vector IS NULL), 0), "
            "(SELECT last_indexed_at FROM scopes s WHERE s.collection_id = c.collection_id AND s.scope = c.scope) "
            "FROM chunks c WHERE c.collection_id = ? GROUP BY c.scope ORDER BY c.scope",
            (cid,),
        )
        return [ScopeInfo(*r) for r in rows]

    def chunks_without_vector(
        self, collection: str, *, limit: int | None = None
    ) -> list[tuple[str, str]]:
        cid = self._cid(collection)
        rows = self._query(
            "SELECT chunk_id, content FROM chunks WHERE collection_id = ? AND vector IS NULL "
            "ORDER BY rowid LIMIT ?",
            (cid, -1 if limit is None else limit),
        )
        return [(r[0], r[1]) for r in rows]

    def _row_to_chunk(self, row: tuple[Any, ...]) -> Chunk:
        return Chunk(
            id=row[0],
            source_id=row[1],
            scope=row[2],
            ordinal=row[3],
            content=row[4],
            content_hash=row[5],
            origin=_ORIGIN.validate_json(row[6]),
            metadata=json.loads(row[7]),
        )

    def get_chunks(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        """The chunks of ``chunk_ids`` the collection holds (one statement per 500 ids: the
        collection's id is looked up inside it; NotFoundError only when none was found
        and the collection does not exist)."""
        out: dict[str, Chunk] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for i in range(0, len(ids), 500):
            batch = ids[i : i + 500]
            marks = ",".join("?" * len(batch))
            for row in self._query(
                "SELECT chunk_id, source_id, scope, ordinal, content, content_hash, origin, "
                "metadata FROM chunks WHERE collection_id = (SELECT id FROM collections WHERE name = ?) "
                f"AND chunk_id IN ({marks})",
                (collection, *batch),
            ):
                out[row[0]] = self._row_to_chunk(row)
        if not out:
            self._cid(collection)  # NotFoundError for a collection that does not exist
        return out

    def chunk_ids(self, collection: str, source_id: str | None = None) -> list[str]:
        cid = self._cid(collection)
        if source_id is None:
            rows = self._query(
                "SELECT chunk_id FROM chunks WHERE collection_id = ? ORDER BY rowid", (cid,)
            )
        else:
            rows = self._query(
                "SELECT chunk_id FROM chunks WHERE collection_id = ? AND source_id = ? "
                "ORDER BY ordinal",
                (cid, source_id),
            )
        return [r[0] for r in rows]

    def records(self) -> Records:
        with self._lock:
            if self._records is None:
                legacy = None if str(self.path) == ":memory:" else self.path.expanduser().parent
                records = SqliteRecords(
                    self._db, self._lock, SQLITE_STORE_TABLES, str(self.path), legacy, begin=self._tx
                )
                import_side_files(records, collections=[c.name for c in self.list_collections()])
                self._records = records
            return self._records

    def ping(self) -> None:
        """Readiness: the file is still where the store was opened, and answers a query
        (an open connection keeps reading a removed file, so the path is checked)."""
        if str(self.path) != ":memory:" and not self.path.exists():
            raise StoreUnavailableError(f"the SQLite store {self.path} no longer exists (removed while open)")
        self._query("SELECT 1")

    def close(self) -> None:
        with self._lock:
            self._db.close()
