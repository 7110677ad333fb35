"""Extractive answers: the sentences of the gated sources that answer the question.

Each source is read as it was indexed (:func:`plait.fields.reads_as_markdown`): a
Markdown file as Markdown (:func:`plait.markdown.prose_blocks`), anything else (a JSONL
record, a text file, a session event) as plain text, its paragraphs separated by blank
lines. Paragraphs and list items are split into sentences; headings and code are not candidates; a table body
row is a candidate only when it holds the answer (at least ``ROW_SHARE`` of the
question's content words, or every identifier the question names), so a table is never
pasted whole. A sentence ending in ``:`` introduces what follows (a lead-in) and is never
chosen; a sentence ending in ``?`` restates a question: it is not chosen either, and the
sentence right after it inherits its words (the FAQ shape). A paragraph or list item
that is nothing but links or images (a table of contents, a badge, a list of in-page
anchors) is navigation, not a sentence: it is never chosen. A chunk that starts inside a
table or a fenced code block (``metadata.table`` / ``metadata.fence``) is read as the
rest of it: rows keep their column names, code stays code.

A chunk is a slice of its document cut by size (:mod:`plait.chunking`), so a sentence may
be cut where a chunk ends or where the next one starts (its overlap). Such a piece is not
a candidate: the first sentence of a chunk that continues its section (it starts after
the document's start and not with a heading) begins where the overlap put it, and the
last sentence of a chunk the chunker cut inside a paragraph (its length is the target's,
no paragraph break in its cut window) when it has no sentence end. The target and the
window are the ones the collection's chunks were cut with (``chunking``, as its index
runs record them: :func:`plait.collection_settings.recorded_chunking`), the chunker's
defaults when none is given. A sentence already
chosen is not chosen again, nor one that is a prefix of it (or it of one): overlapping
chunks hold the same sentences.

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
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from markdown_it import MarkdownIt

from plait.chunking import ChunkSettings
from plait.embeddings.base import Embedder
from plait.errors import ProviderError
from plait.fields import reads_as_markdown
from plait.markdown import MarkdownBlock, plain_text, prose_blocks
from plait.refinery.extract import content_stems, sentences, text_stems, trim
from plait.refinery.sentence_split import terminal
from plait.retrieval.plan import lexical_terms
from plait.types import Hit

logger = logging.getLogger(__name__)

__all__ = [
    "DENSE_WEIGHT",
    "KEEP_SHARE",
    "ROW_SHARE",
    "Candidate",
    "candidates",
    "choose",
    "navigation",
    "opening",
]

#: A table row is a candidate only when it holds this share of the question's words.
ROW_SHARE = 0.5
#: The weight of the (rescaled) sentence cosine against the lexical share.
DENSE_WEIGHT = 0.5
#: Sentences scoring under this share of the best one are not added.
KEEP_SHARE = 0.5
_MAX_CANDIDATES = 60
_SENTENCE_CHARS = 400
#: The chunker's cut: a chunk cut inside a paragraph ends at the whitespace nearest the
#: target length (within this many characters, and within the window), no paragraph
#: break in its window.
_CUT_SLACK = 40
_DEFAULT_CHUNKING = ChunkSettings()
_SENTENCE_ENDS = frozenset(".!?…:")
_HEADING_START = re.compile(r"[ \t]{0,3}#{1,6}(?:[ \t]|$)|[^\n]*\n[ \t]{0,3}(?:=+|-+)[ \t]*(?:\n|$)")
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")
_LINKS = {"link_open", "link_close", "image"}
_NEUTRAL = {"softbreak", "hardbreak", "html_inline"}  # an anchor tag beside a link says nothing


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


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable("table")


def plain_blocks(text: str) -> list[MarkdownBlock]:
    """The paragraphs of plain text (separated by blank lines), each on one line.

    >>> [b.text for b in plain_blocks("```\\nx = 1\\n```\\nIt runs.\\n\\n# not a heading\\n")]
    ['``` x = 1 ``` It runs.', '# not a heading']
    """
    return [MarkdownBlock("text", " ".join(part.split())) for part in _PARAGRAPH_BREAK.split(text) if part.strip()]


@lru_cache(maxsize=256)
def navigation(content: str, fence: str | None = None) -> frozenset[str]:
    """The visible text of every paragraph or list item of ``content`` that holds nothing
    but links and images (whitespace and punctuation between them aside): a table of
    contents, anchors, badges. None of them is a sentence. Cached by content: an answer
    reads it for each source's candidates and again for the quotes of those it cites.
    ``fence``: the opening run of the code block ``content`` starts inside, if any.

    >>> sorted(navigation("- [Meaning of SRID 4326](#meaning)\\n- See [the guide](g.md) first."))
    ['Meaning of SRID 4326']
    """
    if "[" not in content:
        return frozenset()
    found: set[str] = set()
    for token in _parser().parse(f"{fence}\n{content}" if fence else content):
        if token.type != "inline" or not token.children:
            continue
        depth, linked, loose = 0, False, False
        for child in token.children:
            if child.type in _LINKS:
                depth += {"link_open": 1, "link_close": -1}.get(child.type, 0)
                linked = True
            elif depth == 0 and child.type not in _NEUTRAL and any(
                ch.isalnum() for ch in child.content
            ):
                loose = True
                break
        if linked and not loose:
            found.add(" ".join(plain_text(token.content).split()))
    return frozenset(found)


def _cut(hit: Hit, chunking: ChunkSettings) -> tuple[bool, bool]:
    """Whether ``hit`` starts and whether it ends inside a paragraph the chunker cut
    (module docstring): its start when it continues its section, its end when its length
    is ``chunking``'s target and its cut window holds no paragraph break."""
    content = hit.content
    start = hit.metadata.get("charStart")
    heading = reads_as_markdown(hit.metadata, hit.origin) and _HEADING_START.match(content) is not None
    starts_cut = isinstance(start, int) and start > 0 and not heading
    slack = min(_CUT_SLACK, chunking.window)
    low = max(0, chunking.target - chunking.window)
    ends_cut = abs(len(content) - chunking.target) <= slack and not _PARAGRAPH_BREAK.search(content, low)
    return starts_cut, ends_cut


