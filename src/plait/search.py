"""The hybrid search service: two independent arms, fused before the top-k cut.

1. The query is analysed for the lexical arm (exact and stemmed fields) and, when an
   embedder is available, embedded for the dense arm.
2. Each arm asks the store for its own over-fetched candidates (default 50).
3. The two ranked lists are fused (RRF by default, or ADR 0080's weighted sum), and
   only then cut to ``k`` — so a chunk at position 15 of one arm can finish top 5.
4. Each hit is annotated with the citation contract: scores per arm (None when that
   arm did not return it), the match badge, the rank in every stage and its origin.

If the query cannot be embedded (provider down, no vectors in the collection, no
embedder selected), search runs lexical-only and says ``vectorAvailable: false``
with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from plait.analysis import STOPWORDS, analyse_query
from plait.embeddings.base import Embedder
from plait.errors import ProviderError, ValidationError
from plait.fusion import FUSERS, Fused
from plait.stores.base import Filters, Store
from plait.types import FusionMethod, FusionSettings, Hit, Match, Model, Ranks, SearchResult

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "SearchRequest", "SearchService"]

MAX_QUERY_CHARS = 4096
MAX_K = 200
_METADATA_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class SearchRequest(Model):
    """A validated search request: the same model the HTTP API accepts."""

    query: str
    k: int = Field(default=8, ge=1, le=MAX_K)
    fusion: FusionMethod | None = None
    lexical_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    rrf_k: int | None = Field(default=None, ge=1, le=10_000)
    overfetch: int | None = Field(default=None, ge=1, le=10_000)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    scopes: list[str] | None = None
    metadata: dict[str, str | int | float | bool] | None = None

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


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class SearchService:
    """Runs hybrid searches against one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def settings_for(self, collection: str, request: SearchRequest) -> FusionSettings:
        """The collection's saved fusion defaults, overridden by the request."""
        saved = self.store.get_settings(collection).get("fusion", {})
        base = FusionSettings.model_validate(saved) if saved else FusionSettings()
        overrides = {
            name: value
            for name, value in (
                ("method", request.fusion),
                ("lexical_weight", request.lexical_weight),
                ("rrf_k", request.rrf_k),
                ("overfetch", request.overfetch),
                ("threshold", request.threshold),
            )
            if value is not None
        }
        return base.model_copy(update=overrides)

    def search(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        embedder: Embedder | None,
        embedder_note: str | None = None,
    ) -> SearchResult:
        """Search ``collection``; ``embedder`` None means lexical-only (``embedder_note`` says why)."""
        req = _validated(request)
        started = time.perf_counter()
        timings: dict[str, float] = {}
        info = self.store.get_collection(collection)
        if info is None:
            from plait.errors import NotFoundError

            raise NotFoundError(f"collection {collection!r} does not exist")
        settings = self.settings_for(collection, req)
        filters = Filters(scopes=tuple(req.scopes) if req.scopes else None, metadata=req.metadata or {})

        t = time.perf_counter()
        analysed = analyse_query(req.query)
        # A match on "the" or "what" alone is not a lexical hit: stopwords are dropped
        # from the exact field unless the query is nothing but stopwords.
        exact = [term for term in analysed.exact if term not in STOPWORDS] or analysed.exact
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

        t = time.perf_counter()
        lexical = self.store.lexical_search(
            collection, exact, analysed.stems, limit=settings.overfetch, filters=filters
        )
        timings["lexical"] = _ms(t)
        dense: list[tuple[str, float]] = []
        if vector is not None:
            t = time.perf_counter()
            dense = self.store.vector_search(collection, vector, limit=settings.overfetch, filters=filters)
            timings["dense"] = _ms(t)

        t = time.perf_counter()
        fused = FUSERS[settings.method](settings, lexical, dense)
        timings["fuse"] = _ms(t)

        t = time.perf_counter()
        hits = self._hits(collection, fused[: req.k])
        timings["hydrate"] = _ms(t)
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
        )

    def _hits(self, collection: str, fused: Sequence[Fused]) -> list[Hit]:
        chunks = self.store.get_chunks(collection, [f.chunk_id for f in fused])
        hits = []
        for position, item in enumerate(fused, start=1):
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
                    ranks=Ranks(dense=item.dense_rank, lexical=item.lexical_rank, fused=position),
                    origin=chunk.origin,
                    metadata=chunk.metadata,
                )
            )
        return hits
