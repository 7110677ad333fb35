"""OllamaEmbedder and OpenAIEmbedder against a real local HTTP server (WireServer)."""

from __future__ import annotations

import base64
import time
from typing import Any

import httpx
import numpy as np
import pytest

from plait.embeddings import Embedder, OllamaEmbedder, OpenAIEmbedder
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError, ProviderResponseError, ProviderUnavailableError
from plait.testing.wire import WireServer, closed_port

DIM = 16
_FAKE = FakeEmbedder(dimension=DIM)


def raw_vectors(texts: list[str]) -> list[list[float]]:
    """Distinct, deliberately non-unit vectors: the client must normalise them."""
    unit = _FAKE.embed_documents(texts)
    return [(row * (i + 3.0)).tolist() for i, row in enumerate(unit)]


def expected(texts: list[str]) -> np.ndarray:
    return _FAKE.embed_documents(texts)


TEXTS = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta"]


# -- happy paths ----------------------------------------------------------------------


def test_ollama_embeddings_parsed_and_normalised() -> None:
    with WireServer(dimension=DIM, embed=raw_vectors) as srv:
        embedder = OllamaEmbedder(base_url=srv.url, model="nomic-embed-text")
        assert isinstance(embedder, Embedder)
        assert embedder.provider == "ollama"
        assert embedder.dimension is None
        assert embedder.known_dimension == 768  # a hint only
        matrix = embedder.embed_documents(TEXTS)
        assert matrix.shape == (len(TEXTS), DIM)
        assert matrix.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(matrix, expected(TEXTS), atol=1e-5)
        assert embedder.dimension == DIM  # learned from the answer
        (request,) = srv.requests
        assert (request.method, request.path) == ("POST", "/api/embed")
        assert request.body == {"model": "nomic-embed-text", "input": TEXTS}
        embedder.close()


