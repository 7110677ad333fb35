"""The hybrid search service: two independent arms, fused before the top-k cut.

1. The query is analysed for the lexical arm (exact and stemmed fields) and, when an
   embedder is available, embedded for the dense arm.
2. Each arm asks the store for its own over-fetched candidates (default 50).
3. The two ranked lists are fused (RRF by default, or ADR 0080's weighted sum), and
   only then cut to ``k`` — so a chunk at position 15 of one arm can finish top 5.
4. Each hit is annotated with the citation contract: scores per arm (None when that
   arm did not return it), the match badge, the rank in every stage and its origin.
5. Opt-in per request (``rerank="llm"`` or ``"cross-encoder"``): the fused top
   ``max(k, k_overfetch)`` (default 20) go to a reranker, the final top ``k`` comes
   from its order and ``ranks.rerank`` is filled. A reranker that fails keeps the
   fused order and the result says ``reranked: false`` with the reason.

If the query cannot be embedded (provider down, no vectors in the collection, no
embedder selected), search runs lexical-only and says ``vectorAvailable: false``
with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from plait.analysis import STOPWORDS, analyse_query
from plait.autoweight import resolve_weight
from plait.embeddings.base import Embedder, embedder_languages
from plait.errors import ConfigError, ProviderError, ValidationError
from plait.fusion import (
    FUSERS,
    Fused,
    fetch_depth,
    for_query,
    max_fused_score,
    resolve_fusion,
    tiered,
)
from plait.rerank.base import Reranker, complete_order
from plait.stores.base import Filters, Store
from plait.types import (
    Chunk,
    CollectionInfo,
    FusionMethod,
    FusionSettings,
    Hit,
    LexicalWeightMode,
    Match,
    Model,
    Ranks,
    SearchResult,
)

__all__ = [
    "DEFAULT_K_OVERFETCH",
    "MAX_K",
    "MAX_OFFSET",
    "MAX_QUERY_CHARS",
    "SEARCH_HIDDEN_KEY",
    "RerankerResolver",
    "SearchRequest",
    "SearchService",
    "lexical_terms",
    "without_hidden",
]

MAX_QUERY_CHARS = 4096
MAX_K = 200
#: The deepest page start a request may ask for.
MAX_OFFSET = 1000
#: Collection setting: ``{scope: [chunk ids]}`` left out of searches that name no scope.
SEARCH_HIDDEN_KEY = "searchHidden"
#: Fused candidates handed to a reranker when the request names none.
DEFAULT_K_OVERFETCH = 20

#: Maps a rerank method (``llm``, ``cross-encoder``) to the reranker that runs it.
RerankerResolver = Callable[[str], Reranker]
_METADATA_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class SearchRequest(Model):
    """A validated search request: the same model the HTTP API accepts."""

    query: str
    k: int = Field(default=8, ge=1, le=MAX_K)
    fusion: FusionMethod | None = None
    lexical_weight: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["auto"] | None = None
    rrf_k: int | None = Field(default=None, ge=1, le=10_000)
    overfetch: int | None = Field(default=None, ge=1, le=10_000)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    language_prior: bool | None = None
    """``adaptive``: False ignores the embedder's languages (see FusionSettings)."""
    scopes: list[str] | None = None
    metadata: dict[str, str | int | float | bool] | None = None
    rerank: Literal["llm", "cross-encoder"] | None = None
    k_overfetch: int = Field(default=DEFAULT_K_OVERFETCH, ge=1, le=MAX_K)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    qa_first: bool = False
    """Prefer a matching FAQ card (see :mod:`plait.refinery`); served by the Plait facade."""

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        if not value or not value.strip():
            raise ValueError("query is empty")
        if len(value) > MAX_QUERY_CHARS:
            raise ValueError(f"query has {len(value)} characters; the limit is {MAX_QUERY_CHARS}")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if not key or not set(key) <= _METADATA_KEY_CHARS:
                raise ValueError(
                    f"metadata filter key {key!r} may only hold letters, digits, '_' and '-'"
                )
        return value


def _validated(request: SearchRequest | Mapping[str, Any]) -> SearchRequest:
    if isinstance(request, SearchRequest):
        return request
    try:
        return SearchRequest.model_validate(dict(request))
    except Exception as exc:  # pydantic.ValidationError → one clear message
        errors = getattr(exc, "errors", None)
        if callable(errors):
            parts = [f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}" for e in errors()]
            raise ValidationError("; ".join(parts)) from None
        raise ValidationError(str(exc)) from None


def without_hidden(
    ranked: list[tuple[str, float]], hidden: frozenset[str], limit: int
) -> list[tuple[str, float]]:
    """``ranked`` minus the hidden chunk ids, cut to ``limit``."""
    if not hidden:
        return ranked
    return [item for item in ranked if item[0] not in hidden][:limit]


