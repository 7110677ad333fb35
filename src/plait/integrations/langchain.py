"""A LangChain retriever over plait: ``pip install 'plait[langchain]'``.

    from plait import Plait
    from plait.integrations.langchain import PlaitRetriever

    retriever = PlaitRetriever(engine=Plait("./.plait/plait.db"), collection="docs", k=5, fusion="rrf")
    for doc in retriever.invoke("what does ERR-4012 mean"):
        print(doc.metadata["ranks"]["fused"], doc.metadata["match"], doc.metadata["source"])

``invoke`` / ``ainvoke`` return langchain-core ``Document``\\ s: ``page_content`` is the
chunk, ``id`` its chunk id, and ``metadata`` the hit's citation contract in camelCase
(``chunkId``, ``score``, ``vectorScore``, ``lexicalScore``, ``match``, ``scope``,
``ranks``, ``origin``, ``metadata``, ``snippet``…) plus ``source``
(:func:`plait.integrations.common.hit_metadata`). ``engine`` may be a served
:class:`~plait.Client` (the same), or an :class:`~plait.AsyncClient` (``ainvoke`` only).
Keyword options beyond ``collection`` and ``k`` are :meth:`plait.Plait.search`'s
(``fusion``, ``lexical_weight``, ``scopes``, ``rerank``…; the metadata filter is
``filter``), checked when the retriever is made; ``tags`` and ``metadata`` keep
LangChain's meaning (tracing). ``ainvoke`` on an embedded engine runs the search in a
worker thread.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from plait.client import AsyncClient, Client
from plait.errors import ConfigError
from plait.integrations.common import asearch, check_engine, check_options, hit_metadata, search
from plait.service import Plait
from plait.types import SearchResult

__all__ = ["PlaitRetriever"]


def _documents(result: SearchResult) -> list[Document]:
    return [Document(page_content=hit.content, metadata=hit_metadata(hit), id=hit.chunk_id) for hit in result.hits]


class PlaitRetriever(BaseRetriever):
    """plait's hybrid search as a LangChain ``BaseRetriever`` (see the module docstring)."""

    engine: Plait | Client | AsyncClient
    collection: str = "default"
    k: int = 8
    search_options: dict[str, Any] = Field(default_factory=dict)
    """The :meth:`plait.Plait.search` options every call uses (``filter`` = ``metadata``)."""

    def __init__(
        self,
        *,
        engine: Plait | Client | AsyncClient,
        collection: str = "default",
        k: int = 8,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        check_engine(engine)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a whole number >= 1, got {k!r}")
        # the fields as a dict: mypy types BaseRetriever.__init__ with the base's fields only
        fields: dict[str, Any] = {
            "engine": engine,
            "collection": collection,
            "k": k,
            "tags": tags,
            "metadata": metadata,
            "search_options": check_options(options),
        }
        super().__init__(**fields)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        result = search(self.engine, query, collection=self.collection, k=self.k, options=self.search_options)
        return _documents(result)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        result = await asearch(self.engine, query, collection=self.collection, k=self.k, options=self.search_options)
        return _documents(result)
