"""Plumbing of the Milvus store: the client, the metadata entities, the chunk layout.

See :mod:`plait.stores.milvus` for the design (versions, visibility, the two arms) and
:mod:`plait.stores.milvus_schema` for the collections' schemas.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import TypeAdapter

from plait.config import Settings
from plait.errors import ConfigError, NotFoundError, StoreError, StoreUnavailableError
from plait.store_identity import milvus_address
from plait.stores.base import (
    BM25Params,
    StoredChunk,
)
from plait.stores.milvus_schema import (
    CHUNK_FIELDS,
    MAX_TEXT,
    check_text,
    chunk_index_params,
    chunk_schema,
    encode_tokens,
    json_body,
    literal,
    meta_schema,
)
from plait.stores.records import SqliteRecords
from plait.types import CollectionInfo, Origin

__all__ = ["MAX_TOPK", "MilvusBase", "and_", "visible"]

_ORIGIN = TypeAdapter(Origin)
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_TOPK = 16384
"""Milvus's largest ``limit`` for one search; ``limit=None`` ranks at most this many."""
_BATCH = 500
_PLACEHOLDER_DIM = 2
"""Dimension of a collection's first layout while no vector or dimension is known yet."""


def _lite_path(uri: str) -> Path:
    """The absolute path of a milvus-lite file, symlinks followed where that still names
    a ``.db`` (milvus-lite recognises its files by the suffix)."""
    real = os.path.realpath(uri)
    return Path(real if real.endswith(".db") else os.path.abspath(uri))


def _sidecar(uri: str, prefix: str) -> Path:
    """The default records file of a Milvus store (:mod:`plait.stores.records`):
    ``<file>.<prefix>.records.sqlite`` next to a milvus-lite file, named from the file's
    resolved path (:func:`_lite_path`: however the path was spelt — relative, absolute,
    through a symlink — one file, one sidecar, whatever folder the records are opened
    from); for a server, ``./.plait/milvus-<host>-<port>-<prefix>.records.sqlite`` named
    from the address as the copy's same-store guard normalises it
    (:func:`plait.store_identity.milvus_address`: scheme and case ignored, a trailing dot
    or slash dropped, the default port filled in — 443 for ``https``, else 19530), with
    ``.<database>`` before ``.records`` for a database other than ``default``: one server
    and database, one sidecar, however the address is spelt."""
    if uri.endswith(".db"):
        return Path(f"{_lite_path(uri)}.{prefix}.records.sqlite")
    host, port, database = milvus_address(uri)
    db = "" if database == "default" else f".{database}"
    return Path(".plait") / f"milvus-{host}-{port}-{prefix}{db}.records.sqlite"


def _spelled_sidecar(uri: str, prefix: str) -> Path:
    """The sidecar as plait named it before from the address or path as typed (absolute
    now): a milvus-lite path not resolved; a server's host as ``urlsplit`` reads it
    (``host:port`` without a scheme read as ``localhost``), its port or 19530, no database."""
    if uri.endswith(".db"):
        return Path(os.path.abspath(f"{uri}.{prefix}.records.sqlite"))
    where = urlsplit(uri)
    try:
        port = where.port
    except ValueError:  # not a number: that name could not be made before either
        port = None
    name = f"milvus-{where.hostname or 'localhost'}-{port or 19530}-{prefix}.records.sqlite"
    return Path(os.path.abspath(Path(".plait") / name))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def visible(committed: int) -> str:
    return f"born <= {int(committed)} and (died == 0 or died > {int(committed)})"


def and_(*parts: str) -> str:
    return " and ".join(f"({p})" for p in parts if p)


