"""Ask: an answer grounded in retrieved chunks, with numbered citations that resolve.

1. ``qa_first`` (opt-in): a matching FAQ card answers directly (``mode: "card"``),
   citing the card's source chunks that share words with its answer; ``grounded`` only
   when they back every sentence of it (:mod:`plait.refinery.grounding`); no LLM call.
2. Otherwise a hybrid search (optionally re-ranked) fetches candidates, and the
   **relevance gate** keeps those that are plausibly about the question. A hit passes
   when its dense cosine with the question reaches ``min_cosine``, or the lexical arm
   found it and it holds ``min_term_coverage`` of the question's content words (stems,
   stopwords excluded; a word no chunk holds counts twice in the total) or every
   identifier the question names (``ERR-4012``). Both values are
   **calibrated on the collection** at the end of the index run that changed it, without
   labels (:mod:`plait.ask_gate`: pseudo-questions cut from its own chunks against
   shuffled text in its own vocabulary), and stored with it (setting ``askGate``; ``gate``
   says when and by what: ``calibratedAt``, ``calibratedBy``). The collection setting ``ask`` (``minCosine``,
   ``minTermCoverage``) or the call overrides them; a collection never calibrated uses
   0.84 / 0.5; one indexed before the gate existed, or with vectors pending, is
   calibrated by its first ``hybrid`` ask (the calibration runs both arms); under
   search ``mode`` ``lexical`` / ``vector`` the stored gate is used, and under ``vector``
   no lexical arm runs, so the term coverage counts for every hit. The result says which gate was used (``gate``) and, for every retrieved
   hit, whether and why it passed (``gateChecks``).
3. No hit passes → a plain "not found in the knowledge base" answer, ``mode:
   "not-found"``, and no LLM call.
4. With an LLM: the passing hits go to the model as delimited, numbered **data**
   (:mod:`plait.ask_grounding`: it is told they may hold instructions to ignore). Every
   sentence of the reply must cite a source it was given and share words with it;
   the others are dropped and listed in ``dropped`` with the reason, invented numbers
   are listed in ``invalidCitations``. ``grounded`` is true when every claim left cites
   a source. When nothing is left (every sentence cites nothing, only invented sources,
   or nothing it shares words with; or the reply holds no sentence) the LLM's answer has
   failed: step 5 answers, ``dropped`` / ``invalidCitations`` still list the reply's
   sentences and ``note`` says why it was dropped. When the model answers ``NOT_FOUND``,
   ``mode: "not-found"``, with an answer saying that the passages passed the gate but the
   model found no answer in them (never that none was relevant: the gate passed them),
   and the passages in ``sources``.
5. Without an LLM (or when it fails, or its reply was dropped — ``note`` says so): an
   extractive answer (:mod:`plait.ask_extract`): the sentences of the passing hits chosen by their own
   relevance (both arms' evidence at sentence level), never a lead-in ending in ``:``,
   a table row only when it holds the answer, never raw Markdown (a source holding no
   prose sentence, only code or a diagram, is named, not pasted); ``mode: "extractive"``.

Citations are numbered ``[1]..[n]`` in order of use; ``sources`` are reordered to match
(source ``n`` is ``sources[n - 1]``: the cited ones first, then the other passing hits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, StrictBool, field_validator
from pydantic import ValidationError as PydanticValidationError

from plait.ask_extract import choose, navigation, opening
from plait.ask_gate import (
    Gate,
    GateVerdict,
    question_identifiers,
    resolve_gate,
    unknown_terms,
    verdict,
)
from plait.ask_gate_state import ensure_gate_read
from plait.ask_grounding import (
    NOT_FOUND_TOKEN,
    DroppedClaim,
    ask_messages,
    check_citations,
    ground,
    renumber,
)
from plait.chunking import ChunkSettings
from plait.collection_settings import CollectionSettings, read_collection, recorded_chunking
from plait.errors import NotFoundError, ProviderError, ValidationError
from plait.markdown import plain_text
from plait.refinery.extract import content_stems, sentences, text_stems, trim
from plait.refinery.grounding import card_support, indexed_text
from plait.refinery.models import CARD_SCOPE
from plait.retrieval.request import plain_number, validation_message
from plait.search import MAX_QUERY_CHARS
from plait.staleness import searchable_count
from plait.stores.base import SearchScopeStore
from plait.types import CardHit, Hit, Model, Origin, SearchMode, heading_path
from plait.usage import metering

if TYPE_CHECKING:
    from plait.llm import LLM
    from plait.searcher import AskEngine

__all__ = [
    "NOT_FOUND_ANSWER",
    "AskRequest",
    "AskResult",
    "AskSettings",
    "Citation",
    "answer_question",
    "ask_messages",
    "check_citations",
    "passes_gate",
]

NOT_FOUND_ANSWER = (
    "Not found in the knowledge base: no indexed passage is relevant enough to answer this question."
)
_QUOTE_CHARS = 300
_MARKS = re.compile(r"((?:\s?\[\d+(?:\s*,\s*\d+)*\])+)")


class AskSettings(Model):
    """The number of sources and sentences, and gate overrides (collection setting ``ask``).

    ``min_cosine`` / ``min_term_coverage`` None: the collection's calibrated gate."""

    k: int = Field(default=5, ge=1, le=20)
    min_cosine: float | None = Field(default=None, ge=0.0, le=1.0)
    min_term_coverage: float | None = Field(default=None, gt=0.0, le=1.0)
    max_sentences: int = Field(default=3, ge=1, le=10)


