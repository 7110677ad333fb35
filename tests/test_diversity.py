"""``maxPerSource``: at most N chunks of one source in the hits, applied after fusion and
before the cut; ``moreFromSource`` counts the rest; pages stay stable; ``groupBy``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plait.embeddings.fake import FakeEmbedder
from plait.errors import ValidationError
from plait.fusion import Fused
from plait.retrieval.diversity import diversify
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.types import FileOrigin, Hit

QUERY = "refund policy card"


def _doc(source: str, sections: int) -> SourceDocument:
    """``sections`` chunks, each its own heading, all about refunds with a varying mix."""
    parts = tuple(
        SourcePart(
            text=f"refund {'policy ' * (n % 3)}{'card ' * ((n + len(source)) % 4)}section {n} of {source}",
            origin=FileOrigin(source_path=f"{source}.md", heading_path=[f"{source} part {n}"]),
            key=f"s{n}",
        )
        for n in range(sections)
    )
    return SourceDocument(source_id=source, scope="docs", parts=parts, metadata={"docId": source})


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plait]:
    path = tmp_path_factory.mktemp("diversity") / "plait.db"
    with Plait(str(path), embedder=FakeEmbedder(dimension=64)) as e:
        e.index_documents([_doc("big", 9), _doc("mid", 4), _doc("one", 1), _doc("two", 2), _doc("many", 6)])
        yield e


def _source(hit: Hit) -> str:
    return str(hit.metadata["docId"])


def test_diversify_by_hand() -> None:
    fused = [Fused(c, 1.0, None, None, None, None) for c in ["a1", "a2", "b1", "a3", "gone", "b2", "a4", "c1"]]
    sources = {"a1": "a", "a2": "a", "a3": "a", "a4": "a", "b1": "b", "b2": "b", "c1": "c"}
    d = diversify(fused, sources, 2)
    assert [(p, i.chunk_id) for p, i in d.order] == [(1, "a1"), (2, "a2"), (3, "b1"), (6, "b2"), (8, "c1")]
    assert d.cut == {"a3": 4, "a4": 7}
    assert d.more == {"a": 2}
    with pytest.raises(ValueError, match="at least 1"):
        diversify(fused, sources, 0)


def test_max_per_source_is_the_fused_order_thinned_before_the_cut(engine: Plait) -> None:
    whole = engine.search(QUERY, k=22)
    assert len(whole.hits) == 22  # every chunk matches "refund": all of them fused
    assert all(h.more_from_source is None for h in whole.hits)
    kept: dict[str, int] = {}
    expected = []
    for hit in whole.hits:
        if kept.get(_source(hit), 0) < 2:
            kept[_source(hit)] = kept.get(_source(hit), 0) + 1
            expected.append(hit.chunk_id)
    result = engine.search(QUERY, k=5, max_per_source=2)
    assert [h.chunk_id for h in result.hits] == expected[:5]
    assert result.max_per_source == 2
    totals = {"big": 9, "mid": 4, "one": 1, "two": 2, "many": 6}
    for hit in result.hits:
        # fused positions are the fusion's own: the chunks left out leave gaps in them
        assert hit.ranks.fused == next(h.ranks.fused for h in whole.hits if h.chunk_id == hit.chunk_id)
        assert hit.more_from_source == max(0, totals[_source(hit)] - 2)
    counts: dict[str, int] = {}
    for hit in result.hits:
        counts[_source(hit)] = counts.get(_source(hit), 0) + 1
    assert max(counts.values()) <= 2


def test_a_thin_page_fuses_deeper_and_says_so(engine: Plait) -> None:
    # over-fetch 3: one chunk per source needs more than 3 fused candidates for 5 sources
    result = engine.search(QUERY, k=5, max_per_source=1, overfetch=3)
    assert sorted(_source(h) for h in result.hits) == ["big", "many", "mid", "one", "two"]
    assert any(n.startswith("maxPerSource 1 left out") for n in result.notes)
    deep = engine.search(QUERY, k=5, max_per_source=1, overfetch=50)
    assert sorted(_source(h) for h in deep.hits) == ["big", "many", "mid", "one", "two"]
    assert not any("maxPerSource" in n for n in deep.notes)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cap=st.integers(min_value=1, max_value=4),
    size=st.integers(min_value=1, max_value=6),
    overfetch=st.sampled_from([2, 3, 5, 50]),
    fusion=st.sampled_from(["adaptive", "rrf"]),
)
# one-hit pages with over-fetch 3 stopped after 12 of the 15 hits: the arms held every
# candidate, but the fusion's tiers had stopped at ``need`` and read only 12 deep
@example(cap=4, size=1, overfetch=3, fusion="adaptive")
@example(cap=4, size=1, overfetch=3, fusion="rrf")
def test_pages_never_repeat_or_skip(engine: Plait, cap: int, size: int, overfetch: int, fusion: str) -> None:
    options = {"max_per_source": cap, "overfetch": overfetch, "fusion": fusion}
    whole = engine.search(QUERY, k=30, **options)  # type: ignore[arg-type]
    flat: list[str] = []
    offset = 0
    while True:
        page = engine.search(QUERY, k=size, offset=offset, **options)  # type: ignore[arg-type]
        if not page.hits:
            break
        flat += [h.chunk_id for h in page.hits]
        offset += size
    assert flat == [h.chunk_id for h in whole.hits]
    assert len(set(flat)) == len(flat)
    counts: dict[str, int] = {}
    for hit in whole.hits:
        counts[_source(hit)] = counts.get(_source(hit), 0) + 1
    assert len(whole.hits) == sum(min(cap, n) for n in (9, 4, 1, 2, 6))
    assert max(counts.values()) <= cap


def test_group_by_source(engine: Plait) -> None:
    result = engine.search(QUERY, k=3, group_by="source", max_per_source=2)
    assert result.group_by == "source" and result.groups is not None
    assert len(result.groups) == 3
    hits = {h.chunk_id: h for h in result.hits}
    assert [c for g in result.groups for c in g.chunk_ids] == [h.chunk_id for h in _by_group(result.hits)]
    for group in result.groups:
        members = [hits[c] for c in group.chunk_ids]
        assert {_source(h) for h in members} == {group.source_id}
        assert 1 <= len(members) <= 2
        assert group.score == members[0].score == max(h.score for h in members)
        assert group.more_from_source == members[0].more_from_source
    # groups come in the order of their best chunk; the next page starts at the 4th source
    best = [min(hits[c].ranks.fused or 0 for c in g.chunk_ids) for g in result.groups]
    assert best == sorted(best)
    nxt = engine.search(QUERY, k=2, offset=3, group_by="source", max_per_source=2)
    every = engine.search(QUERY, k=5, group_by="source", max_per_source=2)
    assert nxt.groups is not None and every.groups is not None
    assert [g.source_id for g in every.groups] == [g.source_id for g in result.groups + nxt.groups]
    # without maxPerSource a group holds up to 3 chunks
    default = engine.search(QUERY, k=5, group_by="source")
    assert default.max_per_source == 3 and default.groups is not None
    assert {g.source_id: len(g.chunk_ids) for g in default.groups} == {
        "big": 3, "mid": 3, "one": 1, "two": 2, "many": 3
    }


def _by_group(hits: list[Hit]) -> list[Hit]:
    order = list(dict.fromkeys(_source(h) for h in hits))
    return sorted(hits, key=lambda h: order.index(_source(h)))


def test_explain_says_a_chunk_was_cut_by_max_per_source(engine: Plait) -> None:
    whole = engine.search(QUERY, k=22)
    big = [h for h in whole.hits if _source(h) == "big"]
    cut = big[1]  # the second-best chunk of 'big': maxPerSource 1 leaves it out
    explained = engine.explain(QUERY, chunk=cut.chunk_id, k=5, max_per_source=1)
    assert explained.fusion.returned is False
    assert explained.fusion.dropped_by == "max-per-source"
    assert explained.diagnosis.code.value == "max-per-source"
    assert f"fused {cut.ranks.fused}" in explained.diagnosis.message
    (journey,) = explained.chunks
    assert journey.cut_by_max_per_source is True and journey.fused_rank == cut.ranks.fused
    kept = engine.explain(QUERY, chunk=big[0].chunk_id, k=5, max_per_source=1)
    assert kept.fusion.returned is True and kept.chunks[0].cut_by_max_per_source is False


def test_bounds(engine: Plait) -> None:
    with pytest.raises(ValidationError, match="maxPerSource"):
        engine.search(QUERY, max_per_source=0)
    with pytest.raises(ValidationError, match="groupBy"):
        engine.search(QUERY, group_by="scope")


def test_works_with_rerank(tmp_path: Path) -> None:
    from plait.rerank.base import RerankOutcome

    class Reverse:
        name = "reverse"

        def rerank(self, query: str, candidates: list[tuple[str, str]]) -> RerankOutcome:
            return RerankOutcome(order=[cid for cid, _ in reversed(candidates)], reranked=True)

    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=64), cross_encoder=Reverse()) as e:  # type: ignore[arg-type]
        e.index_documents([_doc("big", 9), _doc("mid", 4), _doc("one", 1)])
        plain = e.search(QUERY, k=20, max_per_source=1)
        reranked = e.search(QUERY, k=3, max_per_source=1, rerank="cross-encoder", k_overfetch=3)
    assert [h.chunk_id for h in reranked.hits] == [h.chunk_id for h in reversed(plain.hits[:3])]
    assert [h.ranks.rerank for h in reranked.hits] == [1, 2, 3]


def test_a_deeper_page_reruns_the_arms_only_when_they_must_go_deeper(tmp_path: Path) -> None:
    """Regression: the refill loop doubled ``need`` but ran both arms again at the same
    depth while ``need`` stayed within the over-fetch (limits 50, 50, 50, 50, 100, 200)."""
    from typing import Any

    from plait.stores.sqlite import SQLiteStore

    limits: list[int | None] = []

    class Counting(SQLiteStore):
        def lexical_search(self, *args: Any, **kwargs: Any) -> Any:
            limits.append(kwargs.get("limit"))
            return super().lexical_search(*args, **kwargs)

    store = Counting(tmp_path / "plait.db")
    with Plait(store, embedder="none") as engine:
        engine.index_documents([_doc("big", 120), _doc("one", 1)])
        limits.clear()
        result = engine.search(QUERY, k=5, max_per_source=1)
    assert sorted({_source(h) for h in result.hits}) == ["big", "one"]  # one chunk of each
    assert limits == sorted(set(limits)) and len(limits) >= 2  # every pass goes deeper
