"""The query half of :class:`plait.service.Plait`: search and explain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from plait._text import valid_text
from plait.collection_settings import CollectionSettings, parse_settings
from plait.embeddings import Embedder
from plait.embeddings.guard import GuardedEmbedder
from plait.errors import NotFoundError, ValidationError
from plait.model_guard import check_model
from plait.request_body import request_body
from plait.retrieval.request import validated
from plait.search import SearchRequest
from plait.service_base import NONE as _NONE
from plait.service_base import EngineBase
from plait.snippets import with_snippets
from plait.stores.base import AheadScopeStore, CollectionReadStore, SearchScopeStore
from plait.types import CollectionInfo, SearchResult

if TYPE_CHECKING:
    from plait.cockpit import ArmLists, ChunkView, SourceEntry
    from plait.explain import ExplainResult

__all__ = ["QueryingMixin"]


@dataclass(frozen=True)
class _QuerySetup:
    """The embedder, its note and the hidden chunks one query runs with (:meth:`QueryingMixin._query_setup`)."""

    embedder: Embedder | None
    note: str | None
    hidden: frozenset[str]


class QueryingMixin(EngineBase):
    """Answer queries: hybrid search, its explanation, and the debug views of the web page."""

    # searching ------------------------------------------------------------------
    @valid_text
    def search(
        self,
        query: str,
        *,
        collection: str = "default",
        k: int = 8,
        fusion: str | Mapping[str, Any] | None = None,
        lexical_weight: float | str | None = None,
        rrf_k: int | None = None,
        overfetch: int | None = None,
        threshold: float | None = None,
        scopes: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        rerank: str | None = None,
        k_overfetch: int | None = None,
        offset: int = 0,
        qa_first: bool = False,
        language_prior: bool | None = None,
        mode: str = "hybrid",
        max_per_source: int | None = None,
        group_by: str | None = None,
    ) -> SearchResult:
        """Hybrid search: both arms over-fetch, fusion, then the top-``k`` cut.

        ``fusion`` is a method name (its knobs given here: ``lexical_weight``, ``rrf_k``…)
        or the method's own object, e.g. ``{"method": "minmax", "denseWeight": 0.8}``, or
        an object without a method, its knobs for the collection's saved method
        (``{"denseWeight": 0.8}``; see :mod:`plait.retrieval.fusion_choice`). ``lexical_weight`` is 0..1 or ``"auto"``
        (identifier-aware, see :mod:`plait.autoweight`). ``rerank`` (``"llm"`` or
        ``"cross-encoder"``) reorders the fused top ``max(k, k_overfetch)`` (default 20)
        before the cut. ``offset`` pages: the hits are fused positions ``offset + 1 …
        offset + k``. ``qa_first`` answers with a matching FAQ card when there is one
        (``answered_by``/``card``, see :mod:`plait.refinery.cards`), else with the hybrid
        search. ``language_prior`` False makes ``adaptive`` ignore the embedder's declared
        languages (see :class:`~plait.types.FusionSettings`). ``mode`` is ``hybrid`` (both arms),
        ``lexical`` (the embedder is never called) or ``vector`` (BM25 never runs).
        ``max_per_source`` keeps at most that many chunks of one source in the hits (the
        rest counted in ``more_from_source``); ``group_by="source"`` returns one entry per
        source in ``groups`` (see :mod:`plait.retrieval.diversity`).
        """
        return self.search_request(collection, request_body(locals()))

    @valid_text
    def search_request(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        drafts_visible: bool = True,
    ) -> SearchResult:
        """Search with a request model (or its camelCase JSON form).

        ``drafts_visible=False`` (a reader over HTTP or MCP) hides the FAQ cards not yet
        approved from a search that names the ``faq-card`` scope."""
        # A qa-first request only reads the collection's existence here: its fallback search
        # (search_request again, from the refinery) sends ahead and runs again itself. Sent
        # ahead here too, a write meanwhile ran the whole qa-first path, fallback and its
        # ``searched`` event included, twice (review-7 #5).
        ahead = isinstance(self.store, AheadScopeStore) and not _wants_qa_first(request)
        for attempt in (0, 1):
            scope = (
                self.store.search_scope(collection, ahead=ahead and attempt == 0) if isinstance(self.store, AheadScopeStore)
                else self.store.search_scope(collection) if isinstance(self.store, SearchScopeStore)
                else nullcontext()
            )
            with scope:  # one read of the collection's state for the whole search (see SearchScopeStore)
                try:
                    info, raw = self._collection_and_settings(collection)
                    saved = None if raw is None or _wants_qa_first(request) else parse_settings(raw, collection=collection)
                    result, final = self._search_unfinished(collection, request, info, saved, drafts_visible=drafts_visible)
                except Exception:  # any error, not only a PlaitError (review-7 #8)
                    if ahead and attempt == 0 and not self._ahead_held(collection):
                        continue  # raised on values the collection no longer has: run again
                    raise
                if ahead and attempt == 0 and not self._ahead_held(collection):
                    continue  # the collection changed before the search began: run again
                return result if final else self._finished(collection, result)
        raise AssertionError("unreachable: the second attempt does not read ahead")  # pragma: no cover

    def _ahead_held(self, collection: str) -> bool:
        """False when the store answered the search's first read ahead and then read
        something else (:class:`~plait.stores.base.AheadScopeStore`): run it again."""
        return not isinstance(self.store, AheadScopeStore) or self.store.ahead_held(collection)

    def search_known(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        known: tuple[CollectionInfo, CollectionSettings],
        drafts_visible: bool = True,
    ) -> SearchResult:
        """:meth:`search_request` with the collection and its settings as the caller just
        read them (:func:`~plait.collection_settings.read_collection`), not read again.
        The caller holds the store's search scope open around its read and this (ask
        does), so the search answers from the key that read saw."""
        result, final = self._search_unfinished(collection, request, known[0], known[1], drafts_visible=drafts_visible)
        return result if final else self._finished(collection, result)

    def _search_unfinished(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        info: CollectionInfo,
        saved: CollectionSettings | None,
        *,
        drafts_visible: bool,
    ) -> tuple[SearchResult, bool]:
        """:meth:`search_request` once the collection (and, where read, its settings) is
        known: the result and whether it is final (a FAQ card's answer) or still gets its
        event and snippets (:meth:`_finished`)."""
        if _wants_qa_first(request):
            return self.refinery.search(collection, request, drafts_visible=drafts_visible), True
        setup = self._query_setup(collection, request, info=info, drafts_visible=drafts_visible, saved_settings=saved)
        with self.metered(collection, "query"):
            result = self._search.search(
                collection, request, embedder=setup.embedder, embedder_note=setup.note, info=info,
                also_hidden=setup.hidden, saved_settings=saved,
            )
        empty = self._empty_scopes(collection, validated(request).scopes)
        if empty:
            result = result.model_copy(update={"notes": [*result.notes, empty]})
        return result, False

    def _finished(self, collection: str, result: SearchResult) -> SearchResult:
        self.events.searched(collection, result)
        return with_snippets(result)

    def _collection(self, collection: str) -> CollectionInfo:
        """The collection, or NotFoundError."""
        info = self.store.get_collection(collection)
        if info is None:
            raise NotFoundError(f"collection {collection!r} does not exist")
        return info

    def _collection_and_settings(self, collection: str) -> tuple[CollectionInfo, dict[str, Any] | None]:
        """The collection (or NotFoundError) and, from a store that reads both in one
        round trip (:class:`~plait.stores.base.CollectionReadStore`), its stored settings;
        None for them otherwise (read when needed, as before)."""
        if isinstance(self.store, CollectionReadStore):
            both = self.store.collection_with_settings(collection)
            if both is None:
                raise NotFoundError(f"collection {collection!r} does not exist")
            return both
        return self._collection(collection), None

    def _query_setup(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        info: CollectionInfo,
        drafts_visible: bool,
        saved_settings: CollectionSettings | None = None,
    ) -> _QuerySetup:
        """What a search, explain or arms view of ``request`` runs with: the collection's
        embedder (its model checked against the stored vectors, guarded), the note when it
        is ``none``, and the draft cards hidden from a caller who may not see them."""
        embedder, name = self.embedder_for(collection, info=info, saved_settings=saved_settings)
        check_model(self.store, collection, embedder, info=info)
        return _QuerySetup(
            embedder=self._guarded(embedder, info),
            note="embedder 'none' selected (lexical only)" if name == _NONE else None,
            hidden=frozenset() if drafts_visible else self._draft_card_chunks(collection, request),
        )

    def _empty_scopes(self, collection: str, scopes: Sequence[str] | None) -> str | None:
        """A note naming the asked scopes that hold no chunk, and the scopes that do."""
        if not scopes:
            return None
        counts = {s.scope: s.chunks for s in self.store.scopes(collection) if s.chunks}
        missing = [name for name in scopes if name not in counts]
        if not missing:
            return None
        held = ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "none"
        names = ", ".join(repr(name) for name in missing)
        noun = "scope" if len(missing) == 1 else "scopes"
        return f"{noun} {names} {'has' if len(missing) == 1 else 'have'} no chunks in collection {collection!r} (chunks per scope: {held})"

    def _draft_card_chunks(self, collection: str, request: SearchRequest | Mapping[str, Any]) -> frozenset[str]:
        """Chunk ids of the collection's draft FAQ cards when ``request`` names their scope."""
        from plait.refinery.models import CARD_SCOPE

        scopes = request.scopes if isinstance(request, SearchRequest) else request.get("scopes")
        if not scopes or CARD_SCOPE not in scopes:
            return frozenset()
        ids: set[str] = set()
        for source_id in self._draft_card_sources(collection):
            ids.update(self.store.chunk_ids(collection, source_id))
        return frozenset(ids)

    def _draft_card_sources(self, collection: str) -> list[str]:
        """The source ids the collection's draft FAQ cards are indexed under."""
        from plait.refinery.cards import card_source_id
        from plait.refinery.models import CardStatus

        return [card_source_id(card.id) for card in self.refinery.cards(collection, status=CardStatus.DRAFT)]

    def _guarded(self, embedder: Embedder | None, info: CollectionInfo) -> Embedder | None:
        """The embedder with its query embeddings bounded and circuit-broken."""
        if embedder is None:
            return None
        return cast(Embedder, GuardedEmbedder(embedder, self._query_guard, dimension=info.dimension))

    @valid_text
    def explain(
        self,
        query: str,
        *,
        doc: str | None = None,
        path: str | None = None,
        chunk: str | None = None,
        collection: str = "default",
        drafts_visible: bool = True,
        **options: Any,
    ) -> ExplainResult:
        """Why a document did (not) come back for ``query``: every stage, and a diagnosis.

        Name the document by exactly one of ``doc`` (metadata ``docId`` or source id),
        ``path`` (source path) or ``chunk`` (chunk id); ``options`` are the search
        options of :meth:`search` (``k``, ``fusion``, ``lexical_weight``, ``rerank``…).
        ``drafts_visible`` as in :meth:`search_request`: explain traces the search the
        caller would get, so for a reader a draft FAQ card is hidden here as there.
        See :mod:`plait.explain`.
        """
        from plait.explain import explain

        info = self._collection(collection)
        request = {"query": query, **request_body(options, skip=())}
        if _wants_qa_first(request):  # taken and ignored before: the trace was the hybrid search's
            raise ValidationError(
                "qaFirst does not apply to explain: it traces the retrieval pipeline, not a FAQ card's answer; "
                "leave it out (the search it explains is the one without qaFirst)"
            )
        setup = self._query_setup(collection, request, info=info, drafts_visible=drafts_visible)
        with self.metered(collection, "query"):
            return explain(
                self._search,
                collection,
                request,
                doc=doc,
                path=path,
                chunk=chunk,
                embedder=setup.embedder,
                embedder_note=setup.note,
                roots=self.recorded_roots(collection),
                walk=self._walker(collection),
                also_hidden=setup.hidden,
            )

    # the web page's debug views (plait.cockpit) ----------------------------------
    @valid_text
    def arms(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        limit: int = 10,
        drafts_visible: bool = True,
    ) -> ArmLists:
        """The lexical, dense and fused lists of one search, side by side (top ``limit``)."""
        from plait.cockpit import arm_lists

        info = self._collection(collection)
        setup = self._query_setup(collection, request, info=info, drafts_visible=drafts_visible)
        trace = self._search.trace(
            collection, request, embedder=setup.embedder, embedder_note=setup.note, info=info,
            also_hidden=setup.hidden,
        )
        return arm_lists(self.store, collection, trace, limit=limit)

    @valid_text
    def sources(
        self, *, collection: str = "default", prefix: str = "", limit: int = 100, drafts_visible: bool = True
    ) -> list[SourceEntry]:
        """The collection's sources whose id starts with ``prefix``, and how explain names each.

        ``drafts_visible=False`` (a reader) leaves out the draft FAQ cards' sources."""
        from plait.cockpit import source_list

        self._collection(collection)
        if drafts_visible:
            return source_list(self.store, collection, self.recorded_roots(collection), prefix=prefix, limit=limit)
        drafts = set(self._draft_card_sources(collection))
        entries = source_list(
            self.store, collection, self.recorded_roots(collection), prefix=prefix, limit=limit + len(drafts)
        )
        return [e for e in entries if e.source_id not in drafts][:limit]

    @valid_text
    def chunk(self, chunk_id: str, *, collection: str = "default", drafts_visible: bool = True) -> ChunkView:
        """One chunk with its content rendered to sanitised HTML (:func:`plait.cockpit.chunk_view`).

        ``drafts_visible=False`` (a reader) gets a draft FAQ card's chunk as not found."""
        from plait.cockpit import chunk_view, missing_chunk
        from plait.refinery.models import CARD_SCOPE

        self._collection(collection)
        if not drafts_visible and chunk_id in self._draft_card_chunks(collection, {"scopes": [CARD_SCOPE]}):
            raise missing_chunk(collection, chunk_id)
        return chunk_view(self.store, collection, chunk_id)


def _wants_qa_first(request: SearchRequest | Mapping[str, Any]) -> bool:
    if isinstance(request, SearchRequest):
        return request.qa_first
    return bool(request.get("qaFirst") or request.get("qa_first"))

