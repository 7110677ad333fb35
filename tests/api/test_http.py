"""The HTTP API through a real uvicorn server (127.0.0.1, free port) and httpx:
bodies are the library's own camelCase models, errors are one-line ``{"error": …}``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

import httpx
from http_served import Served, serve_engine

from plait.api.http import MAX_BODY_BYTES, create_app, error_status
from plait.embeddings.fake import FakeEmbedder
from plait.errors import (
    ConfigError,
    ModelMismatchError,
    NotFoundError,
    ProviderResponseError,
    ProviderUnavailableError,
    StoreUnavailableError,
    ValidationError,
)
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread
from plait.types import to_json


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_engine(tmp_path) as s:
        yield s


@pytest.fixture
def admin(served: Served) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {served.tokens['admin_all']}"}
    with httpx.Client(base_url=served.url, headers=headers, timeout=30) as client:
        yield client


def _search(client: httpx.Client, collection: str, body: Any) -> httpx.Response:
    return client.post(f"/v1/collections/{collection}/search", json=body)


def test_health_needs_no_key(served: Served) -> None:
    response = httpx.get(served.url + "/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "auth": True, "defaultCollection": "default"}


def _raw_head(url: str, path: str) -> tuple[str, dict[str, str], bytes]:
    """HEAD ``path`` over a plain socket: the status line, the headers and every byte after
    them until the server closes (httpx would not read a body a HEAD response carries)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"HEAD {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return status, headers, body


def test_health_checkers_may_send_head(served: Served) -> None:
    """HEAD / and HEAD /healthz were 405 (only GET was routed). Each is now GET's status and
    headers with no body, and the OpenAPI document still lists one GET operation."""
    for path, kind in (("/", "text/html; charset=utf-8"), ("/healthz", "application/json"), ("/readyz", "application/json")):
        got = httpx.get(served.url + path)
        status, headers, body = _raw_head(served.url, path)
        assert (status, headers["content-type"], body) == ("HTTP/1.1 200 OK", kind, b""), path
        assert headers["content-length"] == str(len(got.content)) and got.status_code == 200
    paths = httpx.get(served.url + "/openapi.json").json()["paths"]
    assert list(paths["/healthz"]) == ["get"] and list(paths["/readyz"]) == ["get"] and "/" not in paths


def test_search_returns_the_library_model_in_camel_case(served: Served, admin: httpx.Client) -> None:
    response = _search(admin, "a", {"query": "ERR-4012", "k": 3, "lexicalWeight": 0.5, "fusion": "rrf"})
    assert response.status_code == 200
    data = response.json()
    expected = to_json(served.engine.search("ERR-4012", collection="a", k=3, lexical_weight=0.5, fusion="rrf"))
    data.pop("timingsMs"), expected.pop("timingsMs")
    assert data == expected
    top = data["hits"][0]
    assert set(top) == {
        "chunkId", "content", "score", "vectorScore", "lexicalScore", "match", "scope", "ranks",
        "origin", "metadata", "scoreNormalised", "snippet", "highlights",  # issue 20: readable hits
        "moreFromSource",  # issue 25: null without maxPerSource
    }
    assert top["moreFromSource"] is None
    assert top["metadata"]["docId"] == "kb-101" and top["match"] == "both"
    assert top["ranks"]["lexical"] == 1 and top["ranks"]["fused"] == 1
    # RRF, k = 60, equal weights: 1/(60 + lexical rank) + 1/(60 + dense rank).
    assert top["score"] == pytest.approx(1 / 61 + 1 / (60 + top["ranks"]["dense"]))
    assert top["origin"] == {"kind": "file", "sourcePath": "kb-101.md", "headingPath": [], "title": "kb-101"}
    assert data["fusion"]["rrfK"] == 60 and data["vectorAvailable"] is True


def test_a_hit_no_arm_found_lexically_has_null_lexical_score(admin: httpx.Client) -> None:
    data = _search(admin, "a", {"query": "zebra", "k": 5}).json()
    assert len(data["hits"]) == 5
    assert all(h["match"] == "semantic" and h["lexicalScore"] is None for h in data["hits"])
    assert all(h["ranks"]["lexical"] is None for h in data["hits"])


