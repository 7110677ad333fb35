"""``plait.client.Client``: the same calls, models and errors as ``Plait``, over a real server.

Every test taking ``engine`` runs twice: once on an embedded :class:`Plait`, once on a
:class:`Client` talking to a real uvicorn on 127.0.0.1 that serves an engine over an
identical store, with identical assertions. Dense ranks are placed with FakeEmbedder
overrides (the query on the e0 axis, each document at a chosen angle), so every rank
and score below is computed by hand (see ``hand_ranked``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

import httpx

from hand_ranked import DIM, QUERY, make_engine, serve
from plait import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConfigError,
    ModelMismatchError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServiceError,
    ServiceTimeoutError,
    ServiceUnavailableError,
    ValidationError,
)
from plait.api.http import create_app
from plait.api.keys import KeyStore
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConflictError
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread
from plait.testing.corpus import ARTICLE_DOCS
from plait.types import FileOrigin, Match, Ranks


@pytest.fixture(params=["embedded", "served"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with make_engine(tmp_path) as plait:
        if request.param == "embedded":
            yield plait
            return
        with serve(plait, tmp_path) as (url, token), Client(url, api_key=token, timeout=30) as client:
            yield client


# -- the same assertions, embedded and served ---------------------------------------------


def test_search_rrf_scores_ranks_and_citation(engine: Any) -> None:
    result = engine.search(QUERY, collection="a", k=3, fusion="rrf")
    assert [h.metadata["docId"] for h in result.hits] == ["kb-101", "kb-102", "kb-103"]
    top, second, third = result.hits
    assert top.match is Match.BOTH and top.ranks == Ranks(dense=5, lexical=1, fused=1)
    assert top.score == pytest.approx(1 / 61 + 1 / 65)  # RRF k = 60, equal weights
    assert top.vector_score == pytest.approx(math.cos(math.radians(80)), abs=1e-6)
    assert top.origin == FileOrigin(source_path="kb-101.md", title="kb-101")
    assert second.match is Match.SEMANTIC and second.lexical_score is None
    assert second.ranks == Ranks(dense=1, lexical=None, fused=2) and second.score == pytest.approx(1 / 61)
    assert third.ranks.dense == 2 and third.score == pytest.approx(1 / 62)
    assert result.collection == "a" and result.k == 3 and result.vector_available is True
    assert result.fusion_asked == {"fusion": "rrf"}
    assert result.fusion_decided is not None and result.fusion_decided.parameters["k"] == 60


def test_search_options_pass_through(engine: Any) -> None:
    # lexical weight 1.0: lexical contributions x2, dense x0 → kb-101 alone, 2/61
    lexical = engine.search(QUERY, collection="a", k=2, fusion="rrf", lexical_weight=1.0, rrf_k=60)
    assert lexical.hits[0].score == pytest.approx(2 / 61)
    paged = engine.search(QUERY, collection="a", k=2, fusion="rrf", offset=1)
    assert [h.metadata["docId"] for h in paged.hits] == ["kb-102", "kb-103"] and paged.offset == 1
    assert [h.ranks.fused for h in paged.hits] == [2, 3]
    scoped = engine.search(QUERY, collection="a", scopes=("adr",), metadata={"docId": "kb-101"})
    assert scoped.hits == [] and "scope 'adr' has no chunks" in scoped.notes[-1]
    filtered = engine.search(QUERY, collection="a", metadata={"docId": "kb-104"}, fusion="rrf")
    assert [h.metadata["docId"] for h in filtered.hits] == ["kb-104"]


def test_search_and_ask_modes_pass_through(engine: Any) -> None:
    lexical = engine.search(QUERY, collection="a", mode="lexical")
    assert lexical.mode == "lexical" and [h.metadata["docId"] for h in lexical.hits] == ["kb-101"]
    assert lexical.hits[0].match is Match.LEXICAL and lexical.hits[0].ranks.dense is None
    vector = engine.search(QUERY, collection="a", k=5, mode="vector")
    assert [h.metadata["docId"] for h in vector.hits] == ["kb-102", "kb-103", "kb-104", "kb-105", "kb-101"]
    assert all(h.lexical_score is None and h.match is Match.SEMANTIC for h in vector.hits)
    answer = engine.ask("What does ERR-4012 mean?", collection="a", mode="lexical")
    assert answer.citations[0].chunk_id == lexical.hits[0].chunk_id
    assert all(source.ranks.dense is None for source in answer.sources)
    with pytest.raises(ValidationError, match="mode"):
        engine.search(QUERY, collection="a", mode="dense")


def test_max_per_source_passes_through(engine: Any) -> None:
    every = engine.search("ERR-7", collection="multi", mode="lexical")
    assert sorted(h.origin.source_path for h in every.hits) == ["long.md", "long.md", "long.md", "short.md"]
    assert all(h.more_from_source is None for h in every.hits)
    thinned = engine.search("ERR-7", collection="multi", mode="lexical", max_per_source=1)
    assert {h.origin.source_path: h.more_from_source for h in thinned.hits} == {"long.md": 2, "short.md": 0}
    assert len(thinned.hits) == 2


def test_search_request_takes_the_camel_case_form(engine: Any) -> None:
    result = engine.search_request("a", {"query": QUERY, "k": 1, "fusion": "rrf", "lexicalWeight": 1.0})
    assert result.hits[0].score == pytest.approx(2 / 61) and result.k == 1


def test_explain_says_fusion_rescued_the_identifier(engine: Any) -> None:
    result = engine.explain(QUERY, doc="kb-101", collection="a", k=1, fusion="rrf")
    assert result.lexical.rank == 1 and result.dense.rank == 5 and result.fusion.rank == 1
    assert result.fusion.score == pytest.approx(1 / 61 + 1 / 65)
    assert result.diagnosis.code == "fusion-worked"
    assert result.diagnosis.message.startswith("fusion worked (lexical 1, dense 5, fused 1)")


def test_ask_cites_the_chunk_the_search_found(engine: Any) -> None:
    answer = engine.ask("What does ERR-4012 mean?", collection="a")
    top = engine.search(QUERY, collection="a", k=1).hits[0]
    assert answer.mode == "extractive" and answer.grounded is True
    assert answer.answer == f"{ARTICLE_DOCS['kb-101']} [1]"
    assert [(c.n, c.chunk_id) for c in answer.citations] == [(1, top.chunk_id)]
    assert answer.citations[0].origin == FileOrigin(source_path="kb-101.md", title="kb-101")


def test_coverage_collections_and_reindex(engine: Any, tmp_path: Path) -> None:
    report = engine.coverage(collection="files")
    (scope,) = report.scopes
    assert (scope.scope, scope.sources_present, scope.sources_indexed, scope.chunks) == ("docs", 2, 2, 2)
    assert scope.chunks_without_vector == 0 and scope.embedding_model == "fake/hash-64"
    infos = {c.name: c for c in engine.collections()}
    assert sorted(infos) == ["a", "files", "multi", "other"]
    assert (infos["a"].chunks, infos["a"].sources, infos["a"].dimension) == (5, 5, DIM)
    assert infos["other"].embedder_model == "other-model"

    unchanged = engine.reindex(collection="files")
    assert (unchanged.sources_seen, unchanged.chunks_unchanged, unchanged.chunks_added) == (2, 2, 0)
    assert unchanged.complete is True and unchanged.embedding.embedded == 0
    (tmp_path / "files" / "keys.md").write_text("# Keys\n\nEvery refund carries a key.\n", encoding="utf-8")
    changed = engine.reindex(collection="files")
    assert changed.changed_sources == ["keys.md"] and changed.embedding.embedded == 1
    assert (changed.chunks_unchanged, changed.chunks_added + changed.chunks_updated) == (1, 1)


def test_errors_are_the_same_classes(engine: Any) -> None:
    with pytest.raises(NotFoundError, match="collection 'nope' does not exist"):
        engine.search(QUERY, collection="nope")
    with pytest.raises(NotFoundError):
        engine.coverage(collection="nope")
    with pytest.raises(NotFoundError):
        engine.reindex(collection="nope")
    with pytest.raises(ValidationError, match="k: Input should be greater than or equal to 1"):
        engine.search(QUERY, collection="a", k=0)
    with pytest.raises(ValidationError, match="name exactly one document to explain"):
        engine.explain(QUERY, collection="a")
    with pytest.raises(ModelMismatchError, match="other-model"):
        engine.search(QUERY, collection="other")
    with pytest.raises(ConfigError, match="rerank='llm' needs an LLM"):
        engine.search(QUERY, collection="a", rerank="llm")


# -- served only -------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    with make_engine(tmp_path) as plait:
        keys = KeyStore(tmp_path / "keys.db")
        tokens = {
            "reader_a": keys.create(role="reader", collection="a")[1],
            "maintainer_files": keys.create(role="maintainer", collection="files")[1],
        }
        try:
            with UvicornThread(create_app(plait, auth=True, keys=keys)) as server:
                yield server.url, tokens
        finally:
            keys.close()


def test_auth_errors(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    with Client(url) as anonymous, pytest.raises(AuthenticationError, match="a valid API key") as no_key:
        anonymous.search(QUERY, collection="a")
    assert no_key.value.status == 401
    with Client(url, api_key="plait_wrong") as wrong, pytest.raises(AuthenticationError):
        wrong.collections()
    with Client(url, api_key=tokens["reader_a"]) as reader:
        assert [c.name for c in reader.collections()] == ["a"]  # only what the key covers
        assert reader.search(QUERY, collection="a", k=1).hits[0].metadata["docId"] == "kb-101"
        with pytest.raises(PermissionDeniedError, match="maintainer role") as denied:
            reader.reindex(collection="a")
        assert denied.value.status == 403
        # a collection the key does not cover looks exactly like one that does not exist
        with pytest.raises(NotFoundError, match="collection 'files' does not exist") as hidden:
            reader.coverage(collection="files")
        assert any("HTTP 404" in note for note in hidden.value.__notes__)
    with Client(url + "/", api_key=tokens["maintainer_files"]) as maintainer:
        assert maintainer.reindex(collection="files", timeout=60).chunks_unchanged == 2


def test_the_server_names_the_error_class(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    headers = {"Authorization": f"Bearer {tokens['reader_a']}"}
    response = httpx.post(f"{url}/v1/collections/a/search", json={"query": QUERY, "rerank": "llm"}, headers=headers)
    assert response.status_code == 422 and response.headers["X-Plait-Error"] == "ConfigError"
    # it said "pass llm='ollama' …", which a request cannot: its body has no llm field
    assert response.json() == {"error": (
        "rerank='llm' needs an LLM and none is configured: set PLAIT_LLM (ollama | openai) where plait runs "
        "(for plait serve and plait mcp, the server's environment), or pass llm= (Python) / --llm (CLI)")}


def test_async_client_gives_the_same_models(served: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    url, tokens = served

    async def run() -> tuple[Any, Any, Any]:
        async with AsyncClient(url, api_key=tokens["reader_a"]) as client:
            result = await client.search(QUERY, collection="a", k=3, fusion="rrf")
            answer = await client.ask("What does ERR-4012 mean?", collection="a")
            try:
                await client.reindex(collection="a")
            except PermissionDeniedError as exc:
                return result, answer, exc
            return result, answer, None

    result, answer, denied = asyncio.run(run())
    assert [h.ranks.dense for h in result.hits] == [5, 1, 2]
    assert result.hits[0].score == pytest.approx(1 / 61 + 1 / 65)
    assert answer.citations[0].chunk_id == result.hits[0].chunk_id
    assert isinstance(denied, PermissionDeniedError) and denied.status == 403


FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"


def test_usage_and_faq_review_over_http(tmp_path: Path) -> None:
    """usage (maintainer), faq_cards (a reader sees approved cards only), approve_card and
    reject_card (maintainer) against a real server: the models Plait returns."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=DIM)) as plait:
        plait.index(kb, collection="kb")
        plait.refinery.run("kb", mode="extractive")
        drafts = plait.refinery.cards("kb", status="draft")
        assert len(drafts) >= 2
        keys = KeyStore(tmp_path / "keys.db")
        reader_token = keys.create(role="reader", collection="kb")[1]
        maintainer_token = keys.create(role="maintainer", collection="kb")[1]
        try:
            with UvicornThread(create_app(plait, auth=True, keys=keys)) as server, Client(
                server.url, api_key=reader_token
            ) as reader, Client(server.url, api_key=maintainer_token) as maintainer:
                assert reader.faq_cards("kb") == []  # nothing approved yet
                with pytest.raises(PermissionDeniedError):
                    reader.faq_cards("kb", status="draft")
                assert maintainer.faq_cards("kb", status="draft") == drafts
                approved = maintainer.approve_card("kb", drafts[0].id)
                rejected = maintainer.reject_card("kb", drafts[1].id)
                with pytest.raises(PermissionDeniedError):
                    reader.approve_card("kb", drafts[1].id)
                with pytest.raises(NotFoundError):
                    maintainer.approve_card("kb", "no-such-card")
                seen = reader.faq_cards("kb")
                usage = maintainer.usage("kb", since="2021-01-01")
                with pytest.raises(PermissionDeniedError, match="maintainer"):
                    reader.usage("kb")
        finally:
            keys.close()
        assert (approved.status, rejected.status) == ("approved", "rejected")
        assert seen == [approved] == plait.refinery.cards("kb", status="approved")
        assert usage == plait.usage("kb", since="2021-01-01") and usage.collection == "kb"


