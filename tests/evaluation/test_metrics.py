"""Metric wiring: ir-measures on a hand-made qrels and run, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from plait.evaluation.metrics import mean_scores, per_query, run_from_rankings

QRELS = {
    "q1": {"d1": 1, "d2": 1},
    "q2": {"d3": 2, "d4": 1},  # graded
    "q3": {"d5": 1},  # the run has nothing for q3
    "q4": {"d7": 1},  # found only at rank 11
    "q5": {"d8": 0, "d9": 1},  # grade 0 is judged non-relevant
}
RANKINGS = {
    "q1": ["d2", "d9", "d1"],
    "q2": ["d4", "d3"],
    "q4": [f"x{i}" for i in range(10)] + ["d7"],
    "q5": ["d8", "d9"],
    "q-unjudged": ["d1"],
}


def log2(x: float) -> float:
    return math.log2(x)


# nDCG with trec_eval's linear gain and log2(rank + 1) discount
NDCG_Q1 = (1 + 1 / log2(4)) / (1 + 1 / log2(3))  # relevant at ranks 1 and 3
NDCG_Q2 = (1 / log2(2) + 2 / log2(3)) / (2 / log2(2) + 1 / log2(3))  # grade 1 first, grade 2 second
NDCG_Q5 = (1 / log2(3)) / 1.0  # the only relevant document at rank 2


def test_run_scores_preserve_the_given_order() -> None:
    run = run_from_rankings({"q": ["b", "a", "b", "c"]})
    assert run == {"q": {"b": 3.0, "a": 2.0, "c": 1.0}}


def test_per_query_matches_hand_computed_values() -> None:
    scores = per_query(QRELS, run_from_rankings(RANKINGS))
    assert set(scores) == {"ndcg@10", "recall@10", "recall@100", "mrr@10"}
    assert set(scores["ndcg@10"]) == set(QRELS)  # unjudged queries are not scored
    assert scores["ndcg@10"]["q1"] == pytest.approx(NDCG_Q1)  # 0.919721
    assert scores["ndcg@10"]["q2"] == pytest.approx(NDCG_Q2)  # 0.859719
    assert scores["ndcg@10"]["q3"] == 0.0
    assert scores["ndcg@10"]["q4"] == 0.0
    assert scores["ndcg@10"]["q5"] == pytest.approx(NDCG_Q5)
    assert scores["recall@10"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 0.0, "q5": 1.0}
    assert scores["recall@100"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 1.0, "q5": 1.0}
    assert scores["mrr@10"]["q1"] == 1.0
    assert scores["mrr@10"]["q4"] == 0.0  # rank 11 is outside the cut
    assert scores["mrr@10"]["q5"] == pytest.approx(0.5)


def test_means_count_every_judged_query() -> None:
    scores = per_query(QRELS, run_from_rankings(RANKINGS))
    means = mean_scores(scores)
    assert means["ndcg@10"] == pytest.approx((NDCG_Q1 + NDCG_Q2 + NDCG_Q5) / 5)
    assert means["recall@100"] == pytest.approx(4 / 5)
    assert means["mrr@10"] == pytest.approx((1 + 1 + 0.5) / 5)
    only = mean_scores(scores, ["q1", "q3"])
    assert only["ndcg@10"] == pytest.approx(NDCG_Q1 / 2)


def test_an_empty_run_scores_zero() -> None:
    scores = per_query(QRELS, {})
    assert mean_scores(scores) == {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
