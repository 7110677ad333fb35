"""What every part of :class:`plait.service.Plait` reads: the store, the embedder of each
collection, the LLM and rerankers, the recorded roots and their walks.

:class:`EngineBase` declares the engine's state (set by ``Plait.__init__``); the indexing
(:mod:`plait.service_indexing`) and query (:mod:`plait.service_querying`) halves build on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait.chunking import ChunkSettings
from plait.collection_settings import CollectionSettings, read_settings
from plait.embeddings import DEFAULT_EMBEDDER, Embedder, make_embedder, registry_name
from plait.embeddings.guard import QueryGuard
from plait.errors import NotFoundError, PlaitError
from plait.events import EngineEvents
from plait.llm import LLM, make_llm
from plait.rerank import Reranker, make_reranker
from plait.search import SearchService
from plait.sources.walks import RootWalk, WalkCache, collection_state
from plait.stores import Store
from plait.stores.base import is_read_only
from plait.types import CollectionInfo
from plait.usage import Purpose, metering, rows_of

if TYPE_CHECKING:
    from plait.refinery import Refinery

__all__ = ["NONE", "EngineBase"]
_log = logging.getLogger(__name__)

#: The embedder name that means "no dense arm".
NONE = "none"
CUSTOM = "custom"  # an Embedder object no registry name rebuilds: never recorded


class EngineBase:
    """The engine's state and the lookups shared by indexing and querying."""

    store: Store
    events: EngineEvents
    chunk_settings: ChunkSettings
    backfill_batch: int
    walks: WalkCache
    _query_guard: QueryGuard
    _keys: Path | None
    _reindex_lock: threading.Lock
    _embedder_choice: str | Embedder | None
    _embedders: dict[str, Embedder | None]
    _llm_choice: str | LLM | None
    _llm: LLM | None
    _llm_resolved: bool
    _cross_encoder_choice: str | Path | Reranker | None
    _rerankers: dict[str, Reranker]
    _search: SearchService
    _refinery: Refinery | None
    _refinery_lock: threading.Lock

    if TYPE_CHECKING:

        @property
        def refinery(self) -> Refinery:
            """Defined by :class:`plait.service.Plait` (the refinery searches through it)."""

    @property
    def query_guard(self) -> QueryGuard:
        """The bound and circuit breaker of query embeddings (its failures and open circuits)."""
        return self._query_guard

    # embedders ------------------------------------------------------------------

    @contextmanager
    def metered(self, collection: str, purpose: Purpose) -> Iterator[None]:
        """Meter the provider calls inside the block as ``purpose`` and write them to the
        store for ``collection`` when it ends (nested blocks add to the outermost one).
        A failed usage write is logged, never fails the work it measured."""
        with metering(purpose) as (events, outermost):
            try:
                yield
            finally:
                if outermost and events and is_read_only(self.store):
                    _log.debug("usage of %s on %r not recorded: the store is read-only", purpose, collection)
                elif outermost and events:
                    try:
                        self.store.add_usage(collection, rows_of(events))
                    except PlaitError as exc:
                        _log.warning("usage of %s on %r not recorded: %s", purpose, collection, exc)

    def _by_name(self, name: str) -> Embedder | None:
        if name not in self._embedders:
            self._embedders[name] = make_embedder(name)
        return self._embedders[name]

    def embedder_for(
        self,
        collection: str,
        *,
        info: CollectionInfo | None = None,
        saved_settings: CollectionSettings | None = None,
    ) -> tuple[Embedder | None, str]:
        """The embedder to use for a collection, and its name.

        ``info`` and ``saved_settings`` are the collection and its settings as the caller
        just read them (saves reading them again).
        """
        choice = self._embedder_choice
        if isinstance(choice, str):
            return self._by_name(choice), choice
        if choice is not None:  # an object: recorded only under a name that rebuilds it
            return choice, registry_name(choice) or CUSTOM
        if info is None:
            info = self.store.get_collection(collection)
        if info is None:
            recorded = None
        else:
            settings = read_settings(self.store, collection) if saved_settings is None else saved_settings
            recorded = settings.embedder
        name = recorded or DEFAULT_EMBEDDER
        return self._by_name(name), name

    # LLM and rerankers ----------------------------------------------------------
    @property
    def llm(self) -> LLM | None:
        """The chat LLM (``Plait(llm=...)``, else ``PLAIT_LLM``), built once; None if none."""
        if not self._llm_resolved:
            choice = self._llm_choice
            self._llm = choice if choice is not None and not isinstance(choice, str) else make_llm(choice)
            self._llm_resolved = True
        return self._llm

    def reranker(self, method: str) -> Reranker:
        """The reranker for ``method`` (``llm`` or ``cross-encoder``), built once."""
        if method not in self._rerankers:
            llm = self.llm if method == "llm" else None
            self._rerankers[method] = make_reranker(
                method,
                llm=llm if llm is not None else "none",  # resolved already: no second env read
                cross_encoder=self._cross_encoder_choice,
            )
        return self._rerankers[method]

    # recorded roots -------------------------------------------------------------
    def recorded_roots(
        self, collection: str, *, source: str | Path | None = None
    ) -> list[dict[str, Any]]:
        """The roots recorded for a collection; only those at ``source`` when given."""
        roots: list[dict[str, Any]] = list(read_settings(self.store, collection).roots)
        if source is None:
            return roots
        wanted = str(Path(source).expanduser().resolve())
        chosen = [r for r in roots if r.get("path") == wanted]
        if not chosen:
            known = ", ".join(sorted({str(r.get("path")) for r in roots})) or "none"
            inside = [str(r.get("path")) for r in roots if Path(wanted).is_relative_to(str(r.get("path")))]
            hint = (
                f"; it is inside {inside[0]}: --source takes a recorded root, and reindexing it "
                "re-reads only what changed"
                if inside else ""
            )
            raise NotFoundError(
                f"{wanted} is not a recorded source of collection {collection!r} (recorded: {known}){hint}"
            )
        return chosen

    def _walker(self, collection: str) -> Callable[[Mapping[str, Any]], RootWalk]:
        """What a recorded root yields now, from the walk cache (see :mod:`plait.sources.walks`):
        what its runs read, the folders of the recorded roots nested inside it left out
        (:func:`plait.sources.nesting.subtree_of`)."""
        from plait.coverage import _chunk_keys
        from plait.sources.nesting import subtree_of

        state = collection_state(self.store, collection)
        keys = _chunk_keys(self.chunk_settings)
        recorded = self.recorded_roots(collection)

        def walk(root: Mapping[str, Any]) -> RootWalk:
            subtree, _ = subtree_of(root, recorded)
            return self.walks.get(
                root, state=state, chunk_keys=keys, settings_key=self.chunk_settings, subtree=subtree
            )

        return walk
