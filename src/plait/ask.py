"""Ask: an answer grounded in retrieved chunks, with numbered citations that resolve.

1. ``qa_first`` (opt-in): a matching FAQ card answers directly (``mode: "card"``),
   citing the card's source chunks; no LLM call.
2. Otherwise a hybrid search (optionally re-ranked) fetches candidates, and the
   **relevance gate** keeps those that are plausibly about the question. A hit passes
   when either

   * the lexical arm found it and it contains at least ``min_term_coverage``
     (default 0.5) of the question's content words (stems, stopwords excluded), or
   * its dense cosine with the question is at least ``min_cosine`` (default 0.84).

   ``mode`` picks the search's arms (``hybrid``, ``lexical``, ``vector``); under
   ``vector`` no lexical arm runs, so the first rule reads "contains at least
   ``min_term_coverage`` of the content words" alone.

   The default is measured (``benchmarks/ask_gate.py``, figures in
   ``benchmarks/results/ask_gate_*.json``): over ``examples/docs`` with the local e5
   model, the best cosine of 14 answerable questions is 0.84–0.92 and of 12
   unrelated ones 0.75–0.83, so 0.84 separates them (narrowly: e5 scores everything
   high). With minilm the two ranges overlap (0.42–0.75 against 0.09–0.51): no cosine
   separates them, so 0.84 leaves the lexical rule to decide; lower it per collection
   only after measuring your own questions.

   Both are settings: per call, or per collection under the ``ask`` setting.
3. No hit passes → a plain "not found in the knowledge base" answer, ``mode:
   "not-found"``, and no LLM call.
4. With an LLM: the passing hits go to the model as numbered sources ``[1]..[n]``; it
   must cite them as ``[n]``. Every ``[n]`` is checked against the sources actually
   given: an invented number is removed from the answer and listed in
   ``invalidCitations``. ``grounded`` is true when at least one valid citation is left.
   A model that answers ``NOT_FOUND`` gives ``mode: "not-found"``.
5. Without an LLM (or when it fails — ``note`` says so): an extractive answer, the
   sentences of the passing hits that share the most content words with the question,
   each cited, ``mode: "extractive"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from plait.chunk_build import index_text
from plait.collection_settings import read_settings
from plait.errors import ProviderError, ValidationError
from plait.refinery.extract import content_stems, sentences, text_stems, trim
from plait.refinery.models import CARD_SCOPE
from plait.search import MAX_QUERY_CHARS
from plait.types import CardHit, FileOrigin, Hit, Model, Origin, SearchMode

if TYPE_CHECKING:
    from plait.searcher import AskEngine

__all__ = [
    "NOT_FOUND_ANSWER",
    "AskRequest",
    "AskResult",
    "AskSettings",
    "Citation",
    "answer_question",
    "check_citations",
    "passes_gate",
]

NOT_FOUND_ANSWER = (
    "Not found in the knowledge base: no indexed passage is relevant enough to answer this question."
)
_NOT_FOUND_TOKEN = "NOT_FOUND"
_MARKS = re.compile(r"((?:\s?\[\d+(?:\s*,\s*\d+)*\])+)")
_QUOTE_CHARS = 300
_SOURCE_CHARS = 2000
_SYSTEM = (
    "You answer questions using only the numbered sources you are given. Cite every "
    "statement with the number of the source it comes from in square brackets, like [1] "
    "or [1][3]. Use no knowledge beyond the sources. If the sources do not contain the "
    f"answer, reply with exactly {_NOT_FOUND_TOKEN}. Answer in the language of the "
    "question, concisely."
)


class AskSettings(Model):
    """The relevance gate and the number of sources (collection setting ``ask``)."""

    k: int = Field(default=5, ge=1, le=20)
    min_cosine: float = Field(default=0.84, ge=0.0, le=1.0)
    min_term_coverage: float = Field(default=0.5, gt=0.0, le=1.0)
    max_sentences: int = Field(default=3, ge=1, le=10)


class AskRequest(Model):
    """A question, as the HTTP API accepts it; None fields use the collection's settings."""

    question: str
    k: int | None = Field(default=None, ge=1, le=20)
    mode: SearchMode = SearchMode.HYBRID
    """The search's arms: ``hybrid``, ``lexical`` (no embedding) or ``vector`` (no BM25)."""
    qa_first: bool = False
    include_drafts: bool | None = None
    rerank: Literal["llm", "cross-encoder"] | None = None
    scopes: list[str] | None = None
    min_cosine: float | None = Field(default=None, ge=0.0, le=1.0)
    min_term_coverage: float | None = Field(default=None, gt=0.0, le=1.0)

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        if not value or not value.strip():
            raise ValueError("question is empty")
        if len(value) > MAX_QUERY_CHARS:
            raise ValueError(f"question has {len(value)} characters; the limit is {MAX_QUERY_CHARS}")
        return value


class Citation(Model):
    """A citation that resolves: source ``n`` is chunk ``chunk_id``; ``quote`` its best sentence."""

    n: int
    chunk_id: str
    origin: Origin
    quote: str


