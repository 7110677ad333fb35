"""The small engine protocol ask and the Knowledge Refinery depend on (not :class:`~plait.service.Plait`).

Ask and the refinery need a store, searching with a request, indexing documents (the
refinery indexes FAQ cards) and the chat LLM; ask also matches FAQ cards first.
:class:`plait.service.Plait` satisfies both protocols, and so can anything else that
offers these methods, so neither module imports the service that builds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from plait.collection_settings import CollectionSettings
from plait.embeddings.base import Embedder
from plait.llm.base import LLM
from plait.retrieval.request import SearchRequest
from plait.sources.base import SourceDocument
from plait.stores.base import Store
from plait.types import CardHit, CollectionInfo, IndexReport, SearchResult

__all__ = ["AskEngine", "CardMatcher", "Searcher"]


class Searcher(Protocol):
    """A store, search, indexing and the chat LLM: what the refinery uses."""

    store: Store

    @property
    def llm(self) -> LLM | None:
        """The chat LLM, or None when none is configured."""
        ...

    def search_request(
        self, collection: str, request: SearchRequest | Mapping[str, Any], *, drafts_visible: bool = True
    ) -> SearchResult:
        """Search ``collection`` with a request model (or its camelCase JSON form);
        ``drafts_visible`` False hides draft FAQ cards from a search naming their scope."""
        ...

    def index_documents(self, documents: Iterable[SourceDocument], *, collection: str = "default") -> IndexReport:
        """Index documents built in code."""
        ...


class CardMatcher(Protocol):
    """Finds the FAQ card that answers a query (the refinery's ``match``)."""

    def match(
        self, collection: str, query: str, *, include_drafts: bool | None = None, mode: str = "hybrid"
    ) -> CardHit | None:
        """The card that answers ``query`` (its search of ``mode``'s arms), or None."""
        ...

    def drafts_count(self, collection: str, include_drafts: bool | None = None) -> bool:
        """Whether draft cards may answer (``include_drafts``, else the collection's setting)."""
        ...


class AskEngine(Searcher, Protocol):
    """A :class:`Searcher` that can also match FAQ cards (``refinery``): what ask uses."""

    def search_known(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        known: tuple[CollectionInfo, CollectionSettings],
        drafts_visible: bool = True,
    ) -> SearchResult:
        """:meth:`Searcher.search_request` with the collection and its settings as the
        caller just read them (inside the store's search scope), not read again."""
        ...

    @property
    def refinery(self) -> CardMatcher:
        """The FAQ cards of this engine."""
        ...

    def embedder_for(
        self,
        collection: str,
        *,
        info: CollectionInfo | None = None,
        saved_settings: CollectionSettings | None = None,
    ) -> tuple[Embedder | None, str]:
        """The collection's embedder (ask scores answer sentences with it) and its name;
        ``info`` and ``saved_settings``, as the caller just read them, are not read again."""
        ...
