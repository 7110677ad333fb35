"""Chunks without a vector yet are scored as if the dense arm agreed (hand-computed)."""

from __future__ import annotations

import pytest

from plait.fusion import FUSERS
from plait.fusion_pending import not_penalised
from plait.types import FusionMethod, FusionSettings


def _scores(fused: list) -> list[tuple[str, float]]:
    return [(f.chunk_id, round(f.score, 6)) for f in fused]


def test_rrf_pending_chunk_takes_its_lexical_rank_in_both_arms() -> None:
    """lexical a, b; dense c, b; k = 60. Plain: b = 2/62 = 0.032258, a = c = 1/61 =
    0.016393 (a before c by id). a pending: a = 2/61 = 0.032787, first."""
    settings = FusionSettings(method=FusionMethod.RRF)
    lexical, dense = [("a", 3.0), ("b", 2.0)], [("c", 0.9), ("b", 0.8)]
    plain = FUSERS[FusionMethod.RRF](settings, lexical, dense)
    assert _scores(plain) == [("b", 0.032258), ("a", 0.016393), ("c", 0.016393)]
    fused = not_penalised(FUSERS[FusionMethod.RRF], {"a"})(settings, lexical, dense)
    assert _scores(fused) == [("a", 0.032787), ("b", 0.032258), ("c", 0.016393)]
    assert (fused[0].lexical_rank, fused[0].dense_rank) == (1, None)
    # a chunk the dense arm returned, or that only the dense arm returned, is untouched
    assert _scores(not_penalised(FUSERS[FusionMethod.RRF], {"b", "c"})(settings, lexical, dense)) == _scores(plain)


def test_weighted_pending_chunk_is_not_dropped_by_the_threshold() -> None:
    """lexical a 4, p 1; dense a 0.5. a = 0.6·0.5 + 0.4·1 = 0.7; p = 0.4·0.25 = 0.1 <
    0.2 is dropped — unless pending: (0.4 + 0.6)·0.25 = 0.25."""
    settings = FusionSettings(method=FusionMethod.WEIGHTED)
    lexical, dense = [("a", 4.0), ("p", 1.0)], [("a", 0.5)]
    assert _scores(FUSERS[FusionMethod.WEIGHTED](settings, lexical, dense)) == [("a", 0.7)]
    fused = not_penalised(FUSERS[FusionMethod.WEIGHTED], {"p"})(settings, lexical, dense)
    assert _scores(fused) == [("a", 0.7), ("p", 0.25)]
    assert (fused[1].lexical_rank, fused[1].lexical_score, fused[1].dense_rank) == (2, 1.0, None)


def test_minmax_pending_chunk_gets_its_lexical_score_for_both_arms() -> None:
    """lexical a 4, b 2, c 1 → 1, 1/3, 0; dense b 0.9, d 0.3 → 1, 0; dense weight 0.4.
    Plain: a = 0.6, b = 0.6/3 + 0.4 = 0.6, c = d = 0. a pending: a = 1.0."""
    settings = FusionSettings(method=FusionMethod.MINMAX, dense_weight=0.4)
    lexical, dense = [("a", 4.0), ("b", 2.0), ("c", 1.0)], [("b", 0.9), ("d", 0.3)]
    plain = FUSERS[FusionMethod.MINMAX](settings, lexical, dense)
    assert dict(_scores(plain)) == pytest.approx({"a": 0.6, "b": 0.6, "c": 0.0, "d": 0.0})
    fused = not_penalised(FUSERS[FusionMethod.MINMAX], {"a"})(settings, lexical, dense)
    assert [f.chunk_id for f in fused][:2] == ["a", "b"]
    assert fused[0].score == pytest.approx(1.0)


def test_nothing_pending_or_no_dense_arm_changes_nothing() -> None:
    fuser = FUSERS[FusionMethod.RRF]
    assert not_penalised(fuser, set()) is fuser
    settings = FusionSettings(method=FusionMethod.RRF)
    lexical_only = not_penalised(fuser, {"a"})(settings, [("a", 1.0), ("b", 0.5)], [])
    assert _scores(lexical_only) == [("a", 0.016393), ("b", 0.016129)]
