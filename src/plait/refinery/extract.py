"""Extractive FAQ cards: questions and answers the corpus already wrote down.

No model is involved; three shapes are recognised in a chunk:

1. **Q/A blocks** — a line starting ``Q:`` / ``Question:`` (Portuguese ``P:`` /
   ``Pergunta:``, Spanish ``Pregunta:``) followed by a line starting ``A:`` /
   ``Answer:`` (``R:`` / ``Resposta:`` / ``Respuesta:``); the answer runs until the
   next question, heading or blank line followed by something else.
2. **Headings phrased as questions** — a chunk whose own heading ends with ``?``
   (``### How do I rotate an API key?``): the heading is the question, the section's
   text the answer.
3. **FAQ sections** — inside a section titled FAQ / Frequently asked questions /
   Perguntas frequentes / Preguntas frecuentes, a one-line paragraph ending with
   ``?`` (bold or numbered allowed) followed by a paragraph.

Also the small text helpers the refinery and ``ask`` share: sentence splitting,
content-word stems and Jaccard similarity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from plait.analysis import analyse, analyse_query
from plait.refinery.sentence_split import split_sentences
from plait.types import Chunk, heading_path

__all__ = [
    "MAX_ANSWER_CHARS",
    "Extracted",
    "content_stems",
    "extract_cards",
    "jaccard",
    "sentences",
    "text_stems",
    "trim",
]

#: Longer answers are cut at the last sentence end before this many characters.
MAX_ANSWER_CHARS = 800
#: Longer questions are not questions but paragraphs.
MAX_QUESTION_CHARS = 300

_Q_LINE = re.compile(
    r"^\s*(?:[-*]\s+)?(?:\*\*|__)?(?:q|p|question|pergunta|pregunta)\s*[:.)]\s*(?:\*\*|__)?\s*(?P<text>\S.*)$",
    re.IGNORECASE,
)
_A_LINE = re.compile(
    r"^\s*(?:[-*]\s+)?(?:\*\*|__)?(?:a|r|answer|resposta|respuesta)\s*[:.)]\s*(?:\*\*|__)?\s*(?P<text>.*)$",
    re.IGNORECASE,
)
_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s")
_FAQ_TITLE = re.compile(
    r"\b(faqs?|frequently asked questions|perguntas frequentes|preguntas frecuentes)\b", re.IGNORECASE
)
_QUESTION_PARAGRAPH = re.compile(r"^\s*(?:\d+[.)]\s*|[-*]\s+)?(?:\*\*|__)?(?P<text>[^\n]+?\?)(?:\*\*|__)?\s*$")
_LIST_MARK = re.compile(r"^(?:[-*]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class Extracted:
    """A question and answer found in (or drafted from) the chunks it names."""

    question: str
    answer: str
    chunk_ids: tuple[str, ...]


def _clean(text: str) -> str:
    return " ".join(text.split())


def trim(text: str, limit: int = MAX_ANSWER_CHARS) -> str:
    """Whitespace collapsed; cut at the last sentence end before ``limit`` (else a word)."""
    text = _clean(text)
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind(". "), head.rfind("? "), head.rfind("! "))
    if cut > limit // 3:
        return head[: cut + 1]
    return head.rsplit(" ", 1)[0] + " …"


def sentences(text: str) -> list[str]:
    """Sentences of a text: headings and blank lines separate, then sentence ends do
    (:func:`plait.refinery.sentence_split.split_sentences`: before any word, not after
    an abbreviation such as "e.g." or "Dr.", never inside "3.5", "v1.2" or "README.md").

    Heading lines are dropped (they are titles, not statements).
    """
    found: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+[.)])\s)", text):
        lines = [ln for ln in block.splitlines() if ln.strip() and not _HEADING_LINE.match(ln)]
        if not lines:
            continue
        joined = _LIST_MARK.sub("", _clean(" ".join(lines)))
        found.extend(split_sentences(joined))
    return found


def content_stems(text: str) -> frozenset[str]:
    """A question's content words: stems in its detected language, no stopwords."""
    return frozenset(analyse(text).stems)


def text_stems(text: str) -> frozenset[str]:
    """A passage's content words, stemmed both ways like a query so the two meet."""
    return frozenset(analyse_query(text).stems) | frozenset(analyse(text).stems)


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 0.0 when both are empty."""
    left, right = set(a), set(b)
    union = left | right
    return len(left & right) / len(union) if union else 0.0


def _strip_headings(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not _HEADING_LINE.match(ln))


def _qa_blocks(text: str) -> list[tuple[str, str]]:
    """Q:/A: (P:/R:) pairs in a text."""
    pairs: list[tuple[str, str]] = []
    question: list[str] = []
    answer: list[str] = []
    state = "idle"  # idle | question (waiting for its answer line) | answer
    blank = False

    def close() -> None:
        if question and answer and _clean(" ".join(answer)):
            pairs.append((" ".join(question), " ".join(answer)))
        question.clear()
        answer.clear()

    for line in text.splitlines():
        q = _Q_LINE.match(line)
        a = _A_LINE.match(line)
        if _HEADING_LINE.match(line):
            close()
            state = "idle"
        elif q:
            close()
            question.append(q.group("text"))
            state, blank = "question", False
        elif a and state == "question":
            answer.append(a.group("text"))
            state, blank = "answer", False
        elif not line.strip():
            blank = state == "answer"
        elif state == "question":
            question.append(line.strip())  # a question wrapped onto two lines
        elif state == "answer":
            if blank:  # a paragraph after the answer that is not a new question
                close()
                state = "idle"
            else:
                answer.append(line.strip())
    close()
    return pairs


def _faq_paragraphs(text: str) -> list[tuple[str, str]]:
    """One-line question paragraphs followed by an answer paragraph."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", _strip_headings(text)) if p.strip()]
    pairs = []
    for here, after in pairwise(paragraphs):
        match = _QUESTION_PARAGRAPH.match(here)
        if match and "\n" not in here and not _QUESTION_PARAGRAPH.match(after):
            pairs.append((match.group("text"), after))
    return pairs


def extract_cards(chunk: Chunk) -> list[Extracted]:
    """The questions and answers a chunk states itself (see the module docstring)."""
    headings = heading_path(chunk.origin)
    found: list[tuple[str, str]] = _qa_blocks(chunk.content)
    own = headings[-1].strip() if headings else ""
    if not found and own.endswith("?") and len(own) <= MAX_QUESTION_CHARS:
        body = _strip_headings(chunk.content)
        if body.strip():
            found.append((own, body))
    if not found and any(_FAQ_TITLE.search(h) for h in headings):
        found.extend(_faq_paragraphs(chunk.content))
    cards = []
    for question, answer in found:
        question = _clean(question).strip("*_ ")
        if not question or len(question) > MAX_QUESTION_CHARS:
            continue
        answer = trim(answer)
        if answer:
            cards.append(Extracted(question=question, answer=answer, chunk_ids=(chunk.id,)))
    return cards
