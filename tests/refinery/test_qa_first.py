"""qa_first: search and ask prefer a matching reviewed FAQ card and fall back to hybrid
search; card questions are indexed in both arms yet never leak into ordinary search.

Two things made these tests flaky, and are pinned here:

* ordering: card and run ids are random (``uuid4``), so each build's card chunk ids —
  hashes of ``card:<id>`` — sorted differently among the FAQ's, and the ask gate's
  calibration, which walks the sorted ids with one seeded generator, masked other
  words: the gate differed from build to build (min cosine 0.40–0.48 over 8 builds) and
  so did which questions were in the query cache. Ids are numbered here (:func:`_ids`);
* timing: the service bounds a query embedding (in its own thread) by 5 s; on a loaded
  machine one could take longer, the guard's circuit opened and every search of the
  next 30 s went lexical — no ``match: both``, no cosine. The engines here allow
  :data:`QUERY_DEADLINE`, and each test ends by checking that no query embedding failed.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plait.ask_gate import GateCalibration
from plait.embeddings.base import TextKind
from plait.embeddings.fake import FakeEmbedder
from plait.embeddings.guard import DEFAULT_QUERY_DEADLINE
from plait.errors import NotFoundError
from plait.llm import OllamaLLM
from plait.refinery import CARD_SCOPE, CardStatus, EditedCard, FaqCard, RefinerySettings
from plait.refinery import store as refinery_store
from plait.refinery.extract import content_stems, jaccard
from plait.service import Plait
from plait.testing.wire import WireServer

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"
ROTATE = "How do I rotate an API key?"
#: Seconds a query embedding may take here: the fake embedder answers in milliseconds, so
#: only a stalled (loaded) machine gets near it, and then the test waits rather than flakes.
QUERY_DEADLINE = 300.0


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


def _number_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Card and run ids numbered in creation order from 1 (``card_000000000002``, ...), not
    random: every build of the fixture is the same index, so the same calibrated gate."""
    numbers = itertools.count(1)
    monkeypatch.setattr(refinery_store, "_new_id", lambda prefix: f"{prefix}_{next(numbers):012d}")


@pytest.fixture(autouse=True)
def _ids(monkeypatch: pytest.MonkeyPatch) -> None:
    _number_ids(monkeypatch)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(chat=lambda messages: "Should not be asked [1].") as s:
        yield s


