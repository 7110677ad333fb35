"""``plait.integrations.llamaindex.PlaitRetriever`` against the real llama-index-core, over
an embedded Plait and over a real server (Client, AsyncClient); ranks and scores by hand
(``hand_ranked``: kb-101 lexical 1 / dense 5, kb-102 dense 1, kb-103 dense 2; RRF k = 60).

Each test body is one coroutine: an AsyncClient's connections belong to one event loop."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from retriever_engines import ENGINES, SESSION_TEXT, open_engine

from hand_ranked import QUERY
from plait.client import AsyncClient
from plait.errors import ConfigError, NotFoundError
from plait.integrations.llamaindex import PlaitRetriever
from plait.testing.corpus import ARTICLE_DOCS


async def _get(retriever: PlaitRetriever, query: str, *, use_async: bool) -> list[NodeWithScore]:
    return await retriever.aretrieve(query) if use_async else retriever.retrieve(query)


async def _close(engine: Any) -> None:
    if isinstance(engine, AsyncClient):
        await engine.aclose()


@pytest.mark.parametrize("kind", ENGINES)
def test_nodes_carry_the_citation_contract(kind: str, tmp_path: Path) -> None:
    async def body(engine: Any, plait: Any) -> None:
        retriever = PlaitRetriever(engine=engine, collection="a", k=3, fusion="rrf")
        assert isinstance(retriever, BaseRetriever)
        for use_async in [True] if kind == "async-client" else [False, True]:
            found = await _get(retriever, QUERY, use_async=use_async)
            assert [n.node.metadata["metadata"]["docId"] for n in found] == ["kb-101", "kb-102", "kb-103"]
            top, second, _ = found
            assert isinstance(top.node, TextNode) and top.node.text == ARTICLE_DOCS["kb-101"]
            assert top.node.node_id == top.node.metadata["chunkId"] == plait.store.chunk_ids("a", "kb-101")[0]
            assert top.score == top.node.metadata["score"] == pytest.approx(1 / 61 + 1 / 65)
            assert top.node.metadata["match"] == "both"
            assert top.node.metadata["ranks"] == {"dense": 5, "lexical": 1, "fused": 1, "rerank": None}
            assert top.node.metadata["origin"] == {
                "kind": "file", "sourcePath": "kb-101.md", "headingPath": [], "title": "kb-101"
            }
            assert top.node.metadata["source"] == "kb-101.md"
            # an LLM (or an embedder) is shown the source and the text, not the debug metadata
            assert top.node.get_content(MetadataMode.LLM) == f"source: kb-101.md\n\n{ARTICLE_DOCS['kb-101']}"
            assert top.node.get_content(MetadataMode.EMBED) == f"source: kb-101.md\n\n{ARTICLE_DOCS['kb-101']}"
            assert second.node.metadata["match"] == "semantic" and second.node.metadata["lexicalScore"] is None
            assert second.node.metadata["vectorScore"] == pytest.approx(math.cos(math.radians(10)), abs=1e-6)
            assert second.score == pytest.approx(1 / 61)
        await _close(engine)

    with open_engine(kind, tmp_path) as (engine, plait):
        asyncio.run(body(engine, plait))


@pytest.mark.parametrize("kind", ENGINES)
def test_search_options_and_session_origins(kind: str, tmp_path: Path) -> None:
    use_async = kind == "async-client"

    async def body(engine: Any) -> None:
        lexical = PlaitRetriever(engine=engine, collection="a", k=2, fusion="rrf", lexical_weight=1.0)
        scores = [n.score for n in await _get(lexical, QUERY, use_async=use_async)]
        assert scores == [pytest.approx(2 / 61), 0.0]  # lexical x2, dense x0
        only = PlaitRetriever(engine=engine, collection="a", fusion="rrf", filter={"docId": "kb-104"})
        found = await _get(only, QUERY, use_async=use_async)
        assert [n.node.metadata["metadata"]["docId"] for n in found] == ["kb-104"]
        thinned = PlaitRetriever(engine=engine, collection="multi", mode="lexical", max_per_source=1)
        found = await _get(thinned, "ERR-7", use_async=use_async)
        assert {n.node.metadata["source"]: n.node.metadata["moreFromSource"] for n in found} == {
            "long.md": 2, "short.md": 0
        }
        (session,) = await _get(PlaitRetriever(engine=engine, collection="s"), "ERR-4013", use_async=use_async)
        assert session.node.get_content() == SESSION_TEXT and session.node.metadata["source"] == "sess-1"
        assert session.node.metadata["origin"] == {
            "kind": "session", "sessionId": "sess-1", "eventId": "evt-1", "title": None
        }
        lexical_only = await _get(PlaitRetriever(engine=engine, collection="a", mode="lexical"), QUERY, use_async=use_async)
        assert [n.node.metadata["metadata"]["docId"] for n in lexical_only] == ["kb-101"]
        assert lexical_only[0].node.metadata["match"] == "lexical"
        assert lexical_only[0].node.metadata["ranks"] == {"dense": None, "lexical": 1, "fused": 1, "rerank": None}
        with pytest.raises(NotFoundError, match="collection 'nope' does not exist"):
            await _get(PlaitRetriever(engine=engine, collection="nope"), QUERY, use_async=use_async)
        await _close(engine)

    with open_engine(kind, tmp_path) as (engine, _):
        asyncio.run(body(engine))


def test_query_bundle_and_bad_construction(tmp_path: Path) -> None:
    with open_engine("embedded", tmp_path) as (plait, _):
        found = PlaitRetriever(engine=plait, collection="a", k=1).retrieve(QueryBundle(QUERY))
        assert found[0].node.metadata["metadata"]["docId"] == "kb-101"
        with pytest.raises(ConfigError, match=r"unknown search option\(s\) 'metadata' \(the chunk-metadata filter is 'filter'\)"):
            PlaitRetriever(engine=plait, metadata={"docId": "kb-101"})
        with pytest.raises(ConfigError, match="engine must be a plait.Plait"):
            PlaitRetriever(engine=None)
        with pytest.raises(ConfigError, match="k must be a whole number >= 1, got True"):
            PlaitRetriever(engine=plait, k=True)
    with pytest.raises(ConfigError, match="engine is an AsyncClient: call it asynchronously"):
        PlaitRetriever(engine=AsyncClient("http://127.0.0.1:9")).retrieve(QUERY)