class AskRequest(Model):
    """A question, as the HTTP API accepts it; None fields use the collection's settings."""

    question: str
    k: int | None = Field(default=None, ge=1, le=20)
    mode: SearchMode = SearchMode.HYBRID
    """The search's arms: ``hybrid``, ``lexical`` (no embedding) or ``vector`` (no BM25)."""
    qa_first: StrictBool = False
    include_drafts: StrictBool | None = None
    rerank: Literal["llm", "cross-encoder"] | None = None
    scopes: list[str] | None = None
    min_cosine: float | None = Field(default=None, ge=0.0, le=1.0)
    min_term_coverage: float | None = Field(default=None, gt=0.0, le=1.0)

    @field_validator("k", "min_cosine", "min_term_coverage", mode="before")
    @classmethod
    def _plain_number(cls, value: Any) -> Any:
        return plain_number(value)  # true is not k=1, NaN not a threshold

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
    ones the answer cites, numbered 1..n in order of use. ``gate`` is the relevance gate
    used and ``gate_checks`` why each retrieved hit passed or failed it.
    ``invalid_citations`` lists numbers the model invented (removed from the answer),
    ``dropped`` the model's sentences removed because they cite no source given or share
    nothing with what they cite (listed too when none was left and the answer is
    extractive; a ``[n]`` in a reason is ``sources[n - 1]``, numbered as the answer is).
    ``llm`` names the model whose reply the result reports on. ``note`` says
    what degraded (e.g. the LLM failed, or its reply was dropped).
    """

    question: str
    collection: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    mode: Literal["llm", "extractive", "card", "not-found"]
    grounded: bool
    answered_by: Literal["card", "search"] = "search"
    invalid_citations: list[int] = Field(default_factory=list)
    dropped: list[DroppedClaim] = Field(default_factory=list)
    sources: list[Hit] = Field(default_factory=list)
    gate: Gate | None = None
    gate_checks: list[GateVerdict] = Field(default_factory=list)
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
        raise ValidationError(validation_message(exc)) from None


def passes_gate(hit: Hit, question_stems: frozenset[str], gate: Gate, *, lexical_ran: bool = True) -> bool:
    """The relevance gate (module docstring, step 2; :func:`plait.ask_gate.verdict` says why).
    ``lexical_ran`` False (mode ``vector``): a hit is not refused for the lexical arm's
    silence, only its terms count."""
    return verdict(hit, question_stems, gate, lexical_ran=lexical_ran).passed


_TABLE_LINE = re.compile(r"^[ \t]*\|.*$", re.MULTILINE)
_DELIMITER_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


_CODE_SPAN = re.compile(r"(`+)[^`].*?\1")
_INLINE_LINK = re.compile(
    r"!?\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]"  # [text] or ![alt], one level of brackets inside
    r"\((?:<[^<>\n]*>|(?:[^()\s]|\([^()\s]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
_REFERENCE_LINK = re.compile(r"!?\[((?:[^\[\]\\]|\\.)+)\]\[[^\[\]]*\]")


def _unlinked(piece: str) -> str:
    """``piece`` with every inline or reference link (and image) written as its text (alt
    text): a quote says "the guide", never "[the guide](docs/guide.md)". Code spans stay
    as written."""
    if "[" not in piece:
        return piece
    out: list[str] = []
    at = 0
    for code in _CODE_SPAN.finditer(piece):
        out += [_texts(piece[at : code.start()]), code.group()]
        at = code.end()
    return "".join([*out, _texts(piece[at:])])


def _texts(text: str) -> str:
    """Links and images written as their text, an image inside a link (a badge) too."""
    for _ in range(3):
        done = _REFERENCE_LINK.sub(r"\1", _INLINE_LINK.sub(r"\1", text))
        if done == text:
            break
        text = done
    return text


def _quote_candidates(content: str) -> list[str]:
    """The pieces of ``content`` a quote may be, each as written (links as their text):
    every table line (a row, never the delimiter row) on its own, and the sentences of the
    text between them, never one that is only links (a table of contents: no sentence,
    :func:`plait.ask_extract.navigation`)."""
    pieces: list[str] = []
    at = 0
    for line in _TABLE_LINE.finditer(content):
        pieces += sentences(content[at : line.start()])
        if not _DELIMITER_ROW.match(line.group()):
            pieces.append(line.group().strip())
        at = line.end()
    pieces += sentences(content[at:])
    links = navigation(content)
    if links:
        pieces = [p for p in pieces if " ".join(plain_text(p).split()) not in links]
    return [_unlinked(p) for p in pieces]


def _quote(content: str, against: str) -> str:
    """The sentence of ``content`` (or the table row: a row is quoted alone, as written)
    sharing most content words with ``against``."""
    wanted = content_stems(against)
    best, best_score = "", -1.0
    for piece in _quote_candidates(content):
        score = len(wanted & text_stems(piece))
        if score > best_score:
            best, best_score = piece, score
    return trim(best or content, _QUOTE_CHARS)


def _visible_lines(content: str) -> str:
    """The visible text of ``content`` (:func:`plait.markdown.plain_text`), each line its
    own paragraph: a lead-in and the code line under it are two pieces, not one sentence."""
    lines = [line.strip() for line in plain_text(content).splitlines() if line.strip()]
    return "\n\n".join(lines) or content


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


def _citations(
    numbers: Sequence[int], sources: Sequence[Hit], answer: str, quotes: Mapping[int, str] | None = None
) -> list[Citation]:
    """The citations of ``answer``; ``quotes`` gives a source's quote where it is not a
    sentence of it (a passage named, not quoted)."""
    given = quotes or {}
    return [
        Citation(
            n=n,
            chunk_id=sources[n - 1].chunk_id,
            origin=sources[n - 1].origin,
            quote=given[n] if n in given else _quote(sources[n - 1].content, _citing(answer, n)),
        )
        for n in numbers
    ]


def _in_order_of_use(answer: str, cited: Sequence[int], sources: Sequence[Hit]) -> tuple[str, list[Hit]]:
    """Renumber ``answer`` so its citations run 1..n in order of use; the sources to match."""
    order = list(dict.fromkeys(cited))
    rest = [hit for n, hit in enumerate(sources, start=1) if n not in order]
    return renumber(answer, order), [sources[n - 1] for n in order] + rest


_REASON_MARK = re.compile(r"\[(\d+)\]")


def _renumbered(dropped: Sequence[DroppedClaim], cited: Sequence[int], given: int) -> list[DroppedClaim]:
    """``dropped`` with the sources its reasons name numbered as :func:`_in_order_of_use`
    reorders them (``cited`` in order of use first, then the rest), so ``[n]`` in a reason
    is ``sources[n - 1]`` of the result, as everywhere else; a number that was not given
    (an invented one) stays as the model wrote it."""
    order = list(dict.fromkeys(cited))
    moved = order + [n for n in range(1, given + 1) if n not in order]
    new = {old: at for at, old in enumerate(moved, start=1)}

    def mark(match: re.Match[str]) -> str:
        old = int(match.group(1))
        return f"[{new.get(old, old)}]"

    return [claim.model_copy(update={"reason": _REASON_MARK.sub(mark, claim.reason)}) for claim in dropped]


def _extractive(
    question: str,
    sources: Sequence[Hit],
    settings: AskSettings,
    engine: AskEngine,
    collection: str,
    mode: SearchMode,
    chunking: ChunkSettings,
) -> tuple[str, list[int], str | None]:
    """The chosen sentences, best first, each followed by its ``[n]`` (sources' numbers;
    ``chunking``: the chunk settings the collection was cut with),
    and, when no source holds a sentence, the quote of the passage named instead: its
    heading (what the answer names it by; no sentence of it is quoted), or, for a passage
    under no heading (a file without headings, plain text, a JSONL record, a session
    event), the piece of its visible text sharing most words with the question."""
    embedder = engine.embedder_for(collection)[0] if mode != SearchMode.LEXICAL else None
    chosen = choose(question, sources, max_sentences=settings.max_sentences, embedder=embedder, chunking=chunking)
    if not chosen:  # found by meaning only: the first prose sentence, never raw Markdown
        first = opening(question, sources, chunking=chunking)
        if first is not None:
            return f"{first.text} [{first.n}]", [first.n], None
        path = heading_path(sources[0].origin)
        where = f" (“{' › '.join(path)}”)" if path else ""
        named = path[-1] if path else _quote(_visible_lines(sources[0].content), question)
        return f"The closest passage{where} holds no sentence to quote [1]", [1], named
    answer = " ".join(f"{c.text} [{c.n}]" for c in chosen)
    return answer, list(dict.fromkeys(c.n for c in chosen)), None


def _settings(saved: CollectionSettings, req: AskRequest) -> AskSettings:
    base = AskSettings.model_validate(saved.ask)
    return base.model_copy(update={"k": req.k}) if req.k is not None else base


def _from_card(question: str, collection: str, card: CardHit, vector_available: bool) -> AskResult:
    """The card's answer citing the chunks that back it. ``grounded`` only when they back
    every sentence of the answer as it reads now (:mod:`plait.refinery.grounding`): an
    answer edited by hand is checked as edited, never taken on its sources' word."""
    present = [
        (s.chunk_id, s.origin, s.content) for s in card.sources if s.origin is not None and s.content is not None
    ]
    support = card_support(card.answer, [indexed_text(content, origin) for _, origin, content in present])
    cited = [present[i] for i in support.supporting]
    marks = "".join(f"[{n}]" for n in range(1, len(cited) + 1))
    citations = [
        Citation(n=n, chunk_id=chunk_id, origin=origin, quote=_quote(content, card.answer))
        for n, (chunk_id, origin, content) in enumerate(cited, start=1)
    ]
    gone = len(card.sources) - len(present)
    verb = "is" if gone == 1 else "are"
    notes = [f"{gone} of the card's source chunks {verb} no longer indexed"] if gone else []
    if support.note:  # none left to check against is said too, as an edit says it
        notes.append(support.note)
    return AskResult(
        question=question,
        collection=collection,
        answer=f"{card.answer} {marks}".strip(),
        citations=citations,
        mode="card",
        grounded=support.grounded,
        answered_by="card",
        card=card,
        vector_available=vector_available,
        note="; ".join(notes) or None,
    )


