"""The one service every interface (Python, CLI, HTTP, MCP, web) is a thin adapter over.

>>> engine = Plait(store="./.plait/plait.db")          # doctest: +SKIP
>>> engine.index("examples/")                          # doctest: +SKIP
>>> engine.search("what does ERR-4012 mean").hits[0]   # doctest: +SKIP

The embedder of a collection is fixed when it is first indexed: later calls that name
no embedder use the recorded one, and naming another model is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.chunking import ChunkSettings
from plait.config import Settings
from plait.embeddings import DEFAULT_EMBEDDER, Embedder, make_embedder
from plait.errors import ConfigError, NotFoundError
from plait.ingest import Indexer, Progress, check_model
from plait.search import SearchRequest, SearchService
from plait.sources.base import Scan, SourceDocument
from plait.sources.folder import FolderSource
from plait.sources.jsonl import JsonlSource
from plait.stores import Store, open_store
from plait.types import CollectionInfo, IndexReport, SearchResult

__all__ = ["Plait"]

_NONE = "none"


class Plait:
    """Index sources into collections and search them.

    ``embedder`` is a name (``e5``, ``minilm``, ``ollama``, ``openai``, ``none``, ``fake``)
    or an :class:`Embedder`; None uses each collection's recorded embedder, or the
    default for a new collection.
    """

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        embedder: str | Embedder | None = None,
        chunk_settings: ChunkSettings | None = None,
    ) -> None:
        if store is None or isinstance(store, str):
            store = open_store(Settings.resolve(store=store).store)
        self.store: Store = store
        self._embedder_choice = embedder
        self._embedders: dict[str, Embedder | None] = {}
        self.chunk_settings = chunk_settings or ChunkSettings()
        self._search = SearchService(store)

    # embedders ------------------------------------------------------------------
    def _by_name(self, name: str) -> Embedder | None:
        if name not in self._embedders:
            self._embedders[name] = make_embedder(name)
        return self._embedders[name]

    def embedder_for(self, collection: str) -> tuple[Embedder | None, str]:
        """The embedder to use for a collection, and its name."""
        choice = self._embedder_choice
        if isinstance(choice, str):
            return self._by_name(choice), choice
        if choice is not None:
            return choice, choice.provider
        info = self.store.get_collection(collection)
        recorded = self.store.get_settings(collection).get("embedder") if info else None
        name = recorded or DEFAULT_EMBEDDER
        return self._by_name(name), name

    # indexing -------------------------------------------------------------------
    def _indexer(self, collection: str) -> tuple[Indexer, str]:
        embedder, name = self.embedder_for(collection)
        check_model(self.store, collection, embedder)
        return Indexer(self.store, embedder, chunk_settings=self.chunk_settings), name

    def _remember(self, collection: str, name: str, root: Mapping[str, Any] | None) -> None:
        settings = self.store.get_settings(collection)
        update: dict[str, Any] = {}
        if name != _NONE and not settings.get("embedder"):
            update["embedder"] = name
        if root is not None:
            roots = [r for r in settings.get("roots", []) if r != root]
            update["roots"] = [*roots, dict(root)]
        if update:
            self.store.update_settings(collection, update)

    @staticmethod
    def scan(path: str | Path, *, scope: str | None = None) -> tuple[Scan, dict[str, Any]]:
        """A source for a path: a ``.jsonl`` file of documents, else a folder."""
        target = Path(path)
        if target.is_file() and target.suffix == ".jsonl":
            source = JsonlSource(path=target, scope=scope or "docs")
            return source.scan(), {"kind": "jsonl", "path": str(target.resolve()), "scope": source.scope}
        folder = FolderSource(root=target)
        return folder.scan(), {"kind": "folder", "path": str(target.resolve())}

    def index(
        self,
        path: str | Path,
        *,
        collection: str = "default",
        scope: str | None = None,
        progress: Progress | None = None,
    ) -> IndexReport:
        """Index a folder of Markdown/text files or a ``.jsonl`` file of documents."""
        scan, root = self.scan(path, scope=scope)
        indexer, name = self._indexer(collection)
        self.store.ensure_collection(collection)
        self._remember(collection, name, root)
        return indexer.index(collection, scan, progress=progress)

    def index_documents(
        self,
        documents: Iterable[SourceDocument],
        *,
        collection: str = "default",
        progress: Progress | None = None,
    ) -> IndexReport:
        """Index documents built in code."""
        indexer, name = self._indexer(collection)
        self.store.ensure_collection(collection)
        self._remember(collection, name, None)
        return indexer.index(collection, documents, progress=progress)

    def reindex(self, *, collection: str = "default", progress: Progress | None = None) -> IndexReport:
        """Re-read every recorded root (unchanged chunks are not re-embedded) and backfill
        missing vectors."""
        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        indexer, _ = self._indexer(collection)
        roots = self.store.get_settings(collection).get("roots", [])
        report = None
        for root in roots:
            if root.get("kind") == "jsonl":
                scan = JsonlSource(path=Path(root["path"]), scope=root.get("scope", "docs")).scan()
            elif root.get("kind") == "folder":
                scan = FolderSource(root=Path(root["path"])).scan()
            else:
                raise ConfigError(f"unknown recorded source kind {root.get('kind')!r}")
            part = indexer.index(collection, scan, progress=progress)
            report = part if report is None else _merge(report, part)
        backfill = indexer.backfill_report(collection)
        return backfill if report is None else _merge(report, backfill)

    # searching ------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        collection: str = "default",
        k: int = 8,
        fusion: str | None = None,
        lexical_weight: float | None = None,
        rrf_k: int | None = None,
        overfetch: int | None = None,
        threshold: float | None = None,
        scopes: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Hybrid search: both arms over-fetch, fusion, then the top-``k`` cut."""
        request = {
            "query": query,
            "k": k,
            "fusion": fusion,
            "lexicalWeight": lexical_weight,
            "rrfK": rrf_k,
            "overfetch": overfetch,
            "threshold": threshold,
            "scopes": list(scopes) if scopes else None,
            "metadata": dict(metadata) if metadata else None,
        }
        return self.search_request(collection, request)

    def search_request(
        self, collection: str, request: SearchRequest | Mapping[str, Any]
    ) -> SearchResult:
        """Search with a request model (or its camelCase JSON form)."""
        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        embedder, name = self.embedder_for(collection)
        check_model(self.store, collection, embedder)
        note = "embedder 'none' selected (lexical only)" if name == _NONE else None
        return self._search.search(collection, request, embedder=embedder, embedder_note=note)

    # collections ----------------------------------------------------------------
    def collections(self) -> list[CollectionInfo]:
        return self.store.list_collections()

    def delete_collection(self, name: str) -> bool:
        return self.store.delete_collection(name)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Plait:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _merge(a: IndexReport, b: IndexReport) -> IndexReport:
    """Two reports of one collection as one: counts add up, the later embedding state wins."""
    emb = b.embedding.model_copy(
        update={
            "embedded": a.embedding.embedded + b.embedding.embedded,
            "reused": a.embedding.reused + b.embedding.reused,
            "calls": a.embedding.calls + b.embedding.calls,
            "available": a.embedding.available and b.embedding.available,
            "reason": b.embedding.reason or a.embedding.reason,
        }
    )
    skipped = [*a.skipped, *b.skipped]
    return IndexReport(
        collection=a.collection,
        sources_seen=a.sources_seen + b.sources_seen,
        sources_indexed=a.sources_indexed + b.sources_indexed,
        skipped=skipped,
        chunks_added=a.chunks_added + b.chunks_added,
        chunks_updated=a.chunks_updated + b.chunks_updated,
        chunks_unchanged=a.chunks_unchanged + b.chunks_unchanged,
        chunks_deleted=a.chunks_deleted + b.chunks_deleted,
        embedding=emb,
        complete=not skipped and emb.skipped == 0,
        elapsed_ms=round(a.elapsed_ms + b.elapsed_ms, 1),
    )
