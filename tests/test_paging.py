"""``offset`` paging is consistent across pages; ``scoreNormalised`` means what it says."""

from __future__ import annotations

import pytest

from plait.errors import ValidationError
from plait.fusion import _rrf_from, fetch_depth, max_fused_score, rrf, tiered
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.types import FusionMethod, FusionSettings


def test_tiered_keeps_the_overfetch_fusion_and_appends_deeper_tiers() -> None:
    lexical = [("a", 9.0), ("b", 8.0), ("c", 7.0)]
    dense = [("c", 0.9), ("d", 0.8), ("e", 0.7)]
    settings = FusionSettings(overfetch=2)
    # tier 0 (depth 2): a=1/61, c=1/61, b=1/62, d=1/62 → a, c (tie: rank 1, then id), b, d
    # tier 1 (depth 4): c=1/63+1/61 first, then a … ; only e is new
    order = [f.chunk_id for f in tiered(_rrf_from, settings, lexical, dense, need=5)]
    assert order == ["a", "c", "b", "d", "e"]
    # fusing once at the deeper cut would move c above a: page 1 would change with the page size
    assert [f.chunk_id for f in rrf(lexical, dense)][:2] == ["c", "a"]
    assert [f.chunk_id for f in tiered(_rrf_from, settings, lexical, dense, need=2)] == ["a", "c", "b", "d"]


def test_fetch_depth_doubles() -> None:
    assert [fetch_depth(50, n) for n in (8, 50, 51, 101, 1008)] == [50, 50, 100, 200, 1600]


def _corpus(n: int) -> dict[str, str]:
    # every document holds "refund", with a different mix of other words
    return {f"d{i:02d}": f"refund {'policy ' * (i % 4)}{'card ' * (i % 3)}note {i}" for i in range(n)}


def test_pages_never_repeat_or_skip(engine: Plait) -> None:
    engine.index_documents(documents(_corpus(30)))
    whole = engine.search("refund card policy", k=30, overfetch=8)
    assert [h.ranks.fused for h in whole.hits] == list(range(1, 31))
    pages = [engine.search("refund card policy", k=5, overfetch=8, offset=o) for o in range(0, 30, 5)]
    flat = [h.chunk_id for page in pages for h in page.hits]
    assert flat == [h.chunk_id for h in whole.hits]
    assert len(set(flat)) == 30
    assert [h.ranks.fused for page in pages for h in page.hits] == list(range(1, 31))
    assert pages[0].notes == [] and pages[0].offset == 0
    assert pages[2].offset == 10 and pages[2].notes and "each arm fetched 16" in pages[2].notes[0]
    # page 1 is exactly the search without an offset
    plain = engine.search("refund card policy", k=5, overfetch=8)
    assert [h.chunk_id for h in plain.hits] == [h.chunk_id for h in pages[0].hits]


def test_offset_past_the_end_and_bounds(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    assert engine.search("ERR-4012", k=3, offset=10).hits == []
    with pytest.raises(ValidationError, match="offset"):
        engine.search("ERR-4012", offset=1001)
    with pytest.raises(ValidationError, match="offset"):
        engine.search("ERR-4012", offset=-1)


def test_score_normalised(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.search("ERR-4012", k=5, fusion="rrf")
    for hit in result.hits:
        assert hit.score_normalised == pytest.approx(hit.score / (2 / 61), abs=1e-6)
        assert 0.0 < hit.score_normalised <= 1.0
    weighted = engine.search("ERR-4012", k=3, fusion="weighted")
    for hit in weighted.hits:
        assert hit.score_normalised == pytest.approx(hit.score / 1.0, abs=1e-6)


def test_score_normalised_lexical_only(tmp_path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        (hit,) = engine.search("ERR-4012", k=1, fusion="rrf").hits
    assert hit.ranks.lexical == 1 and hit.score == pytest.approx(1 / 61)
    assert hit.score_normalised == 1.0  # rank 1 in the only arm that ran


def test_max_fused_score() -> None:
    rrf = FusionMethod.RRF
    assert max_fused_score(FusionSettings(method=rrf)) == pytest.approx(2 / 61)
    assert max_fused_score(FusionSettings(method=rrf, lexical_weight=0.7), dense=False) == pytest.approx(1.4 / 61)
    assert max_fused_score(FusionSettings(method=rrf, rrf_k=10, lexical_weight=1.0)) == pytest.approx(2 / 11)
    assert max_fused_score(FusionSettings(method=FusionMethod.WEIGHTED)) == pytest.approx(1.0)
    assert max_fused_score(FusionSettings(method=rrf, lexical_weight=1.0), lexical=False) is None
    # the default (adaptive, min-max normalised): weights 0.6 lexical / 0.4 dense before resolving
    assert max_fused_score(FusionSettings()) == pytest.approx(1.0)
    assert max_fused_score(FusionSettings(), dense=False) == pytest.approx(0.6)