def candidates(
    question: str, sources: Sequence[Hit], *, chunking: ChunkSettings = _DEFAULT_CHUNKING
) -> list[Candidate]:
    """Every sentence and answering row of ``sources``, with its lexical evidence;
    ``chunking``: the chunk settings they were cut with (module docstring)."""
    wanted = content_stems(question)
    identifiers = _identifiers(question)
    found: list[Candidate] = []
    for n, hit in enumerate(sources, start=1):
        carry: frozenset[str] = frozenset()
        position = 0
        table = hit.metadata.get("table")  # the header of a table the chunk continues
        fence = hit.metadata.get("fence")  # the opening run of a code block it continues
        fence = fence if isinstance(fence, str) else None
        if reads_as_markdown(hit.metadata, hit.origin):
            blocks = prose_blocks(hit.content, table=table if isinstance(table, str) else None, fence=fence)
            links = navigation(hit.content, fence)
        else:  # cut as plain text: a code fence or a '#' line in it is text, not Markdown
            blocks, links = plain_blocks(hit.content), frozenset()
        starts_cut, ends_cut = _cut(hit, chunking)
        starts_cut = starts_cut and fence is None  # cut inside code: its first prose is whole
        for index, block in enumerate(blocks):
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
            if block.text in links:
                position += 1
                carry = frozenset()
                continue
            pieces = sentences(block.text)
            for at, sentence in enumerate(pieces):
                position += 1
                stems = wanted & text_stems(sentence)
                end = terminal(sentence)  # closing quotes and brackets aside: '"Why?"'
                first = starts_cut and index == 0 and at == 0
                last = ends_cut and index == len(blocks) - 1 and at == len(pieces) - 1
                if first or (last and end not in _SENTENCE_ENDS):
                    carry = frozenset()  # a piece of a sentence cut at the chunk's edge
                    continue
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
    question: str,
    sources: Sequence[Hit],
    *,
    max_sentences: int,
    embedder: Embedder | None = None,
    chunking: ChunkSettings = _DEFAULT_CHUNKING,
) -> list[Candidate]:
    """The sentences the answer is made of, best first (module docstring)."""
    found = candidates(question, sources, chunking=chunking)
    if embedder is not None and len(found) > 1:
        found = _with_dense(question, found, embedder)
    else:
        found = [c for c in found if c.lexical > 0]
    if not found:
        return []
    ranked = sorted(found, key=lambda c: (-c.score, c.n, c.position))
    best = ranked[0].score
    chosen: list[Candidate] = []
    for candidate in ranked:
        if len(chosen) >= max_sentences or candidate.score < KEEP_SHARE * best:
            break
        if not any(_same(candidate.text, c.text) for c in chosen):
            chosen.append(candidate)
    return chosen


def _same(a: str, b: str) -> bool:
    """Whether two sentences are one: equal, or one a prefix of the other (a sentence
    trimmed, or cut where an overlapping chunk ends), trailing " …" aside."""
    a, b = a.removesuffix(" …"), b.removesuffix(" …")
    return a.startswith(b) or b.startswith(a)


def opening(
    question: str, sources: Sequence[Hit], *, chunking: ChunkSettings = _DEFAULT_CHUNKING
) -> Candidate | None:
    """The first candidate of the first source holding one (in source order), or None
    when no source holds a sentence to quote (module docstring)."""
    found = candidates(question, sources, chunking=chunking)
    return min(found, key=lambda c: (c.n, c.position)) if found else None
