"""FAQ cards in the index, and ``qa_first``: prefer a matching card, else hybrid search.

Every card that is not rejected is indexed in both arms of its collection as a source
document ``card:<id>`` of scope ``faq-card`` whose one chunk is the card's question
(so matching works on every store, lexical and dense). Those chunk ids are recorded in
the collection setting ``searchHidden`` so a search that names no scope never returns
them: ordinary search sees raw chunks only, as if no card existed.

A card *matches* a query when the Jaccard similarity of their content-word stems is at
least ``qa_min_overlap`` (default 0.6) or the cosine of their vectors is at least
``qa_min_cosine`` (default 0.92); only approved cards count unless
``qa_include_drafts`` is on (see :class:`~plait.refinery.models.RefinerySettings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticValidationError

from plait.chunk_build import chunk_id
from plait.collection_settings import read_settings, write_settings
from plait.errors import ValidationError
from plait.refinery.extract import content_stems, jaccard
from plait.refinery.models import CARD_SCOPE, CardStatus, FaqCard, RefinerySettings
from plait.refinery.store import RefineryStore
from plait.search import SearchRequest
from plait.sources.base import SourceDocument, SourcePart
from plait.types import CardHit, CardSource, FileOrigin, SearchResult

if TYPE_CHECKING:
    from plait.searcher import Searcher

__all__ = [
    "card_chunk_id",
    "card_document",
    "card_source_id",
    "match_card",
    "qa_first_search",
    "refresh_hidden",
    "sync_cards",
    "validated_request",
]

#: Card candidates the card search returns before the thresholds are applied.
_CARD_CANDIDATES = 5


def validated_request(request: Mapping[str, Any]) -> SearchRequest:
    """A search request from its JSON form; one clear :class:`ValidationError` if bad."""
    try:
        return SearchRequest.model_validate(dict(request))
    except PydanticValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in exc.errors()]
        raise ValidationError("; ".join(parts)) from None


def card_source_id(card_id: str) -> str:
    """The source id a card is indexed under."""
    return f"card:{card_id}"


def card_chunk_id(card_id: str, n: int = 0) -> str:
    """The id of the ``n``-th chunk of a card's document (:func:`card_document`: one plain
    text part, no part key, no headings), as an index run builds it."""
    return chunk_id(card_source_id(card_id), "", (), n)


def card_document(card: FaqCard) -> SourceDocument:
    """The source document that indexes a card's question."""
    return SourceDocument(
        source_id=card_source_id(card.id),
        scope=CARD_SCOPE,
        parts=(
            SourcePart(
                text=card.question,
                origin=FileOrigin(source_path=f"faq/{card.id}", title=card.question),
            ),
        ),
        metadata={"cardId": card.id},
    )


def sync_cards(engine: Searcher, collection: str, cards: Sequence[FaqCard]) -> None:
    """Bring the index in line with ``cards``: rejected ones out, the others (re)indexed.

    Unchanged questions are not embedded again (the indexer keeps their vectors). The
    cards' chunk ids (:func:`card_chunk_id`) join ``searchHidden`` (and the rejected ones
    leave it) before the index run, whose end calibrates the collection; then the list is
    refreshed from the index.
    """
    if not cards:
        return
    store = engine.store
    keep = [card for card in cards if card.status != CardStatus.REJECTED]
    rejected = {card_chunk_id(card.id) for card in cards if card.status == CardStatus.REJECTED}
    for card in cards:
        if card.status == CardStatus.REJECTED:
            store.delete_source(collection, card_source_id(card.id))
    if keep:
        # Hidden before they are indexed: the index run's calibrations (ask gate, arm
        # estimate) run at its end and sample only what a search can return. The
        # rejected cards' ids (deleted above) leave the list now: the searchable count
        # (chunks less hidden ids) would otherwise drop by them and both calibrations
        # would be measured again although no searchable chunk changed.
        hidden = dict(read_settings(store, collection).search_hidden)
        hidden[CARD_SCOPE] = sorted(
            ({*hidden.get(CARD_SCOPE, ())} - rejected) | {card_chunk_id(card.id) for card in keep}
        )
        write_settings(store, collection, search_hidden=hidden)
        engine.index_documents([card_document(card) for card in keep], collection=collection)
    refresh_hidden(engine, collection)