def _open(tmp_path: Path, server: WireServer, embedder: FakeEmbedder) -> Plait:
    """The FAQ indexed in collection kb, its cards drafted (extractive), no request recorded."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    llm = OllamaLLM(base_url=server.url, model="m", retries=0)
    e = Plait(str(tmp_path / "plait.db"), embedder=embedder, llm=llm, query_deadline=QUERY_DEADLINE)
    e.index(folder, collection="kb")
    e.refinery.run("kb", mode="extractive")
    server.clear()
    return e


@pytest.fixture
def engine(tmp_path: Path, server: WireServer) -> Iterator[Plait]:
    with _open(tmp_path, server, FakeEmbedder(dimension=64)) as e:
        yield e
        assert e.query_guard.failures == 0  # every search had its query vector


def _card(engine: Plait, question: str) -> FaqCard:
    return next(c for c in engine.refinery.cards("kb") if c.question == question)


def _cosine(a: str, b: str) -> float:
    fake = FakeEmbedder(dimension=64)
    x, y = fake.embed_query(a), fake.embed_documents([b])[0]
    return float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))


class StallingEmbedder(FakeEmbedder):
    """The fake embedder, whose first guarded query embedding stalls ``stall`` seconds, as
    one did on a loaded machine."""

    def __init__(self, stall: float) -> None:
        super().__init__(dimension=64)
        self.query_cache_size = 0  # the search's query is embedded, not found cached
        self.stall = stall
        self.stalled = False

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        if kind == "query" and not self.stalled and threading.current_thread().name == "plait-query-embed":
            self.stalled = True
            time.sleep(self.stall)
        return super()._embed_batch(texts, kind)


def test_a_query_embedding_slower_than_the_default_deadline_changes_nothing(
    tmp_path: Path, server: WireServer
) -> None:
    """The flaky failure, made to happen: a query embedding past the service's default 5 s
    deadline opened the circuit, and the card search went lexical."""
    embedder = StallingEmbedder(DEFAULT_QUERY_DEADLINE + 0.5)
    with _open(tmp_path, server, embedder) as e:
        cards = e.search(ROTATE, collection="kb", k=3, scopes=[CARD_SCOPE])
        assert embedder.stalled and e.query_guard.failures == 0
        assert cards.vector_available and cards.hits[0].match.value == "both"
        assert cards.hits[0].vector_score == pytest.approx(_cosine(ROTATE, ROTATE), abs=1e-5)


def test_card_questions_are_indexed_but_hidden_from_ordinary_search(engine: Plait) -> None:
    plain = engine.search(ROTATE, collection="kb", k=50)
    assert plain.hits and all(h.scope != CARD_SCOPE for h in plain.hits)
    assert plain.hits[0].origin.heading_path[-1] == ROTATE
    assert plain.answered_by is None and plain.card is None
    # Named explicitly, the card scope is searchable in both arms.
    cards = engine.search(ROTATE, collection="kb", k=3, scopes=[CARD_SCOPE])
    top = cards.hits[0]
    assert top.metadata["cardId"] == _card(engine, ROTATE).id and top.content == ROTATE
    assert top.match.value == "both" and top.vector_score == pytest.approx(_cosine(ROTATE, ROTATE), abs=1e-5)
    assert len(engine.store.list_sources("kb", CARD_SCOPE)) == 16


def test_qa_first_serves_an_approved_card_and_falls_back_otherwise(engine: Plait) -> None:
    query = "how do I rotate my API keys"
    drafts_only = engine.search(query, collection="kb", qa_first=True)
    assert drafts_only.answered_by == "search" and drafts_only.card is None and drafts_only.hits

    card = engine.refinery.approve("kb", _card(engine, ROTATE).id)
    result = engine.search(query, collection="kb", qa_first=True)

    assert result.answered_by == "card" and result.hits == []
    hit = result.card
    assert hit is not None and hit.card_id == card.id and hit.status == "approved"
    # stems {rotat, api, key} on both sides
    assert hit.overlap == jaccard(content_stems(query), content_stems(ROTATE)) == 1.0
    assert hit.score == 1.0 and hit.answer == card.answer
    assert [s.chunk_id for s in hit.sources] == card.sources
    assert hit.sources[0].origin.heading_path[-1] == ROTATE
    assert hit.sources[0].content.startswith("### How do I rotate an API key?")

    # "rotate" alone: overlap 1/3 < 0.6 and (hand-checked) cosine under 0.92 → hybrid search
    weak = "rotate"
    assert jaccard(content_stems(weak), content_stems(ROTATE)) == pytest.approx(1 / 3)
    assert _cosine(weak, ROTATE) < RefinerySettings().qa_min_cosine == 0.92
    fallback = engine.search(weak, collection="kb", qa_first=True)
    assert fallback.answered_by == "search" and fallback.card is None
    assert fallback.hits and all(h.scope != CARD_SCOPE for h in fallback.hits)


def test_drafts_count_when_the_setting_says_so(engine: Plait) -> None:
    query = "Which currencies are supported?"
    assert engine.search(query, collection="kb", qa_first=True).answered_by == "search"
    engine.refinery.configure("kb", qa_include_drafts=True)
    result = engine.search(query, collection="kb", qa_first=True)
    assert result.answered_by == "card" and result.card.status == "draft"
    assert result.card.answer.startswith("BRL, USD, EUR, MXN, CLP and COP")


def test_review_keeps_the_index_in_line(engine: Plait) -> None:
    card = engine.refinery.approve("kb", _card(engine, ROTATE).id)
    engine.refinery.reject("kb", card.id)
    assert engine.search(ROTATE, collection="kb", qa_first=True).answered_by == "search"
    assert all(
        h.metadata.get("cardId") != card.id
        for h in engine.search(ROTATE, collection="kb", scopes=[CARD_SCOPE], k=20).hits
    )
    engine.refinery.approve("kb", card.id)  # back in the index
    edited = engine.refinery.edit("kb", card.id, question="How can I roll a secret key?")
    # the approval was of the old question: review again
    assert edited.status == CardStatus.DRAFT and edited.sources == card.sources
    assert edited.note == (
        "the card was approved; its question changed, so it is a draft again until it is approved anew "
        "(the approval was of the old text)"
    )
    assert engine.search("roll a secret key", collection="kb", qa_first=True).answered_by == "search"
    engine.refinery.approve("kb", card.id)
    assert engine.search("roll a secret key", collection="kb", qa_first=True).card.card_id == card.id
    assert engine.search(ROTATE, collection="kb", qa_first=True).answered_by == "search"
    # ordinary search stays free of cards after every change
    assert all(h.scope != CARD_SCOPE for h in engine.search("roll secret key", collection="kb", k=50).hits)


def test_ask_with_qa_first_answers_from_the_card_without_the_llm(
    engine: Plait, server: WireServer
) -> None:
    card = engine.refinery.approve("kb", _card(engine, ROTATE).id)
    result = engine.ask("How do I rotate API keys?", collection="kb", qa_first=True)

    assert result.mode == "card" and result.answered_by == "card" and result.grounded
    assert result.answer == card.answer + " [1]"
    assert [(c.n, c.chunk_id) for c in result.citations] == [(1, card.sources[0])]
    assert result.citations[0].quote.startswith("Go to *Developers › API keys*, click **Roll key**")
    assert server.paths() == []  # the card answered: no LLM call

    fallback: Any = engine.ask("What happens to my webhook secret?", collection="kb", qa_first=True)
    assert fallback.answered_by == "search" and fallback.mode == "llm"
    assert server.paths() == ["/api/chat"]


AGAIN = (
    "the card was approved; its answer changed, so it is a draft again until it is approved anew "
    "(the approval was of the old text)"
)


def test_an_edited_answer_is_reviewed_again_and_ask_checks_it_against_the_cards_sources(
    engine: Plait, server: WireServer
) -> None:
    """An approved card's answer edited to "Call the hotline at 555-0199." stayed approved,
    and ask --qa-first answered with it, grounded: true, quoting its source's sentence
    that says nothing of a hotline."""
    card = engine.refinery.approve("kb", _card(engine, ROTATE).id)
    question = "How do I rotate API keys?"

    edited = engine.refinery.edit("kb", card.id, answer="Call the hotline at 555-0199.")
    assert isinstance(edited, EditedCard) and edited.status == CardStatus.DRAFT
    unbacked = "the card's answer is not grounded: it shares no content word with the card's source chunks"
    assert edited.note == f"{AGAIN}; {unbacked}"
    assert engine.refinery.get_card("kb", card.id).status == CardStatus.DRAFT
    waiting = engine.ask(question, collection="kb", qa_first=True)
    assert waiting.answered_by == "search" and waiting.card is None  # a draft is not served

    engine.refinery.approve("kb", card.id)  # approved as it now reads: served, never called grounded
    served = engine.ask(question, collection="kb", qa_first=True)
    assert (served.mode, served.grounded, served.answer) == ("card", False, "Call the hotline at 555-0199.")
    assert served.citations == [] and served.note == unbacked

    # one sentence backed by the source, one not: that source cited, not grounded
    partly = engine.refinery.edit(
        "kb", card.id, answer="Roll the key under Developers › API keys. Call the hotline at 555-0199."
    )
    assert partly.note == (
        f"{AGAIN}; the card's answer is not grounded: 1 of its 2 sentences shares no content word "
        "with the card's source chunks"
    )
    engine.refinery.approve("kb", card.id)
    served = engine.ask(question, collection="kb", qa_first=True)
    assert not served.grounded and served.answer.endswith("Call the hotline at 555-0199. [1]")
    assert [(c.n, c.chunk_id) for c in served.citations] == [(1, card.sources[0])]
    assert served.citations[0].quote.startswith("Go to *Developers › API keys*, click **Roll key**")
    assert served.note == (
        "the card's answer is not grounded: 1 of its 2 sentences shares no content word with the card's source chunks"
    )

    backed = engine.refinery.edit("kb", card.id, answer="Roll the key under Developers › API keys.")
    assert backed.status == CardStatus.DRAFT and backed.note == AGAIN
    engine.refinery.approve("kb", card.id)
    served = engine.ask(question, collection="kb", qa_first=True)
    assert served.grounded and served.note is None
    assert served.answer == "Roll the key under Developers › API keys. [1]"
    # the same text again changes nothing: still approved, nothing to say
    same = engine.refinery.edit("kb", card.id, answer="Roll the key under Developers › API keys.")
    assert same.status == CardStatus.APPROVED and same.note is None
    assert server.paths() == ["/api/chat"]  # only the fallback while the card was a draft


def test_a_card_none_of_whose_chunks_is_indexed_says_its_answer_is_not_grounded(
    engine: Plait, tmp_path: Path, server: WireServer
) -> None:
    """faq.md rewritten and re-indexed: the card's one chunk is gone. Ask said only "1 of the
    card's source chunks are no longer indexed" (grounded false, no citation, and not why;
    "are": the verb now agrees),
    while an edit of the same card said its answer was not grounded."""
    card = engine.refinery.approve("kb", _card(engine, ROTATE).id)
    assert len(card.sources) == 1
    (tmp_path / "docs" / "faq.md").write_text("# Billing\n\nInvoices are sent monthly.\n", encoding="utf-8")
    engine.index(tmp_path / "docs", collection="kb")
    assert engine.store.get_chunks("kb", list(card.sources)) == {}

    served = engine.ask(ROTATE, collection="kb", qa_first=True)
    assert (served.mode, served.grounded, served.citations) == ("card", False, [])
    assert served.answer == card.answer  # no [n]: nothing left to cite
    assert served.note == (
        "1 of the card's source chunks is no longer indexed; "
        "the card's answer is not grounded: none of its source chunks is indexed any more"
    )
    edited = engine.refinery.edit("kb", card.id, answer="Roll the key under Developers › API keys.")
    assert edited.note is not None
    assert edited.note.endswith("; the card's answer is not grounded: none of its source chunks is indexed any more")
    assert server.paths() == []


def test_deleting_a_collection_removes_its_runs_and_cards(engine: Plait, tmp_path: Path) -> None:
    assert engine.refinery.cards("kb") and engine.refinery.list_runs("kb")
    assert engine.delete_collection("kb") is True
    assert engine.refinery.store.list_cards("kb") == []
    assert engine.refinery.store.list_runs("kb") == []
    with pytest.raises(NotFoundError):
        engine.refinery.cards("kb")
    # a new collection of the same name starts with no cards from the old one
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64)) as again:
        assert again.store.get_collection("kb") is None
        assert again.refinery.store.list_cards("kb") == []


def test_two_builds_are_one_index_with_one_gate(
    tmp_path: Path, server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ordering half of the flakiness: with random card ids, two builds of the fixture
    calibrated two different gates."""
    gates = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        _number_ids(monkeypatch)  # each build numbers from 1, as each test does
        with _open(tmp_path / name, server, FakeEmbedder(dimension=64)) as e:
            gates.append(e.store.get_settings("kb")["askGate"])
            assert [c.id for c in e.refinery.cards("kb")][:2] == ["card_000000000002", "card_000000000003"]
    first, second = (GateCalibration.model_validate(g) for g in gates)
    assert (first.min_cosine, first.min_term_coverage, first.inside_cosine, first.outside_cosine) == (
        second.min_cosine, second.min_term_coverage, second.inside_cosine, second.outside_cosine)