def test_same_signatures_as_plait() -> None:
    """Options added to Plait must be added to the clients (and the reverse)."""
    for name in ("search", "explain", "ask", "coverage", "collections", "search_request", "ask_request", "usage"):
        # drafts_visible is decided by the key's role on a server, never by the caller
        plait = {k: v for k, v in inspect.signature(getattr(Plait, name)).parameters.items() if k != "drafts_visible"}
        for kind in (Client, AsyncClient):
            client = inspect.signature(getattr(kind, name)).parameters
            assert list(client) == list(plait), (kind.__name__, name)
            for param, spec in plait.items():
                assert client[param].default == spec.default, (kind.__name__, name, param)
                assert client[param].kind == spec.kind, (kind.__name__, name, param)


def test_one_rule_builds_the_request_body_for_the_facade_and_both_clients() -> None:
    """Plait.search/ask/explain and the clients build their camelCase body with
    plait.request_body; the clients' methods are made once for sync and async."""
    from plait.request_body import request_body

    body = request_body(
        {"self": object(), "collection": "c", "query": "q", "k": 3, "rrf_k": None, "k_overfetch": 40,
         "scopes": ("docs", "faq"), "metadata": {}, "qa_first": False, "max_per_source": 2}
    )
    assert body == {"query": "q", "k": 3, "kOverfetch": 40, "scopes": ["docs", "faq"], "qaFirst": False, "maxPerSource": 2}
    assert request_body({"collection": "kept", "doc": "d"}, skip=()) == {"collection": "kept", "doc": "d"}
    assert (Client.search.__qualname__, AsyncClient.ask.__qualname__) == ("Client.search", "AsyncClient.ask")
    assert not inspect.iscoroutinefunction(Client.search)
    assert all(inspect.iscoroutinefunction(getattr(AsyncClient, name)) for name in ("search", "explain", "health"))
    assert Client.search.__doc__ == AsyncClient.search.__doc__ == "Hybrid search, as :meth:`plait.Plait.search`."


# -- no answer, or not plait's answer ----------------------------------------------------


def test_timeout_and_refused_connection() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        with (
            Client(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.3) as client,
            pytest.raises(ServiceTimeoutError, match=r"timed out after 0.3s \(read timeout\)") as timed_out,
        ):
            client.collections()
        assert timed_out.value.status is None and isinstance(timed_out.value, ServiceUnavailableError)
    finally:
        silent.close()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    with Client(f"http://127.0.0.1:{port}") as client, pytest.raises(ServiceUnavailableError, match="connection refused"):
        client.search(QUERY)


class _Canned(BaseHTTPRequestHandler):
    """Answers every request with the status, headers and body of the server's ``canned``."""

    def _answer(self) -> None:
        status, headers, body = self.server.canned  # type: ignore[attr-defined]
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def canned() -> Iterator[tuple[str, ThreadingHTTPServer]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("status", "headers", "body", "error", "message", "retry"),
    [
        (429, {**JSON, "Retry-After": "7"}, b'{"error": "slow down"}', RateLimitError, "slow down", 7.0),
        (503, {**JSON, "Retry-After": "1"}, b'{"error": "server busy"}', ServiceUnavailableError, "server busy", 1.0),
        (408, JSON, b'{"error": "the request body did not arrive"}', ServiceTimeoutError, "did not arrive", None),
        (500, JSON, b'{"error": "internal error"}', ServiceError, "internal error", None),
        (502, {"Content-Type": "text/html"}, b"<h1>Bad Gateway</h1>", ServiceUnavailableError, "HTTP 502: <h1>Bad Gateway</h1>", None),
        (415, JSON, b'{"error": "POST needs a JSON content type"}', ValidationError, "JSON content type", None),
        (409, {**JSON, "X-Plait-Error": "ModelMismatchError"}, b'{"error": "indexed with x"}', ModelMismatchError, "indexed with x", None),
        (409, JSON, b'{"error": "a run is active"}', ConflictError, "a run is active", None),
        (404, {**JSON, "X-Plait-Error": "NoSuchClass"}, b'{"error": "gone"}', NotFoundError, "gone", None),
    ],
)
def test_status_codes_map_to_the_error_classes(
    canned: tuple[str, ThreadingHTTPServer],
    status: int,
    headers: dict[str, str],
    body: bytes,
    error: type[Exception],
    message: str,
    retry: float | None,
) -> None:
    url, server = canned
    server.canned = (status, headers, body)  # type: ignore[attr-defined]
    with Client(url) as client, pytest.raises(error, match=message) as raised:
        client.search(QUERY)
    if isinstance(raised.value, ServiceError):
        assert raised.value.status == status and raised.value.retry_after == retry


