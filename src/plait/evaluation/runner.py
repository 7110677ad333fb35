"""Run every judged query of a BEIR dataset through each retrieval strategy and score it.

The corpus is indexed with the product's own path (:class:`plait.service.Plait`,
``corpus.jsonl`` read by :class:`~plait.sources.jsonl.JsonlSource`, chunked and analysed
as ``plait index`` does). Then, per query, each arm is asked **once** for its
candidates through the search pipeline's own stages: a
:class:`~plait.retrieval.plan.QueryPlan` per query (the terms, the vector, the settings
resolved for the query) and :func:`plait.retrieval.pipeline.run_arms`; every fused
strategy orders those lists as search does (:func:`plait.retrieval.pipeline.ranked_as_search`:
the fusion of the over-fetch tier, then, in a hybrid run, the identifier precedence), so a
strategy's figures are those of ``plait search`` with that fusion method.

The strategies are built from those two lists:

==============  ===================================================================
``bm25``        the lexical arm alone
``vector``      the dense arm alone
``rrf``         the collection's fusion settings (RRF, k=60, lexical_weight 0.5 by
                default) — the default hybrid
``weighted``    the same settings with ``method=weighted`` (ADR 0080's 0.6/0.4/0.2)
``minmax``      min-max normalised linear fusion (``dense_weight``, default 0.5)
``dbsf``        distribution-based (mean ± 3σ) normalised linear fusion
``adaptive``    ``minmax`` with the dense weight chosen per query (label-free)
``rrf+rerank``  ``rrf``, then the fused top ``k_overfetch`` chunks reranked by
                :mod:`plait.rerank` (unavailable, with the reason, if none is configured)
==============  ===================================================================

BEIR judges documents and plait retrieves chunks: a document ranks where its best
chunk ranks (later chunks of the same document are skipped), and the run is cut at
``depth`` documents (100). The fused strategies use over-fetch
``max(settings.overfetch, depth)``: with fewer than ``depth`` candidates per arm
recall@100 would mean nothing. Each arm is fetched once, deep enough for that and for
``depth`` *documents* on average: ``max(overfetch, depth, ceil(depth × chunks per
document))`` chunks; the single-arm strategies rank documents from that whole list.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.collection_settings import CollectionSettings, read_settings
from plait.embeddings.base import Embedder, embedder_languages
from plait.errors import ConfigError, PlaitError, ProviderError
from plait.evaluation.datasets import BeirDataset
from plait.evaluation.metrics import MEASURES, mean_scores, per_query, run_from_rankings
from plait.evaluation.models import Comparison, EvalReport, SliceMetrics, StrategyResult
from plait.evaluation.slices import SLICES, slice_ids
from plait.retrieval.diversity import doc_ranking
from plait.retrieval.identifier_first import holder_text, query_identifiers
from plait.retrieval.pipeline import fuse, ranked_as_search, run_arms
from plait.retrieval.plan import lexical_terms, plan_for_text
from plait.retrieval.plan import saved_fusion as _saved_fusion
from plait.stores.base import Store
from plait.types import FusionMethod, FusionSettings, IndexReport

__all__ = [
    "DEFAULT_DEPTH",
    "SLICE_RULE",
    "STRATEGIES",
    "Arms",
    "EvalOutcome",
    "collect_arms",
    "doc_ranking",
    "evaluate",
    "fused_chunk_ids",
    "lexical_terms",
    "machine_info",
    "saved_fusion",
]

DEFAULT_DEPTH = 100
STRATEGIES: tuple[str, ...] = (
    "bm25", "vector", "rrf", "weighted", "minmax", "dbsf", "adaptive", "rrf+rerank"
)
#: Strategies that are one fusion method of the collection's settings.
FUSED_STRATEGIES: dict[str, FusionMethod] = {
    "rrf": FusionMethod.RRF,
    "weighted": FusionMethod.WEIGHTED,
    "minmax": FusionMethod.MINMAX,
    "dbsf": FusionMethod.DBSF,
    "adaptive": FusionMethod.ADAPTIVE,
}
SLICE_RULE = (
    "identifier if any whitespace-separated raw token of the query is an identifier by "
    "plait.analysis.is_identifier (a digit, an internal - _ or ., or camelCase), else natural"
)
_DENSE = frozenset({"vector", "rrf+rerank", *FUSED_STRATEGIES})
RerankerFactory = Callable[[], Any]

Ranked = list[tuple[str, float]]


@dataclass
class Arms:
    """Each arm's chunk candidates per query, fetched once; ``doc_of`` maps chunk → document."""

    lexical: dict[str, Ranked]
    dense: dict[str, Ranked] | None
    dense_reason: str | None
    doc_of: dict[str, str]
    limit: int
    #: each query's text and the embedder's declared languages, for the language prior
    texts: dict[str, str] = field(default_factory=dict)
    languages: frozenset[str] | None = None
    #: chunk id → the text the identifier precedence reads (:func:`holder_text`), for the
    #: candidates of the queries that name identifiers
    holders: dict[str, str] = field(default_factory=dict)

    def query_settings(self, settings: FusionSettings, qid: str) -> FusionSettings:
        """``settings`` for one query as search makes them (its language, the embedder's cover)."""
        text = self.texts.get(qid)
        return settings if text is None else plan_for_text(text, settings, languages=self.languages).settings

    def ranked(self, settings: FusionSettings, qid: str) -> list[str]:
        """Chunk ids in the order search returns them for query ``qid`` with ``settings``:
        the fusion of the over-fetch cut, then, in a hybrid run, the identifier precedence
        (:func:`plait.retrieval.pipeline.ranked_as_search`)."""
        dense = None if self.dense is None else self.dense.get(qid)
        _, fused = ranked_as_search(
            self.texts.get(qid, ""),
            self.query_settings(settings, qid),
            self.lexical[qid],
            dense or [],
            hybrid=dense is not None,
            holders=self.holders,
        )
        return [item.chunk_id for item in fused]