class AskResult(Model):
    """An answer with the citations it makes and how it was produced.

    ``mode``: ``llm``, ``extractive``, ``card`` or ``not-found``. ``answered_by``:
    ``card`` (qa_first matched a FAQ card) or ``search``. ``sources`` are the hits
    given as numbered sources (source ``n`` is ``sources[n - 1]``); ``citations`` the
    ones the answer cites. ``invalid_citations`` lists numbers the model invented
    (removed from the answer). ``note`` says what degraded (e.g. the LLM failed).
    """

    question: str
    collection: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    mode: Literal["llm", "extractive", "card", "not-found"]
    grounded: bool
    answered_by: Literal["card", "search"] = "search"
    invalid_citations: list[int] = Field(default_factory=list)
    sources: list[Hit] = Field(default_factory=list)
    card: CardHit | None = None
    llm: str | None = None
    vector_available: bool = False
    search_mode: SearchMode = SearchMode.HYBRID
    """The arms the search behind the answer ran (the request's ``mode``)."""
    note: str | None = None


def _validated(request: AskRequest | Mapping[str, Any]) -> AskRequest:
    if isinstance(request, AskRequest):
        return request
    try:
        return AskRequest.model_validate(dict(request))
    except PydanticValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in exc.errors()]
        raise ValidationError("; ".join(parts)) from None


def _indexed(hit: Hit) -> str:
    heading = hit.origin.heading_path if isinstance(hit.origin, FileOrigin) else []
    return index_text(hit.content, heading)


def passes_gate(
    hit: Hit, question_stems: frozenset[str], settings: AskSettings, *, lexical_ran: bool = True
) -> bool:
    """The relevance gate (module docstring, step 2). ``lexical_ran`` False (mode
    ``vector``): a hit is not refused for the lexical arm's silence, only its terms count."""
    if hit.vector_score is not None and hit.vector_score >= settings.min_cosine:
        return True
    if (lexical_ran and hit.ranks.lexical is None) or not question_stems:
        return False
    shared = question_stems & text_stems(_indexed(hit))
    return len(shared) / len(question_stems) >= settings.min_term_coverage


def check_citations(answer: str, given: int) -> tuple[str, list[int], list[int]]:
    """Keep ``[n]`` with ``1 <= n <= given``; drop the others from the text.

    Returns (cleaned answer, valid numbers in order of first use, invalid numbers sorted).
    """
    valid: list[int] = []
    invalid: set[int] = set()

    def repl(match: re.Match[str]) -> str:
        numbers = [int(x) for x in re.findall(r"\d+", match.group(0))]
        kept = list(dict.fromkeys(n for n in numbers if 1 <= n <= given))
        invalid.update(n for n in numbers if not 1 <= n <= given)
        for n in kept:
            if n not in valid:
                valid.append(n)
        if not kept:
            return ""
        lead = " " if match.group(0).startswith(" ") else ""
        return lead + "".join(f"[{n}]" for n in kept)

    cleaned = _MARKS.sub(repl, answer)
    cleaned = re.sub(r"[ \t]+([.,;:!?])", r"\1", cleaned).strip()
    return cleaned, valid, sorted(invalid)


def _quote(content: str, against: str) -> str:
    """The sentence of ``content`` sharing most content words with ``against``."""
    wanted = content_stems(against)
    best, best_score = "", -1.0
    for sentence in sentences(content):
        score = len(wanted & text_stems(sentence))
        if score > best_score:
            best, best_score = sentence, score
    return trim(best or content, _QUOTE_CHARS)


def _citing(answer: str, n: int) -> str:
    """The text of ``answer`` that cites ``[n]``: what precedes each group of marks
    holding ``[n]``, back to the previous group (the whole answer if nothing does)."""
    parts = _MARKS.split(answer)
    claims = [
        parts[i - 1]
        for i in range(1, len(parts), 2)
        if n in {int(x) for x in re.findall(r"\d+", parts[i])}
    ]
    return " ".join(claims) or answer


def _citations(numbers: Sequence[int], sources: Sequence[Hit], answer: str) -> list[Citation]:
    return [
        Citation(
            n=n,
            chunk_id=sources[n - 1].chunk_id,
            origin=sources[n - 1].origin,
            quote=_quote(sources[n - 1].content, _citing(answer, n)),
        )
        for n in numbers
    ]


def _label(hit: Hit) -> str:
    origin = hit.origin
    if isinstance(origin, FileOrigin):
        return " › ".join([origin.source_path, *origin.heading_path])
    return f"session {origin.session_id}"