class MilvusBase:
    """A :class:`~plait.stores.base.Store` on Milvus (``uri``: a ``.db`` path for
    milvus-lite, or ``http(s)://host:19530`` for a server; ``token`` for auth).

    ``prefix`` names the store's Milvus collections (``{prefix}_meta``, …), so several
    stores can share one Milvus database. ``bm25`` fixes k1 and b of the BM25 indexes of
    collections this store creates (Milvus applies them at index time). On a cluster,
    ``shards`` spreads each new chunk collection's writes over that many shards, and
    ``replicas`` loads every collection on that many query-node groups (more read
    throughput, survives a query node's loss); both stay 1 on milvus-lite.
    """

    def __init__(
        self,
        uri: str,
        *,
        token: str | None = None,
        prefix: str = "plait",
        timeout: float | None = 60.0,
        bm25: BM25Params | None = None,
        shards: int = 1,
        replicas: int = 1,
        records: str | Path | None = None,
    ) -> None:
        for option, value in (("shards", shards), ("replicas", replicas)):
            if not 1 <= value <= 64:
                raise ConfigError(f"Milvus {option}={value} is out of range: use 1..64")
        self.shards, self.replicas = shards, replicas
        if not _PREFIX.fullmatch(prefix):
            raise ConfigError(
                f"Milvus collection prefix {prefix!r} is not allowed: use a letter or _ "
                "then letters, digits or _ (at most 64)"
            )
        try:
            from pymilvus import MilvusClient, MilvusException  # type: ignore[import-untyped]

            if uri.endswith(".db"):
                import milvus_lite  # type: ignore[import-untyped]  # noqa: F401 - pymilvus starts it for .db paths
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError(
                f"the Milvus store needs pymilvus and milvus-lite ({exc}): pip install 'plait[milvus]'"
            ) from exc
        self._error: type[Exception] = MilvusException
        self.uri = uri
        self.records_path = Path(records) if records is not None else _sidecar(uri, prefix)
        #: The sidecar as plait named it before from the path or address as typed (made
        #: absolute now): imported once into ``records_path`` when it is another file
        #: (nothing lost).
        self.spelled_records_path = _spelled_sidecar(uri, prefix) if records is None else None
        self._lite = uri.endswith(".db")
        self.lite_path = _lite_path(uri) if self._lite else None
        """The milvus-lite file, resolved when the store opened (the working folder then,
        symlinks followed): what the same-store check compares; None for a server."""
        try:
            client_uri = str(self.lite_path) if self.lite_path is not None else uri
            # one spelling for milvus-lite, which keys its in-process server on the path
            # text: a second spelling of an open file would not open (its folder is locked)
            self._client = MilvusClient(uri=client_uri, token=token or "", timeout=timeout)
        except Exception as exc:  # pymilvus raises several types for a dead endpoint
            raise StoreUnavailableError(f"cannot reach Milvus at {uri}: {exc}") from exc
        self._bm25 = bm25 or BM25Params()
        self._meta = f"{prefix}_meta"
        self._prefix = prefix
        self._lock = threading.RLock()
        self._loaded: set[str] = set()
        self._records: SqliteRecords | None = None
        self._ensure_meta()

    @classmethod
    def from_url(cls, url: str, *, env: Mapping[str, str] | None = None) -> Self:
        """Open a store from a plait store URL.

        ``milvus:///abs/path.db`` or ``milvus://rel/path.db`` — milvus-lite, in-process
        (the ``.db`` path is its data folder); ``http(s)://host:19530`` — a Milvus server,
        with a token from ``?token=`` or ``PLAIT_MILVUS_TOKEN`` (``user:password`` or an
        API key), and ``?shards=N&replicas=M`` for new collections. ``?prefix=`` names
        the store's Milvus collections (default ``plait``).
        """
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        unknown = sorted(set(query) - {"token", "prefix", "shards", "replicas", "records"})
        if unknown:
            raise ConfigError(
                f"unknown Milvus URL option(s) {unknown} in {url!r}: use token, prefix, shards, replicas or records"
            )
        records = query.get("records")
        prefix = query.get("prefix", "plait")
        sizes = {"shards": 1, "replicas": 1}
        for option in ("shards", "replicas"):
            if option in query:
                try:
                    sizes[option] = int(query[option])
                except ValueError:
                    raise ConfigError(f"Milvus URL option {option}={query[option]!r} is not a whole number") from None
        if parts.scheme == "milvus":
            path = url[len("milvus://") :].split("?", 1)[0]
            path = str(Path(path).expanduser()) if path.startswith("~") else path
            if not path.endswith(".db"):
                raise ConfigError(
                    f"milvus-lite path {path!r} must end in .db (e.g. milvus:///var/plait/plait.db)"
                )
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            return cls(path, prefix=prefix, records=records)
        if parts.scheme not in ("http", "https"):
            raise ConfigError(f"unknown Milvus URL {url!r}: use milvus:///path.db or http(s)://host:19530")
        settings = Settings.resolve() if env is None else Settings.from_env(env)
        token = query.get("token") or settings.secret("milvus_token") or None
        server = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        return cls(
            server, token=token, prefix=prefix, shards=sizes["shards"], replicas=sizes["replicas"], records=records
        )

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._error as exc:
            raise StoreError(f"Milvus {what} failed: {exc}") from exc

    def _ensure_meta(self) -> None:
        c = self._client
        if not self._call("has_collection", c.has_collection, self._meta):
            params = c.prepare_index_params()
            params.add_index(field_name="dummy", index_type="AUTOINDEX", metric_type="COSINE")
            self._create(self._meta, meta_schema(), params)
        self._load(self._meta)

    def _create(self, name: str, schema: Any, params: Any, *, shards: int = 1) -> None:
        """Create a collection, then its indexes without waiting on them (a new, empty
        collection's indexes are ready at once; ``load`` waits for them on a server)."""
        c = self._client
        extra = {"shards_num": shards} if shards > 1 else {}
        self._call(
            "create_collection", c.create_collection, name, schema=schema, consistency_level="Strong", **extra
        )
        self._call("create_index", c.create_index, name, params, sync=False)

    def _load(self, name: str) -> None:
        if name not in self._loaded:
            extra = {"replica_number": self.replicas} if self.replicas > 1 else {}
            self._call("load_collection", self._client.load_collection, name, **extra)
            self._loaded.add(name)

    def _query(self, name: str, expr: str, fields: Sequence[str], *, limit: int | None = None) -> list[dict[str, Any]]:
        self._load(name)
        kwargs: dict[str, Any] = {"filter": expr, "output_fields": list(fields)}
        if limit is not None:
            kwargs["limit"] = limit
        return list(self._call("query", self._client.query, name, **kwargs))

    def _scan(self, name: str, expr: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
        """Every entity matching ``expr``: in pages through a query iterator on a server
        (no single-query result cap), in one query on milvus-lite (whose engine has no
        timestamp service for iterators, and no result cap either)."""
        if self._lite:
            yield from self._query(name, expr, fields)
            return
        self._load(name)
        it = self._call(
            "query_iterator", self._client.query_iterator, name, batch_size=1000, filter=expr,
            output_fields=list(fields),
        )
        try:
            while batch := self._call("query_iterator", it.next):
                yield from batch
        finally:
            it.close()

    def _count(self, name: str, expr: str) -> int:
        rows = self._query(name, expr, ["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def _put_meta(self, key: str, kind: str, coll: str, body: Mapping[str, Any]) -> None:
        self._put_metas([(key, kind, coll, body)])

    def _put_metas(self, entries: Sequence[tuple[str, str, str, Mapping[str, Any]]]) -> None:
        """Metadata entities ``(key, kind, coll, body)`` in one upsert request."""
        rows = [
            {"key": key, "kind": kind, "coll": coll, "body": json_body(body), "dummy": [1.0, 0.0]}
            for key, kind, coll, body in entries
        ]
        if rows:
            self._call("upsert", self._client.upsert, self._meta, rows)

    def _get_record(self, name: str) -> dict[str, Any] | None:
        rows = self._call("get", self._client.get, self._meta, ids=[f"c/{name}"], output_fields=["body"])
        return json.loads(rows[0]["body"]) if rows else None

    def _record(self, name: str) -> dict[str, Any]:
        rec = self._get_record(name)
        if rec is None:
            raise NotFoundError(f"collection {name!r} does not exist")
        return rec

    def _put_record(self, rec: Mapping[str, Any]) -> None:
        self._put_meta(f"c/{rec['name']}", "collection", rec["id"], rec)

    def _source_key(self, rec: Mapping[str, Any], source_id: str) -> str:
        return f"s/{rec['id']}/{source_id}"

    def _sources(self, rec: Mapping[str, Any]) -> list[dict[str, Any]]:
        expr = f'kind == "source" and coll == {literal(rec["id"])}'
        return [json.loads(r["body"]) for r in self._scan(self._meta, expr, ["body"])]

    def _info(self, rec: Mapping[str, Any]) -> CollectionInfo:
        """The collection's figures, from its record alone: the totals are updated in the
        same entity write that commits each version, so they match what reads see."""
        totals = rec.get("totals") or {}
        return CollectionInfo(
            name=rec["name"],
            embedder_provider=rec.get("provider"),
            embedder_model=rec.get("model"),
            dimension=rec.get("dimension"),
            chunks=totals.get("chunks", 0),
            chunks_without_vector=totals.get("without", 0),
            sources=totals.get("sources", 0),
            created_at=rec.get("created_at"),
            last_indexed_at=max(rec["scopes"].values()) if rec.get("scopes") else None,
        )

    def _create_layout(self, rec: dict[str, Any], dim: int) -> dict[str, Any]:
        name = f"{self._prefix}_{rec['id']}_d{dim}"
        c = self._client
        if not self._call("has_collection", c.has_collection, name):
            bm25 = rec["bm25"]
            self._create(
                name, chunk_schema(dim), chunk_index_params(c, k1=bm25["k1"], b=bm25["b"]), shards=self.shards
            )
        self._load(name)
        return {"name": name, "dim": dim}

    def _ensure_layout(self, rec: dict[str, Any], dim: int | None) -> dict[str, Any]:
        """Make sure the chunk collection exists and holds ``dim``-d vectors.

        A layout with no stored vector yet (created before any vector or dimension was
        known) is rebuilt at the new dimension: its entities are copied with a
        placeholder vector, the record is switched in one write, the old one dropped.
        """
        layout = rec.get("layout")
        if layout is None:
            rec["layout"] = self._create_layout(rec, dim or rec.get("dimension") or _PLACEHOLDER_DIM)
            self._put_record(rec)
            return rec
        self._load(layout["name"])
        if dim is None or dim == layout["dim"]:
            return rec
        live = visible(rec["committed"])
        if self._count(layout["name"], and_(live, "has_vector == true")):
            raise StoreError(
                f"collection {rec['name']!r} holds {layout['dim']}-d vectors; "
                f"cannot store {dim}-d vectors beside them"
            )
        new = self._create_layout(rec, dim)
        placeholder = self._placeholder(dim)
        batch: list[dict[str, Any]] = []
        for row in self._scan(layout["name"], live, CHUNK_FIELDS):
            batch.append({**row, "vector": placeholder, "died": 0})
            if len(batch) >= _BATCH:
                self._call("insert", self._client.insert, new["name"], batch)
                batch = []
        if batch:
            self._call("insert", self._client.insert, new["name"], batch)
        rec["layout"] = new
        self._put_record(rec)
        self._call("drop_collection", self._client.drop_collection, layout["name"])
        self._loaded.discard(layout["name"])
        return rec

    @staticmethod
    def _placeholder(dim: int) -> list[float]:
        vec = [0.0] * dim
        vec[0] = 1.0
        return vec

    def _repair(self, rec: dict[str, Any]) -> None:
        """Undo a write that reserved a number but never committed (its rows are invisible)."""
        committed = int(rec["committed"])
        if rec["next_txn"] <= committed + 1 or rec.get("layout") is None:
            return
        name = rec["layout"]["name"]
        self._call("delete", self._client.delete, name, filter=f"born > {committed}")
        revive = [{**r, "died": 0} for r in self._query(name, f"died > {committed}", CHUNK_FIELDS)]
        for i in range(0, len(revive), _BATCH):
            self._call("upsert", self._client.upsert, name, revive[i : i + _BATCH])
        rec["next_txn"] = committed + 1

    def _row(self, rec: Mapping[str, Any], item: StoredChunk, scope: str, born: int, vector: Any) -> dict[str, Any]:
        chunk = item.chunk
        dim = rec["layout"]["dim"]
        if vector is not None and len(vector) != dim:
            raise StoreError(
                f"chunk {chunk.id!r} has a {len(vector)}-d vector; collection "
                f"{rec['name']!r} holds {dim}-d vectors"
            )
        return {
            "pk": f"{born}/{chunk.id}",
            "chunk_id": chunk.id,
            "source_id": chunk.source_id,
            "scope": scope,
            "ordinal": chunk.ordinal,
            "content": check_text(chunk.content, f"chunk {chunk.id!r}"),
            "content_hash": chunk.content_hash,
            "origin": chunk.origin.model_dump_json(by_alias=True),
            "metadata": dict(chunk.metadata),
            "born": born,
            "died": 0,
            "has_vector": vector is not None,
            "vector": self._placeholder(dim) if vector is None else [float(x) for x in vector],
            "exact_text": check_text(encode_tokens(item.exact), f"exact tokens of {chunk.id!r}"),
            "stems_text": check_text(encode_tokens(item.stems), f"stemmed tokens of {chunk.id!r}"),
        }

    def _commit(
        self, rec: dict[str, Any], version: int, source_id: str,
        new_rows: list[dict[str, Any]], dead: list[dict[str, Any]], *, empty: bool,
        delta: Mapping[str, int],
    ) -> None:
        """Reserve ``version``, write it invisibly, publish it in one entity write, clean up.

        The record also notes which source the write is for (``writing``), so that a
        writer that dies after the commit but before the source's own entity is updated
        is noticed, and that entity rebuilt, by the next write (:meth:`_settle`).
        """
        name = rec["layout"]["name"]
        rec["next_txn"] = version + 1
        rec["writing"] = {"source": source_id, "version": version, "empty": empty}
        self._put_record(rec)
        for i in range(0, len(new_rows), _BATCH):
            self._call("insert", self._client.insert, name, new_rows[i : i + _BATCH])
        marked = [{f: r[f] for f in CHUNK_FIELDS} | {"died": version} for r in dead]
        for i in range(0, len(marked), _BATCH):
            self._call("upsert", self._client.upsert, name, marked[i : i + _BATCH])
        rec["committed"] = version
        self._add_totals(rec, delta)
        self._put_record(rec)
        if dead:
            self._call("delete", self._client.delete, name, filter=f"died != 0 and died <= {version}")

    @staticmethod
    def _add_totals(rec: dict[str, Any], delta: Mapping[str, int]) -> None:
        totals = rec.setdefault("totals", {"chunks": 0, "without": 0, "sources": 0})
        for key, value in delta.items():
            totals[key] = totals.get(key, 0) + value

    # source entities -------------------------------------------------------------
    def _get_source(self, rec: Mapping[str, Any], source_id: str) -> dict[str, Any] | None:
        key = self._source_key(rec, source_id)
        rows = self._call("get", self._client.get, self._meta, ids=[key], output_fields=["body"])
        return json.loads(rows[0]["body"]) if rows else None

    def _put_source(
        self, rec: Mapping[str, Any], *, source_id: str, scope: str, root: str, indexed_at: str,
        version: int, rows: Sequence[Mapping[str, Any]],
    ) -> None:
        """Write a source's entity: its figures and the primary keys of its live chunks
        (reads of one source then fetch by key, the cheapest Milvus read)."""
        pks = [r["pk"] for r in rows]
        body = {
            "source_id": source_id, "scope": scope, "indexed_at": indexed_at, "root": root,
            "chunks": len(rows), "without": sum(not r["has_vector"] for r in rows),
            "version": version, "pks": pks,
        }
        if len(json.dumps(body, ensure_ascii=False).encode("utf-8")) > MAX_TEXT:
            body["pks"] = None  # too many chunks to list: reads fall back to a query
        self._put_meta(self._source_key(rec, source_id), "source", rec["id"], body)

    def _existing(self, rec: Mapping[str, Any], source_id: str, fields: Sequence[str] = CHUNK_FIELDS) -> dict[str, dict[str, Any]]:
        """The source's visible chunk entities by chunk id."""
        if rec.get("layout") is None:
            return {}
        name, committed = rec["layout"]["name"], int(rec["committed"])
        wanted = list(dict.fromkeys([*fields, "chunk_id", "born", "died"]))
        body = self._get_source(rec, source_id)
        writing = rec.get("writing") or {}
        settled = writing.get("source") != source_id or (
            writing.get("empty") if body is None else body.get("version") == writing.get("version")
        )
        self._load(name)
        if settled and body is not None and body.get("pks") is not None:
            rows = self._call("get", self._client.get, name, ids=body["pks"], output_fields=wanted) if body["pks"] else []
        elif settled and body is None:
            rows = []
        else:
            expr = and_(visible(committed), f"source_id == {literal(source_id)}")
            rows = self._query(name, expr, wanted)
        return {
            r["chunk_id"]: r for r in rows
            if r["born"] <= committed and (r["died"] == 0 or r["died"] > committed)
        }

    def _settle(self, rec: dict[str, Any]) -> None:
        """Rebuild the entity of the source the last committed write was for, if that
        writer died before updating it (its version is older than the write's)."""
        writing = rec.get("writing")
        if not writing or writing["version"] > rec["committed"]:
            return
        source_id = writing["source"]
        body = self._get_source(rec, source_id)
        if (body is None and writing.get("empty")) or (body is not None and body.get("version") == writing["version"]):
            return
        expr = and_(visible(rec["committed"]), f"source_id == {literal(source_id)}")
        rows = self._query(rec["layout"]["name"], expr, ["pk", "chunk_id", "scope", "has_vector"])
        if rows:
            self._put_source(
                rec, source_id=source_id, scope=rows[0]["scope"], root=(body or {}).get("root", ""),
                indexed_at=(body or {}).get("indexed_at") or _now(), version=writing["version"], rows=rows,
            )
        else:
            self._call("delete", self._client.delete, self._meta, ids=[self._source_key(rec, source_id)])

    def _recount(self, rec: Mapping[str, Any], source_id: str) -> None:
        body = self._get_source(rec, source_id)
        if body is None:
            return
        rows = list(self._existing(rec, source_id, ["pk", "has_vector"]).values())
        self._put_source(
            rec, source_id=source_id, scope=body["scope"], root=body["root"],
            indexed_at=body["indexed_at"], version=body.get("version", 0), rows=rows,
        )

    def _search(self, name: str, data: Any, field: str, limit: int, expr: str, params: dict[str, Any]) -> list[tuple[str, float]]:
        self._load(name)
        hits = self._call(
            "search", self._client.search, name, data=[data], anns_field=field, limit=limit,
            filter=expr, output_fields=["chunk_id"], search_params=params,
        )
        return [(h["entity"]["chunk_id"], float(h["distance"])) for h in hits[0]]
