"""``plait.integrations.langchain.PlaitRetriever`` against the real langchain-core, over an
embedded Plait and over a real server (Client, AsyncClient); ranks and scores by hand
(``hand_ranked``: kb-101 lexical 1 / dense 5, kb-102 dense 1, kb-103 dense 2; RRF k = 60).

Each test body is one coroutine: an AsyncClient's connections belong to one event loop."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from retriever_engines import ENGINES, SESSION_TEXT, open_engine

from hand_ranked import QUERY
from plait.client import AsyncClient
from plait.errors import ConfigError, NotFoundError
from plait.integrations.langchain import PlaitRetriever
from plait.testing.corpus import ARTICLE_DOCS


@pytest.fixture(autouse=True)
def _no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangSmith tracing (on only when these are set) would send each run over the network."""
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        monkeypatch.delenv(name, raising=False)


async def _get(retriever: PlaitRetriever, query: str, *, use_async: bool) -> list[Document]:
    return await retriever.ainvoke(query) if use_async else retriever.invoke(query)


async def _close(engine: Any) -> None:
    if isinstance(engine, AsyncClient):
        await engine.aclose()


@pytest.mark.parametrize("kind", ENGINES)
def test_documents_carry_the_citation_contract(kind: str, tmp_path: Path) -> None:
    async def body(engine: Any, plait: Any) -> None:
        retriever = PlaitRetriever(engine=engine, collection="a", k=3, fusion="rrf")
        assert isinstance(retriever, BaseRetriever)
        for use_async in [True] if kind == "async-client" else [False, True]:
            docs = await _get(retriever, QUERY, use_async=use_async)
            assert [d.metadata["metadata"]["docId"] for d in docs] == ["kb-101", "kb-102", "kb-103"]
            top, second, _ = docs
            assert top.page_content == ARTICLE_DOCS["kb-101"]
            assert top.id == top.metadata["chunkId"] == plait.store.chunk_ids("a", "kb-101")[0]
            assert top.metadata["match"] == "both"
            assert top.metadata["ranks"] == {"dense": 5, "lexical": 1, "fused": 1, "rerank": None}
            assert top.metadata["score"] == pytest.approx(1 / 61 + 1 / 65)
            assert top.metadata["origin"] == {
                "kind": "file", "sourcePath": "kb-101.md", "headingPath": [], "title": "kb-101"
            }
            assert top.metadata["source"] == "kb-101.md" and top.metadata["scope"] == "docs"
            assert "content" not in top.metadata
            assert second.metadata["match"] == "semantic" and second.metadata["lexicalScore"] is None
            assert second.metadata["vectorScore"] == pytest.approx(math.cos(math.radians(10)), abs=1e-6)
            assert second.metadata["score"] == pytest.approx(1 / 61)
        await _close(engine)

    with open_engine(kind, tmp_path) as (engine, plait):
        asyncio.run(body(engine, plait))


@pytest.mark.parametrize("kind", ENGINES)
def test_search_options_and_session_origins(kind: str, tmp_path: Path) -> None:
    use_async = kind == "async-client"

    async def body(engine: Any) -> None:
        lexical = PlaitRetriever(engine=engine, collection="a", k=2, fusion="rrf", lexical_weight=1.0)
        # lexical contributions x2, dense x0: kb-101 2/61, the dense-only kb-102 0
        scores = [d.metadata["score"] for d in await _get(lexical, QUERY, use_async=use_async)]
        assert scores == [pytest.approx(2 / 61), 0.0]
        only = PlaitRetriever(engine=engine, collection="a", fusion="rrf", filter={"docId": "kb-104"})
        assert [d.metadata["metadata"]["docId"] for d in await _get(only, QUERY, use_async=use_async)] == ["kb-104"]
        scoped = PlaitRetriever(engine=engine, collection="a", scopes=["adr"])
        assert await _get(scoped, QUERY, use_async=use_async) == []
        thinned = PlaitRetriever(engine=engine, collection="multi", mode="lexical", max_per_source=1)
        docs = await _get(thinned, "ERR-7", use_async=use_async)
        assert {d.metadata["source"]: d.metadata["moreFromSource"] for d in docs} == {"long.md": 2, "short.md": 0}
        (session,) = await _get(PlaitRetriever(engine=engine, collection="s"), "ERR-4013", use_async=use_async)
        assert session.page_content == SESSION_TEXT and session.metadata["source"] == "sess-1"
        assert session.metadata["origin"] == {"kind": "session", "sessionId": "sess-1", "eventId": "evt-1", "title": None}
        with pytest.raises(NotFoundError, match="collection 'nope' does not exist"):
            await _get(PlaitRetriever(engine=engine, collection="nope"), QUERY, use_async=use_async)
        await _close(engine)

    with open_engine(kind, tmp_path) as (engine, _):
        asyncio.run(body(engine))


def test_bad_construction_and_sync_use_of_an_async_client(tmp_path: Path) -> None:
    with open_engine("embedded", tmp_path) as (plait, _):
        with pytest.raises(ConfigError, match=r"unknown search option\(s\) 'fuson'; allowed: fusion, lexical_weight"):
            PlaitRetriever(engine=plait, fuson="rrf")
        with pytest.raises(ConfigError, match="engine must be a plait.Plait"):
            PlaitRetriever(engine="http://127.0.0.1:8000")
        with pytest.raises(ConfigError, match="k must be a whole number >= 1, got 0"):
            PlaitRetriever(engine=plait, k=0)
        # LangChain's own tags and metadata keep their meaning (tracing), they are not options
        traced = PlaitRetriever(engine=plait, collection="a", tags=["t"], metadata={"team": "x"})
        assert traced.tags == ["t"] and traced.metadata == {"team": "x"} and traced.search_options == {}
    with pytest.raises(ConfigError, match="engine is an AsyncClient: call it asynchronously"):
        PlaitRetriever(engine=AsyncClient("http://127.0.0.1:9")).invoke(QUERY)
