"""The query plan: everything a search decided before it asks the store.

A :class:`QueryPlan` holds the lexical terms, the query vector (or why there is none),
the query's language, the fusion settings with the request's overrides and this
query's weights resolved, the filters, the chunks hidden from this search, and the
page asked for. :func:`plan_query` builds it exactly once per search, and
:func:`plait.retrieval.pipeline.run` runs it; search, explain, calibration and the
evaluation harness all go through these two.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.analysis import STOPWORDS, analyse_query
from plait.arm_estimate import saved_estimate
from plait.autoweight import resolve_weight
from plait.backfill import vector_coverage
from plait.collection_settings import CollectionSettings, read_settings
from plait.embeddings.base import Embedder, embedder_languages
from plait.errors import NotFoundError, ProviderError, ValidationError
from plait.fusion import fetch_depth, for_query
from plait.retrieval.diversity import DEFAULT_GROUP_SIZE
from plait.retrieval.fusion_choice import SavedMethodFusion, _Choice
from plait.retrieval.request import DEFAULT_K_OVERFETCH, SearchRequest
from plait.stores.base import Filters, Store
from plait.types import (
    CollectionInfo,
    FusionMethod,
    FusionSettings,
    LexicalWeightMode,
    SearchMode,
)

__all__ = [
    "SEARCH_HIDDEN_KEY",
    "QueryPlan",
    "embed_query",
    "hidden_chunks",
    "lexical_terms",
    "mode_settings",
    "plan_for_text",
    "plan_query",
    "request_settings",
    "saved_fusion",
]

#: Collection setting: ``{scope: [chunk ids]}`` left out of searches that name no scope.
SEARCH_HIDDEN_KEY = "searchHidden"


def lexical_terms(query: str) -> tuple[list[str], list[str]]:
    """The (exact, stems) terms the lexical arm is asked for ``query``.

    A match on "the" or "what" alone is not a lexical hit: stopwords are dropped from
    the exact field unless the query is nothing but stopwords (the stems field has
    none already).
    """
    analysed = analyse_query(query)
    exact = [term for term in analysed.exact if term not in STOPWORDS] or analysed.exact
    return exact, analysed.stems


def saved_fusion(saved_settings: CollectionSettings) -> FusionSettings:
    """The collection's saved fusion defaults, else the built-in ones."""
    saved = saved_settings.fusion
    settings = FusionSettings.model_validate(saved) if saved else FusionSettings()
    estimate = saved_estimate(saved_settings)
    if estimate is None:
        return settings
    return settings.model_copy(update={"estimated_base": estimate[0], "estimate_reason": estimate[1]})


