"""Usage metering against the fake Ollama / OpenAI servers: the token counts the provider
reports end up in the store's usage, per purpose; estimated (and labelled) when absent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.embeddings.remote import OllamaEmbedder, OpenAIEmbedder
from plait.errors import ValidationError
from plait.llm import OllamaLLM, OpenAILLM
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.testing.wire import WireServer
from plait.usage import UsageRow, bucket_of, estimate_tokens, since_bucket


def _embedded(server: WireServer, path: str) -> list[str]:
    """Every text the server was asked to embed at ``path``."""
    texts: list[str] = []
    for request in server.requests:
        if request.path == path and isinstance(request.body, dict):
            given = request.body["input"]
            texts += [given] if isinstance(given, str) else list(given)
    return texts


def _calls(server: WireServer, path: str) -> int:
    return sum(1 for r in server.requests if r.path == path)


def _only(rows: list[UsageRow], **match: Any) -> UsageRow:
    found = [r for r in rows if all(getattr(r, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, rows)
    return found[0]


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(dimension=32) as s:
        yield s


def test_ollama_embedding_tokens_as_reported(tmp_path: Path, server: WireServer) -> None:
    embedder = OllamaEmbedder(base_url=server.url, model="nomic-embed-text", retries=0)
    with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        engine.backfill()
        indexed = _embedded(server, "/api/embed")
        calls = _calls(server, "/api/embed")
        assert indexed and calls
        server.clear()
        engine.search("why was my payment refused", k=3)
        engine.search("ERR-4012", k=3, mode="lexical")  # never calls the embedder
        report = engine.usage()
    index = _only(report.rows, purpose="index")
    assert (index.kind, index.provider, index.model, index.estimated) == ("embedding", "ollama", "nomic-embed-text", False)
    # the fake Ollama reports prompt_eval_count = the words of the texts it embedded
    assert index.input_tokens == sum(len(t.split()) for t in indexed)
    assert (index.calls, index.texts, index.characters) == (calls, len(indexed), sum(len(t) for t in indexed))
    query = _only(report.rows, purpose="query")
    assert (query.calls, query.texts, query.input_tokens) == (1, 1, 5)  # "why was my payment refused"
    assert index.bucket == query.bucket == bucket_of()
    assert [t.purpose for t in report.totals] == ["index", "query"]


def test_openai_embeddings_and_llm_ask_and_rerank(tmp_path: Path, server: WireServer) -> None:
    embedder = OpenAIEmbedder(base_url=server.url, model="text-embedding-3-small", retries=0)
    server.chat = lambda messages: "ERR-4012 means the session token expired [1]."
    llm = OpenAILLM(base_url=server.url, model="gpt-4o-mini", retries=0)
    with Plait(str(tmp_path / "p.db"), embedder=embedder, llm=llm) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        engine.backfill()
        server.clear()
        answer = engine.ask("What does ERR-4012 mean?", k=3)
        assert answer.mode == "llm"
        chats = [r.body for r in server.requests if r.path == "/v1/chat/completions"]
        asked = _embedded(server, "/v1/embeddings")  # the question, and any gate calibration texts
        rows = engine.usage().rows
    (chat,) = chats
    ask = _only(rows, purpose="ask")
    # the fake OpenAI reports prompt_tokens = words of the messages, completion = words of the reply
    prompt = sum(len(str(m["content"]).split()) for m in chat["messages"])
    assert (ask.kind, ask.provider, ask.model, ask.estimated) == ("llm", "openai", "gpt-4o-mini", False)
    assert (ask.calls, ask.input_tokens, ask.output_tokens) == (1, prompt, 7)  # 7 words
    query = _only(rows, purpose="query")
    assert "What does ERR-4012 mean?" in asked
    assert (query.provider, query.texts) == ("openai", len(asked))
    assert query.input_tokens == sum(len(t.split()) for t in asked)  # as the fake OpenAI counts them
    index = _only(rows, purpose="index")
    assert index.provider == "openai" and index.input_tokens > 0 and not index.estimated


def test_llm_rerank_is_metered_as_rerank(tmp_path: Path, server: WireServer) -> None:
    server.chat = lambda messages: "[]"
    llm = OllamaLLM(base_url=server.url, model="llama3.2", retries=0)
    from plait.embeddings.fake import FakeEmbedder

    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=32), llm=llm) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        engine.search("ERR-4012", k=3, rerank="llm")
        rows = engine.usage().rows
    (chat,) = [r.body for r in server.requests if r.path == "/api/chat"]
    rerank = _only(rows, purpose="rerank")
    # the fake Ollama reports prompt_eval_count 1 and eval_count = words of the reply ("[]": 1)
    assert (rerank.kind, rerank.provider, rerank.model) == ("llm", "ollama", "llama3.2")
    assert (rerank.calls, rerank.input_tokens, rerank.output_tokens, rerank.estimated) == (1, 1, 1, False)
    assert chat["model"] == "llama3.2"
    assert [r.purpose for r in rows] == ["rerank"]  # the local fake embedder is not a paid provider


def test_tokens_are_estimated_and_labelled_when_the_provider_reports_none(tmp_path: Path) -> None:
    with WireServer(dimension=32, usage=False) as server:
        embedder = OllamaEmbedder(base_url=server.url, model="nomic-embed-text", retries=0)
        with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
            engine.index_documents(documents(ARTICLE_DOCS))
            engine.backfill()
            texts = _embedded(server, "/api/embed")
            rows = engine.usage().rows
    index = _only(rows, purpose="index")
    assert index.estimated is True
    assert index.input_tokens == estimate_tokens(texts) == sum(max(1, -(-len(t) // 4)) for t in texts)


def test_usage_since_cli_and_http(tmp_path: Path, server: WireServer) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from plait.api.http import create_app
    from plait.api.keys import KeyStore
    from plait.testing.asgi_server import UvicornThread

    store = str(tmp_path / "p.db")
    embedder = OllamaEmbedder(base_url=server.url, model="nomic-embed-text", retries=0)
    with Plait(store, embedder=embedder) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        engine.backfill()
        engine.store.add_usage(
            "default",
            [UsageRow(bucket="2020-01-01T00:00:00Z", kind="llm", purpose="ask", provider="openai",
                      model="gpt-4o-mini", calls=1, texts=2, characters=10, input_tokens=7, output_tokens=3)],
        )
        assert len(engine.usage().rows) == 2
        recent = engine.usage(since="24h")
        assert [r.purpose for r in recent.rows] == ["index"] and recent.since == since_bucket("24h")
        with pytest.raises(ValidationError, match="since"):
            engine.usage(since="last tuesday")
        keys = KeyStore(tmp_path / "keys.db")
        reader = keys.create(role="reader", collection="default")[1]
        maintainer = keys.create(role="maintainer", collection="default")[1]
        try:
            with UvicornThread(create_app(engine, keys=keys)) as http:
                url = f"{http.url}/v1/collections/default/usage"
                denied = httpx.get(url, headers={"Authorization": f"Bearer {reader}"})
                shown = httpx.get(url, params={"since": "2021-01-01"},
                                  headers={"Authorization": f"Bearer {maintainer}"})
        finally:
            keys.close()
        expected = engine.usage(since="2021-01-01").model_dump(mode="json", by_alias=True)
    assert denied.status_code == 403
    assert shown.status_code == 200 and shown.json() == expected
    assert shown.json()["rows"][0]["inputTokens"] == expected["rows"][0]["inputTokens"] > 0
    out = CliRunner().invoke(app, ["usage", "--store", store, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert [r["purpose"] for r in data["rows"]] == ["ask", "index"]
    table = CliRunner().invoke(app, ["usage", "--store", store, "--since", "2021-01-01"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "ollama/nomic-embed-text" in table.output and "openai" not in table.output
    bad = CliRunner().invoke(app, ["usage", "--store", store, "--since", "soon"])
    assert bad.exit_code == 1 and "since" in bad.output