def test_weighted_fusion_and_the_fusion_echo(admin: httpx.Client) -> None:
    data = _search(admin, "a", {"query": "ERR-4012", "fusion": "weighted", "k": 2}).json()
    assert data["fusion"]["method"] == "weighted" and data["fusion"]["threshold"] == 0.2
    assert data["hits"][0]["metadata"]["docId"] == "kb-101"


LONG = "x" * 5000


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        ({"query": ""}, ["query", "empty"]),
        ({"query": "   "}, ["query", "empty"]),
        ({"query": LONG}, ["query", "5000", "4096"]),
        ({"query": "a", "k": 0}, ["k", "greater than or equal to 1", "got 0"]),
        ({"query": "a", "k": 201}, ["k", "less than or equal to 200"]),
        ({"query": "a", "fusion": "max"}, ["fusion", "'rrf', 'weighted', 'minmax', 'dbsf' or 'adaptive'"]),
        ({"query": "a", "lexicalWeight": 1.5}, ["lexicalWeight", "less than or equal to 1"]),
        ({"query": "a", "bogus": 1}, ["bogus", "Extra inputs"]),
        ({"query": "a", "k": True}, ["k", "expected a number, got true"]),  # was read as k=1
        ({"query": "a", "offset": False}, ["offset", "expected a number, got false"]),
        ({"query": "a", "lexicalWeight": True}, ["lexicalWeight", "expected a number, got true"]),
        # NaN and infinity were refused only by a range check ('less than or equal to 1 (got nan)')
        ({"query": "a", "fusion": "rrf", "lexicalWeight": "NaN"}, ["lexicalWeight", "expected a finite number, got nan"]),
        ({"query": "a", "fusion": "weighted", "threshold": "-Infinity"}, ["threshold", "a finite number, got -inf"]),
        # a string or a number for a flag was read as a boolean ('yes', 'on', 1 → true)
        ({"query": "a", "qaFirst": "yes"}, ["qaFirst", "valid boolean", "got 'yes'"]),
        ({"query": "a", "languagePrior": 0}, ["languagePrior", "valid boolean", "got 0"]),
        ({"query": "a", "fusion": {"method": "adaptive", "languagePrior": "off"}}, ["languagePrior", "valid boolean"]),
        ({"k": 3}, ["query", "Field required"]),
        ([1, 2], ["body", "dictionary"]),
    ],
)
def test_invalid_requests_are_422_with_one_clear_line(
    admin: httpx.Client, body: Any, needles: list[str]
) -> None:
    response = _search(admin, "a", body)
    assert response.status_code == 422
    data = response.json()
    assert list(data) == ["error"]
    message = data["error"]
    for needle in needles:
        assert needle in message
    assert "\n" not in message and "Traceback" not in message and len(message) <= 300
    assert "x" * 50 not in message  # a huge input is never echoed


def test_nan_and_bool_are_named_once(admin: httpx.Client) -> None:
    """A JSON NaN token (Python's json reads it) and true are refused in words that say
    what was given, once (the message used to end '… got true (got True)')."""
    nan = admin.post(
        "/v1/collections/a/search", content=b'{"query": "a", "fusion": "rrf", "lexicalWeight": NaN}',
        headers={"Content-Type": "application/json"},
    )
    assert (nan.status_code, nan.json()) == (422, {"error": "lexicalWeight: expected a finite number, got nan"})
    as_bool = _search(admin, "a", {"query": "a", "k": True})
    assert (as_bool.status_code, as_bool.json()) == (422, {"error": "k: expected a number, got true"})