def test_openai_embeddings_sorted_by_index_with_auth() -> None:
    with WireServer(dimension=DIM, embed=raw_vectors, shuffle=True) as srv:
        with OpenAIEmbedder(base_url=srv.url, api_key="sk-test-123") as embedder:
            matrix = embedder.embed_documents(TEXTS)
        np.testing.assert_allclose(matrix, expected(TEXTS), atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
        (request,) = srv.requests
        assert request.path == "/v1/embeddings"
        assert request.body == {"model": "text-embedding-3-small", "input": TEXTS}
        assert request.headers.get("Authorization") == "Bearer sk-test-123"
        assert "sk-test-123" not in repr(embedder)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_openai_base_url_with_or_without_v1(suffix: str) -> None:
    with WireServer(dimension=DIM) as srv:
        embedder = OpenAIEmbedder(base_url=srv.url + suffix)
        assert embedder.url == srv.url + "/v1/embeddings"
        embedder.embed_documents(["one"])
        assert srv.paths() == ["/v1/embeddings"]


def test_openai_dimensions_sent_and_enforced() -> None:
    with WireServer(dimension=DIM) as srv:
        embedder = OpenAIEmbedder(base_url=srv.url, dimensions=8)
        assert embedder.dimension == 8
        assert embedder.embed_documents(["a b", "c d"]).shape == (2, 8)
        assert srv.requests[0].body["dimensions"] == 8


def test_query_is_cached_and_batches_respect_batch_size() -> None:
    with WireServer(dimension=DIM) as srv:
        embedder = OllamaEmbedder(base_url=srv.url, batch_size=2)
        first = embedder.embed_query("what is hybrid search?")
        second = embedder.embed_query("what is hybrid search?")
        assert first is second
        assert len(srv.requests) == 1
        srv.clear()
        embedder.embed_documents([f"text {i}" for i in range(5)])
        assert [len(r.body["input"]) for r in srv.requests] == [2, 2, 1]


def test_empty_texts_are_sent_as_a_space_to_openai() -> None:
    with WireServer(dimension=DIM) as srv:
        OpenAIEmbedder(base_url=srv.url).embed_documents(["", "x"])
        assert srv.requests[0].body["input"] == [" ", "x"]


def test_empty_document_list_makes_no_request() -> None:
    with WireServer(dimension=DIM) as srv:
        assert OllamaEmbedder(base_url=srv.url).embed_documents([]).shape[0] == 0
        assert srv.requests == []


def test_openai_base64_embeddings_are_decoded() -> None:
    embedder = OpenAIEmbedder(base_url="http://127.0.0.1:9")
    vector = np.array([3.0, 4.0], dtype="<f4")
    answer = {
        "data": [{"index": 0, "embedding": base64.b64encode(vector.tobytes()).decode()}]
    }
    np.testing.assert_allclose(embedder._parse(answer, 1), [[3.0, 4.0]])


# -- retries --------------------------------------------------------------------------


def test_flap_retries_500_then_succeeds() -> None:
    with WireServer(dimension=DIM, flap=True) as srv:
        embedder = OllamaEmbedder(base_url=srv.url, retries=2, backoff=0.01)
        matrix = embedder.embed_documents(["a", "b"])
        assert matrix.shape == (2, DIM)
        assert len(srv.requests) == 2  # the first failed with 500, the retry succeeded


def test_persistent_500_gives_up_after_retries() -> None:
    with WireServer(dimension=DIM, status=500) as srv:
        embedder = OpenAIEmbedder(base_url=srv.url, retries=2, backoff=0.01)
        with pytest.raises(ProviderResponseError, match="500") as info:
            embedder.embed_documents(["a"])
        assert "3 attempts" in str(info.value)
        assert len(srv.requests) == 3


def test_persistent_503_is_unavailable() -> None:
    with WireServer(dimension=DIM, status=503) as srv:
        embedder = OllamaEmbedder(base_url=srv.url, retries=1, backoff=0.01)
        with pytest.raises(ProviderUnavailableError, match="HTTP 503") as info:
            embedder.embed_documents(["a"])
        assert srv.url in str(info.value)
        assert len(srv.requests) == 2


def test_429_is_retried() -> None:
    with WireServer(dimension=DIM, status=429) as srv:
        embedder = OllamaEmbedder(base_url=srv.url, retries=1, backoff=0.01)
        with pytest.raises(ProviderResponseError, match="429"):
            embedder.embed_query("q")
        assert len(srv.requests) == 2


def test_400_fails_at_once_with_status_and_body() -> None:
    with WireServer(dimension=DIM, status=400) as srv:
        embedder = OpenAIEmbedder(base_url=srv.url, retries=3, backoff=0.01)
        with pytest.raises(ProviderResponseError) as info:
            embedder.embed_documents(["a"])
        message = str(info.value)
        assert "400" in message and "scripted failure" in message
        assert len(srv.requests) == 1


def test_timeout_is_unavailable_within_the_configured_timeout() -> None:
    with WireServer(dimension=DIM, delay=5.0) as srv:
        embedder = OllamaEmbedder(base_url=srv.url, timeout=0.3, retries=0)
        start = time.monotonic()
        with pytest.raises(ProviderUnavailableError) as info:
            embedder.embed_documents(["slow"])
        elapsed = time.monotonic() - start
        assert elapsed < 0.3 + 0.7
        message = str(info.value)
        assert srv.url in message and "timed out" in message


def test_timeout_retries_are_bounded() -> None:
    with WireServer(dimension=DIM, delay=5.0) as srv:
        embedder = OpenAIEmbedder(
            base_url=srv.url, timeout=0.3, retries=1, backoff=0.05
        )
        start = time.monotonic()
        with pytest.raises(ProviderUnavailableError, match="2 attempts"):
            embedder.embed_query("slow")
        elapsed = time.monotonic() - start
        assert elapsed < 2 * 0.3 + 0.05 + 1.0
        assert len(srv.requests) == 2


def test_closed_port_is_unavailable_quickly() -> None:
    url = closed_port()
    embedder = OllamaEmbedder(base_url=url, retries=2, backoff=0.01)
    start = time.monotonic()
    with pytest.raises(ProviderUnavailableError) as info:
        embedder.embed_documents(["a"])
    assert time.monotonic() - start < 2.0
    message = str(info.value)
    assert url in message and "refused" in message and "3 attempts" in message


# -- bad answers ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", [OllamaEmbedder, OpenAIEmbedder])
def test_malformed_json_is_a_response_error_without_retry(cls: type) -> None:
    with WireServer(dimension=DIM, malformed=True) as srv:
        embedder = cls(base_url=srv.url, retries=2, backoff=0.01)
        with pytest.raises(ProviderResponseError, match="malformed JSON"):
            embedder.embed_documents(["a"])
        assert len(srv.requests) == 1


@pytest.mark.parametrize("cls", [OllamaEmbedder, OpenAIEmbedder])
def test_wrong_dimension_after_the_first_answer(cls: type) -> None:
    with WireServer(dimension=DIM) as srv:
        embedder = cls(base_url=srv.url)
        embedder.embed_documents(["a"])
        srv.wrong_dimension = True
        with pytest.raises(
            ProviderResponseError, match=f"{DIM + 1}-d vectors, expected {DIM}-d"
        ):
            embedder.embed_documents(["b"])


def test_wrong_dimension_against_requested_dimensions() -> None:
    with WireServer(dimension=DIM, wrong_dimension=True) as srv:
        embedder = OpenAIEmbedder(base_url=srv.url, dimensions=8)
        with pytest.raises(ProviderResponseError, match="9-d vectors, expected 8-d"):
            embedder.embed_query("a")


def test_wrong_count_and_ragged_answers() -> None:
    def short(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]]

    def ragged(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0], [1.0, 0.0, 0.0]]

    with WireServer(dimension=DIM, embed=short) as srv:
        embedder = OllamaEmbedder(base_url=srv.url)
        with pytest.raises(ProviderResponseError, match="1 embeddings for 2 texts"):
            embedder.embed_documents(["a", "b"])
    with WireServer(dimension=DIM, embed=ragged) as srv:
        openai = OpenAIEmbedder(base_url=srv.url)
        with pytest.raises(ProviderResponseError, match="different dimensions"):
            openai.embed_documents(["a", "b"])