def test_an_approval_made_while_an_edit_runs_does_not_stay_on_the_new_text(
    engine: Plait, server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review finding (stop 44): edit read the card's status, then wrote its text in a
    second step, so a card approved in between stayed approved with text no one approved.
    The demotion is now part of the write."""
    card = _card(engine, ROTATE)
    store = engine.refinery.store
    read = store.get_card

    def read_then_approve(collection: str, card_id: str) -> FaqCard:
        seen = read(collection, card_id)  # the edit sees a draft...
        monkeypatch.setattr(store, "get_card", read)
        store.update_card(collection, card_id, {"status": CardStatus.APPROVED})  # ...approved meanwhile
        return seen

    monkeypatch.setattr(store, "get_card", read_then_approve)
    edited = engine.refinery.edit("kb", card.id, answer="Call the hotline at 555-0199.")
    assert edited.status == CardStatus.DRAFT
    assert engine.refinery.get_card("kb", card.id).status == CardStatus.DRAFT
    again = engine.refinery.edit("kb", card.id, answer="Call the hotline at 555-0199.")  # same text: no change
    assert again.status == CardStatus.DRAFT and again.note is None
    engine.refinery.reject("kb", card.id)
    assert engine.refinery.edit("kb", card.id, answer="Roll the key.").status == CardStatus.REJECTED  # stays rejected
