"""Sentence splitting (plait.refinery.extract.sentences), which extractive answers and
citation quotes are made of: a sentence may start with a lowercase word, a quote, a
bracket or an accented capital, in English and Portuguese; abbreviations, decimals,
versions and file names do not end one. It split only before an ASCII-range capital or a
digit, so "Posso cancelar? sim, …" or "… the logs. then restart" stayed one sentence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.ask_extract import candidates
from plait.embeddings.fake import FakeEmbedder
from plait.refinery.extract import sentences
from plait.refinery.sentence_split import terminal
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin, Hit, Ranks

RUNBOOK = (
    "Run `plait backfill` after the upgrade, e.g. from cron. then restart the API so it "
    "loads the new vectors (v1.2 needs 3.5 GB). \"Healthy\" in /status means it is done. "
    "(The old index stays readable meanwhile.) See README.md for details; ask Dr. Rao if "
    "i.e. the cluster is shared. Why? because two servers would race!  wait… then retry."
)
FAQ_PT = (
    "Posso cancelar a assinatura? sim, a qualquer momento pelo aplicativo, sem multa. "
    "E o reembolso? É proporcional aos dias restantes! «Configurações» mostra o valor, "
    "p. ex. R$ 12,50 na versão 2.3. Fale com a Sra. Lima se o valor estiver errado... "
    "o prazo é de 7 dias."
)


def test_english_prose_splits_before_any_word_and_keeps_abbreviations_and_names_whole() -> None:
    assert sentences(RUNBOOK) == [
        "Run `plait backfill` after the upgrade, e.g. from cron.",
        "then restart the API so it loads the new vectors (v1.2 needs 3.5 GB).",
        '"Healthy" in /status means it is done.',
        "(The old index stays readable meanwhile.)",
        "See README.md for details; ask Dr. Rao if i.e. the cluster is shared.",
        "Why?",
        "because two servers would race!",
        "wait… then retry.",
    ]


def test_portuguese_prose_splits_after_question_and_exclamation_marks_and_before_quotes() -> None:
    assert sentences(FAQ_PT) == [
        "Posso cancelar a assinatura?",
        "sim, a qualquer momento pelo aplicativo, sem multa.",
        "E o reembolso?",
        "É proporcional aos dias restantes!",
        "«Configurações» mostra o valor, p. ex. R$ 12,50 na versão 2.3.",
        "Fale com a Sra. Lima se o valor estiver errado... o prazo é de 7 dias.",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See fig. 3 and No. 5 first. Then go.", ["See fig. 3 and No. 5 first.", "Then go."]),
        ("Call J. Smith today. Step 1. then step 2.", ["Call J. Smith today.", "Step 1. then step 2."]),
        ("It took 40 ms. then it failed.", ["It took 40 ms.", "then it failed."]),
        ("Apples, pears, etc. are fruit. Etc. Done", ["Apples, pears, etc. are fruit.", "Etc.", "Done"]),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ("Open https://example.com/a.b?c=d now. ok", ["Open https://example.com/a.b?c=d now.", "ok"]),
    ],
)
def test_edge_cases(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@pytest.fixture
def offline(tmp_path: Path) -> Iterator[Plait]:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=64), llm="none") as engine:
        doc = SourceDocument(
            source_id="faq.md",
            scope="docs",
            parts=(SourcePart(text=FAQ_PT, origin=FileOrigin(source_path="faq.md", title="FAQ")),),
        )
        engine.index_documents([doc], collection="pt")
        yield engine


def test_an_extractive_answer_quotes_the_answer_not_the_question_glued_to_it(offline: Plait) -> None:
    # the question sentence is skipped and the one after it inherits its words (the FAQ
    # shape, plait.ask_extract): the answer is the sentence after "?" — it was the
    # question and its answer as one sentence
    result = offline.ask("Posso cancelar a assinatura?", collection="pt", min_term_coverage=0.5)
    assert result.mode == "extractive"
    assert result.answer.startswith("sim, a qualquer momento pelo aplicativo, sem multa. [1]")
    assert "Posso cancelar" not in result.answer


def test_a_quoted_question_is_still_a_question_for_the_extractive_answer(tmp_path: Path) -> None:
    # the closing quote now stays with its sentence ('"Can I pause it?"'): the answer
    # still skips it as a restated question and quotes the sentence after it
    text = 'Customers often ask: "Can I pause the subscription?" yes, for up to 3 months in the app.'
    assert sentences(text) == [
        'Customers often ask: "Can I pause the subscription?"',
        "yes, for up to 3 months in the app.",
    ]
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=64), llm="none") as engine:
        doc = SourceDocument(
            source_id="pause.md",
            scope="docs",
            parts=(SourcePart(text=text, origin=FileOrigin(source_path="pause.md", title="Pause")),),
        )
        engine.index_documents([doc], collection="en")
        result = engine.ask("Can I pause the subscription?", collection="en", min_term_coverage=0.5)
    assert result.mode == "extractive"
    assert result.answer == "yes, for up to 3 months in the app. [1]"


@pytest.mark.parametrize(
    "text",
    [
        "Backups of the database run nightly at 2am (why not hourly?)",
        "Backups of the database run nightly at 2am, no config needed :)",
        'Backups of the database run nightly and the dialog asks "Keep the old backup?"',
    ],
)
def test_an_answer_ending_in_a_bracketed_or_quoted_question_or_a_smiley_is_kept(text: str) -> None:
    # the closers aside, these end in "?" or ":"; but they wrap only the sentence's last
    # part, so the sentence is neither a restated question nor a lead-in: it is the answer
    hit = Hit(
        chunk_id="c1", content=text, score=1.0, vector_score=0.9, lexical_score=1.0, match="both",
        scope="docs", ranks=Ranks(lexical=1, dense=1, fused=1), origin=FileOrigin(source_path="d.md", title="d"),
    )
    assert [c.text for c in candidates("When do database backups run?", [hit])] == [text]
    assert [terminal(text), terminal('"Can I pause it?"'), terminal('Asked: "Can I pause it?"')] == [text[-1], "?", "?"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # abbreviations before a phrase, a name or a number: no end before a lowercase word
        ("Smith et al. reported that it works. Others disagree.", ["Smith et al. reported that it works.", "Others disagree."]),
        ("Acme Inc. and its partners ship it. Contact sales.", ["Acme Inc. and its partners ship it.", "Contact sales."]),
        ("A empresa XYZ Ltda. e seus parceiros. Fale conosco.", ["A empresa XYZ Ltda. e seus parceiros.", "Fale conosco."]),
        ("Set the max. value to 10. Then save.", ["Set the max. value to 10.", "Then save."]),
        # a lone capital after a lowercase word is a word: it ends the sentence before a capital
        ("Levels of vitamin D. These results were confirmed.", ["Levels of vitamin D.", "These results were confirmed."]),
        ("Choose option A. The other option is slower.", ["Choose option A.", "The other option is slower."]),
        ("Growth of E. coli was slower. Then it stopped.", ["Growth of E. coli was slower.", "Then it stopped."]),
        # an initial: at the start, after a capitalised word or another initial, or before one
        ("J. Smith and K. M. Lang wrote it. Call J. Smith today.", ["J. Smith and K. M. Lang wrote it.", "Call J. Smith today."]),
        ("It was written by J. K. Rowling. Yes.", ["It was written by J. K. Rowling.", "Yes."]),
        # a dotted abbreviation ends a sentence before a common sentence opener only
        ("The meeting is at 10 a.m. The room is booked.", ["The meeting is at 10 a.m.", "The room is booked."]),
        ("Read the F.A.Q. Then ask. The U.S. Army uses it.", ["Read the F.A.Q.", "Then ask.", "The U.S. Army uses it."]),
        ("See e.g. The Guide. Then go.", ["See e.g. The Guide.", "Then go."]),
        # a piece with no word joins the sentence before it; a code span never splits
        ("Model. . . . . The end.", ["Model. . . . .", "The end."]),
        ("Is it `foo?` or bar that fails? Run `make test`. then deploy.", ["Is it `foo?` or bar that fails?", "Run `make test`.", "then deploy."]),
    ],
)
def test_scientific_and_business_abbreviations_initials_and_word_less_pieces(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected
