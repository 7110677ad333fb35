"""The one retrieval pipeline: arms → fusion → cut → rerank, with a trace of every stage.

:func:`run` executes a :class:`~plait.retrieval.plan.QueryPlan` against a store and
returns a :class:`Trace`: each arm's ranked candidates (hidden chunks removed, cut at
the fetch depth), the fusion settings as resolved for this query, the fused order,
the rerank pool and outcome, the page and the hits. Search returns the trace's hits;
explain reads the same trace, so it cannot disagree with search. The stages are also
callable one by one (:func:`run_arms`, :func:`fuse`) for the calibration and the
evaluation harness, which reuse the arms' answers across many fusions.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from plait.fusion import FUSERS, Fused, fetch_depth, max_fused_score, resolve_fusion, tiers
from plait.fusion_pending import not_penalised
from plait.rerank.base import Reranker, complete_order
from plait.retrieval.diversity import Diversified, diversify
from plait.retrieval.identifier_first import PRECEDENCE_DEPTH, holder_text, identifier_first, query_identifiers
from plait.retrieval.plan import QueryPlan
from plait.stores.base import Store, TwoArmStore
from plait.types import Chunk, FusionSettings, Hit, Match, Ranks
from plait.usage import metering

__all__ = [
    "MAX_DIVERSITY_DEPTH",
    "Ranked",
    "RerankTrace",
    "Trace",
    "fuse",
    "hits_for",
    "pending_chunks",
    "precedence_identifiers",
    "ranked_as_search",
    "rerank_order",
    "run",
    "run_arms",
    "without_hidden",
]

Ranked = list[tuple[str, float]]
#: The deepest each arm is fetched to fill a page that ``max_per_source`` thinned out.
MAX_DIVERSITY_DEPTH = 4096


def without_hidden(ranked: Ranked, hidden: frozenset[str], limit: int | None) -> Ranked:
    """``ranked`` minus the hidden chunk ids, cut to ``limit`` (None: not cut)."""
    if not hidden:
        return ranked
    kept = [item for item in ranked if item[0] not in hidden]
    return kept if limit is None else kept[:limit]


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def run_arms(
    store: Store,
    collection: str,
    plan: QueryPlan,
    *,
    depth: int | None,
    timings: dict[str, float] | None = None,
) -> tuple[Ranked, Ranked]:
    """Each arm's candidates for ``plan``, hidden chunks removed, ``depth`` deep (None: all).

    The dense list is empty when the plan has no vector (the dense arm does not run), the
    lexical one when the plan's mode is ``vector``.
    """
    timings = timings if timings is not None else {}
    extra = len(plan.hidden)
    limit = None if depth is None else depth + extra
    if isinstance(store, TwoArmStore):
        # A server store answers both arms in one round trip: the time is the pair's.
        t = time.perf_counter()
        both = store.search_arms(
            collection, list(plan.exact), list(plan.stems), plan.vector, limit=limit,
            filters=plan.filters, lexical=plan.lexical_runs,
        )
        if plan.lexical_runs:
            timings["lexical"] = _ms(t)
        if plan.vector is not None:
            timings["dense"] = _ms(t)
        return without_hidden(both[0], plan.hidden, depth), without_hidden(both[1], plan.hidden, depth)
    lexical: Ranked = []
    if plan.lexical_runs:  # mode 'vector': BM25 never runs
        t = time.perf_counter()
        lexical = store.lexical_search(
            collection, list(plan.exact), list(plan.stems), limit=limit, filters=plan.filters
        )
        lexical = without_hidden(lexical, plan.hidden, depth)
        timings["lexical"] = _ms(t)
    dense: Ranked = []
    if plan.vector is not None:
        t = time.perf_counter()
        dense = store.vector_search(collection, plan.vector, limit=limit, filters=plan.filters)
        dense = without_hidden(dense, plan.hidden, depth)
        timings["dense"] = _ms(t)
    return lexical, dense


def fuse(
    settings: FusionSettings,
    lexical: Ranked,
    dense: Ranked,
    *,
    need: int,
    pending: Collection[str] = frozenset(),
) -> tuple[FusionSettings, list[Fused], int]:
    """The settings resolved for this query (dense weight of the linear fusions, fixed on
    the over-fetch cut), the tiered fused order reaching ``need`` positions, and how deep
    that fusion read each arm.

    ``need`` 0 fuses the over-fetch cut only (the evaluation harness ranks every candidate
    of that one fusion). ``pending`` chunks have no vector yet and are not penalised for
    it (see :mod:`plait.fusion_pending`)."""
    resolved = resolve_fusion(settings, lexical, dense)
    fuser = not_penalised(FUSERS[resolved.method], pending)
    fused, depth = tiers(fuser, resolved, lexical, dense, need=need)
    return resolved, fused, depth


def pending_chunks(store: Store, collection: str, plan: QueryPlan, lexical: Ranked) -> frozenset[str]:
    """The lexical candidates still without a vector, when that matters: the dense arm
    ran and the collection is not fully embedded (``plan.vector_coverage`` < 1)."""
    if plan.vector is None or plan.vector_coverage >= 1.0 or not lexical:
        return frozenset()
    return frozenset(store.without_vector(collection, [cid for cid, _ in lexical]))


@dataclass(frozen=True)
class RerankTrace:
    """What the reranker was given and what it did."""

    method: str
    pool: list[tuple[int, Fused]]
    """(fused position, candidate) handed to the reranker: the fused top ``max(k, k_overfetch)``
    whose chunks still exist."""
    order: list[str]
    """The pool's chunk ids in the reranked order (the fused order when it failed)."""
    reranked: bool
    reason: str | None
    ranks: dict[str, int]
    """chunk id → rerank position (1-based); empty when the reranker kept the fused order."""