def lexical_terms(query: str) -> tuple[list[str], list[str]]:
    """The (exact, stems) terms the lexical arm is asked for ``query``.

    A match on "the" or "what" alone is not a lexical hit: stopwords are dropped from
    the exact field unless the query is nothing but stopwords (the stems field has
    none already).
    """
    analysed = analyse_query(query)
    exact = [term for term in analysed.exact if term not in STOPWORDS] or analysed.exact
    return exact, analysed.stems


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class SearchService:
    """Runs hybrid searches against one store."""

    def __init__(self, store: Store, *, rerankers: RerankerResolver | None = None) -> None:
        """Search ``store``; ``rerankers`` builds the reranker a request's ``rerank`` names."""
        self.store = store
        self.rerankers = rerankers

    def settings_for(
        self,
        collection: str,
        request: SearchRequest,
        *,
        saved_settings: Mapping[str, Any] | None = None,
    ) -> FusionSettings:
        """The collection's saved fusion defaults, overridden by the request.

        ``saved_settings`` is the collection's settings when the caller already read them.
        """
        if saved_settings is None:
            saved_settings = self.store.get_settings(collection)
        saved = saved_settings.get("fusion", {})
        base = FusionSettings.model_validate(saved) if saved else FusionSettings()
        overrides: dict[str, Any] = {
            name: value
            for name, value in (
                ("method", request.fusion),
                ("rrf_k", request.rrf_k),
                ("overfetch", request.overfetch),
                ("threshold", request.threshold),
                ("language_prior", request.language_prior),
            )
            if value is not None
        }
        if request.lexical_weight == "auto":
            overrides["lexical_weight_mode"] = LexicalWeightMode.AUTO
        elif request.lexical_weight is not None:
            overrides["lexical_weight"] = request.lexical_weight
            overrides["lexical_weight_mode"] = LexicalWeightMode.FIXED
        return base.model_copy(update=overrides)

    def search(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        embedder: Embedder | None,
        embedder_note: str | None = None,
        info: CollectionInfo | None = None,
    ) -> SearchResult:
        """Search ``collection``; ``embedder`` None means lexical-only (``embedder_note`` says why).

        ``info`` is the collection as the caller just read it (saves reading it again).
        """
        req = _validated(request)
        started = time.perf_counter()
        timings: dict[str, float] = {}
        if info is None:
            info = self.store.get_collection(collection)
        if info is None:
            from plait.errors import NotFoundError

            raise NotFoundError(f"collection {collection!r} does not exist")
        saved_settings = self.store.get_settings(collection)  # read once per search
        settings = for_query(
            resolve_weight(self.settings_for(collection, req, saved_settings=saved_settings), req.query),
            req.query,
            embedder_languages(embedder),
        )
        reranker = self._reranker(req.rerank) if req.rerank is not None else None
        filters = Filters(scopes=tuple(req.scopes) if req.scopes else None, metadata=req.metadata or {})

        t = time.perf_counter()
        exact, stems = lexical_terms(req.query)
        timings["analyse"] = _ms(t)

        vector = None
        reason = embedder_note
        if embedder is None:
            reason = reason or "no embedder selected"
        elif info.chunks - info.chunks_without_vector == 0:
            reason = "the collection has no vectors yet"
        else:
            t = time.perf_counter()
            try:
                vector = embedder.embed_query(req.query)
            except ProviderError as exc:
                reason = f"query embedding failed: {exc}"
            timings["embed"] = _ms(t)

        need = req.offset + req.k
        depth = fetch_depth(settings.overfetch, need)
        notes: list[str] = []
        if depth > settings.overfetch:
            notes.append(
                f"offset {req.offset} + k {req.k} goes past over-fetch {settings.overfetch}: "
                f"each arm fetched {depth}; positions past the over-fetch fusion come from "
                "deeper fusions appended after it, so earlier pages keep their order"
            )
        hidden = self.hidden_ids(collection, req, saved_settings=saved_settings)
        t = time.perf_counter()
        lexical = self.store.lexical_search(
            collection, exact, stems, limit=depth + len(hidden), filters=filters
        )
        lexical = without_hidden(lexical, hidden, depth)
        timings["lexical"] = _ms(t)
        dense: list[tuple[str, float]] = []
        if vector is not None:
            t = time.perf_counter()
            dense = self.store.vector_search(
                collection, vector, limit=depth + len(hidden), filters=filters
            )
            dense = without_hidden(dense, hidden, depth)
            timings["dense"] = _ms(t)

        t = time.perf_counter()
        settings = resolve_fusion(settings, lexical, dense)
        fused = tiered(FUSERS[settings.method], settings, lexical, dense, need=need)
        timings["fuse"] = _ms(t)
        best = max_fused_score(settings, lexical=True, dense=vector is not None)

        rerank_echo: dict[str, Any] = {}
        if reranker is None:
            t = time.perf_counter()
            page = list(enumerate(fused, start=1))[req.offset : need]
            hits = self._hits(collection, page, best=best)
            timings["hydrate"] = _ms(t)
        else:
            hits, rerank_echo = self._reranked(collection, req, reranker, fused, timings, best=best)
        timings["total"] = _ms(started)
        return SearchResult(
            query=req.query,
            collection=collection,
            hits=hits,
            vector_available=vector is not None,
            vector_unavailable_reason=None if vector is not None else reason,
            fusion=settings,
            k=req.k,
            timings_ms=timings,
            offset=req.offset,
            notes=notes,
            **rerank_echo,
        )

    def hidden_ids(
        self,
        collection: str,
        req: SearchRequest,
        *,
        saved_settings: Mapping[str, Any] | None = None,
    ) -> frozenset[str]:
        """Chunk ids of scopes searched only when named (FAQ cards: ``searchHidden``).

        The collection setting ``searchHidden`` maps a scope to its chunk ids; a
        request that names no scopes never sees them, as if they were not indexed.
        """
        if req.scopes:
            return frozenset()
        if saved_settings is None:
            saved_settings = self.store.get_settings(collection)
        saved = saved_settings.get(SEARCH_HIDDEN_KEY) or {}
        return frozenset(cid for ids in saved.values() for cid in ids)

    def _reranker(self, method: str) -> Reranker:
        if self.rerankers is None:
            raise ConfigError(
                f"rerank={method!r} was asked but this search service has no rerankers configured"
            )
        return self.rerankers(method)

    def _reranked(
        self,
        collection: str,
        req: SearchRequest,
        reranker: Reranker,
        fused: Sequence[Fused],
        timings: dict[str, float],
        *,
        best: float | None = None,
    ) -> tuple[list[Hit], dict[str, Any]]:
        """Rerank the fused top ``max(k, k_overfetch)``, then cut ``[offset, offset + k)``.

        Positions past the reranked pool keep their fused order, so pages of one size
        do not overlap."""
        t = time.perf_counter()
        pool = list(enumerate(fused[: max(req.k, req.k_overfetch)], start=1))
        chunks = self.store.get_chunks(collection, [item.chunk_id for _, item in pool])
        pool = [(position, item) for position, item in pool if item.chunk_id in chunks]
        timings["hydrate"] = _ms(t)
        t = time.perf_counter()
        candidates = [(item.chunk_id, chunks[item.chunk_id].content) for _, item in pool]
        outcome = reranker.rerank(req.query, candidates)
        timings["rerank"] = _ms(t)
        order, _, _ = complete_order(candidates, outcome.order)  # a permutation, whatever came back
        by_id = {item.chunk_id: (position, item) for position, item in pool}
        ranks = {cid: n for n, cid in enumerate(order, start=1)} if outcome.reranked else {}
        size = max(req.k, req.k_overfetch)
        rest = list(enumerate(fused, start=1))[size : req.offset + req.k]
        selected = ([by_id[cid] for cid in order] + rest)[req.offset : req.offset + req.k]
        if rest:
            chunks = {**chunks, **self.store.get_chunks(collection, [i.chunk_id for _, i in rest])}
        hits = self._hits(collection, selected, rerank_ranks=ranks, chunks=chunks, best=best)
        echo = {
            "rerank": req.rerank,
            "k_overfetch": req.k_overfetch,
            "reranked": outcome.reranked,
            "rerank_reason": outcome.reason,
        }
        return hits, echo

    def _hits(
        self,
        collection: str,
        fused: Sequence[tuple[int, Fused]],
        *,
        rerank_ranks: Mapping[str, int] | None = None,
        chunks: Mapping[str, Chunk] | None = None,
        best: float | None = None,
    ) -> list[Hit]:
        """Hits for ``(fused position, candidate)`` pairs, in the order given."""
        if chunks is None:
            chunks = self.store.get_chunks(collection, [f.chunk_id for _, f in fused])
        rerank_ranks = rerank_ranks or {}
        hits = []
        for position, item in fused:
            chunk = chunks.get(item.chunk_id)
            if chunk is None:  # deleted between the arms and now
                continue
            if item.lexical_rank is not None and item.dense_rank is not None:
                match = Match.BOTH
            elif item.lexical_rank is not None:
                match = Match.LEXICAL
            else:
                match = Match.SEMANTIC
            hits.append(
                Hit(
                    chunk_id=item.chunk_id,
                    content=chunk.content,
                    score=item.score,
                    vector_score=item.dense_score,
                    lexical_score=item.lexical_score,
                    match=match,
                    scope=chunk.scope,
                    ranks=Ranks(
                        dense=item.dense_rank,
                        lexical=item.lexical_rank,
                        fused=position,
                        rerank=rerank_ranks.get(item.chunk_id),
                    ),
                    origin=chunk.origin,
                    metadata=chunk.metadata,
                    score_normalised=None if best is None else round(min(1.0, item.score / best), 6),
                )
            )
        return hits
