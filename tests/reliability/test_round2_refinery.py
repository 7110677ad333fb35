"""Issue 23, refinery: readers do not see draft FAQ cards through scopes ["faq-card"];
a second refinery run while one is active is a 409 (and two at once cannot both start)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from plait.api.keys import KeyStore
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConflictError, PlaitError
from plait.refinery import CARD_SCOPE
from plait.service import Plait

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")

from plait.api.http import create_app
from plait.testing.asgi_server import UvicornThread

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"
ROTATE = "How do I rotate an API key?"


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Plait, dict[str, str]]]:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64), llm="none") as engine:
        engine.index(folder, collection="kb")
        engine.refinery.run("kb", mode="extractive")  # 16 draft cards
        keys = KeyStore(tmp_path / "keys.db")
        tokens = {
            "reader": keys.create(role="reader", collection="kb")[1],
            "maintainer": keys.create(role="maintainer", collection="kb")[1],
        }
        try:
            with UvicornThread(create_app(engine, keys=keys)) as server:
                yield server.url, engine, tokens
        finally:
            keys.close()


def _card_hits(url: str, token: str) -> list[str]:
    response = httpx.post(
        f"{url}/v1/collections/kb/search",
        json={"query": ROTATE, "k": 20, "scopes": [CARD_SCOPE]},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return [h["metadata"]["cardId"] for h in response.json()["hits"]]


def test_readers_do_not_see_draft_cards_through_the_card_scope(served: tuple[str, Plait, dict[str, str]]) -> None:
    url, engine, tokens = served
    rotate = next(c for c in engine.refinery.cards("kb") if c.question == ROTATE)
    assert _card_hits(url, tokens["reader"]) == []  # all 16 cards are drafts
    assert rotate.id in _card_hits(url, tokens["maintainer"])  # reviewers still find them
    engine.refinery.approve("kb", rotate.id)
    assert _card_hits(url, tokens["reader"]) == [rotate.id]  # approved: visible, and only it
    from plait.api.mcp import create_mcp_server

    async def mcp_search() -> dict[str, object]:
        result = await create_mcp_server(engine).call_tool(
            "search", {"query": "restore a backup", "collection": "kb", "k": 20, "scopes": [CARD_SCOPE]}
        )
        return result.structured_content  # type: ignore[no-any-return]

    hits = anyio.run(mcp_search)["hits"]
    assert [h["metadata"]["cardId"] for h in hits] == [rotate.id]  # type: ignore[index]


def test_a_second_run_while_one_is_active_is_a_409(served: tuple[str, Plait, dict[str, str]]) -> None:
    url, engine, tokens = served
    active = engine.refinery.create_run("kb")  # queued, never executed here
    response = httpx.post(
        f"{url}/v1/collections/kb/refinery/runs",
        json={"mode": "extractive"},
        headers={"Authorization": f"Bearer {tokens['maintainer']}"},
        timeout=30,
    )
    assert response.status_code == 409
    assert response.json() == {
        "error": f"collection 'kb' already has an active refinery run {active.id} (queued); "
        "cancel it or wait for it to finish"
    }
    engine.refinery.cancel(active.id)


def test_two_runs_started_at_once_cannot_both_start(served: tuple[str, Plait, dict[str, str]]) -> None:
    _, engine, _ = served
    barrier = threading.Barrier(8)
    outcomes: list[object] = []

    def start() -> None:
        barrier.wait()
        try:
            outcomes.append(engine.refinery.create_run("kb"))
        except PlaitError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = [o for o in outcomes if isinstance(o, ConflictError)]
    assert len(outcomes) == 8 and len(errors) == 7
    assert len(engine.refinery.store.active_runs("kb")) == 1


def test_a_reader_cannot_ask_with_drafts(served: tuple[str, Plait, dict[str, str]]) -> None:
    url, _, tokens = served
    body = {"question": ROTATE, "qaFirst": True, "includeDrafts": True}
    reader = httpx.post(
        f"{url}/v1/collections/kb/ask", json=body, headers={"Authorization": f"Bearer {tokens['reader']}"}, timeout=30
    )
    assert reader.status_code == 403
    assert reader.json() == {"error": "ask with includeDrafts needs the maintainer role; this key is a reader"}
    maintainer = httpx.post(
        f"{url}/v1/collections/kb/ask", json=body, headers={"Authorization": f"Bearer {tokens['maintainer']}"}, timeout=30
    )
    assert maintainer.status_code == 200 and maintainer.json()["answeredBy"] == "card"


def _explain(url: str, token: str, card_id: str) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/v1/collections/kb/explain",
        json={"query": ROTATE, "k": 20, "scopes": [CARD_SCOPE], "doc": f"card:{card_id}"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_explain_traces_the_callers_search_so_a_reader_sees_drafts_hidden(
    served: tuple[str, Plait, dict[str, str]],
) -> None:
    """Regression: explain ran the maintainer's search for everybody, so a reader was told a
    draft card it can never get was "returned at fused rank 1"."""
    url, engine, tokens = served
    rotate = next(c for c in engine.refinery.cards("kb") if c.question == ROTATE)
    as_reader = _explain(url, tokens["reader"], rotate.id)
    assert as_reader["diagnosis"]["code"] == "hidden"
    assert "draft" in as_reader["diagnosis"]["message"]
    assert all(c["hidden"] and c["fusedRank"] is None for c in as_reader["chunks"])
    as_maintainer = _explain(url, tokens["maintainer"], rotate.id)
    assert as_maintainer["diagnosis"]["code"] != "hidden"
    assert any(c["fusedRank"] is not None for c in as_maintainer["chunks"])
    engine.refinery.approve("kb", rotate.id)
    assert _explain(url, tokens["reader"], rotate.id)["diagnosis"]["code"] != "hidden"


def test_ask_over_the_card_scope_is_built_from_approved_cards_only(
    served: tuple[str, Plait, dict[str, str]],
) -> None:
    """Regression: ask searched with drafts visible, so an answer naming scopes ["faq-card"]
    quoted cards nobody had approved (to a reader too)."""
    url, engine, tokens = served
    rotate = next(c for c in engine.refinery.cards("kb") if c.question == ROTATE)

    def cited_cards() -> list[str]:
        response = httpx.post(
            f"{url}/v1/collections/kb/ask",
            json={"question": ROTATE, "scopes": [CARD_SCOPE]},
            headers={"Authorization": f"Bearer {tokens['reader']}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        return [c["chunkId"] for c in response.json()["citations"]]

    assert cited_cards() == []  # every card is a draft
    assert engine.ask(ROTATE, collection="kb", scopes=[CARD_SCOPE]).citations == []
    engine.refinery.approve("kb", rotate.id)
    cited = cited_cards()
    assert cited and set(cited) <= set(engine.store.chunk_ids("kb", f"card:{rotate.id}"))


def _post(url: str, token: str, route: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/v1/collections/kb/{route}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_qa_first_search_hides_drafts_from_readers(served: tuple[str, Plait, dict[str, str]]) -> None:
    """Regression: a qaFirst search went to the card matcher, whose fallback search showed
    drafts to everybody, so a reader naming scopes ["faq-card"] got every draft card."""
    url, _, tokens = served
    body = {"query": ROTATE, "k": 20, "scopes": [CARD_SCOPE], "qaFirst": True}
    as_reader = _post(url, tokens["reader"], "search", body)
    assert as_reader["answeredBy"] == "search" and as_reader["hits"] == []  # all 16 cards are drafts
    as_maintainer = _post(url, tokens["maintainer"], "search", body)
    assert len(as_maintainer["hits"]) == 16  # reviewers still find them (drafts never answer qaFirst)


def test_sources_leave_draft_cards_out_for_readers(served: tuple[str, Plait, dict[str, str]]) -> None:
    """Regression: GET /sources listed every draft card's source to reader keys."""
    url, engine, tokens = served

    def listed(token: str) -> list[str]:
        response = httpx.get(
            f"{url}/v1/collections/kb/sources", params={"limit": 100},
            headers={"Authorization": f"Bearer {token}"}, timeout=30,
        )
        assert response.status_code == 200, response.text
        return [s["sourceId"] for s in response.json()]

    assert listed(tokens["reader"]) == ["faq.md"]
    assert len(listed(tokens["maintainer"])) == 17  # faq.md and the 16 draft cards
    rotate = next(c for c in engine.refinery.cards("kb") if c.question == ROTATE)
    engine.refinery.approve("kb", rotate.id)
    assert sorted(listed(tokens["reader"])) == sorted(["faq.md", f"card:{rotate.id}"])