@dataclass(frozen=True)
class Trace:
    """Every stage of one search (see the module docstring)."""

    plan: QueryPlan
    depth: int
    """How deep each arm was fetched."""
    fused_depth: int
    """How deep fusion read each arm: a chunk ranked deeper in both was never fused."""
    lexical: Ranked
    dense: Ranked
    settings: FusionSettings
    fused: list[Fused]
    best_score: float | None
    rerank: RerankTrace | None
    page: list[tuple[int, Fused]]
    """(fused position, candidate) in the returned order, before hydration."""
    hits: list[Hit]
    timings_ms: dict[str, float] = field(default_factory=dict)
    diversity: Diversified | None = None
    """``max_per_source`` applied to :attr:`fused` (None when the plan has none)."""

    @property
    def dense_ran(self) -> bool:
        return self.plan.vector is not None

    @property
    def lexical_ran(self) -> bool:
        return self.plan.lexical_runs

    @property
    def returned(self) -> frozenset[str]:
        """Chunk ids of the hits."""
        return frozenset(hit.chunk_id for hit in self.hits)

    def positions(self, arm: str) -> dict[str, tuple[int, float]]:
        """``lexical`` / ``dense``: chunk id → (1-based rank, score) in that arm's list."""
        ranked = self.lexical if arm == "lexical" else self.dense
        return {cid: (n, score) for n, (cid, score) in enumerate(ranked, start=1)}

    def fused_positions(self) -> dict[str, tuple[int, Fused]]:
        return {item.chunk_id: (n, item) for n, item in enumerate(self.fused, start=1)}


def rerank_order(
    store: Store,
    collection: str,
    query: str,
    reranker: Reranker,
    fused: Sequence[Fused],
    *,
    size: int,
    method: str | None = None,
    timings: dict[str, float] | None = None,
    numbered: Sequence[tuple[int, Fused]] | None = None,
    held: Mapping[str, Chunk] | None = None,
) -> tuple[RerankTrace, dict[str, Chunk]]:
    """Rerank the fused top ``size`` (chunks that still exist); also returns their chunks.

    ``method`` is the name the request gave (default: the reranker's own); ``numbered``
    the (fused position, candidate) order to take the pool from when it is not ``fused``
    itself (``max_per_source`` left some out); ``held`` chunks already read (not read again)."""
    timings = timings if timings is not None else {}
    t = time.perf_counter()
    pool = list(numbered[:size]) if numbered is not None else list(enumerate(fused[:size], start=1))
    held = held or {}
    unread = [item.chunk_id for _, item in pool if item.chunk_id not in held]
    chunks = {cid: held[cid] for _, item in pool if (cid := item.chunk_id) in held}
    if unread:
        chunks.update(store.get_chunks(collection, unread))
    pool = [(position, item) for position, item in pool if item.chunk_id in chunks]
    timings["hydrate"] = _ms(t)
    t = time.perf_counter()
    candidates = [(item.chunk_id, chunks[item.chunk_id].content) for _, item in pool]
    with metering("rerank"):  # an LLM reranker's tokens, within the search's usage
        outcome = reranker.rerank(query, candidates)
    timings["rerank"] = _ms(t)
    order, _, _ = complete_order(candidates, outcome.order)  # a permutation, whatever came back
    ranks = {cid: n for n, cid in enumerate(order, start=1)} if outcome.reranked else {}
    trace = RerankTrace(
        method=method or reranker.name,
        pool=pool,
        order=order,
        reranked=outcome.reranked,
        reason=outcome.reason,
        ranks=ranks,
    )
    return trace, chunks


