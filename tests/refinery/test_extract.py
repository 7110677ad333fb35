"""Extractive FAQ cards: the example FAQ's question headings and its Portuguese P:/R:
block become cards, through a real refinery run over a real store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.chunking import ChunkSettings
from plait.embeddings.fake import FakeEmbedder
from plait.ingest import build_chunks
from plait.refinery import CardMode, CardStatus, RunStatus
from plait.refinery.extract import (
    content_stems,
    extract_cards,
    jaccard,
    sentences,
    trim,
)
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"

HEADING_QUESTIONS = [
    "How do I rotate an API key?",
    "What is the difference between publishable and secret keys?",
    "Can I restrict a key to certain endpoints?",
    "How do I test without moving real money?",
    "Which currencies are supported?",
    "Why is a payment stuck in pending?",  # the heading's visible title (issue 20: CommonMark)
    "When do I receive my money?",
    "Why did a payout fail?",
    "How do I verify a webhook signature?",
    "I received the same event twice. Is that a bug?",
]
PT_QUESTIONS = [
    "Como gero um QR Code PIX com valor fixo?",
    "Qual é o prazo para devolver um PIX?",
    "O boleto foi pago, mas o pedido continua pendente. O que fazer?",
    "Posso ter mais de uma chave PIX na mesma conta?",
    "Como altero a conta de repasse?",
    "A Lumen Pay emite nota fiscal das taxas cobradas?",
]


def _chunks(text: str, path: str = "faq.md"):
    doc = SourceDocument(
        source_id=path,
        scope="docs",
        parts=(SourcePart(text=text, origin=FileOrigin(source_path=path), markdown=True),),
    )
    return build_chunks(doc, ChunkSettings())


def _extract(text: str) -> list[tuple[str, str]]:
    return [(c.question, c.answer) for chunk in _chunks(text) for c in extract_cards(chunk)]


def test_the_example_faq_gives_every_heading_question_and_every_pr_pair() -> None:
    cards = _extract(FAQ.read_text(encoding="utf-8"))
    assert [q for q, _ in cards] == HEADING_QUESTIONS + PT_QUESTIONS
    answers = dict(cards)
    assert answers["I received the same event twice. Is that a bug?"] == (
        "No. Delivery is at-least-once; deduplicate on `event.id`."
    )
    assert answers["Qual é o prazo para devolver um PIX?"] == (
        "Até 90 dias após o pagamento, em uma ou várias devoluções parciais, limitadas ao valor original."
    )
    assert answers["Posso ter mais de uma chave PIX na mesma conta?"] == (
        "Sim, até 20 chaves para CNPJ (e-mail, telefone, CNPJ e aleatórias)."
    )
    # The heading line is not part of the answer.
    assert answers["Which currencies are supported?"].startswith("BRL, USD, EUR, MXN, CLP and COP")


def test_q_a_blocks_wrapped_questions_and_multi_line_answers() -> None:
    text = (
        "# Support\n\n"
        "Q: How long is a refund\nwindow for cards?\n"
        "A: 180 days after capture.\nPartial refunds are allowed.\n\n"
        "**Question:** Is PIX refundable?\n"
        "**Answer:** Yes, for 90 days.\n\n"
        "Some closing paragraph that is not an answer.\n"
    )
    assert _extract(text) == [
        ("How long is a refund window for cards?", "180 days after capture. Partial refunds are allowed."),
        ("Is PIX refundable?", "Yes, for 90 days."),
    ]


def test_question_paragraphs_count_only_inside_a_faq_section() -> None:
    faq = "# FAQ\n\n**Do you ship abroad?**\n\nYes, to 40 countries.\n\nWhy? Because we can.\n"
    assert _extract(faq) == [("Do you ship abroad?", "Yes, to 40 countries.")]
    prose = "# Shipping\n\nDo you ship abroad?\n\nYes, to 40 countries.\n"
    assert _extract(prose) == []


def test_headings_that_are_not_questions_and_empty_sections_give_nothing() -> None:
    assert _extract("# Payouts\n\nPaid D+30.\n\n## What is next?\n") == []


def test_text_helpers() -> None:
    assert sentences("### Title?\n\nGo to *Developers*. Click **Roll**, then wait!\n\n- one item") == [
        "Go to *Developers*.",
        "Click **Roll**, then wait!",
        "one item",
    ]
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 0.0
    # Stopwords never count; plurals and inflections meet at their stems.
    assert content_stems("How do I rotate an API key?") == content_stems("rotating API keys")
    assert trim("One. Two. " + "x" * 50, 12) == "One. Two."


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Plait]:
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64), llm="none") as e:
        yield e


def test_an_extractive_run_over_the_markdown_faq(engine: Plait, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    engine.index(folder, collection="kb")
    total = engine.store.get_collection("kb").chunks

    run = engine.refinery.run("kb")

    assert run.status == RunStatus.SUCCEEDED and run.mode == CardMode.EXTRACTIVE and run.error is None
    assert run.progress.chunks_total == run.progress.chunks_scanned == total
    assert run.progress.cards_made == 16 and run.progress.llm_calls == 0
    cards = engine.refinery.cards("kb")
    assert [c.question for c in cards] == HEADING_QUESTIONS + PT_QUESTIONS
    assert {c.status for c in cards} == {CardStatus.DRAFT}
    assert {c.mode for c in cards} == {CardMode.EXTRACTIVE}
    # Each card cites the chunk it was read from: the section under its own heading.
    rotate = cards[0]
    (chunk,) = engine.store.get_chunks("kb", rotate.sources).values()
    assert chunk.origin.heading_path[-1] == "How do I rotate an API key?"
    pix = next(c for c in cards if c.question == "Qual é o prazo para devolver um PIX?")
    (chunk,) = engine.store.get_chunks("kb", pix.sources).values()
    assert chunk.origin.heading_path[-1] == "Perguntas frequentes (Português)"

    # A second run finds only the same questions: merged, nothing new.
    again = engine.refinery.run("kb")
    assert again.progress.cards_made == 0 and again.progress.cards_merged == 16
    assert len(engine.refinery.cards("kb")) == 16