def collect_arms(
    store: Store,
    collection: str,
    queries: Mapping[str, str],
    *,
    embedder: Embedder | None,
    limit: int,
) -> Arms:
    """Ask both arms once per query for ``limit`` chunks each."""
    info = store.get_collection(collection)
    dense_reason: str | None = None
    if embedder is None:
        dense_reason = "no embedder selected (lexical only)"
    elif info is None or info.chunks - info.chunks_without_vector == 0:
        dense_reason = f"collection {collection!r} has no vectors"
    lexical: dict[str, Ranked] = {}
    dense: dict[str, Ranked] | None = None if dense_reason else {}
    base = FusionSettings()
    for qid, text in queries.items():
        vector = None
        if dense is not None and embedder is not None:
            try:
                vector = embedder.embed_query(text)
            except ProviderError as exc:
                dense, dense_reason = None, f"query embedding failed: {exc}"
        lexical[qid], dense_list = run_arms(
            store, collection, plan_for_text(text, base, vector=vector), depth=limit
        )
        if dense is not None and vector is not None:
            dense[qid] = dense_list
    ids: set[str] = set()
    for lists in (lexical, dense or {}):
        for ranked in lists.values():
            ids.update(cid for cid, _ in ranked)
    chunks = store.get_chunks(collection, sorted(ids))
    doc_of = {cid: chunk.source_id for cid, chunk in chunks.items()}
    named = [qid for qid, text in queries.items() if query_identifiers(text)]
    candidates = {cid for qid in named for lists in (lexical, dense or {}) for cid, _ in lists.get(qid, [])}
    return Arms(
        lexical=lexical,
        dense=dense,
        dense_reason=dense_reason,
        doc_of=doc_of,
        limit=limit,
        texts=dict(queries),
        languages=embedder_languages(embedder) if embedder is not None else None,
        holders={cid: holder_text(chunks[cid]) for cid in sorted(candidates) if cid in chunks},
    )


def fused_chunk_ids(settings: FusionSettings, lexical: Ranked, dense: Ranked) -> list[str]:
    """Chunk ids in fused order, each arm cut to ``settings.overfetch`` first (the pipeline's
    fusion, its first tier), before search's identifier precedence: for studies of fusion
    alone. What search returns is :meth:`Arms.ranked`."""
    return [item.chunk_id for item in fuse(settings, lexical, dense, need=0)[1]]