def _not_answered(n: int) -> str:
    """The answer when the model read the ``n`` passages that passed the gate and replied
    NOT_FOUND: true about the gate (they passed it) and about who judged them."""
    if n == 1:
        return (
            "Not found in the knowledge base: one passage passed the relevance gate, "
            "but the model read it and found no answer to this question in it."
        )
    return (
        f"Not found in the knowledge base: {n} passages passed the relevance gate, "
        "but the model read them and found no answer to this question in them."
    )


_FAILURES = (  # a dropped claim's reason (plait.ask_grounding.ground) → how it is counted
    ("shares no content word", "sharing no content word with the source it cites"),
    ("cites no source", "citing no source"),
    ("cites only sources that were not given", "citing only sources that were not given"),
)


def _why_dropped(dropped: Sequence[DroppedClaim]) -> str:
    """Why no sentence of a reply was kept: its one sentence's reason, or each reason's count."""
    if not dropped:
        return "it holds no sentence"
    if len(dropped) == 1:
        return f"its one sentence {dropped[0].reason}"
    counts: dict[str, int] = {}
    for claim in dropped:
        kind = next((words for start, words in _FAILURES if claim.reason.startswith(start)), claim.reason)
        counts[kind] = counts.get(kind, 0) + 1
    listed = ", ".join(f"{count} {kind}" for kind, count in counts.items())
    return f"none of its {len(dropped)} sentences passed the citation check ({listed})"