def run(
    store: Store,
    collection: str,
    plan: QueryPlan,
    *,
    reranker: Reranker | None = None,
    timings: dict[str, float] | None = None,
) -> Trace:
    """Run ``plan``: its arms (both, or the one its mode names), fusion, ``max_per_source``,
    the ``[offset, offset + k)`` cut, the rerank."""
    timings = timings if timings is not None else {}
    depth, need = plan.depth, plan.need
    chunks: dict[str, Chunk] = {}
    diversity: Diversified | None = None
    lexical: Ranked = []
    dense: Ranked = []
    pending: frozenset[str] = frozenset()
    ran_depth: int | None = -1  # the depth the arms last ran at (-1: not yet)
    hybrid = plan.lexical_runs and plan.vector is not None
    identifiers = precedence_identifiers(plan.query, plan.settings, hybrid=hybrid)  # once per search
    window = PRECEDENCE_DEPTH if identifiers else 0
    while True:
        if depth != ran_depth:  # a deeper page that needs no deeper arm only fuses deeper
            lexical, dense = run_arms(store, collection, plan, depth=depth, timings=timings)
            pending = pending_chunks(store, collection, plan, lexical)
            ran_depth = depth
        t = time.perf_counter()
        # with identifiers, fuse at least the precedence window, so every page reorders the same one
        settings, fused, fused_depth = fuse(plan.settings, lexical, dense, need=max(need, window), pending=pending)
        timings["fuse"] = _ms(t)
        settings, fused, chunks = _identifiers_first(store, collection, plan, identifiers, settings, fused, chunks, timings)
        if plan.max_per_source is None:
            break
        # Diversity needs every candidate's source, and enough candidates left after it:
        # fuse deeper (prefix-stable, see plait.fusion.tiered) until the page is full.
        t = time.perf_counter()
        missing = [item.chunk_id for item in fused if item.chunk_id not in chunks]
        chunks = {**chunks, **store.get_chunks(collection, missing)} if missing else chunks
        diversity = diversify(fused, {cid: c.source_id for cid, c in chunks.items()}, plan.max_per_source)
        timings["diversity"] = _ms(t)
        have = len(diversity.order) if plan.group_by is None else len(_sources_in(diversity))
        # Exhausted: the arms hold no more candidates *and* the fusion read all they hold
        # (its tiers stop once they reach ``need``, well before a short arm's end).
        exhausted = (
            len(lexical) < depth and len(dense) < depth
            and fused_depth >= len(lexical) and fused_depth >= len(dense)
        )
        if have >= plan.need or exhausted or depth >= MAX_DIVERSITY_DEPTH:
            break
        need *= 2
        depth = fetch_depth(plan.settings.overfetch, need)
    best = max_fused_score(settings, lexical=plan.lexical_runs, dense=plan.vector is not None)
    numbered = diversity.order if diversity is not None else list(enumerate(fused, start=1))
    rerank: RerankTrace | None = None
    t = time.perf_counter()
    if reranker is None:
        ordered = numbered
    else:
        rerank, pool_chunks = rerank_order(
            store, collection, plan.query, reranker, fused,
            size=plan.pool_size, method=plan.rerank, timings=timings, numbered=numbered, held=chunks,
        )
        chunks = {**chunks, **pool_chunks}
        # Positions past the reranked pool keep their fused order, so pages of one size
        # do not overlap.
        by_id = {item.chunk_id: (position, item) for position, item in rerank.pool}
        ordered = [by_id[cid] for cid in rerank.order] + numbered[plan.pool_size :]
    if plan.group_by is None:
        page = ordered[plan.offset : plan.need]
    else:
        sources = diversity.sources if diversity is not None else {}
        wanted = set(list(dict.fromkeys(sources.get(i.chunk_id, i.chunk_id) for _, i in ordered))[plan.offset : plan.need])
        page = [(p, i) for p, i in ordered if sources.get(i.chunk_id, i.chunk_id) in wanted]
    missing = [item.chunk_id for _, item in page if item.chunk_id not in chunks]
    if missing:
        chunks = {**chunks, **store.get_chunks(collection, missing)}
    timings["hydrate"] = timings.get("hydrate", 0.0) + _ms(t)
    more: dict[str, int] | None = None
    if diversity is not None:
        more = {
            item.chunk_id: diversity.more.get(diversity.sources.get(item.chunk_id, ""), 0) for _, item in page
        }
    hits = hits_for(page, chunks, rerank_ranks=rerank.ranks if rerank else None, best=best, more=more)
    return Trace(
        plan=plan,
        depth=depth,
        fused_depth=fused_depth,
        lexical=lexical,
        dense=dense,
        settings=settings,
        fused=fused,
        best_score=best,
        rerank=rerank,
        page=page,
        hits=hits,
        timings_ms=timings,
        diversity=diversity,
    )


