"""The runner's strategies are the engine's: rrf equals Plait.search, rerank reorders the head."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from beir_files import write_beir
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError
from plait.evaluation.prepare import prepared
from plait.evaluation.runner import doc_ranking, evaluate, saved_fusion
from plait.evaluation.tuner import score_candidates
from plait.rerank.base import Candidate, RerankOutcome
from plait.service import Plait


class Reverse:
    """A real (if silly) reranker: the candidates in reverse fused order."""

    name = "reverse"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def rerank(self, query: str, candidates: Sequence[Candidate]) -> RerankOutcome:
        self.seen.append(len(candidates))
        return RerankOutcome(order=[cid for cid, _ in reversed(candidates)], reranked=True)


def test_rrf_is_what_search_returns(tiny_beir: Path, tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    with prepared(tiny_beir, embedder=embedder, use_cache=False) as ready:
        outcome = evaluate(
            ready.dataset, store=ready.store, collection=ready.collection, embedder=ready.embedder,
            strategies=["rrf", "weighted"],
        )
        engine = Plait(ready.store, embedder=embedder)
        for qid, text in ready.dataset.queries.items():
            if qid not in ready.dataset.qrels:
                continue
            for method in ("rrf", "weighted"):
                result = engine.search(text, collection=ready.collection, k=100, overfetch=100, fusion=method)
                docs = list(dict.fromkeys(hit.metadata["docId"] for hit in result.hits))
                assert outcome.rankings[method][qid] == docs
    assert set(outcome.rankings["rrf"]) == {"q1", "q2", "q3", "q4"}  # the train query is not run


def test_rerank_reorders_the_fused_head(tiny_beir: Path) -> None:
    reverse = Reverse()
    with prepared(tiny_beir, embedder=FakeEmbedder(), use_cache=False) as ready:
        outcome = evaluate(
            ready.dataset, store=ready.store, collection=ready.collection, embedder=ready.embedder,
            strategies=["rrf", "rrf+rerank"], reranker=lambda: reverse, k_overfetch=3,
        )
    for qid, fused in outcome.rankings["rrf"].items():
        assert len(fused) == 5
        assert outcome.rankings["rrf+rerank"][qid] == [*reversed(fused[:3]), *fused[3:]]
    assert reverse.seen == [3, 3, 3, 3]
    assert outcome.report.strategy("rrf+rerank").available is True


def test_a_reranker_that_cannot_be_built_is_reported_not_faked(tiny_beir: Path) -> None:
    def broken() -> Reverse:
        raise ConfigError("rerank='cross-encoder' needs a model")

    with prepared(tiny_beir, embedder=FakeEmbedder(), use_cache=False) as ready:
        report = evaluate(
            ready.dataset, store=ready.store, collection=ready.collection, embedder=ready.embedder,
            strategies=["rrf+rerank"], reranker=broken,
        ).report
    result = report.strategy("rrf+rerank")
    assert result.available is False and result.reason == "rerank='cross-encoder' needs a model"
    assert result.slices == []


def test_documents_rank_by_their_best_chunk() -> None:
    doc_of = {"a1": "A", "a2": "A", "b1": "B", "c1": "C"}
    assert doc_ranking(["a2", "b1", "a1", "gone", "c1"], doc_of, 10) == ["A", "B", "C"]
    assert doc_ranking(["a2", "b1", "a1", "c1"], doc_of, 2) == ["A", "B"]


def test_bad_arguments_name_the_allowed_values(tiny_beir: Path) -> None:
    with prepared(tiny_beir, embedder="none") as ready:
        with pytest.raises(ConfigError, match="allowed: bm25, vector, rrf, weighted, minmax, dbsf, adaptive, rrf\\+rerank"):
            evaluate(ready.dataset, store=ready.store, collection=ready.collection, embedder=None,
                     strategies=["bm42"])
        with pytest.raises(ConfigError, match="depth must be between 1 and 1000, got 0"):
            evaluate(ready.dataset, store=ready.store, collection=ready.collection, embedder=None, depth=0)


def test_adaptive_settings_name_the_collection_estimate_they_use(tiny_beir: Path) -> None:
    """The table said 'adaptive dense_weight=0.4' while every query's weight moved around
    the collection's arm estimate (here 0.6011), not 0.4."""
    from plait.arm_estimate import estimate_record
    from plait.collection_settings import write_settings
    from plait.evaluation.report import settings_text

    figures = {"samples": 200, "lexicalMrr": 0.865, "denseMrr": 0.589, "lexicalSourceMrr": 0.966, "denseSourceMrr": 0.761}
    with prepared(tiny_beir, embedder=FakeEmbedder(), use_cache=False) as ready:
        write_settings(ready.store, ready.collection, arm_estimate=estimate_record(figures, 659))
        outcome = evaluate(
            ready.dataset, store=ready.store, collection=ready.collection, embedder=ready.embedder,
            strategies=["adaptive", "minmax"],
        )
    adaptive, minmax = (outcome.report.strategy(name) for name in ("adaptive", "minmax"))
    assert settings_text(adaptive) == "adaptive base=0.6011 (collection estimate, per query) overfetch=100"
    assert settings_text(minmax) == "minmax dense_weight=0.4 overfetch=100"  # minmax ignores the estimate


