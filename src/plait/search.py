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

The steps are :mod:`plait.retrieval`'s: :func:`~plait.retrieval.plan.plan_query` builds
the plan, :func:`~plait.retrieval.pipeline.run` runs it and returns the trace that
:mod:`plait.explain` reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from plait.collection_settings import CollectionSettings, read_settings
from plait.embeddings.base import Embedder
from plait.errors import ConfigError
from plait.rerank.base import Reranker
from plait.retrieval.diversity import group_by_source
from plait.retrieval.fusion_choice import decision
from plait.retrieval.pipeline import MAX_DIVERSITY_DEPTH, Trace, run, without_hidden
from plait.retrieval.plan import (
    SEARCH_HIDDEN_KEY,
    lexical_terms,
    plan_query,
    request_settings,
)
from plait.retrieval.request import (
    DEFAULT_K_OVERFETCH,
    MAX_K,
    MAX_OFFSET,
    MAX_QUERY_CHARS,
    SearchRequest,
)
from plait.retrieval.request import validated as _validated
from plait.stores.base import Store
from plait.types import CollectionInfo, FusionSettings, SearchResult

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

#: Maps a rerank method (``llm``, ``cross-encoder``) to the reranker that runs it.
RerankerResolver = Callable[[str], Reranker]


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
        saved_settings: CollectionSettings | None = None,
    ) -> FusionSettings:
        """The collection's saved fusion defaults, overridden by the request.

        ``saved_settings`` is the collection's settings when the caller already read them.
        """
        if saved_settings is None:
            saved_settings = read_settings(self.store, collection)
        return request_settings(saved_settings, request)

    def trace(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        embedder: Embedder | None,
        embedder_note: str | None = None,
        info: CollectionInfo | None = None,
        also_hidden: frozenset[str] = frozenset(),
        saved_settings: CollectionSettings | None = None,
    ) -> Trace:
        """Run the search and return the trace of every stage (see :mod:`plait.retrieval`)."""
        req = _validated(request)
        started = time.perf_counter()
        timings: dict[str, float] = {}
        plan = plan_query(
            self.store, collection, req, embedder=embedder, embedder_note=embedder_note,
            info=info, saved_settings=saved_settings, timings=timings, also_hidden=also_hidden,
        )
        reranker = self._reranker(req.rerank) if req.rerank is not None else None
        trace = run(self.store, collection, plan, reranker=reranker, timings=timings)
        timings["total"] = _ms(started)
        return trace

    def search(
        self,
        collection: str,
        request: SearchRequest | Mapping[str, Any],
        *,
        embedder: Embedder | None,
        embedder_note: str | None = None,
        info: CollectionInfo | None = None,
        also_hidden: frozenset[str] = frozenset(),
        saved_settings: CollectionSettings | None = None,
    ) -> SearchResult:
        """Search ``collection``; ``embedder`` None means lexical-only (``embedder_note`` says why).

        ``info`` and ``saved_settings`` are the collection and its settings as the caller
        just read them (saves reading them again).
        """
        req = _validated(request)
        trace = self.trace(
            collection, req, embedder=embedder, embedder_note=embedder_note, info=info, also_hidden=also_hidden,
            saved_settings=saved_settings,
        )
        return result_of(trace, req, collection)

    def _reranker(self, method: str) -> Reranker:
        if self.rerankers is None:
            raise ConfigError(
                f"rerank={method!r} was asked but this search service has no rerankers configured"
            )
        return self.rerankers(method)


def result_of(trace: Trace, req: SearchRequest, collection: str) -> SearchResult:
    """The search response for a trace of ``req``."""
    plan = trace.plan
    notes: list[str] = []
    if plan.depth > plan.settings.overfetch:
        notes.append(
            f"offset {plan.offset} + k {plan.k} goes past over-fetch {plan.settings.overfetch}: "
            f"each arm fetched {plan.depth}; positions past the over-fetch fusion come from "
            "deeper fusions appended after it, so earlier pages keep their order"
        )
    if not trace.lexical_ran and not trace.dense_ran:
        notes.append(
            f"mode 'vector' runs the dense arm only and it could not run ({plan.vector_reason}): "
            "no hits; mode 'hybrid' or 'lexical' searches the lexical index"
        )
    diversity = trace.diversity
    groups = None
    if diversity is not None:
        left_out = sum(diversity.more.values())
        if trace.depth > plan.depth:
            notes.append(
                f"maxPerSource {plan.max_per_source} left out {left_out} fused candidates: each arm "
                f"fetched {trace.depth} (not {plan.depth}) to fill the page"
            )
        if trace.depth >= MAX_DIVERSITY_DEPTH:
            notes.append(f"maxPerSource: stopped fusing deeper at {MAX_DIVERSITY_DEPTH} candidates per arm")
        if plan.group_by is not None:
            groups = group_by_source(trace.hits, diversity.sources)
    rerank_echo: dict[str, Any] = {}
    if trace.rerank is not None:
        rerank_echo = {
            "rerank": req.rerank,
            "k_overfetch": req.k_overfetch,
            "reranked": trace.rerank.reranked,
            "rerank_reason": trace.rerank.reason,
        }
    return SearchResult(
        query=req.query,
        collection=collection,
        hits=trace.hits,
        vector_available=trace.dense_ran,
        mode=plan.mode,
        vector_unavailable_reason=None if trace.dense_ran else plan.vector_reason,
        vector_coverage=plan.vector_coverage,
        fusion=trace.settings,
        k=req.k,
        timings_ms=trace.timings_ms,
        offset=req.offset,
        notes=notes,
        fusion_asked=req.model_dump(
            mode="json", by_alias=True, exclude_none=True,
            include={"fusion", "lexical_weight", "rrf_k", "overfetch", "threshold", "language_prior"},
        ),
        fusion_decided=decision(trace.settings, plan.method_from),
        max_per_source=plan.max_per_source,
        group_by="source" if plan.group_by is not None else None,
        groups=groups,
        **rerank_echo,
    )
