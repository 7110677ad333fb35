"""The one service every interface (Python, CLI, HTTP, MCP, web) is a thin adapter over.

>>> engine = Plait(store="./.plait/plait.db")          # doctest: +SKIP
>>> engine.index("examples/")                          # doctest: +SKIP
>>> engine.search("what does ERR-4012 mean").hits[0]   # doctest: +SKIP

The embedder of a collection is fixed when it is first indexed: later calls that name
no embedder use the recorded one, and naming another model is refused. The methods live in
:mod:`plait.service_indexing` (index, backfill, reindex, calibrate, coverage),
:mod:`plait.service_querying` (search, explain) and :mod:`plait.service_base` (embedders,
LLM, rerankers, recorded roots); this module holds the engine's construction, the refinery and
ask, collections and API-key revocation.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait._text import valid_text
from plait.backfill import DEFAULT_BACKFILL_BATCH
from plait.chunking import ChunkSettings
from plait.config import Settings
from plait.embeddings import Embedder
from plait.embeddings.guard import (
    DEFAULT_PROBE_INTERVAL,
    DEFAULT_QUERY_DEADLINE,
    QueryGuard,
)
from plait.errors import ConfigError, NotFoundError
from plait.events import EngineEvents
from plait.llm import LLM
from plait.request_body import request_body
from plait.rerank import Reranker
from plait.search import SearchService
from plait.service_indexing import IndexingMixin
from plait.service_querying import QueryingMixin
from plait.sources.walks import WalkCache
from plait.stores import Store, close_store, new_sqlite_file, open_store
from plait.types import CollectionInfo, DeletedCollection
from plait.usage import UsageReport, since_bucket, usage_report

if TYPE_CHECKING:
    from plait.api.keys import KeyStore
    from plait.ask import AskRequest, AskResult
    from plait.copying import CopyProgress, CopyReport
    from plait.refinery import Refinery

__all__ = ["Plait"]


def _backfill_batch(value: int | None) -> int:
    """``value``, else ``PLAIT_BACKFILL_BATCH``, else the default; must be >= 1."""
    if value is None:
        configured = Settings.resolve().backfill_batch
        if configured is None:
            return DEFAULT_BACKFILL_BATCH
        value = configured
    if value < 1:
        raise ConfigError(f"the backfill batch must be >= 1 chunk, got {value}")
    return value


class Plait(IndexingMixin, QueryingMixin):
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
        llm: str | LLM | None = None,
        cross_encoder: str | Path | Reranker | None = None,
        create_store: bool = True,
        query_deadline: float = DEFAULT_QUERY_DEADLINE,
        probe_interval: float = DEFAULT_PROBE_INTERVAL,
        keys: str | Path | None = None,
        backfill_batch: int | None = None,
        walk_max_age: float = 0.0,
    ) -> None:
        """``llm`` (a provider name or an :class:`~plait.llm.LLM`; None reads ``PLAIT_LLM``)
        serves ``rerank="llm"``; ``cross_encoder`` (a model directory, a package name or a
        reranker; None reads ``PLAIT_CROSS_ENCODER``) serves ``rerank="cross-encoder"``.
        Neither is built until first used. ``create_store=False`` refuses to create a
        SQLite store that does not exist (``NotFoundError``). Each query embedding is
        bounded by ``query_deadline`` seconds in total, and after a provider failure
        searches go lexical at once until a probe (every ``probe_interval`` seconds)
        succeeds (:mod:`plait.embeddings.guard`). ``keys`` names an API key file whose
        keys for a deleted collection are revoked (as are those of ``PLAIT_KEYS`` and of
        ``keys.db`` next to the store). ``backfill_batch`` (None reads
        ``PLAIT_BACKFILL_BATCH``, default 32) is how many chunks the backfill embeds and
        commits at a time: the most a crash can lose. With ``walk_max_age`` > 0 (``plait
        serve`` and ``plait mcp`` use :data:`~plait.sources.walks.DEFAULT_MAX_AGE`) coverage
        and explain reuse one walk of each recorded root while the collection is unchanged,
        for at most that many seconds (:mod:`plait.sources.walks`); 0 walks on every call."""
        self.events = EngineEvents()
        """Listeners of searches, embedding calls and provider failures (:mod:`plait.events`)."""
        self._query_guard = QueryGuard(deadline=query_deadline, probe_interval=probe_interval)
        self._keys = Path(keys) if keys is not None else None
        self.backfill_batch = _backfill_batch(backfill_batch)
        self.walks = WalkCache(max_age=walk_max_age)
        self._new_file: Path | None = None  # the SQLite file this engine created, if it did
        if store is None or isinstance(store, str):
            url = Settings.resolve(store=store).store
            self._new_file = new_sqlite_file(url) if create_store else None
            store = open_store(url, create=create_store)
        self.store: Store = store
        self._reindex_lock = threading.Lock()
        self._embedder_choice = embedder
        self._embedders: dict[str, Embedder | None] = {}
        self.chunk_settings = chunk_settings or ChunkSettings()
        self._llm_choice = llm
        self._llm: LLM | None = None
        self._llm_resolved = False
        self._cross_encoder_choice = cross_encoder
        self._rerankers: dict[str, Reranker] = {}
        self._search = SearchService(store, rerankers=self.reranker)
        self._refinery: Refinery | None = None
        self._refinery_lock = threading.Lock()

    # ask and the refinery -------------------------------------------------------
    @property
    def refinery(self) -> Refinery:
        """The Knowledge Refinery (FAQ-card runs and review), opened on first use."""
        with self._refinery_lock:  # two first requests at once must not open it twice
            if self._refinery is None:
                from plait.refinery import Refinery

                self._refinery = Refinery(self)
            return self._refinery

    @valid_text
    def ask(
        self,
        question: str,
        *,
        collection: str = "default",
        k: int | None = None,
        qa_first: bool = False,
        include_drafts: bool | None = None,
        rerank: str | None = None,
        scopes: Sequence[str] | None = None,
        min_cosine: float | None = None,
        min_term_coverage: float | None = None,
        mode: str = "hybrid",
    ) -> AskResult:
        """An answer grounded in the collection, with ``[n]`` citations (see :mod:`plait.ask`);
        ``mode`` is the search's (``hybrid``, ``lexical`` or ``vector``)."""
        return self.ask_request(collection, request_body(locals()))

    @valid_text
    def ask_request(self, collection: str, request: AskRequest | Mapping[str, Any]) -> AskResult:
        """Ask with a request model (or its camelCase JSON form)."""
        from plait.ask import answer_question

        # answer_question reads the collection once (NotFoundError when it does not exist)
        with self.metered(collection, "query"):  # the answer's own LLM call is metered as 'ask'
            return answer_question(self, collection, request)

    # usage ----------------------------------------------------------------------
    @valid_text
    def usage(self, collection: str = "default", *, since: str | None = None) -> UsageReport:
        """The collection's provider usage per hour, kind, purpose, provider and model
        (see :mod:`plait.usage`); ``since`` is an ISO date or time, or ``24h`` / ``7d``."""
        if self.store.get_collection(collection) is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        start = since_bucket(since)
        return usage_report(collection, self.store.usage(collection, since=start), since=start)

    def refinery_runs(self) -> dict[str, int]:
        """Refinery runs per status (every status, 0 included), for ``/metrics``."""
        from plait.refinery.models import RunStatus

        counts = {status.value: 0 for status in RunStatus}
        for run in self.refinery.list_runs(limit=1_000_000):
            counts[run.status.value] += 1
        return counts

    # collections ----------------------------------------------------------------
    def collections(self) -> list[CollectionInfo]:
        return self.store.list_collections()

    @valid_text
    def delete_collection(self, name: str) -> bool:
        """Remove the collection from the store, its refinery runs and FAQ cards, and
        revoke the API keys scoped to it (see :meth:`delete_collection_report`)."""
        return self.delete_collection_report(name).deleted

    @valid_text
    def delete_collection_report(self, name: str) -> DeletedCollection:
        """Delete ``name`` and revoke the keys scoped to it in every key file the engine
        knows (:meth:`key_files`), so a later collection of the same name does not
        inherit old grants; keys for all collections (``*``) are kept."""
        from plait.refinery.store import RefineryStore

        deleted = self.store.delete_collection(name)
        RefineryStore(self.store.records()).delete_collection(name)
        return DeletedCollection(name=name, deleted=deleted, revoked_keys=self._revoke_keys(name))

    @property
    def keys(self) -> KeyStore:
        """The API keys kept in the store (:mod:`plait.api.keys`)."""
        from plait.api.keys import KeyStore

        return KeyStore(self.store.records())

    def key_files(self) -> list[Path]:
        """The stand-alone API key files this engine also revokes in: ``keys`` given,
        ``PLAIT_KEYS``, and a former ``keys.db`` of the store (each once)."""
        from plait.stores.records_import import legacy_files

        candidates = [
            self._keys,
            Path(env) if (env := Settings.resolve().keys) else None,
            *[p for p in legacy_files(self.store.records()) if p.name == "keys.db"],
        ]
        out: list[Path] = []
        for candidate in candidates:
            if candidate is not None and candidate.expanduser().absolute() not in {p.absolute() for p in out}:
                out.append(candidate.expanduser())
        return out

    def _revoke_keys(self, collection: str) -> list[int]:
        from plait.api.keys import KeyStore

        revoked: list[int] = [key.id for key in self.keys.revoke_collection(collection)]
        seen = self.keys.token_hashes(revoked)
        for path in self.key_files():
            if not path.exists():  # never create a key file to revoke nothing
                continue
            keys = KeyStore(path)
            try:
                # a key imported into the store from this file was reported already
                revoked += [
                    key.id for key in keys.revoke_collection(collection)
                    if not keys.token_hashes([key.id]) & seen
                ]
            finally:
                keys.close()
        return revoked

    @valid_text
    def copy_collection(
        self,
        target: Store | str,
        *,
        collection: str = "default",
        target_collection: str | None = None,
        replace: bool = False,
        verify: bool = True,
        progress: CopyProgress | None = None,
        embedder: str | None = None,
    ) -> CopyReport:
        """Copy a collection from this engine's store to ``target`` (a store or its URL)
        with no embedding call, resumably, verified at the end (:mod:`plait.copying`).
        ``embedder`` (a name) must be the model of the collection's vectors; a collection
        never embedded records it on the copy."""
        from plait.copying import copy_collection

        opened = open_store(target) if isinstance(target, str) else target
        try:
            return copy_collection(
                self.store, opened, collection, target_name=target_collection,
                replace=replace, verify=verify, progress=progress, embedder=embedder,
            )
        finally:
            if isinstance(target, str):
                opened.close()

    @valid_text
    def copy_collections(
        self,
        target: Store | str,
        *,
        collections: Sequence[str] | None = None,
        replace: bool = False,
        verify: bool = True,
        embedder: str | None = None,
    ) -> list[CopyReport]:
        """Copy several collections (None: all of them) as ``plait copy`` does: the whole
        request checked first, so a mistake in it copies nothing (:mod:`plait.copy_plan`),
        then each collection by :meth:`copy_collection`."""
        from plait.copy_plan import copy_names
        from plait.copying import copy_collection

        names = copy_names(self.store, collections, embedder=embedder)
        opened = open_store(target) if isinstance(target, str) else target
        try:
            return [
                copy_collection(self.store, opened, name, replace=replace, verify=verify, embedder=embedder)
                for name in names
            ]
        finally:
            if isinstance(target, str):
                opened.close()

    def close(self, *, failed: bool = False) -> None:
        """Close the store and providers. ``failed`` (the work inside the engine raised):
        a SQLite file this engine created that still holds no collection is removed, so
        a failed first command (``plait index /no/such/folder``) leaves nothing behind."""
        if self._refinery is not None:
            self._refinery.close()
        closer = getattr(self._llm, "close", None)
        if callable(closer):
            closer()
        close_store(self.store, self._new_file, failed=failed)

    def __enter__(self) -> Plait:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(failed=exc_type is not None)

