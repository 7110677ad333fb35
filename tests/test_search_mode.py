"""Per-call ``mode``: ``lexical`` never calls the embedder, ``vector`` never runs BM25, and
the badges, ranks and scores say which arm ran."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.errors import ValidationError
from plait.service import Plait
from plait.stores.base import Filters
from plait.stores.sqlite import SQLiteStore
from plait.testing.corpus import ARTICLE_DOCS, doc_of, documents
from plait.types import Match, SearchMode


class RaisingEmbedder(FakeEmbedder):
    """The fake embedder's identity (same model) but every embedding call fails loudly."""

    def embed_query(self, text: str) -> np.ndarray:
        raise RuntimeError(f"the embedder was called for {text!r}")

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("the embedder was called for documents")


class NoLexicalStore(SQLiteStore):
    """A real SQLite store whose lexical index refuses every query (and counts them)."""

    lexical_calls = 0

    def lexical_search(self, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        type(self).lexical_calls += 1
        raise RuntimeError("BM25 ran")


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "plait.db")
    with Plait(path, embedder=FakeEmbedder(dimension=64)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
    return path


@pytest.fixture
def lexical_only(db: str) -> Iterator[Plait]:
    with Plait(db, embedder=RaisingEmbedder(dimension=64)) as engine:
        yield engine


def test_lexical_mode_never_calls_the_embedder(lexical_only: Plait) -> None:
    result = lexical_only.search("checkout session token", k=5, mode="lexical")
    assert result.mode == SearchMode.LEXICAL
    assert result.vector_available is False
    assert result.vector_unavailable_reason == "mode 'lexical': the dense arm does not run"
    expected = lexical_only.store.lexical_search(
        "default", ["checkout", "session", "token"], ["checkout", "session", "token"], limit=50, filters=Filters()
    )
    assert [h.chunk_id for h in result.hits] == [cid for cid, _ in expected][:5]
    assert {h.match for h in result.hits} == {Match.LEXICAL}
    for position, hit in enumerate(result.hits, start=1):
        assert hit.ranks.dense is None and hit.vector_score is None
        assert hit.ranks.lexical == position == hit.ranks.fused
    # adaptive fusion with the whole weight on the lexical arm: min-max normalised BM25
    assert result.fusion.dense_weight_used == 0.0
    assert result.fusion.fusion_reason == "mode 'lexical': the lexical arm only"
    assert result.hits[0].score == pytest.approx(1.0)
    assert result.hits[0].score_normalised == pytest.approx(1.0)
    # the same engine in hybrid mode does call it
    with pytest.raises(RuntimeError, match="the embedder was called"):
        lexical_only.search("checkout session token", k=5)


def test_lexical_mode_reaches_explain_and_ask(lexical_only: Plait) -> None:
    explained = lexical_only.explain("ERR-4012", doc="kb-101", mode="lexical")
    assert explained.mode == SearchMode.LEXICAL
    assert explained.dense.ran is False and explained.dense.reason == "mode 'lexical': the dense arm does not run"
    assert explained.lexical.ran is True and explained.lexical.rank == 1
    assert explained.fusion.returned is True
    answer = lexical_only.ask("What does ERR-4012 mean?", k=3, mode="lexical")
    assert answer.search_mode == SearchMode.LEXICAL and answer.vector_available is False
    assert answer.mode == "extractive"
    assert [c.chunk_id for c in answer.citations] == [answer.sources[0].chunk_id]
    assert doc_of(answer.sources[0]) == "kb-101"


@pytest.fixture
def no_bm25(db: str) -> Iterator[tuple[Plait, FakeEmbedder]]:
    NoLexicalStore.lexical_calls = 0
    fake = FakeEmbedder(dimension=64)
    with Plait(NoLexicalStore(db), embedder=fake) as engine:
        yield engine, fake


@pytest.mark.parametrize("fusion", ["adaptive", "rrf", "minmax", "dbsf"])
def test_vector_mode_never_runs_bm25(no_bm25: tuple[Plait, FakeEmbedder], fusion: str) -> None:
    engine, fake = no_bm25
    query = "why was my card payment declined"
    result = engine.search(query, k=4, mode="vector", fusion=fusion)
    assert NoLexicalStore.lexical_calls == 0
    assert result.mode == SearchMode.VECTOR and result.vector_available is True
    dense = engine.store.vector_search("default", fake.embed_query(query), limit=50, filters=Filters())
    assert [h.chunk_id for h in result.hits] == [cid for cid, _ in dense][:4]
    assert {h.match for h in result.hits} == {Match.SEMANTIC}
    for position, (hit, (_, cosine)) in enumerate(zip(result.hits, dense, strict=False), start=1):
        assert hit.ranks.lexical is None and hit.lexical_score is None
        assert hit.ranks.dense == position == hit.ranks.fused
        assert hit.vector_score == pytest.approx(cosine)
    if fusion != "dbsf":  # dbsf normalises by mean ± 3σ: the top is not 1
        assert result.hits[0].score_normalised == pytest.approx(1.0)
    if fusion != "rrf":
        assert result.fusion.dense_weight_used == 1.0
    with pytest.raises(RuntimeError, match="BM25 ran"):
        engine.search(query, k=4)


def test_vector_mode_explain_says_no_lexical_arm(no_bm25: tuple[Plait, FakeEmbedder]) -> None:
    engine, _ = no_bm25
    explained = engine.explain("ERR-4012 checkout", doc="kb-101", mode="vector", k=5)
    assert NoLexicalStore.lexical_calls == 0
    assert explained.mode == SearchMode.VECTOR
    assert explained.lexical.ran is False
    assert explained.lexical.reason == "mode 'vector': the lexical arm does not run"
    assert explained.lexical.rank is None and explained.dense.ran is True
    assert explained.fusion.returned is True
    assert "no lexical arm (mode 'vector')" in explained.diagnosis.message


def test_vector_mode_without_a_vector_returns_nothing_and_says_why(db: str) -> None:
    NoLexicalStore.lexical_calls = 0
    with Plait(NoLexicalStore(db), embedder="none") as engine:
        result = engine.search("ERR-4012", mode="vector")
    assert NoLexicalStore.lexical_calls == 0
    assert result.hits == [] and result.vector_available is False
    assert result.notes == [
        (
            "mode 'vector' runs the dense arm only and it could not run (embedder 'none' selected "
            "(lexical only)): no hits; mode 'hybrid' or 'lexical' searches the lexical index"
        )
    ]


def test_vector_mode_ask_gates_on_terms_without_the_lexical_rank(no_bm25: tuple[Plait, FakeEmbedder]) -> None:
    engine, _ = no_bm25
    answer = engine.ask("What does ERR-4012 mean?", k=3, mode="vector")
    assert NoLexicalStore.lexical_calls == 0
    assert answer.search_mode == SearchMode.VECTOR
    assert answer.mode == "extractive" and doc_of(answer.sources[0]) == "kb-101"


def test_hybrid_is_the_default_and_unknown_modes_are_refused(db: str) -> None:
    with Plait(db, embedder=FakeEmbedder(dimension=64)) as engine:
        plain = engine.search("ERR-4012", k=3)
        hybrid = engine.search("ERR-4012", k=3, mode="hybrid")
        assert plain.mode == SearchMode.HYBRID
        assert [h.chunk_id for h in plain.hits] == [h.chunk_id for h in hybrid.hits]
        assert plain.hits[0].match == Match.BOTH
        with pytest.raises(ValidationError, match="mode"):
            engine.search("ERR-4012", mode="dense")