def test_malformed_json_is_422(admin: httpx.Client) -> None:
    response = admin.post(
        "/v1/collections/a/search", content=b'{"query": ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json() == {"error": "malformed JSON body (at character 10)"}


def test_a_metadata_value_no_scalar_takes_is_named_at_its_own_field(admin: httpx.Client) -> None:
    """It was 'metadata.a.str: Input should be a valid string; metadata.a.int: …; and 1 more':
    pydantic's one error per member of the union, each at a field that does not exist."""
    response = _search(admin, "a", {"query": "a", "metadata": {"a": {"b": 1}, "c": "ok"}})
    assert (response.status_code, response.json()) == (
        422, {"error": "metadata.a: Input should be a valid string, integer, number or boolean"})


def test_a_body_not_utf8_or_nested_too_deeply_is_malformed_json(admin: httpx.Client) -> None:
    """Both were a 400 'There was an error parsing the body' (FastAPI's words), saying
    neither what was wrong nor that it is the same malformed JSON a syntax error is (422)."""
    latin1 = admin.post(
        "/v1/collections/a/search", content='{"query": "café"}'.encode("latin-1"),
        headers={"Content-Type": "application/json"},
    )
    assert (latin1.status_code, latin1.json()) == (
        422, {"error": "malformed JSON body: not UTF-8 (byte 0xe9 at character 14)"})
    deep = admin.post(
        "/v1/collections/a/search", content=b'{"query": "a", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert (deep.status_code, deep.json()) == (422, {"error": "malformed JSON body: nested too deeply"})


def test_bodies_over_the_limit_are_413(admin: httpx.Client) -> None:
    big = b'{"query": "' + b"x" * MAX_BODY_BYTES + b'"}'
    response = admin.post(
        "/v1/collections/a/search", content=big, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json() == {"error": f"the request body is over {MAX_BODY_BYTES} bytes"}

    def chunks() -> Iterator[bytes]:  # no Content-Length: the stream itself is counted
        yield b'{"query": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    streamed = admin.post(
        "/v1/collections/a/search", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    assert streamed.json()["error"].startswith("the request body is over")


def test_missing_collection_and_route_are_404(admin: httpx.Client) -> None:
    response = _search(admin, "nope", {"query": "a"})
    assert response.status_code == 404
    assert response.json() == {"error": "collection 'nope' does not exist"}
    assert admin.post("/v1/collections/nope/reindex").json() == {"error": "collection 'nope' does not exist"}
    assert admin.get("/v2/whatever").json() == {"error": "Not Found"}


def test_model_mismatch_is_409(tmp_path: Path, served: Served) -> None:
    other = Plait(served.engine.store, embedder=FakeEmbedder(dimension=32, model="hash-32"))
    with UvicornThread(create_app(other, auth=False)) as server:
        response = httpx.post(f"{server.url}/v1/collections/a/search", json={"query": "ERR-4012"})
    assert response.status_code == 409
    assert "hash-64" in response.json()["error"] and "hash-32" in response.json()["error"]


def test_an_unexpected_failure_is_500_without_a_traceback(tmp_path: Path) -> None:
    engine = Plait(str(tmp_path / "closed.db"), embedder=FakeEmbedder(dimension=8))
    engine.close()  # every store call now fails with sqlite3.ProgrammingError: a bug, not a PlaitError
    with UvicornThread(create_app(engine, auth=False)) as server:
        response = httpx.post(f"{server.url}/v1/collections/a/search", json={"query": "x"})
    assert response.status_code == 500
    assert response.text == '{"error":"internal error"}'


def test_rerank_on_a_server_with_no_reranker_is_a_clear_422(admin: httpx.Client) -> None:
    for method, needs in (("llm", "PLAIT_LLM"), ("cross-encoder", "PLAIT_CROSS_ENCODER")):
        response = _search(admin, "a", {"query": "refund", "rerank": method})
        assert response.status_code == 422, response.text
        # what to set, and where: the server's environment (a request takes no llm or model)
        assert f"set {needs} " in response.json()["error"]
        assert "for plait serve and plait mcp, the server's environment" in response.json()["error"]


def test_error_status_table() -> None:
    assert error_status(ValidationError("x")) == 422
    assert error_status(NotFoundError("x")) == 404
    assert error_status(ModelMismatchError("x")) == 409
    assert error_status(StoreUnavailableError("x")) == 503
    assert error_status(ProviderUnavailableError("x")) == 503
    assert error_status(ProviderResponseError("x")) == 502
    assert error_status(ConfigError("x")) == 422


def test_reindex_picks_up_a_new_file(tmp_path: Path, served: Served, admin: httpx.Client) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n\nThe PIX-2024-88317 refund runbook.\n", encoding="utf-8")
    served.engine.index(folder, collection="folder")
    (folder / "two.md").write_text("# Two\n\nThe resolveTenantDB helper.\n", encoding="utf-8")
    response = admin.post("/v1/collections/folder/reindex")
    assert response.status_code == 200
    report = response.json()
    assert report["collection"] == "folder"
    assert (report["sourcesSeen"], report["sourcesIndexed"], report["chunksAdded"]) == (2, 2, 1)
    assert report["chunksUnchanged"] == 1 and report["complete"] is True
    hits = _search(admin, "folder", {"query": "resolveTenantDB"}).json()["hits"]
    assert hits[0]["origin"]["sourcePath"] == "two.md" and hits[0]["ranks"]["lexical"] == 1


def test_collections_lists_what_the_key_covers(served: Served, admin: httpx.Client) -> None:
    listed = admin.get("/v1/collections").json()
    assert [c["name"] for c in listed] == ["a", "b"]
    assert listed[0]["chunks"] == 5 and listed[0]["embedderModel"] == "hash-64"
    reader = {"X-API-Key": served.tokens["reader_a"]}
    assert [c["name"] for c in httpx.get(served.url + "/v1/collections", headers=reader).json()] == ["a"]


def test_openapi_describes_the_camel_case_models(admin: httpx.Client) -> None:
    spec = admin.get("/openapi.json").json()
    assert {"/healthz", "/v1/collections", "/v1/collections/{collection}/search",
            "/v1/collections/{collection}/reindex", "/v1/collections/{collection}/coverage"} <= set(spec["paths"])
    schemas = spec["components"]["schemas"]
    assert {"query", "k", "fusion", "lexicalWeight", "rrfK"} <= set(schemas["SearchRequest"]["properties"])
    assert {"vectorAvailable", "timingsMs", "hits"} <= set(schemas["SearchResult"]["properties"])
    assert "vectorScore" in schemas["Hit"]["properties"]


def test_the_page_and_its_assets_are_served(served: Served) -> None:
    page = httpx.get(served.url + "/")
    assert page.status_code == 200 and 'id="search-form"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert '<script type="module" src="/web/app.js">' in page.text
    script = httpx.get(served.url + "/web/app.js")
    assert script.status_code == 200 and 'from "./hits.js"' in script.text
    hits = httpx.get(served.url + "/web/hits.js")
    assert hits.status_code == 200 and "export function whyKept" in hits.text
    assert hits.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    assert httpx.get(served.url + "/web/style.css").status_code == 200
    assert httpx.get(served.url + "/web/missing.js").json() == {"error": "Not Found"}


def test_coverage_counts_present_against_indexed(tmp_path: Path, served: Served, admin: httpx.Client) -> None:
    folder = tmp_path / "cov"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n\nThe PIX-2024-88317 refund runbook.\n", encoding="utf-8")
    served.engine.index(folder, collection="cov")
    (folder / "two.md").write_text("# Two\n\nNot indexed yet.\n", encoding="utf-8")
    response = admin.get("/v1/collections/cov/coverage")
    assert response.status_code == 200
    report = response.json()
    assert report["collection"] == "cov" and report["embedderModel"] == "hash-64"
    (scope,) = report["scopes"]
    assert (scope["scope"], scope["sourcesPresent"], scope["sourcesIndexed"]) == ("docs", 2, 1)
    assert scope["chunksWithoutVector"] == 0
    assert admin.get("/v1/collections/nope/coverage").json() == {"error": "collection 'nope' does not exist"}


def test_explain_refuses_qa_first_it_would_ignore(admin: httpx.Client) -> None:
    """Regression (helper walk-through, stop 44): explain took ``qaFirst: true`` and traced
    the hybrid search anyway, as if the caller's search were the one without it."""
    response = admin.post("/v1/collections/a/explain", json={"query": "payment", "doc": "kb-102", "qaFirst": True})
    assert response.status_code == 422, response.text
    assert response.json()["error"] == (
        "qaFirst does not apply to explain: it traces the retrieval pipeline, not a FAQ card's answer; "
        "leave it out (the search it explains is the one without qaFirst)"
    )
    same = admin.post("/v1/collections/a/explain", json={"query": "payment", "doc": "kb-102", "qaFirst": False})
    assert same.status_code == 200 and same.json()["diagnosis"]["code"] == "found", same.text