def _with_llm(llm: LLM, req: AskRequest, sources: list[Hit], base: dict[str, Any]) -> AskResult | dict[str, Any]:
    """The LLM's grounded answer, its refusal (it replied NOT_FOUND), or, when it failed or
    no sentence of its reply passed the citation check, the fields the extractive answer
    carries instead (``note`` saying why; the dropped reply's ``dropped``, ``llm``)."""
    label = f"{llm.provider}/{llm.model}"
    try:
        with metering("ask"):  # within the ask's usage scope (the service writes it)
            reply = llm.chat(ask_messages(req.question, sources), temperature=0.0, max_tokens=700)
    except ProviderError as exc:
        return {"note": f"the LLM ({label}) failed, so the answer is extractive: {exc}"}
    if reply.strip().upper().startswith(NOT_FOUND_TOKEN):
        read = "passage it read is" if len(sources) == 1 else f"{len(sources)} passages it read are"
        return AskResult(
            **base,
            answer=_not_answered(len(sources)),
            mode="not-found",
            grounded=False,
            sources=sources,
            llm=label,
            note=f"the LLM ({label}) replied {NOT_FOUND_TOKEN}; the {read} listed in sources",
        )
    checked = ground(reply, sources)
    if not checked.cited:  # a failed answer: the passages passed the gate, extractive quotes them
        return {
            "note": f"the LLM's reply ({label}) was dropped, so the answer is extractive: {_why_dropped(checked.dropped)}",
            "dropped": checked.dropped,
            "invalid_citations": checked.invalid,
            "llm": label,
        }
    answer, ordered = _in_order_of_use(checked.answer, checked.cited, sources)
    numbers = list(range(1, len(checked.cited) + 1))
    return AskResult(
        **base,
        answer=answer,
        citations=_citations(numbers, ordered, answer),
        mode="llm",
        grounded=True,
        invalid_citations=checked.invalid,
        dropped=_renumbered(checked.dropped, checked.cited, len(sources)),
        sources=ordered,
        llm=label,
        note=_dropped_note(len(checked.dropped)),
    )