def refresh_hidden(engine: Searcher, collection: str) -> None:
    """Record the chunk ids of the collection's card scope in ``searchHidden``."""
    store = engine.store
    ids: list[str] = []
    for source in store.list_sources(collection, CARD_SCOPE):
        ids.extend(store.chunk_ids(collection, source.source_id))
    hidden = dict(read_settings(store, collection).search_hidden)
    hidden[CARD_SCOPE] = sorted(ids)
    write_settings(store, collection, search_hidden=hidden)


def _sources(engine: Searcher, collection: str, chunk_ids: Sequence[str]) -> list[CardSource]:
    found = engine.store.get_chunks(collection, list(chunk_ids))
    out = []
    for cid in chunk_ids:
        chunk = found.get(cid)
        out.append(
            CardSource(chunk_id=cid)
            if chunk is None
            else CardSource(chunk_id=cid, origin=chunk.origin, content=chunk.content)
        )
    return out


def match_card(
    engine: Searcher,
    cards: RefineryStore,
    collection: str,
    query: str,
    settings: RefinerySettings,
    *,
    include_drafts: bool | None = None,
    mode: str = "hybrid",
) -> tuple[CardHit | None, SearchResult | None]:
    """The best card matching ``query`` (or None) and the card search that was run.

    The card search is a search (of ``mode``'s arms) restricted to the ``faq-card`` scope; each
    candidate then has to pass the overlap or cosine threshold (module docstring).
    Returns ``(None, None)`` when the collection has no indexed card at all.
    """
    hidden = read_settings(engine.store, collection).search_hidden
    if not hidden.get(CARD_SCOPE):
        return None, None
    drafts = settings.qa_include_drafts if include_drafts is None else include_drafts
    result = engine.search_request(
        collection, {"query": query, "k": _CARD_CANDIDATES, "scopes": [CARD_SCOPE], "mode": mode}
    )
    ids = [str(hit.metadata.get("cardId")) for hit in result.hits if hit.metadata.get("cardId")]
    found = cards.find_cards(collection, ids)
    wanted = content_stems(query)
    best: CardHit | None = None
    for hit in result.hits:
        card = found.get(str(hit.metadata.get("cardId")))
        if card is None or card.status == CardStatus.REJECTED:
            continue
        if card.status == CardStatus.DRAFT and not drafts:
            continue
        overlap = round(jaccard(wanted, content_stems(card.question)), 6)
        cosine = hit.vector_score
        if overlap < settings.qa_min_overlap and (cosine is None or cosine < settings.qa_min_cosine):
            continue
        score = max(overlap, cosine if cosine is not None else 0.0)
        if best is None or score > best.score:
            best = CardHit(
                card_id=card.id,
                question=card.question,
                answer=card.answer,
                status=card.status.value,
                mode=card.mode.value,
                score=score,
                overlap=overlap,
                vector_score=cosine,
                sources=[],
            )
    if best is not None:
        card = found[best.card_id]
        best = best.model_copy(update={"sources": _sources(engine, collection, card.sources)})
    return best, result


def qa_first_search(
    engine: Searcher,
    cards: RefineryStore,
    settings: RefinerySettings,
    collection: str,
    request: SearchRequest | Mapping[str, Any],
    *,
    drafts_visible: bool = True,
) -> SearchResult:
    """``qa_first``: the matching card if any (``answeredBy: card``), else the search.

    ``drafts_visible`` False (a reader) matches approved cards only and hides draft
    cards from the fallback search, as :meth:`Plait.search_request` does."""
    req = request if isinstance(request, SearchRequest) else validated_request(request)
    plain = req.model_copy(update={"qa_first": False})
    card, card_search = match_card(
        engine, cards, collection, req.query, settings,
        include_drafts=None if drafts_visible else False, mode=req.mode,
    )
    if card is None or card_search is None:
        found = engine.search_request(collection, plain, drafts_visible=drafts_visible)
        return found.model_copy(update={"answered_by": "search"})
    return SearchResult(
        query=req.query,
        collection=collection,
        mode=req.mode,
        hits=[],
        vector_available=card_search.vector_available,
        vector_unavailable_reason=card_search.vector_unavailable_reason,
        vector_coverage=card_search.vector_coverage,
        fusion=card_search.fusion,
        k=req.k,
        timings_ms=card_search.timings_ms,
        answered_by="card",
        card=card,
    )
