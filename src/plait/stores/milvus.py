"""The Milvus store: milvus-lite in-process, or a Milvus standalone / cluster server.

One Milvus entity holds a chunk's row, its dense vector and the two analysed text
fields from which Milvus computes two BM25 sparse vectors (see
:mod:`plait.stores.milvus_schema`), so deletes and upserts keep the two arms in step by
construction. Each arm is queried separately — the dense field with cosine, each BM25
field with Milvus's BM25 — and the exact and stemmed BM25 scores are summed here with
their weights; plait's search service fuses the arms as it does on every store.

Milvus has no multi-row transactions, so :meth:`MilvusStore.replace_source` uses
versions: every chunk entity has ``born`` and ``died`` write numbers, the collection's
metadata entity records the last committed write ``C``, and every read filters to
``born <= C and (died == 0 or died > C)``. A write reserves number ``v``, inserts the new
chunk versions (``born = v``), marks the replaced ones (``died = v``), then commits by
upserting the one metadata entity with ``C = v`` — a single-entity write, atomic in
Milvus — and only then deletes the dead versions. A reader therefore sees a source's
old chunks or its new chunks, never a mix; a writer that dies before the commit leaves
invisible rows that the next write removes. One writer per collection at a time.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plait.errors import ConfigError, StoreError
from plait.stores.base import (
    BM25Params,
    ChunkState,
    Filters,
    ReplaceCounts,
    ScopeInfo,
    SourceInfo,
    StoredChunk,
    add_count,
    replace_changes,
)
from plait.stores.field_topk import FieldList, merge_fields
from plait.stores.milvus_base import (
    _BATCH,
    _ORIGIN,
    MAX_TOPK,
    MilvusBase,
    _now,
    and_,
    visible,
)
from plait.stores.milvus_schema import (
    CHUNK_FIELDS,
    LEXICAL_FIELDS,
    check_text,
    encode_tokens,
    filter_expr,
    in_expr,
    literal,
)
from plait.stores.records import Records, open_records_file
from plait.stores.records_import import import_records_file, import_side_files
from plait.types import Chunk, CollectionInfo
from plait.usage import USAGE_COUNTS, UsageRow, usage_counts, usage_key

__all__ = ["MilvusStore"]

logger = logging.getLogger(__name__)


class MilvusStore(MilvusBase):
    """A :class:`~plait.stores.base.Store` on Milvus; see :class:`MilvusBase` for the options."""

    # collections -----------------------------------------------------------------------
    def ensure_collection(self, name: str) -> CollectionInfo:
        with self._lock:
            rec = self._get_record(name)
            if rec is None:
                check_text(name, "collection name")
                k1, b = self._bm25.k1, self._bm25.b
                rec = {
                    "name": name, "id": uuid.uuid4().hex[:16], "created_at": _now(),
                    "provider": None, "model": None, "dimension": None, "settings": {},
                    "scopes": {}, "committed": 0, "next_txn": 1, "layout": None,
                    "totals": {"chunks": 0, "without": 0, "sources": 0},
                    "bm25": {"k1": k1, "b": b},
                }
                self._put_record(rec)
            return self._info(rec)

    def get_collection(self, name: str) -> CollectionInfo | None:
        rec = self._get_record(name)
        return self._info(rec) if rec else None

    def list_collections(self) -> list[CollectionInfo]:
        rows = self._scan(self._meta, 'kind == "collection"', ["body"])
        records = sorted((json.loads(r["body"]) for r in rows), key=lambda r: r["name"])
        return [self._info(r) for r in records]

    def delete_collection(self, name: str) -> bool:
        with self._lock:
            rec = self._get_record(name)
            if rec is None:
                return False
            prefix = f"{self._prefix}_{rec['id']}_"
            for existing in self._call("list_collections", self._client.list_collections):
                if existing.startswith(prefix):
                    self._call("drop_collection", self._client.drop_collection, existing)
                    self._loaded.discard(existing)
            self._call("delete", self._client.delete, self._meta, ids=[f"c/{name}", self._claims_key(rec)])
            for kind in ("source", "usage"):
                self._call(
                    "delete", self._client.delete, self._meta,
                    filter=f'kind == "{kind}" and coll == {literal(rec["id"])}',
                )
            return True

    def set_embedder(
        self, name: str, *, provider: str, model: str, dimension: int | None
    ) -> CollectionInfo:
        with self._lock:
            rec = self._record(name)
            rec.update(provider=provider, model=model, dimension=dimension)
            if dimension is not None and rec.get("layout") is not None:
                rec = self._ensure_layout(rec, dimension)
            self._put_record(rec)
            return self._info(rec)

    def get_settings(self, name: str) -> dict[str, Any]:
        return dict(self._record(name)["settings"])

    def update_settings(self, name: str, settings: Mapping[str, Any], *, remove: Sequence[str] = ()) -> dict[str, Any]:
        with self._lock:
            rec = self._record(name)
            rec["settings"].update(settings)
            for key in remove:
                rec["settings"].pop(key, None)
            self._put_record(rec)
            return dict(rec["settings"])

    def increment_settings(
        self, name: str, increments: Mapping[str, int], *, settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Read, add and upsert the collection record under the store's lock (Milvus has no
        transactions; one writer per collection across processes)."""
        with self._lock:
            rec = self._record(name)
            rec["settings"].update(settings or {})
            for key, amount in increments.items():
                rec["settings"][key] = add_count(rec["settings"].get(key), amount)
            self._put_record(rec)
            return dict(rec["settings"])

    # usage -----------------------------------------------------------------------------
    def add_usage(
        self, collection: str, rows: Sequence[UsageRow], *, settings: Mapping[str, Any] | None = None
    ) -> None:
        """One metadata entity per usage key, summed under the store's lock (Milvus has no
        transactions: the rows of one call, and the collection record carrying
        ``settings``, are upserted together in one request)."""
        if not rows and not settings:
            return
        with self._lock:
            rec = self._record(collection)
            keys = {self._usage_key(rec, r): r for r in rows}
            stored = (
                self._call("get", self._client.get, self._meta, ids=list(keys), output_fields=["key", "body"])
                if keys else []
            )
            current = {s["key"]: UsageRow.model_validate_json(s["body"]) for s in stored}
            entries: list[tuple[str, str, str, Mapping[str, Any]]] = []
            for key, row in keys.items():
                seen = current.get(key)
                if seen is not None:
                    counts = [a + b for a, b in zip(usage_counts(seen), usage_counts(row), strict=True)]
                    row = row.model_copy(update=dict(zip(USAGE_COUNTS, counts, strict=True)))
                entries.append((key, "usage", rec["id"], row.model_dump(mode="json")))
            if settings:
                rec["settings"].update(settings)
                entries.append((f"c/{rec['name']}", "collection", rec["id"], rec))
            self._put_metas(entries)

    def usage(self, collection: str, *, since: str | None = None) -> list[UsageRow]:
        rec = self._record(collection)
        expr = f'kind == "usage" and coll == {literal(rec["id"])}'
        rows = [UsageRow.model_validate_json(r["body"]) for r in self._scan(self._meta, expr, ["body"])]
        rows = [r for r in rows if r.bucket >= (since or "")]
        return sorted(rows, key=lambda r: (*usage_key(r),))

    @staticmethod
    def _usage_key(rec: Mapping[str, Any], row: UsageRow) -> str:
        return "u/" + "/".join(str(part) for part in (rec["id"], *usage_key(row)))

    # writes ----------------------------------------------------------------------------
    def chunk_states(self, collection: str, source_id: str) -> dict[str, ChunkState]:
        rec = self._record(collection)
        rows = self._existing(rec, source_id, ["content_hash", "has_vector"])
        return {cid: ChunkState(cid, r["content_hash"], bool(r["has_vector"])) for cid, r in rows.items()}

    def vectors_by_hash(self, collection: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        rec = self._record(collection)
        found: dict[str, np.ndarray] = {}
        if rec.get("layout") is None:
            return found
        unique = list(dict.fromkeys(hashes))
        base = and_(visible(rec["committed"]), "has_vector == true")
        for i in range(0, len(unique), _BATCH):
            expr = and_(base, in_expr("content_hash", unique[i : i + _BATCH]))
            for row in self._query(rec["layout"]["name"], expr, ["content_hash", "vector"]):
                found.setdefault(row["content_hash"], np.asarray(row["vector"], dtype=np.float32))
        return {h: found[h] for h in unique if h in found}

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
        with self._lock:
            rec = self._record(collection)
            key = self._source_key(rec, source_id)
            if claim and rec.get("layout") is not None:
                owner = (self._get_source(rec, source_id) or {}).get("root", "")
                if owner and owner != root:
                    return ReplaceCounts(conflict=str(owner))
            if rec.get("layout") is None and not chunks:
                return ReplaceCounts()
            dim = next((len(i.vector) for i in chunks if i.vector is not None), None)
            rec = self._ensure_layout(rec, dim)
            self._repair(rec)
            self._settle(rec)
            existing = self._existing(rec, source_id)
            version = int(rec["next_txn"])
            changes, gone, counts = replace_changes(existing, chunks, lambda row: str(row["content_hash"]))
            new_rows: list[dict[str, Any]] = []
            final: list[dict[str, Any]] = []  # the source's live rows once this write is done
            dead: list[dict[str, Any]] = []
            for change in changes:
                item, old, vector = change.item, change.kept, change.item.vector
                if old is not None:
                    if vector is None and old["has_vector"]:
                        vector = old["vector"]  # no new vector given: keep the stored one
                    row = self._row(rec, item, scope, version, vector)
                    same = all(old[f] == row[f] for f in ("scope", "ordinal", "origin", "metadata"))
                    if same and old["has_vector"] == row["has_vector"] and _same_vector(old, row):
                        final.append(old)
                        continue
                    dead.append(old)
                elif change.replaced is not None:
                    dead.append(change.replaced)
                row = self._row(rec, item, scope, version, vector)
                new_rows.append(row)
                final.append(row)
            dead.extend(gone)
            previous = self._get_source(rec, source_id)
            written = (previous or {}).get("version", 0)
            delta = {
                "chunks": len(final) - len(existing),
                "without": sum(not r["has_vector"] for r in final) - sum(not r["has_vector"] for r in existing.values()),
                "sources": int(bool(chunks)) - int(previous is not None),
            }
            if new_rows or dead:
                self._commit(rec, version, source_id, new_rows, dead, empty=not chunks, delta=delta)
                written = version
            elif delta["sources"]:
                self._add_totals(rec, delta)
                self._put_record(rec)
            if chunks:
                self._put_source(
                    rec, source_id=source_id, scope=scope, root=root, indexed_at=_now(),
                    version=written, rows=final,
                )
            else:
                self._call("delete", self._client.delete, self._meta, ids=[key])
            return counts

    def delete_source(self, collection: str, source_id: str) -> int:
        return self.replace_source(collection, source_id, "", []).deleted

    def set_vectors(
        self, collection: str, vectors: Mapping[str, np.ndarray], *, usage: Sequence[UsageRow] = ()
    ) -> int:
        """Milvus has no transactions: ``usage`` is written before the vectors, under the lock."""
        self.add_usage(collection, usage)
        if not vectors:
            self._record(collection)
            return 0
        with self._lock:
            rec = self._record(collection)
            if rec.get("layout") is None:
                return 0
            rec = self._ensure_layout(rec, len(next(iter(vectors.values()))))
            name, live = rec["layout"]["name"], visible(rec["committed"])
            ids = list(vectors)
            touched: set[str] = set()
            count = gained = 0
            for i in range(0, len(ids), _BATCH):
                expr = and_(live, in_expr("chunk_id", ids[i : i + _BATCH]))
                rows = self._query(name, expr, CHUNK_FIELDS)
                for row in rows:
                    vec = [float(x) for x in np.asarray(vectors[row["chunk_id"]], dtype=np.float32)]
                    if len(vec) != rec["layout"]["dim"]:
                        raise StoreError(
                            f"vector for {row['chunk_id']!r} has {len(vec)} dimensions; "
                            f"collection {collection!r} holds {rec['layout']['dim']}-d vectors"
                        )
                    gained += not row["has_vector"]
                    row.update(vector=vec, has_vector=True)
                    touched.add(row["source_id"])
                if rows:
                    self._call("upsert", self._client.upsert, name, rows)
                count += len(rows)
            for source_id in touched:
                self._recount(rec, source_id)
            if gained:
                self._add_totals(rec, {"without": -gained})
                self._put_record(rec)
            return count

    def mark_scope_indexed(self, collection: str, scope: str, at: str) -> None:
        with self._lock:
            rec = self._record(collection)
            rec["scopes"][scope] = at
            self._put_record(rec)
            if rec.get("layout") is not None:
                # The end of an index run: seal what it wrote, so searches read indexed
                # segments (milvus-lite rebuilds its in-memory buffer's BM25 index per search).
                self._call("flush", self._client.flush, rec["layout"]["name"])

    # backfill claims -------------------------------------------------------------------
    # Kept in one metadata entity per collection ({chunk id: [owner, expires]}), changed
    # under the store's lock: Milvus has no multi-entity transaction, so claims are
    # atomic between the threads of a process (milvus-lite's file is opened by one
    # process); two processes backfilling one collection on a Milvus server is covered
    # only by the single-writer rule of this store.
    def _claims_key(self, rec: Mapping[str, Any]) -> str:
        return f"k/{rec['id']}"

    def _get_claims(self, rec: Mapping[str, Any]) -> dict[str, list[Any]]:
        rows = self._call(
            "get", self._client.get, self._meta, ids=[self._claims_key(rec)], output_fields=["body"]
        )
        return dict(json.loads(rows[0]["body"]).get("claims", {})) if rows else {}

    def _put_claims(self, rec: Mapping[str, Any], claims: Mapping[str, list[Any]]) -> None:
        self._put_meta(self._claims_key(rec), "claims", rec["id"], {"claims": dict(claims)})

    def claim_without_vector(
        self, collection: str, *, owner: str, limit: int, lease_seconds: float
    ) -> list[tuple[str, str]]:
        with self._lock:
            rec = self._record(collection)
            now = time.time()
            claims = {
                k: v for k, v in self._get_claims(rec).items() if v[1] > now and v[0] != owner
            }
            todo = [
                (cid, text)
                for cid, text in self.chunks_without_vector(collection, limit=limit + len(claims))
                if cid not in claims
            ][:limit]
            for cid, _ in todo:
                claims[cid] = [owner, now + lease_seconds]
            self._put_claims(rec, claims)
            return todo

    def release_claims(self, collection: str, owner: str) -> int:
        with self._lock:
            rec = self._record(collection)
            claims = self._get_claims(rec)
            kept = {k: v for k, v in claims.items() if v[0] != owner}
            if len(kept) != len(claims):
                self._put_claims(rec, kept)
            return len(claims) - len(kept)

    def claim_owners(self, collection: str) -> dict[str, int]:
        with self._lock:
            rec = self._record(collection)
            now = time.time()
            live = {k: v[0] for k, v in self._get_claims(rec).items() if v[1] > now}
            pending = self.without_vector(collection, list(live))
            counts: dict[str, int] = {}
            for cid, who in live.items():
                if cid in pending:
                    counts[who] = counts.get(who, 0) + 1
            return dict(sorted(counts.items()))

    def without_vector(self, collection: str, chunk_ids: Sequence[str]) -> set[str]:
        rec = self._record(collection)
        if rec.get("layout") is None or not chunk_ids:
            return set()
        name, live = rec["layout"]["name"], visible(rec["committed"])
        ids = list(dict.fromkeys(chunk_ids))
        out: set[str] = set()
        for i in range(0, len(ids), _BATCH):
            expr = and_(live, "has_vector == false", in_expr("chunk_id", ids[i : i + _BATCH]))
            out.update(r["chunk_id"] for r in self._query(name, expr, ["chunk_id"]))
        return out

    # reads -----------------------------------------------------------------------------
    def list_sources(
        self, collection: str, scope: str | None = None, *, root: str | None = None
    ) -> list[SourceInfo]:
        rec = self._record(collection)
        rows = [
            s for s in self._sources(rec)
            if (scope is None or s["scope"] == scope) and (root is None or s["root"] == root)
        ]
        rows.sort(key=lambda s: s["source_id"])
        return [
            SourceInfo(s["source_id"], s["scope"], s["chunks"], s["without"], s["indexed_at"], s["root"])
            for s in rows
        ]

    def scopes(self, collection: str) -> list[ScopeInfo]:
        rec = self._record(collection)
        totals: dict[str, list[int]] = {}
        for s in self._sources(rec):
            t = totals.setdefault(s["scope"], [0, 0, 0])
            t[0] += 1
            t[1] += s["chunks"]
            t[2] += s["without"]
        return [
            ScopeInfo(scope, t[0], t[1], t[2], rec["scopes"].get(scope))
            for scope, t in sorted(totals.items())
        ]

    def chunks_without_vector(
        self, collection: str, *, limit: int | None = None
    ) -> list[tuple[str, str]]:
        rec = self._record(collection)
        if rec.get("layout") is None:
            return []
        expr = and_(visible(rec["committed"]), "has_vector == false")
        fields = ["chunk_id", "content", "born", "source_id", "ordinal"]
        name = rec["layout"]["name"]
        rows = list(self._scan(name, expr, fields)) if limit is None else self._query(name, expr, fields, limit=limit)
        rows.sort(key=lambda r: (r["born"], r["source_id"], r["ordinal"]))
        return [(r["chunk_id"], r["content"]) for r in rows]

    def get_chunks(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        rec = self._record(collection)
        out: dict[str, Chunk] = {}
        if rec.get("layout") is None:
            return out
        ids = list(dict.fromkeys(chunk_ids))
        fields = ["chunk_id", "source_id", "scope", "ordinal", "content", "content_hash", "origin", "metadata"]
        for i in range(0, len(ids), _BATCH):
            expr = and_(visible(rec["committed"]), in_expr("chunk_id", ids[i : i + _BATCH]))
            for r in self._query(rec["layout"]["name"], expr, fields):
                out[r["chunk_id"]] = Chunk(
                    id=r["chunk_id"], source_id=r["source_id"], scope=r["scope"],
                    ordinal=r["ordinal"], content=r["content"], content_hash=r["content_hash"],
                    origin=_ORIGIN.validate_json(r["origin"]), metadata=r["metadata"] or {},
                )
        return {i: out[i] for i in ids if i in out}

    def chunk_ids(self, collection: str, source_id: str | None = None) -> list[str]:
        rec = self._record(collection)
        if rec.get("layout") is None:
            return []
        name, live = rec["layout"]["name"], visible(rec["committed"])
        fields = ["chunk_id", "born", "source_id", "ordinal"]
        if source_id is None:
            rows = list(self._scan(name, live, fields))
        else:
            rows = list(self._existing(rec, source_id, fields).values())
        rows.sort(key=lambda r: (r["ordinal"],) if source_id else (r["born"], r["source_id"], r["ordinal"]))
        return [r["chunk_id"] for r in rows]

    # the two arms ----------------------------------------------------------------------
    def lexical_search(
        self,
        collection: str,
        exact: Sequence[str],
        stems: Sequence[str],
        *,
        limit: int | None,
        filters: Filters | None = None,
        params: BM25Params | None = None,
    ) -> list[tuple[str, float]]:
        rec = self._record(collection)
        params = params or BM25Params()
        stored = rec["bm25"]
        if (params.k1, params.b) != (stored["k1"], stored["b"]):
            raise ConfigError(
                f"BM25 k1={params.k1}, b={params.b} asked of Milvus collection {collection!r}, "
                f"whose BM25 indexes were built with k1={stored['k1']}, b={stored['b']}: "
                "Milvus fixes them at index time"
            )
        if rec.get("layout") is None or (limit is not None and limit <= 0):
            return []
        name = rec["layout"]["name"]
        base = and_(visible(rec["committed"]), filter_expr(filters))
        arms = []
        for field, terms, weight in (("exact", exact, params.exact_weight), ("stems", stems, params.stems_weight)):
            terms = list(dict.fromkeys(terms))
            if weight and terms:
                arms.append((LEXICAL_FIELDS[field][1], encode_tokens(terms), weight))
        # Each field's unfiltered top list only (a search filtered to given chunk ids
        # scores BM25 over that subset); deeper until the threshold stop proves the top
        # ``limit`` exact (see plait.stores.field_topk).
        fetch = MAX_TOPK if limit is None else min(2 * limit, MAX_TOPK)
        while True:
            lists = []
            for sparse, text, weight in arms:
                hits = self._search(name, text, sparse, fetch, base, {"metric_type": "BM25"})
                lists.append(FieldList({c: abs(d) for c, d in hits}, weight, len(hits) < fetch))
            merged = merge_fields(lists, limit)
            if merged.exact or fetch >= MAX_TOPK:
                break
            fetch = min(4 * fetch, MAX_TOPK)
        if not merged.exact:
            logger.warning(
                "Milvus lexical search in %r: a field has more than %d matches; totals of "
                "chunks beyond a field's top %d leave that field out", collection, MAX_TOPK, MAX_TOPK,
            )
        ranked = merged.ranked
        return ranked if limit is None else ranked[:limit]

    def vector_search(
        self,
        collection: str,
        vector: np.ndarray,
        *,
        limit: int | None,
        filters: Filters | None = None,
    ) -> list[tuple[str, float]]:
        rec = self._record(collection)
        layout = rec.get("layout")
        if layout is None or (limit is not None and limit <= 0):
            return []
        query = np.asarray(vector, dtype=np.float32)
        live = visible(rec["committed"])
        if query.shape[0] != layout["dim"]:
            if not self._count(layout["name"], and_(live, "has_vector == true")):
                return []
            raise StoreError(
                f"query vector has {query.shape[0]} dimensions, collection {collection!r} "
                f"holds {layout['dim']}-d vectors"
            )
        fetch = MAX_TOPK if limit is None else min(limit, MAX_TOPK)
        expr = and_(live, "has_vector == true", filter_expr(filters))
        params = {"metric_type": "COSINE", "params": {"ef": max(fetch, 64)}}
        hits = self._search(layout["name"], [float(x) for x in query], "vector", fetch, expr, params)
        return sorted(hits, key=lambda kv: (-kv[1], kv[0]))

    def records(self) -> Records:
        """Refinery runs and cards, API keys in a SQLite sidecar file (``records_path``;
        Milvus has no transactions); the former ``./.plait/`` side files are imported, and
        so, once, is a sidecar named from the path or address as typed
        (``spelled_records_path``; for a server only the runs and cards of collections
        this store holds: that name was shared by the server's databases)."""
        with self._lock:
            if self._records is None:
                records = open_records_file(self.records_path, legacy_dir=Path(".plait"))
                names = [c.name for c in self.list_collections()]
                import_side_files(records, collections=names, once=True)
                spelled = self.spelled_records_path
                if spelled is not None and spelled.is_file() and not spelled.samefile(self.records_path):
                    import_records_file(records, spelled, collections=None if self._lite else names)
                self._records = records
            return self._records

    def ping(self) -> None:
        """Readiness: the server (or milvus-lite file) lists its collections."""
        self._call("list_collections", self._client.list_collections)

    def close(self) -> None:
        with self._lock:
            if self._records is not None:
                self._records.close()
                self._records = None
            self._call("close", self._client.close)


def _same_vector(old: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether a rewritten row would store the vector the old version already holds."""
    if not old["has_vector"] or not row["has_vector"]:
        return bool(old["has_vector"] == row["has_vector"])
    return bool(
        np.array_equal(np.asarray(old["vector"], np.float32), np.asarray(row["vector"], np.float32))
    )
