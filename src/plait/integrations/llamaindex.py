"""A LlamaIndex retriever over plait: ``pip install 'plait[llamaindex]'``.

    from plait import Plait
    from plait.integrations.llamaindex import PlaitRetriever

    retriever = PlaitRetriever(engine=Plait("./.plait/plait.db"), collection="docs", k=5)
    for found in retriever.retrieve("what does ERR-4012 mean"):
        print(found.score, found.node.metadata["match"], found.node.metadata["source"])

``retrieve`` / ``aretrieve`` return llama-index-core ``NodeWithScore``\\ s: the node is a
``TextNode`` whose ``id_`` is the chunk id, ``text`` the chunk, and ``metadata`` the
hit's citation contract in camelCase plus ``source``
(:func:`plait.integrations.common.hit_metadata`); ``score`` is the hit's fused score.
Only ``source`` is shown to an LLM or an embedder by the node's ``get_content``; the
rest stays metadata. ``engine``, ``collection``, ``k`` and the search options
(``filter`` = ``metadata``) are as in :mod:`plait.integrations.langchain`.

llama-index-core ships the NLTK and tiktoken files it uses (``llama_index/core/_static``)
and this retriever calls neither, so nothing is downloaded at import or search time.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from plait.client import AsyncClient, Client
from plait.errors import ConfigError
from plait.integrations.common import asearch, check_engine, check_options, hit_metadata, search
from plait.service import Plait
from plait.types import Hit, SearchResult

__all__ = ["PlaitRetriever"]

_SHOWN = ("source",)
"""Metadata keys a node's ``get_content`` puts before the text for an LLM or an embedder."""


def _node(hit: Hit) -> NodeWithScore:
    metadata = hit_metadata(hit)
    hidden = [key for key in metadata if key not in _SHOWN]
    node = TextNode(
        id_=hit.chunk_id,
        text=hit.content,
        metadata=metadata,
        excluded_embed_metadata_keys=hidden,
        excluded_llm_metadata_keys=hidden,
    )
    return NodeWithScore(node=node, score=hit.score)


def _nodes(result: SearchResult) -> list[NodeWithScore]:
    return [_node(hit) for hit in result.hits]


class PlaitRetriever(BaseRetriever):
    """plait's hybrid search as a LlamaIndex ``BaseRetriever`` (see the module docstring)."""

    def __init__(
        self,
        *,
        engine: Plait | Client | AsyncClient,
        collection: str = "default",
        k: int = 8,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **options: Any,
    ) -> None:
        check_engine(engine)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a whole number >= 1, got {k!r}")
        self.engine = engine
        self.collection = collection
        self.k = k
        self.search_options = check_options(options)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = search(
            self.engine, query_bundle.query_str, collection=self.collection, k=self.k, options=self.search_options
        )
        return _nodes(result)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await asearch(
            self.engine, query_bundle.query_str, collection=self.collection, k=self.k, options=self.search_options
        )
        return _nodes(result)
