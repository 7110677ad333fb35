"""Extractive answers: the sentences of the gated sources that answer the question.

Each source is read as Markdown (:func:`plait.markdown.prose_blocks`): paragraphs and
list items are split into sentences; headings and code are not candidates; a table body
row is a candidate only when it holds the answer (at least ``ROW_SHARE`` of the
question's content words, or every identifier the question names), so a table is never
pasted whole. A sentence ending in ``:`` introduces what follows (a lead-in) and is never
chosen; a sentence ending in ``?`` restates a question: it is not chosen either, and the
sentence right after it inherits its words (the FAQ shape).

Every candidate is scored with both arms' evidence at sentence level:

* lexical: the share of the question's content words (stems) the sentence holds;
* dense: the sentence's cosine with the question (sentences embedded as passages,
  through the collection's embedder), rescaled over the candidates to 0..1 — e5 puts
  every cosine within a few hundredths, so only the order among them means something.

The score is the lexical share plus ``DENSE_WEIGHT`` times the dense one divided by the
number of the question's content words: the dense evidence is worth at most half a
shared word, so a sentence holding more of the question's words (an identifier above
all) always wins, and meaning breaks ties and ranks the sentences that share no word. The best ``max_sentences`` candidates are kept, best first,
while they score at least ``KEEP_SHARE`` of the best one; with no embedder (or when it
fails) only the lexical evidence counts and a sentence needs a shared word.

When nothing is chosen (no embedder and no sentence sharing a word), :func:`opening`
gives the first candidate of the first source that has one: a sentence of its prose,
never its raw Markdown (a code fence, a heading, a table). A source holding no
candidate at all (only headings, restated questions, code or diagrams) is not quoted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from plait.embeddings.base import Embedder
from plait.errors import ProviderError
from plait.markdown import prose_blocks
from plait.refinery.extract import content_stems, sentences, text_stems, trim
from plait.refinery.sentence_split import terminal
from plait.retrieval.plan import lexical_terms
from plait.types import Hit

logger = logging.getLogger(__name__)

__all__ = ["DENSE_WEIGHT", "KEEP_SHARE", "ROW_SHARE", "Candidate", "candidates", "choose", "opening"]

#: A table row is a candidate only when it holds this share of the question's words.
ROW_SHARE = 0.5
#: The weight of the (rescaled) sentence cosine against the lexical share.
DENSE_WEIGHT = 0.5
#: Sentences scoring under this share of the best one are not added.
KEEP_SHARE = 0.5
_MAX_CANDIDATES = 60
_SENTENCE_CHARS = 400


@dataclass(frozen=True, slots=True)
class Candidate:
    """A sentence (or table row) of source ``n`` and its evidence."""

    n: int
    position: int
    text: str
    lexical: float
    dense: float = 0.0  # rescaled cosine, divided by the question's content words

    @property
    def score(self) -> float:
        return self.lexical + DENSE_WEIGHT * self.dense


def _identifiers(question: str) -> frozenset[str]:
    exact, _ = lexical_terms(question)
    return frozenset(term for term in exact if any(not ch.isalpha() for ch in term))


def candidates(question: str, sources: Sequence[Hit]) -> list[Candidate]:
    """Every sentence and answering row of ``sources``, with its lexical evidence."""
    wanted = content_stems(question)
    identifiers = _identifiers(question)
    found: list[Candidate] = []
    for n, hit in enumerate(sources, start=1):
        carry: frozenset[str] = frozenset()
        position = 0
        table = hit.metadata.get("table")  # the header of a table the chunk continues
        for block in prose_blocks(hit.content, table=table if isinstance(table, str) else None):
            if block.kind == "row":
                stems = text_stems(block.text)
                share = len(wanted & stems) / max(1, len(wanted))
                lowered = block.text.lower()
                named = bool(identifiers) and all(term in lowered for term in identifiers)
                if share >= ROW_SHARE or named:
                    found.append(Candidate(n, position, trim(block.text, _SENTENCE_CHARS), share))
                position += 1
                carry = frozenset()
                continue
            for sentence in sentences(block.text):
                position += 1
                stems = wanted & text_stems(sentence)
                end = terminal(sentence)  # closing quotes and brackets aside: '"Why?"'
                if end == "?":
                    carry = stems  # a question restated is not an answer
                    continue
                if end == ":" or len(sentence.split()) < 3:
                    carry = frozenset()  # a lead-in or a label says nothing by itself
                    continue
                shared = stems | carry
                carry = frozenset()
                found.append(
                    Candidate(n, position, trim(sentence, _SENTENCE_CHARS), len(shared) / max(1, len(wanted)))
                )
    return found


def _with_dense(question: str, found: list[Candidate], embedder: Embedder) -> list[Candidate]:
    pool = sorted(found, key=lambda c: (-c.lexical, c.n, c.position))[:_MAX_CANDIDATES]
    try:
        query = np.asarray(embedder.embed_query(question), dtype=np.float32)
        matrix = np.asarray(embedder.embed_documents([c.text for c in pool]), dtype=np.float32)
    except ProviderError as exc:
        logger.warning("sentence embedding failed, lexical evidence only: %s", exc)
        return found
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    cosines = matrix @ query / np.maximum(norms, 1e-12)
    low, high = float(cosines.min()), float(cosines.max())
    span = high - low
    words = max(1, len(content_stems(question)))
    return [
        Candidate(c.n, c.position, c.text, c.lexical, (float(cos) - low) / span / words if span > 1e-9 else 0.0)
        for c, cos in zip(pool, cosines, strict=True)
    ]


def choose(
    question: str, sources: Sequence[Hit], *, max_sentences: int, embedder: Embedder | None = None
) -> list[Candidate]:
    """The sentences the answer is made of, best first (module docstring)."""
    found = candidates(question, sources)
    if embedder is not None and len(found) > 1:
        found = _with_dense(question, found, embedder)
    else:
        found = [c for c in found if c.lexical > 0]
    if not found:
        return []
    ranked = sorted(found, key=lambda c: (-c.score, c.n, c.position))
    best = ranked[0].score
    chosen: list[Candidate] = []
    seen: set[str] = set()
    for candidate in ranked:
        if len(chosen) >= max_sentences or candidate.score < KEEP_SHARE * best:
            break
        if candidate.text not in seen:
            seen.add(candidate.text)
            chosen.append(candidate)
    return chosen


def opening(question: str, sources: Sequence[Hit]) -> Candidate | None:
    """The first candidate of the first source holding one (in source order), or None
    when no source holds a sentence to quote (module docstring)."""
    found = candidates(question, sources)
    return min(found, key=lambda c: (c.n, c.position)) if found else None