PRECEDENCE_CORPUS = [
    {"_id": "d1", "title": "Errors", "text": "ERR-4012 is raised by the gateway."},
    {"_id": "d2", "title": "Payment timeout", "text": "A payment timeout during checkout: the payment gateway timed out, see ERR-4013 for the payment timeout."},
    {"_id": "d3", "title": "Fallback", "text": "AUTHENTICATION_FALLBACK switches sign in to the old provider."},
    {"_id": "d4", "title": "Jobseeker sign in fallback", "text": "Sign in for jobseekers falls back to the old provider when AUTHENTICATION_FALLBACK_FOR_JOBSEEKERS is set; sign in fallback provider for jobseekers."},
    {"_id": "d5", "title": "Music", "text": "A marimba is a percussion instrument."},
]
PRECEDENCE_QUERIES = {
    "q1": "ERR-4012 payment timeout gateway",
    "q2": "AUTHENTICATION_FALLBACK sign in fallback for jobseekers provider",
    "q3": "marimba percussion",
}


def test_every_fused_strategy_is_what_search_returns_identifier_precedence_included(tmp_path: Path) -> None:
    """Regression (stop 43's noticed list): eval and tune fused the arms and stopped there,
    while search then moves the chunks holding the query's identifiers ahead
    (plait.retrieval.identifier_first). Here fusion puts d2 (ERR-4013, and the query's
    other words) above d1 (ERR-4012) and d4 (AUTHENTICATION_FALLBACK_FOR_JOBSEEKERS)
    above d3 (AUTHENTICATION_FALLBACK): eval ranked d2 and d4 first, search d1 and d3."""
    root = write_beir(
        tmp_path / "prec", PRECEDENCE_CORPUS, PRECEDENCE_QUERIES, {"test": [("q1", "d1"), ("q2", "d3"), ("q3", "d5")]}
    )
    methods = ["rrf", "weighted", "minmax", "dbsf", "adaptive"]
    embedder = FakeEmbedder()
    with prepared(root, embedder=embedder, use_cache=False) as ready:
        outcome = evaluate(
            ready.dataset, store=ready.store, collection=ready.collection, embedder=ready.embedder, strategies=methods
        )
        engine = Plait(ready.store, embedder=embedder)
        moved = set()
        for qid, text in PRECEDENCE_QUERIES.items():
            for method in methods:
                result = engine.search(text, collection=ready.collection, k=100, overfetch=100, fusion=method)
                assert outcome.rankings[method][qid] == list(dict.fromkeys(hit.metadata["docId"] for hit in result.hits))
                if result.fusion.identifier_reason is not None:
                    moved.add(qid)
        assert moved == {"q1", "q2"}  # the precedence reordered both identifier queries in search
        assert [outcome.rankings["adaptive"][q][0] for q in ("q1", "q2", "q3")] == ["d1", "d3", "d5"]
        for method in methods:  # each relevant document first: nDCG@10 1.0 (was 1/log2(3) for q1, q2)
            assert outcome.report.metric(method, "ndcg@10") == pytest.approx(1.0)
        arms = outcome.arms
        assert arms is not None
        settings = saved_fusion(ready.store, ready.collection).model_copy(update={"method": "rrf"})
        scores = score_candidates(arms, ready.dataset.qrels, [settings], measure="ndcg@10")[0]
        assert scores == pytest.approx({"q1": 1.0, "q2": 1.0, "q3": 1.0})  # the tuner orders as search too
