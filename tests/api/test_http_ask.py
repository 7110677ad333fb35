"""The ask, FAQ-card and refinery-run routes through a real uvicorn server: the library's
models as camelCase JSON, readers may ask and list, maintainers run and review."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

import httpx
from http_served import Served, documents, serve_engine

from plait.api.http import create_app
from plait.embeddings.fake import FakeEmbedder
from plait.llm import OllamaLLM
from plait.service import Plait
from plait.testing.asgi_server import UvicornThread
from plait.testing.wire import WireServer
from plait.types import to_json

FAQ_DOC = {"faq-1": "Q: How do I reset my password?\nA: Use the reset link on the login page."}


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_engine(tmp_path) as s:
        s.engine.index_documents(documents(FAQ_DOC), collection="a")
        yield s


def _client(served: Served, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.tokens[token]}"}, timeout=30
    )


@pytest.fixture
def reader(served: Served) -> Iterator[httpx.Client]:
    with _client(served, "reader_a") as c:
        yield c


@pytest.fixture
def maintainer(served: Served) -> Iterator[httpx.Client]:
    with _client(served, "maintainer_a") as c:
        yield c


def _finished_run(client: httpx.Client, run_id: str) -> dict:
    deadline = time.monotonic() + 30
    while True:
        data = client.get(f"/v1/collections/a/refinery/runs/{run_id}").json()
        if data["status"] in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            return data
        time.sleep(0.05)


def test_a_reader_asks_and_gets_the_library_model(served: Served, reader: httpx.Client) -> None:
    response = reader.post("/v1/collections/a/ask", json={"question": "Why was my payment refused?"})
    assert response.status_code == 200
    data = response.json()
    assert data == to_json(served.engine.ask("Why was my payment refused?", collection="a"))
    assert data["mode"] == "extractive" and data["grounded"] is True
    assert set(data["citations"][0]) == {"n", "chunkId", "origin", "quote"}

    missing = reader.post("/v1/collections/a/ask", json={"question": "zebra migration patterns"}).json()
    assert missing["mode"] == "not-found" and missing["citations"] == []
    assert reader.post("/v1/collections/a/ask", json={"question": ""}).status_code == 422
    # a collection the key does not cover looks exactly like a missing one
    hidden = reader.post("/v1/collections/b/ask", json={"question": "release"})
    assert hidden.status_code == 404 and hidden.json() == {"error": "collection 'b' does not exist"}


def test_ask_refuses_bools_and_nan_for_numbers(reader: httpx.Client) -> None:
    """AskRequest read "k": true as k=1 (SearchRequest refused it); a NaN minCosine was
    refused only as 'less than or equal to 1'."""
    as_bool = reader.post("/v1/collections/a/ask", json={"question": "Why was my payment refused?", "k": True})
    assert (as_bool.status_code, as_bool.json()) == (422, {"error": "k: expected a number, got true"})
    nan = reader.post(
        "/v1/collections/a/ask", content=b'{"question": "Why was my payment refused?", "minCosine": NaN}',
        headers={"Content-Type": "application/json"},
    )
    assert (nan.status_code, nan.json()) == (422, {"error": "minCosine: expected a finite number, got nan"})
    coverage = reader.post("/v1/collections/a/ask", json={"question": "x", "minTermCoverage": "Infinity"})
    assert coverage.json() == {"error": "minTermCoverage: expected a finite number, got inf"}


def test_runs_and_review_need_a_maintainer(reader: httpx.Client, maintainer: httpx.Client) -> None:
    assert reader.get("/v1/collections/a/faq").json() == []
    refused = reader.post("/v1/collections/a/refinery/runs", json={})
    assert refused.status_code == 403
    assert refused.json() == {"error": "refinery runs needs the maintainer role; this key is a reader"}

    started = maintainer.post("/v1/collections/a/refinery/runs", json={"mode": "extractive"})
    assert started.status_code == 202
    run = started.json()
    assert run["status"] == "queued" and run["mode"] == "extractive" and run["collection"] == "a"
    done = _finished_run(maintainer, run["id"])
    assert done["status"] == "succeeded"
    assert done["progress"] == {
        "chunksScanned": 6, "chunksTotal": 6, "cardsMade": 1, "cardsMerged": 0, "llmCalls": 0, "groupsSkipped": 0,
    }
    assert [r["id"] for r in maintainer.get("/v1/collections/a/refinery/runs").json()] == [run["id"]]
    # cancelling a finished run leaves it as it was
    assert maintainer.post(f"/v1/collections/a/refinery/runs/{run['id']}/cancel").json()["status"] == "succeeded"

    # drafts are for reviewers: a reader lists approved cards only
    assert reader.get("/v1/collections/a/faq", params={"status": "draft"}).status_code == 403
    assert reader.get("/v1/collections/a/faq").json() == []
    (card,) = maintainer.get("/v1/collections/a/faq", params={"status": "draft"}).json()
    assert card["question"] == "How do I reset my password?"
    assert card["answer"] == "Use the reset link on the login page."
    assert card["mode"] == "extractive" and card["runId"] == run["id"]

    assert reader.post(f"/v1/collections/a/faq/{card['id']}/approve").status_code == 403
    approved = maintainer.post(f"/v1/collections/a/faq/{card['id']}/approve").json()
    assert approved["status"] == "approved"

    hit = reader.post("/v1/collections/a/search", json={"query": "reset my password", "qaFirst": True}).json()
    assert hit["answeredBy"] == "card" and hit["hits"] == []
    assert hit["card"]["cardId"] == card["id"] and hit["card"]["sources"][0]["chunkId"] == card["sources"][0]
    plain = reader.post("/v1/collections/a/search", json={"query": "reset my password"}).json()
    assert plain["answeredBy"] is None and all(h["scope"] != "faq-card" for h in plain["hits"])

    edited = maintainer.patch(
        f"/v1/collections/a/faq/{card['id']}", json={"answer": "Click 'Forgot password' on the login page."}
    ).json()
    # the approval was of the old answer: a draft again, and the response says so
    assert edited["answer"] == "Click 'Forgot password' on the login page." and edited["status"] == "draft"
    assert edited["note"] == (
        "the card was approved; its answer changed, so it is a draft again until it is approved anew "
        "(the approval was of the old text)"
    )
    ask = {"question": "How to reset my password?", "qaFirst": True}
    assert reader.post("/v1/collections/a/ask", json=ask).json()["answeredBy"] == "search"
    assert maintainer.post(f"/v1/collections/a/faq/{card['id']}/approve").json()["status"] == "approved"
    asked = reader.post("/v1/collections/a/ask", json=ask).json()
    assert (asked["mode"], asked["grounded"]) == ("card", True)  # password, login, page: in its source
    assert asked["answer"] == "Click 'Forgot password' on the login page. [1]"
    unbacked = maintainer.patch(f"/v1/collections/a/faq/{card['id']}", json={"answer": "Call the hotline."}).json()
    assert unbacked["status"] == "draft" and unbacked["note"] == (
        "the card was approved; its answer changed, so it is a draft again until it is approved anew "
        "(the approval was of the old text); the card's answer is not grounded: it shares no content word "
        "with the card's source chunks"
    )
    maintainer.post(f"/v1/collections/a/faq/{card['id']}/approve")
    asked = reader.post("/v1/collections/a/ask", json=ask).json()
    assert (asked["mode"], asked["grounded"], asked["answer"], asked["citations"]) == (
        "card", False, "Call the hotline.", []
    )

    rejected = maintainer.post(f"/v1/collections/a/faq/{card['id']}/reject").json()
    assert rejected["status"] == "rejected"
    assert reader.get("/v1/collections/a/faq", params={"status": "approved"}).json() == []
    assert reader.get("/v1/collections/a/faq", params={"status": "maybe"}).status_code == 422


def test_a_run_whose_every_llm_reply_is_unreadable_reads_failed(tmp_path: Path) -> None:
    """It ended "succeeded" with 0 cards and no note; only groupsSkipped told."""
    with WireServer(chat=lambda messages: "Sorry, I can't help with that.") as wire, Plait(
        str(tmp_path / "plait.db"),
        embedder=FakeEmbedder(dimension=64),
        llm=OllamaLLM(base_url=wire.url, model="m", retries=0),
    ) as engine:
        engine.index_documents(documents(FAQ_DOC), collection="a")
        with UvicornThread(create_app(engine, auth=False)) as server, httpx.Client(
            base_url=server.url, timeout=30
        ) as client:
            started = client.post("/v1/collections/a/refinery/runs", json={"mode": "llm"})
            assert started.status_code == 202, started.text
            done = _finished_run(client, started.json()["id"])
    assert (done["status"], done["note"]) == ("failed", None)
    assert done["error"] == "the 1 group of chunks failed: the LLM's reply held no JSON array of cards, so no card was made"
    assert (done["progress"]["cardsMade"], done["progress"]["llmCalls"], done["progress"]["groupsSkipped"]) == (0, 1, 1)


def test_unknown_cards_and_runs_are_404(served: Served, maintainer: httpx.Client) -> None:
    missing = maintainer.post("/v1/collections/a/faq/card_nope/approve")
    assert missing.status_code == 404
    assert missing.json() == {"error": "FAQ card 'card_nope' does not exist in collection 'a'"}
    nope = maintainer.get("/v1/collections/a/refinery/runs/run_nope")
    assert (nope.status_code, nope.json()) == (404, {"error": "refinery run 'run_nope' does not exist in collection 'a'"})
    assert maintainer.patch("/v1/collections/a/faq/card_nope", json={"question": "Q?"}).status_code == 404
    # a run of collection b is not visible under collection a
    other = served.engine.refinery.create_run("b")
    elsewhere = {"error": f"refinery run '{other.id}' does not exist in collection 'a'"}
    for method, path in (("GET", ""), ("POST", "/cancel")):
        response = maintainer.request(method, f"/v1/collections/a/refinery/runs/{other.id}{path}")
        assert (response.status_code, response.json()) == (404, elsewhere)
    with _client(served, "admin_all") as admin:
        assert admin.get(f"/v1/collections/b/refinery/runs/{other.id}").json()["status"] == "queued"
        assert admin.post(f"/v1/collections/b/refinery/runs/{other.id}/cancel").json()["status"] == "cancelled"


def test_the_openapi_document_lists_the_routes(served: Served) -> None:
    paths = httpx.get(served.url + "/openapi.json").json()["paths"]
    assert {
        "/v1/collections/{collection}/ask",
        "/v1/collections/{collection}/faq",
        "/v1/collections/{collection}/faq/{card_id}",
        "/v1/collections/{collection}/faq/{card_id}/approve",
        "/v1/collections/{collection}/faq/{card_id}/reject",
        "/v1/collections/{collection}/refinery/runs",
        "/v1/collections/{collection}/refinery/runs/{run_id}",
        "/v1/collections/{collection}/refinery/runs/{run_id}/cancel",
    } <= set(paths)


def test_ask_takes_only_true_or_false_for_its_flags(reader: httpx.Client) -> None:
    """"qaFirst": "yes" and "includeDrafts": 1 were read as true."""
    loose = reader.post("/v1/collections/a/ask", json={"question": "Why was my payment refused?", "qaFirst": "yes"})
    assert (loose.status_code, loose.json()) == (422, {"error": "qaFirst: Input should be a valid boolean (got 'yes')"})
    number = reader.post("/v1/collections/a/ask", json={"question": "Why?", "includeDrafts": 1})
    assert (number.status_code, number.json()) == (422, {"error": "includeDrafts: Input should be a valid boolean (got 1)"})