def saved_fusion(store: Store, collection: str) -> FusionSettings:
    """The collection's saved fusion defaults (what search uses), else the built-in ones."""
    return _saved_fusion(read_settings(store, collection) if store.get_collection(collection) else CollectionSettings())


def machine_info() -> dict[str, str]:
    """Where the figures were measured: OS, CPU model and count, Python."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu or "unknown",
        "cores": str(os.cpu_count() or 0),
        "python": platform.python_version(),
    }


@dataclass
class EvalOutcome:
    """The report plus what per-query analysis needs: rankings and scores per strategy."""

    report: EvalReport
    rankings: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    scores: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    arms: Arms | None = None


def _rerank_rankings(
    factory: RerankerFactory | None,
    store: Store,
    collection: str,
    queries: Mapping[str, str],
    fused: Mapping[str, list[str]],
    *,
    k_overfetch: int,
) -> tuple[dict[str, list[str]] | None, str | None]:
    """Chunk rankings with the fused top ``k_overfetch`` reordered, or (None, why not)."""
    if factory is None:
        return None, "no reranker configured"
    try:
        from plait.rerank import complete_order

        reranker = factory()
    except ImportError as exc:
        return None, f"plait.rerank is not importable: {exc}"
    except PlaitError as exc:
        return None, str(exc)
    out: dict[str, list[str]] = {}
    failures = 0
    for qid, chunk_ids in fused.items():
        head = chunk_ids[:k_overfetch]
        chunks = store.get_chunks(collection, head)
        candidates = [(cid, chunks[cid].content) for cid in head if cid in chunks]
        outcome = reranker.rerank(queries[qid], candidates)
        if not outcome.reranked:
            failures += 1
        order, _, _ = complete_order(candidates, outcome.order)
        out[qid] = [*order, *chunk_ids[k_overfetch:]]
    if failures == len(fused) and fused:
        return None, f"the reranker kept the fused order for every query ({failures})"
    return out, None


def _strategy_chunks(
    name: str, arms: Arms, base: FusionSettings, depth: int
) -> tuple[dict[str, list[str]], FusionSettings | None]:
    if name == "bm25":
        return {q: [c for c, _ in r] for q, r in arms.lexical.items()}, None
    dense = arms.dense or {}
    if name == "vector":
        return {q: [c for c, _ in r] for q, r in dense.items()}, None
    method = FUSED_STRATEGIES[name]
    settings = base.model_copy(update={"method": method, "overfetch": max(base.overfetch, depth)})
    return {q: arms.ranked(settings, q) for q in arms.lexical}, settings


def _slice_metrics(scores: Mapping[str, Mapping[str, float]], slices: Mapping[str, list[str]]) -> list[SliceMetrics]:
    return [
        SliceMetrics(slice=name, queries=len(slices[name]), metrics=mean_scores(scores, slices[name]))
        for name in SLICES
        if slices[name]
    ]


def compare(
    scores: Mapping[str, Mapping[str, Mapping[str, float]]],
    strategy: str,
    baseline: str,
    *,
    measure: str = "ndcg@10",
) -> Comparison:
    """How often ``strategy`` beats, loses to or ties ``baseline`` per query on ``measure``."""
    a, b = scores[strategy][measure], scores[baseline][measure]
    deltas = [a[q] - b.get(q, 0.0) for q in a]
    eps = 1e-9
    return Comparison(
        strategy=strategy,
        baseline=baseline,
        measure=measure,
        better=sum(d > eps for d in deltas),
        worse=sum(d < -eps for d in deltas),
        tied=sum(abs(d) <= eps for d in deltas),
        mean_delta=sum(deltas) / len(deltas) if deltas else 0.0,
    )


def evaluate(
    dataset: BeirDataset,
    *,
    store: Store,
    collection: str,
    embedder: Embedder | None,
    strategies: Sequence[str] = STRATEGIES,
    depth: int = DEFAULT_DEPTH,
    reranker: RerankerFactory | None = None,
    k_overfetch: int = 20,
    index: IndexReport | None = None,
    cache: Mapping[str, int] | None = None,
) -> EvalOutcome:
    """Score ``strategies`` on the judged queries of ``dataset`` (already indexed in ``collection``)."""
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ConfigError(f"unknown strategies {unknown}; allowed: {', '.join(STRATEGIES)}")
    if not 1 <= depth <= 1000:
        raise ConfigError(f"depth must be between 1 and 1000, got {depth}")
    started = time.perf_counter()
    info = store.get_collection(collection)
    if info is None or info.chunks == 0:
        raise ConfigError(f"collection {collection!r} holds no chunks; index the corpus first")
    base = saved_fusion(store, collection)
    queries = {qid: dataset.queries[qid] for qid in dataset.query_ids}
    per_doc = info.chunks / max(1, info.sources)
    limit = max(base.overfetch, depth, math.ceil(depth * per_doc))
    arms = collect_arms(store, collection, queries, embedder=embedder, limit=limit)
    slices = slice_ids(queries)
    all_rankings: dict[str, dict[str, list[str]]] = {}
    all_scores: dict[str, dict[str, dict[str, float]]] = {}
    results: list[StrategyResult] = []
    fused_rrf: dict[str, list[str]] | None = None
    for name in dict.fromkeys(strategies):
        t = time.perf_counter()
        settings: FusionSettings | None
        if name in _DENSE and arms.dense is None:
            results.append(StrategyResult(strategy=name, available=False, reason=arms.dense_reason))
            continue
        if name == "rrf+rerank":
            if fused_rrf is None:
                fused_rrf, _ = _strategy_chunks("rrf", arms, base, depth)
            chunk_runs, reason = _rerank_rankings(
                reranker, store, collection, queries, fused_rrf, k_overfetch=k_overfetch
            )
            if chunk_runs is None:
                results.append(StrategyResult(strategy=name, available=False, reason=reason))
                continue
            settings = base.model_copy(update={"overfetch": max(base.overfetch, depth)})
        else:
            chunk_runs, settings = _strategy_chunks(name, arms, base, depth)
            if name == "rrf":
                fused_rrf = chunk_runs
        rankings = {q: doc_ranking(ids, arms.doc_of, depth) for q, ids in chunk_runs.items()}
        scores = per_query(dataset.qrels, run_from_rankings(rankings))
        all_rankings[name], all_scores[name] = rankings, scores
        mean_docs = sum(len(r) for r in rankings.values()) / len(queries) if queries else 0.0
        results.append(
            StrategyResult(
                strategy=name,
                available=True,
                settings=settings,
                slices=_slice_metrics(scores, slices),
                mean_docs=round(mean_docs, 2),
                elapsed_ms=round((time.perf_counter() - t) * 1000, 1),
            )
        )
    indexed = {source.source_id for source in store.list_sources(collection)}
    relevant = {doc for docs in dataset.qrels.values() for doc, grade in docs.items() if grade > 0}
    comparisons = [
        compare(all_scores, hybrid, arm)
        for hybrid in (*FUSED_STRATEGIES, "rrf+rerank")
        for arm in ("bm25", "vector")
        if hybrid in all_scores and arm in all_scores
    ]
    report = EvalReport(
        dataset=dataset.name,
        dataset_path=str(dataset.root),
        split=dataset.split,
        corpus_docs=dataset.corpus_size(),
        chunks=info.chunks,
        queries=len(queries),
        slice_counts={name: len(ids) for name, ids in slices.items()},
        slice_rule=SLICE_RULE,
        embedder=f"{embedder.provider}/{embedder.model}" if embedder is not None else None,
        depth=depth,
        metric_provider=_provider_name(),
        strategies=results,
        comparisons=comparisons,
        relevant_not_indexed=sorted(relevant - indexed),
        index=index,
        cache=dict(cache or {}),
        machine=machine_info(),
        date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return EvalOutcome(report=report, rankings=all_rankings, scores=all_scores, arms=arms)


def _provider_name() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for package in ("ir-measures", "pytrec-eval-terrier"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            continue
    return " / ".join(parts) + f" ({', '.join(MEASURES.values())})"