def precedence_identifiers(query: str, settings: FusionSettings, *, hybrid: bool) -> tuple[str, ...]:
    """The identifiers the precedence moves chunks for: the query's code-shaped ones, in a
    hybrid search (both arms ran) whose settings keep it on; else none."""
    return query_identifiers(query) if hybrid and settings.identifier_precedence else ()


def ranked_as_search(
    query: str,
    settings: FusionSettings,
    lexical: Ranked,
    dense: Ranked,
    *,
    hybrid: bool,
    holders: Mapping[str, str],
) -> tuple[FusionSettings, list[Fused]]:
    """The order :func:`run` gives these arms' candidates: the fusion of the over-fetch cut,
    then the identifier precedence (``holders``: chunk id → :func:`holder_text`, for the
    window's chunks; one that is missing holds nothing). For the evaluation harness and
    the tuner, which fuse the arms' answers many times without a store."""
    resolved, fused, _ = fuse(settings, lexical, dense, need=0)
    identifiers = precedence_identifiers(query, settings, hybrid=hybrid)
    if identifiers:
        fused = identifier_first(fused, holders, identifiers)[0]
    return resolved, fused


def _identifiers_first(
    store: Store,
    collection: str,
    plan: QueryPlan,
    identifiers: Sequence[str],
    settings: FusionSettings,
    fused: list[Fused],
    chunks: dict[str, Chunk],
    timings: dict[str, float],
) -> tuple[FusionSettings, list[Fused], dict[str, Chunk]]:
    """:func:`~plait.retrieval.identifier_first.identifier_first` on the fused order when the
    query names identifiers (``identifiers``: :func:`precedence_identifiers`). The window's chunks are read together with the rest of the
    page (``need``), so hydration asks the store for nothing more. Hybrid searches only:
    a one-arm search (``mode`` lexical or vector, or the dense arm down) returns that arm's
    own order."""
    if not identifiers or not fused:
        return settings, fused, chunks
    t = time.perf_counter()
    # the window and the page, so hydration reads nothing more (not what lies before the offset)
    ids = [item.chunk_id for item in fused[:PRECEDENCE_DEPTH]]
    ids += [item.chunk_id for item in fused[max(PRECEDENCE_DEPTH, plan.offset) : plan.need]]
    wanted = [cid for cid in ids if cid not in chunks]
    if wanted:
        chunks = {**chunks, **store.get_chunks(collection, wanted)}
    texts = {cid: holder_text(chunks[cid]) for cid in ids if cid in chunks}
    order, moved, held = identifier_first(fused, texts, identifiers)
    timings["identifiers"] = _ms(t)
    if not moved:
        return settings, fused, chunks
    names = ", ".join(identifiers)
    window = min(PRECEDENCE_DEPTH, len(fused))
    reason = (
        f"{len(held)} of the first {window} fused chunks hold every identifier of the query ({names}) and "
        f"rank ahead of the {window - len(held)} that do not, each group in fused order ({len(moved)} moved up; "
        "the scores stay the fused ones)"
    )
    return settings.model_copy(update={"identifier_reason": reason}), order, chunks


def _sources_in(diversity: Diversified) -> set[str]:
    return {diversity.sources[item.chunk_id] for _, item in diversity.order}


def hits_for(
    page: Sequence[tuple[int, Fused]],
    chunks: Mapping[str, Chunk],
    *,
    rerank_ranks: Mapping[str, int] | None = None,
    best: float | None = None,
    more: Mapping[str, int] | None = None,
) -> list[Hit]:
    """Hits for ``(fused position, candidate)`` pairs, in the order given; a chunk deleted
    between the arms and now is left out. ``more`` is chunk id → ``more_from_source``
    (None: no ``max_per_source`` was asked)."""
    rerank_ranks = rerank_ranks or {}
    hits = []
    for position, item in page:
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
                more_from_source=None if more is None else more.get(item.chunk_id, 0),
            )
        )
    return hits