def test_an_answer_that_is_not_plait_is_a_service_error(canned: tuple[str, ThreadingHTTPServer]) -> None:
    url, server = canned
    server.canned = (200, {"Content-Type": "text/html"}, b"<html>hello</html>")  # type: ignore[attr-defined]
    with Client(url) as client, pytest.raises(ServiceError, match="not JSON .* is this a plait server"):
        client.search(QUERY)
    server.canned = (200, JSON, b'{"hits": "no"}')  # type: ignore[attr-defined]
    with Client(url) as client, pytest.raises(ServiceError, match="not what this client expects"):
        client.search(QUERY)


def test_fields_a_newer_server_adds_are_ignored(canned: tuple[str, ThreadingHTTPServer], tmp_path: Path) -> None:
    """An older client against a newer server: unknown fields in an answer (top level and
    nested) are dropped, not a 'not what this client expects' error."""
    with make_engine(tmp_path) as plait:
        result = plait.search(QUERY, collection="a", k=2)
    data = result.model_dump(mode="json", by_alias=True)
    data["servedBy"] = "plait 9.9"
    for hit in data["hits"]:
        hit["futureBadge"] = {"kind": "new"}
        hit["ranks"]["sparse"] = 3
    url, server = canned
    server.canned = (200, JSON, json.dumps(data).encode())  # type: ignore[attr-defined]
    with Client(url) as client:
        assert client.search(QUERY, collection="a", k=2) == result


def test_bad_settings_are_config_errors() -> None:
    for url in ("127.0.0.1:8000", "ftp://host", ""):
        with pytest.raises(ConfigError, match="base_url"):
            Client(url)
    with pytest.raises(ConfigError, match="timeout"):
        Client("http://127.0.0.1:8000", timeout=0)
    with pytest.raises(ConfigError, match="api_key is empty"):
        Client("http://127.0.0.1:8000", api_key=" ")
