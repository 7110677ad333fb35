"""Fusion against hand-computed values."""

from __future__ import annotations

import pytest

from plait.fusion import FUSERS, arm_weights, rrf, weighted
from plait.types import FusionMethod, FusionSettings


def test_rrf_textbook_values() -> None:
    lexical = [("a", 12.0), ("b", 7.0)]
    dense = [("c", 0.9), ("a", 0.8), ("b", 0.1)]
    fused = {f.chunk_id: f for f in rrf(lexical, dense)}
    assert fused["a"].score == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"].score == pytest.approx(1 / 62 + 1 / 63)
    assert fused["c"].score == pytest.approx(1 / 61)
    assert [f.chunk_id for f in rrf(lexical, dense)] == ["a", "b", "c"]
    assert (fused["a"].lexical_rank, fused["a"].dense_rank) == (1, 2)
    assert (fused["c"].lexical_rank, fused["c"].lexical_score) == (None, None)
    assert fused["c"].dense_score == 0.9


def test_rrf_lexical_weight() -> None:
    assert arm_weights(0.5) == (1.0, 1.0)
    assert arm_weights(0.75) == (1.5, 0.5)
    fused = {f.chunk_id: f.score for f in rrf([("a", 1.0)], [("b", 1.0)], lexical_weight=0.75, k=10)}
    assert fused["a"] == pytest.approx(1.5 / 11)
    assert fused["b"] == pytest.approx(0.5 / 11)
    only_dense = rrf([("a", 1.0)], [("b", 1.0)], lexical_weight=0.0)
    assert next(f.chunk_id for f in only_dense) == "b"
    assert {f.chunk_id: f.score for f in only_dense}["a"] == 0.0


def test_position_15_in_both_arms_beats_a_single_arm_winner() -> None:
    """2/(60+15) = 0.02667 > 1/61 = 0.01639: consensus wins with k = 60."""
    lexical = [(f"l{i}", 10.0 - i * 0.1) for i in range(1, 15)] + [("x", 1.0)]
    dense = [(f"d{i}", 0.9 - i * 0.01) for i in range(1, 15)] + [("x", 0.5)]
    fused = rrf(lexical, dense)
    top5 = [f.chunk_id for f in fused[:5]]
    assert top5[0] == "x"
    assert fused[0].score == pytest.approx(2 / 75)
    assert (fused[0].lexical_rank, fused[0].dense_rank) == (15, 15)


def test_rrf_ties_break_by_best_rank_then_id() -> None:
    fused = rrf([("b", 1.0)], [("a", 1.0)])
    assert [f.chunk_id for f in fused] == ["a", "b"]


def test_weighted_adr_numbers() -> None:
    """0.6·cos + 0.4·(bm25 / best bm25), threshold 0.2."""
    lexical = [("a", 10.0), ("b", 2.0)]
    dense = [("a", 0.5), ("c", 0.4), ("d", 0.1)]
    fused = {f.chunk_id: f.score for f in weighted(lexical, dense)}
    assert fused["a"] == pytest.approx(0.6 * 0.5 + 0.4 * 1.0)
    assert fused["c"] == pytest.approx(0.24)
    assert "b" not in fused  # 0.4 · 0.2 = 0.08 < 0.2
    assert "d" not in fused  # 0.06 < 0.2
    assert [f.chunk_id for f in weighted(lexical, dense)] == ["a", "c"]


def test_weighted_negative_cosine_counts_zero() -> None:
    fused = weighted([], [("a", -0.5)], threshold=0.0)
    assert fused[0].score == 0.0
    assert fused[0].dense_score == -0.5


def test_fusers_dispatch_by_method() -> None:
    settings = FusionSettings(method=FusionMethod.WEIGHTED, threshold=0.0)
    out = FUSERS[settings.method](settings, [("a", 1.0)], [])
    assert out[0].score == pytest.approx(0.4)
    out = FUSERS[FusionMethod.RRF](FusionSettings(rrf_k=1), [("a", 1.0)], [])
    assert out[0].score == pytest.approx(1 / 2)