def ask_messages(question: str, sources: Sequence[Hit]) -> list[dict[str, Any]]:
    """The chat messages for an LLM answer over numbered sources."""
    blocks = [
        f"[{n}] ({_label(hit)})\n{_indexed(hit)[:_SOURCE_CHARS]}" for n, hit in enumerate(sources, start=1)
    ]
    user = "Sources:\n\n" + "\n\n".join(blocks) + f"\n\nQuestion: {question}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def _extractive(question: str, sources: Sequence[Hit], settings: AskSettings) -> tuple[str, list[int]]:
    """The best sentences of the sources, each followed by its ``[n]``."""
    wanted = content_stems(question)
    scored: list[tuple[float, int, int, str]] = []
    for n, hit in enumerate(sources, start=1):
        carry = 0  # a sentence right after a matching question answers it (FAQ shape)
        for position, sentence in enumerate(sentences(hit.content)):
            shared = len(wanted & text_stems(sentence))
            if sentence.rstrip().endswith("?"):
                carry = shared  # a question restated is not an answer
                continue
            shared, carry = shared + carry, 0
            if shared:
                scored.append((shared / max(1, len(wanted)), n, position, sentence))
    scored.sort(key=lambda item: (-item[0], item[1], item[2]))
    chosen = sorted(scored[: settings.max_sentences], key=lambda item: (item[1], item[2]))
    if not chosen:  # found by meaning only: the top source's opening sentence
        first = next((s for s in sentences(sources[0].content) if not s.endswith("?")), None)
        chosen = [(0.0, 1, 0, first or trim(sources[0].content, _QUOTE_CHARS))]
    answer = " ".join(f"{sentence} [{n}]" for _, n, _, sentence in chosen)
    return answer, list(dict.fromkeys(n for _, n, _, _ in chosen))


def _settings(engine: AskEngine, collection: str, req: AskRequest) -> AskSettings:
    saved = read_settings(engine.store, collection).ask
    base = AskSettings.model_validate(saved)
    overrides = {
        name: getattr(req, name)
        for name in ("k", "min_cosine", "min_term_coverage")
        if getattr(req, name) is not None
    }
    return base.model_copy(update=overrides)


def _from_card(question: str, collection: str, card: CardHit, vector_available: bool) -> AskResult:
    numbered = [s for s in card.sources if s.origin is not None and s.content is not None]
    marks = "".join(f"[{n}]" for n in range(1, len(numbered) + 1))
    citations = [
        Citation(n=n, chunk_id=s.chunk_id, origin=s.origin, quote=_quote(s.content or "", card.answer))
        for n, s in enumerate(numbered, start=1)
        if s.origin is not None
    ]
    gone = len(card.sources) - len(numbered)
    return AskResult(
        question=question,
        collection=collection,
        answer=f"{card.answer} {marks}".strip(),
        citations=citations,
        mode="card",
        grounded=bool(citations),
        answered_by="card",
        card=card,
        vector_available=vector_available,
        note=f"{gone} of the card's source chunks are no longer indexed" if gone else None,
    )


def answer_question(engine: AskEngine, collection: str, request: AskRequest | Mapping[str, Any]) -> AskResult:
    """Answer one question over ``collection`` (see the module docstring)."""
    req = _validated(request)
    if req.qa_first:
        card = engine.refinery.match(collection, req.question, include_drafts=req.include_drafts)
        if card is not None:
            return _from_card(req.question, collection, card, vector_available=card.vector_score is not None)
    settings = _settings(engine, collection, req)
    search = {
        "query": req.question,
        "k": settings.k,
        "scopes": req.scopes,
        "rerank": req.rerank,
        "mode": req.mode,
    }
    # an answer is built from approved cards only, unless drafts count (as for qa_first);
    # cards are searched only when their scope is named (no refinery is opened otherwise)
    names_cards = bool(req.scopes) and CARD_SCOPE in (req.scopes or ())
    drafts = engine.refinery.drafts_count(collection, req.include_drafts) if names_cards else True
    result = engine.search_request(collection, search, drafts_visible=drafts)
    wanted = content_stems(req.question)
    lexical_ran = req.mode != SearchMode.VECTOR
    sources = [hit for hit in result.hits if passes_gate(hit, wanted, settings, lexical_ran=lexical_ran)]
    base: dict[str, Any] = {
        "question": req.question,
        "collection": collection,
        "vector_available": result.vector_available,
        "search_mode": req.mode,
    }
    if not sources:
        return AskResult(**base, answer=NOT_FOUND_ANSWER, mode="not-found", grounded=False)
    llm = engine.llm
    note = None
    if llm is not None:
        label = f"{llm.provider}/{llm.model}"
        try:
            reply = llm.chat(ask_messages(req.question, sources), temperature=0.0, max_tokens=700)
        except ProviderError as exc:
            note = f"the LLM ({label}) failed, so the answer is extractive: {exc}"
        else:
            if reply.strip().upper().startswith(_NOT_FOUND_TOKEN):
                return AskResult(
                    **base,
                    answer=NOT_FOUND_ANSWER,
                    mode="not-found",
                    grounded=False,
                    sources=sources,
                    llm=label,
                    note=f"the LLM found no answer in the {len(sources)} sources given",
                )
            answer, valid, invalid = check_citations(reply, len(sources))
            return AskResult(
                **base,
                answer=answer,
                citations=_citations(valid, sources, answer),
                mode="llm",
                grounded=bool(valid),
                invalid_citations=invalid,
                sources=sources,
                llm=label,
                note=None if valid else "the LLM's answer cites none of the sources given",
            )
    answer, numbers = _extractive(req.question, sources, settings)
    return AskResult(
        **base,
        answer=answer,
        citations=_citations(numbers, sources, answer),
        mode="extractive",
        grounded=True,
        sources=sources,
        note=note,
    )