def request_settings(saved_settings: CollectionSettings, request: SearchRequest) -> FusionSettings:
    """The collection's saved fusion defaults, overridden by the request.

    A fusion object without a method holds knobs for the collection's saved method (else
    the default ``adaptive``): ``{"denseWeight": 0.8}`` is that method's own object with
    them. Raises :class:`~plait.errors.ValidationError` when the request gives a knob the
    method it ends up with does not take (the request names no method and the
    collection's saved one, or the default ``adaptive``, does not take it)."""
    base = saved_fusion(saved_settings)
    choice: _Choice | None = None  # the request's fusion object, as its method's own
    if request.fusion is None or isinstance(request.fusion, SavedMethodFusion):
        where = " (the collection's method)" if saved_settings.fusion.get("method") else " (the default)"
        problem = request.knob_problem(base.method, where=where)
        if problem:
            raise ValidationError(problem)
        if request.fusion is not None:
            choice = request.fusion.resolve(base.method, where=where)
    elif not isinstance(request.fusion, FusionMethod):
        choice = request.fusion
    if choice is not None:
        base = choice.apply(base)
        if getattr(choice, "dense_weight", None) is not None:
            base = base.model_copy(update={"estimated_base": None, "estimate_reason": None})
    overrides: dict[str, Any] = {
        name: value
        for name, value in (
            ("method", request.fusion if isinstance(request.fusion, FusionMethod) else None),
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


def mode_settings(settings: FusionSettings, mode: SearchMode) -> FusionSettings:
    """``settings`` for a one-arm ``mode``: the linear fusions (minmax, dbsf, adaptive)
    get the arm's whole weight (dense weight 0 for ``lexical``, 1 for ``vector``) and say
    so in ``fusion_reason``; RRF and weighted score the one list they get as they are.

    >>> mode_settings(FusionSettings(), SearchMode.VECTOR).dense_weight_used
    1.0
    """
    if mode == SearchMode.HYBRID or settings.method in (FusionMethod.RRF, FusionMethod.WEIGHTED):
        return settings
    used = 1.0 if mode == SearchMode.VECTOR else 0.0
    arm = "dense" if mode == SearchMode.VECTOR else "lexical"
    return settings.model_copy(
        update={"dense_weight_used": used, "fusion_reason": f"mode {mode.value!r}: the {arm} arm only"}
    )


def hidden_chunks(saved_settings: CollectionSettings, scopes: Sequence[str] | None) -> frozenset[str]:
    """Chunk ids of scopes searched only when named (FAQ cards: ``searchHidden``).

    The collection setting ``searchHidden`` maps a scope to its chunk ids; a request
    that names no scopes never sees them, as if they were not indexed.
    """
    if scopes:
        return frozenset()
    return frozenset(cid for ids in saved_settings.search_hidden.values() for cid in ids)


def embed_query(
    embedder: Embedder | None,
    query: str,
    *,
    info: CollectionInfo | None,
    note: str | None = None,
) -> tuple[Any | None, str | None]:
    """(the query vector, None) or (None, why the dense arm does not run)."""
    if embedder is None:
        return None, note or "no embedder selected"
    if info is None or info.chunks - info.chunks_without_vector == 0:
        return None, "the collection has no vectors yet"
    try:
        return embedder.embed_query(query), note
    except ProviderError as exc:
        return None, f"query embedding failed: {exc}"


@dataclass(frozen=True)
class QueryPlan:
    """What one search will ask the store and how it will fuse and cut the answers."""

    query: str
    exact: tuple[str, ...]
    stems: tuple[str, ...]
    settings: FusionSettings
    """The request over the collection's defaults, with this query's language, the
    embedder's coverage of it and the lexical weight (``auto``) resolved. The dense
    weight of the linear fusions is resolved later, on the arms' answers."""
    vector: Any | None = None
    vector_reason: str | None = None
    filters: Filters = field(default_factory=Filters)
    hidden: frozenset[str] = frozenset()
    k: int = 8
    offset: int = 0
    rerank: str | None = None
    k_overfetch: int = DEFAULT_K_OVERFETCH
    method_from: str = "default"
    """Where the fusion method came from: ``request``, ``collection`` or ``default``."""
    max_per_source: int | None = None
    """At most this many chunks per source in the hits (None: no limit; see
    :mod:`plait.retrieval.diversity`)."""
    group_by: str | None = None
    """``source``: the page counts sources, each with its best chunks."""
    mode: SearchMode = SearchMode.HYBRID
    """The arms this search runs: ``lexical`` never embeds the query (:attr:`vector` is
    None), ``vector`` never asks the lexical index."""
    vector_coverage: float = 1.0
    """The share of the collection's chunks that have a vector when planned; below 1
    (a backfill still running) the chunks without one are not penalised in fusion
    (:mod:`plait.fusion_pending`). 1.0 for plans built from text alone."""

    @property
    def lexical_runs(self) -> bool:
        """Whether the lexical arm runs (every mode but ``vector``)."""
        return self.mode != SearchMode.VECTOR

    @property
    def language(self) -> str | None:
        """The query's language by its stopwords (None: undetermined)."""
        return self.settings.query_language

    @property
    def need(self) -> int:
        """Fused positions the page needs: ``offset + k``."""
        return self.offset + self.k

    @property
    def depth(self) -> int:
        """How deep each arm is fetched: the over-fetch, doubled until it reaches :attr:`need`."""
        return fetch_depth(self.settings.overfetch, self.need)

    @property
    def pool_size(self) -> int:
        """Fused candidates a reranker reads: ``max(k, k_overfetch)``."""
        return max(self.k, self.k_overfetch)

    def with_vector(self, vector: Any | None, reason: str | None = None) -> QueryPlan:
        """This plan with the dense arm's query vector set (None: lexical only, ``reason`` why)."""
        from dataclasses import replace

        return replace(self, vector=vector, vector_reason=None if vector is not None else reason)


def plan_for_text(
    query: str,
    settings: FusionSettings,
    *,
    languages: frozenset[str] | None = None,
    vector: Any | None = None,
    vector_reason: str | None = None,
    filters: Filters | None = None,
    hidden: frozenset[str] = frozenset(),
    k: int = 8,
    offset: int = 0,
    rerank: str | None = None,
    k_overfetch: int = DEFAULT_K_OVERFETCH,
) -> QueryPlan:
    """A plan for ``query`` over ``settings`` (the request's and collection's merged)."""
    exact, stems = lexical_terms(query)
    return QueryPlan(
        query=query,
        exact=tuple(exact),
        stems=tuple(stems),
        settings=for_query(
            resolve_weight(settings, query) if settings.method == FusionMethod.RRF else settings,
            query,
            languages,
        ),
        vector=vector,
        vector_reason=vector_reason,
        filters=filters if filters is not None else Filters(),
        hidden=hidden,
        k=k,
        offset=offset,
        rerank=rerank,
        k_overfetch=k_overfetch,
    )


def plan_query(
    store: Store,
    collection: str,
    request: SearchRequest,
    *,
    embedder: Embedder | None,
    embedder_note: str | None = None,
    info: CollectionInfo | None = None,
    saved_settings: CollectionSettings | None = None,
    timings: dict[str, float] | None = None,
    also_hidden: frozenset[str] = frozenset(),
) -> QueryPlan:
    """The plan for ``request`` on ``collection`` (reads the collection's settings once).

    ``info`` and ``saved_settings`` are the collection and its settings when the
    caller already read them; ``timings`` receives ``analyse`` and ``embed`` (ms).
    ``also_hidden`` are chunk ids this caller may not see (draft FAQ cards for a reader).
    """
    if info is None:
        info = store.get_collection(collection)
    if info is None:
        raise NotFoundError(f"collection {collection!r} does not exist")
    if saved_settings is None:
        saved_settings = read_settings(store, collection)
    timings = timings if timings is not None else {}
    started = time.perf_counter()
    plan = plan_for_text(
        request.query,
        mode_settings(request_settings(saved_settings, request), request.mode),
        languages=embedder_languages(embedder),
        filters=Filters(
            scopes=tuple(request.scopes) if request.scopes else None, metadata=request.metadata or {}
        ),
        hidden=hidden_chunks(saved_settings, request.scopes) | also_hidden,
        k=request.k,
        offset=request.offset,
        rerank=request.rerank,
        k_overfetch=request.k_overfetch,
    )
    saved_method = saved_settings.fusion.get("method")
    # a fusion object without a method leaves the method to the collection
    method_from = "request" if request.fusion_method is not None else ("collection" if saved_method else "default")
    from dataclasses import replace

    cap = request.max_per_source
    if request.group_by is not None and cap is None:
        cap = DEFAULT_GROUP_SIZE
    plan = replace(
        plan, method_from=method_from, mode=request.mode, max_per_source=cap, group_by=request.group_by
    )
    timings["analyse"] = _ms(started)
    coverage = vector_coverage(info.chunks, info.chunks_without_vector)
    if request.mode == SearchMode.LEXICAL:  # the embedder is never called
        return replace(plan.with_vector(None, "mode 'lexical': the dense arm does not run"), vector_coverage=coverage)
    if embedder is not None and info.chunks - info.chunks_without_vector > 0:
        started = time.perf_counter()
        vector, reason = embed_query(embedder, request.query, info=info, note=embedder_note)
        timings["embed"] = _ms(started)
    else:
        vector, reason = embed_query(embedder, request.query, info=info, note=embedder_note)
    return replace(plan.with_vector(vector, reason), vector_coverage=coverage)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