def _dropped_note(n: int) -> str | None:
    if n == 0:
        return None
    return "1 sentence of the LLM's answer was dropped" if n == 1 else f"{n} sentences of the LLM's answer were dropped"


def answer_question(engine: AskEngine, collection: str, request: AskRequest | Mapping[str, Any]) -> AskResult:
    """Answer one question over ``collection`` (see the module docstring). On a store
    with search scopes (PostgreSQL) the whole ask is one scope: its one read of the
    collection (and its key) serves the gate, the settings and the search."""
    store = engine.store
    with store.search_scope(collection) if isinstance(store, SearchScopeStore) else nullcontext():
        return _answer(engine, collection, request)


def _answer(engine: AskEngine, collection: str, request: AskRequest | Mapping[str, Any]) -> AskResult:
    read = read_collection(engine.store, collection)  # once: the gate, its share, the settings, the search
    if read is None:
        raise NotFoundError(f"collection {collection!r} does not exist")
    req = _validated(request)
    if req.qa_first:
        card = engine.refinery.match(collection, req.question, include_drafts=req.include_drafts, mode=req.mode)
        if card is not None:
            return _from_card(req.question, collection, card, vector_available=card.vector_score is not None)
    if req.mode == SearchMode.HYBRID:  # one-arm asks must not run the other arm: stored gate
        embedder = engine.embedder_for(collection, info=read[0], saved_settings=read[1])[0]
        state = ensure_gate_read(engine.store, collection, embedder, known=read)
        if state.info is not None and state.settings is not None:
            read = (state.info, state.settings)
    info, saved = read
    settings = _settings(saved, req)
    gate = resolve_gate(
        saved,
        min_cosine=req.min_cosine,
        min_term_coverage=req.min_term_coverage,
        chunks=searchable_count(info.chunks, saved),
    )
    search = {"query": req.question, "k": settings.k, "scopes": req.scopes, "rerank": req.rerank, "mode": req.mode}
    # an answer is built from approved cards only, unless drafts count (as for qa_first);
    # cards are searched only when their scope is named (no refinery is opened otherwise)
    names_cards = bool(req.scopes) and CARD_SCOPE in (req.scopes or ())
    drafts = engine.refinery.drafts_count(collection, req.include_drafts) if names_cards else True
    result = engine.search_known(collection, search, known=(info, saved), drafts_visible=drafts)
    wanted = content_stems(req.question)
    lexical_ran = req.mode != SearchMode.VECTOR
    if lexical_ran:  # mode vector never asks the lexical index: no word is known unknown
        gate = gate.model_copy(update={"unknown_terms": unknown_terms(engine.store, collection, req.question, wanted)})
    named = question_identifiers(req.question)
    checks = [verdict(hit, wanted, gate, lexical_ran=lexical_ran, identifiers=named) for hit in result.hits]
    sources = [hit for hit, check in zip(result.hits, checks, strict=True) if check.passed]
    base: dict[str, Any] = {
        "question": req.question,
        "collection": collection,
        "vector_available": result.vector_available,
        "search_mode": req.mode,
        "gate": gate,
        "gate_checks": checks,
    }
    if not sources:
        return AskResult(**base, answer=NOT_FOUND_ANSWER, mode="not-found", grounded=False)
    fallback: dict[str, Any] = {}  # what the LLM left for the extractive answer to say
    llm = engine.llm
    if llm is not None:
        outcome = _with_llm(llm, req, sources, base)
        if isinstance(outcome, AskResult):
            return outcome
        fallback = outcome
    chunking = recorded_chunking(saved, collection=collection)
    answer, numbers, passage = _extractive(req.question, sources, settings, engine, collection, req.mode, chunking)
    answer, ordered = _in_order_of_use(answer, numbers, sources)
    if "dropped" in fallback:  # the reply's reasons name sources as the answer now numbers them
        fallback["dropped"] = _renumbered(fallback["dropped"], numbers, len(sources))
    return AskResult(
        **base,
        answer=answer,
        citations=_citations(list(range(1, len(numbers) + 1)), ordered, answer, None if passage is None else {1: passage}),
        mode="extractive",
        grounded=True,
        sources=ordered,
        **fallback,
    )