def test_faq_list_shows_readers_approved_cards_only(served: tuple[str, Plait, dict[str, str]]) -> None:
    """Regression: GET /faq?status=draft handed every draft's question and answer to readers."""
    url, engine, tokens = served
    reader = {"Authorization": f"Bearer {tokens['reader']}"}
    assert httpx.get(f"{url}/v1/collections/kb/faq", params={"status": "draft"}, headers=reader).status_code == 403
    assert httpx.get(f"{url}/v1/collections/kb/faq", headers=reader).json() == []
    rotate = next(c for c in engine.refinery.cards("kb") if c.question == ROTATE)
    engine.refinery.approve("kb", rotate.id)
    assert [c["id"] for c in httpx.get(f"{url}/v1/collections/kb/faq", headers=reader).json()] == [rotate.id]


def test_qa_first_keeps_the_per_call_mode(tmp_path: Path) -> None:
    """Regression: qaFirst's card search always ran hybrid, so mode lexical embedded the query."""
    calls: list[str] = []

    class Counting(FakeEmbedder):
        def embed_query(self, text: str) -> Any:
            calls.append(text)
            return super().embed_query(text)

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder=Counting(dimension=64), llm="none") as engine:
        engine.index(folder, collection="kb")
        engine.refinery.run("kb", mode="extractive")
        rotate = next(c for c in engine.refinery.cards("kb") if c.question == ROTATE)
        engine.refinery.approve("kb", rotate.id)
        calls.clear()
        found = engine.search_request("kb", {"query": ROTATE, "qaFirst": True, "mode": "lexical"})
        assert found.answered_by == "card" and found.card is not None and found.card.card_id == rotate.id
        assert found.mode == "lexical" and calls == []  # the lexical arm only: no query embedding
        answer = engine.ask(ROTATE, collection="kb", qa_first=True, mode="lexical")
        assert answer.answered_by == "card" and calls == []