def test_wrong_shape_answers() -> None:
    embedder = OpenAIEmbedder(base_url="http://127.0.0.1:9")
    with pytest.raises(ProviderResponseError, match="no 'data' list"):
        embedder._parse({"embeddings": []}, 1)
    with pytest.raises(ProviderResponseError, match="not 0..n-1"):
        embedder._parse({"data": [{"index": 1, "embedding": [1.0]}]}, 1)
    with pytest.raises(ProviderResponseError, match="non-numeric"):
        embedder._parse({"data": [{"index": 0, "embedding": ["x"]}]}, 1)
    ollama = OllamaEmbedder(base_url="http://127.0.0.1:9")
    with pytest.raises(ProviderResponseError, match="object was expected"):
        ollama._parse([[1.0]], 1)
    with pytest.raises(ProviderResponseError, match="an error"):
        ollama._parse({"error": "model not found"}, 1)


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError):
        OllamaEmbedder(base_url="127.0.0.1:11434")
    with pytest.raises(ConfigError):
        OllamaEmbedder(retries=-1)
    with pytest.raises(ConfigError):
        OllamaEmbedder(timeout=0)
    with pytest.raises(ConfigError):
        OpenAIEmbedder(dimensions=0)


# -- the wire server itself -----------------------------------------------------------


def test_wire_server_chat_formats() -> None:
    def reply(messages: list[dict[str, Any]]) -> str:
        return f"{len(messages)} messages"

    with WireServer(chat=reply, model="m") as srv:
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "hi"},
        ]
        ollama = httpx.post(
            srv.url + "/api/chat",
            json={"model": "llama", "messages": messages, "stream": False},
        ).json()
        assert ollama["model"] == "llama" and ollama["done"] is True
        assert ollama["message"] == {"role": "assistant", "content": "2 messages"}

        stream = httpx.post(
            srv.url + "/api/chat", json={"model": "llama", "messages": messages}
        )
        chunks = [
            httpx.Response(200, content=line).json()
            for line in stream.text.splitlines()
        ]
        assert "".join(c["message"]["content"] for c in chunks) == "2 messages"
        assert chunks[-1]["done"] is True and not chunks[0]["done"]

        openai = httpx.post(
            srv.url + "/v1/chat/completions",
            json={"model": "gpt", "messages": messages},
        ).json()
        assert openai["object"] == "chat.completion"
        assert openai["choices"][0]["message"] == {
            "role": "assistant",
            "content": "2 messages",
        }
        assert openai["choices"][0]["finish_reason"] == "stop"
        assert set(openai["usage"]) == {
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
        }

        sse = httpx.post(
            srv.url + "/v1/chat/completions",
            json={"model": "gpt", "messages": messages, "stream": True},
        ).text
        assert sse.rstrip().endswith("data: [DONE]")
        assert srv.paths() == ["/api/chat"] * 2 + ["/v1/chat/completions"] * 2


def test_wire_server_default_chat_echoes_and_unknown_route_is_404() -> None:
    with WireServer() as srv:
        answer = httpx.post(
            srv.url + "/v1/chat/completions",
            json={"model": "x", "messages": [{"role": "user", "content": "ping"}]},
        ).json()
        assert answer["choices"][0]["message"]["content"] == "echo: ping"
        assert httpx.post(srv.url + "/nope", json={}).status_code == 404
        assert (
            httpx.post(srv.url + "/v1/embeddings", json={"input": 3}).status_code == 400
        )
        assert httpx.get(srv.url + "/health").json() == {"status": "ok"}


def test_wire_server_releases_its_port() -> None:
    srv = WireServer().start()
    url = srv.url
    srv.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=1.0)


def test_closed_port_refuses() -> None:
    with pytest.raises(httpx.ConnectError):
        httpx.get(closed_port(), timeout=1.0)
