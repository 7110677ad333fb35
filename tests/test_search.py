"""Hybrid search end to end on a real SQLite store with the deterministic fake embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.errors import NotFoundError, ValidationError
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, doc_of, documents
from plait.types import Match, to_json


def test_article_identifier_queries(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    first = engine.search("what does ERR-4012 mean")
    assert doc_of(first.hits[0]) == "kb-101"
    assert first.hits[0].ranks.lexical == 1
    assert first.hits[0].match in (Match.BOTH, Match.LEXICAL)
    sku = engine.search("stock wrong for SKU-88213-B")
    assert doc_of(sku.hits[0]) == "kb-103"
    assert sku.vector_available is True


def test_citation_contract_shape(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.search("the bank rejected my purchase", k=5)
    data = to_json(result)
    assert set(data) >= {"query", "hits", "vectorAvailable", "fusion", "timingsMs", "k"}
    hit = data["hits"][0]
    assert set(hit) >= {"chunkId", "content", "score", "vectorScore", "lexicalScore", "match", "scope", "ranks", "origin"}
    assert set(hit["ranks"]) == {"dense", "lexical", "fused", "rerank"}
    assert hit["origin"]["kind"] == "file" and "sourcePath" in hit["origin"] and "headingPath" in hit["origin"]
    by_doc = {h["metadata"]["docId"]: h for h in data["hits"]}
    # kb-102 shares no word with the query: semantic only, lexical score null (never 0)
    assert by_doc["kb-102"]["match"] == "semantic"
    assert by_doc["kb-102"]["lexicalScore"] is None and by_doc["kb-102"]["ranks"]["lexical"] is None
    # kb-101 "rejects" meets "rejected" in the stemmed field: found by both arms
    assert by_doc["kb-101"]["match"] == "both" and by_doc["kb-101"]["ranks"]["lexical"] == 1
    assert {"analyse", "lexical", "dense", "fuse", "total"} <= set(data["timingsMs"])


def test_fusion_rescues_identifier_beyond_the_dense_cut(tmp_path: Path) -> None:
    """The dense arm puts the identifier document at rank 21, beyond k = 5; its lexical
    rank 1 fuses to 1/61 + 1/81 = 0.0287, ahead of the dense-only neighbours (≤ 1/61)."""
    query = "ERR-7001 rollback"
    rng = np.random.default_rng(7)
    q = np.zeros(16, np.float32)
    q[0] = 1.0
    overrides = {query: q}
    docs = {}
    for i in range(20):
        text = f"Neighbour article {i} about deployments and release trains."
        v = q + 0.05 * (i + 1) * rng.standard_normal(16).astype(np.float32)
        overrides[text] = v
        docs[f"n{i:02d}"] = text
    target = "ERR-7001: the payment ledger refuses writes during a schema migration."
    far = np.zeros(16, np.float32)
    far[1] = 1.0
    far[0] = 0.05
    overrides[target] = far
    docs["target"] = target
    embedder = FakeEmbedder(dimension=16, overrides=overrides)
    with Plait(str(tmp_path / "p.db"), embedder=embedder) as engine:
        engine.index_documents(documents(docs))
        dense_only = engine.search(query, k=5, lexical_weight=0.0, fusion="rrf")
        assert "target" not in [doc_of(h) for h in dense_only.hits]
        result = engine.search(query, k=5, fusion="rrf")
        hit = next(h for h in result.hits if doc_of(h) == "target")
        assert hit.ranks.lexical == 1
        assert hit.ranks.dense == 21
        assert hit.ranks.fused == 1
        assert hit.score == pytest.approx(1 / 61 + 1 / 81)
        assert hit.match is Match.BOTH


def test_weighted_fusion_threshold_and_settings_echo(engine: Plait) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.search("ERR-4012 checkout", fusion="weighted", k=5)
    assert result.fusion.method.value == "weighted"
    assert (result.fusion.vector_weight, result.fusion.lexical_score_weight, result.fusion.threshold) == (0.6, 0.4, 0.2)
    assert all(h.score >= 0.2 for h in result.hits)
    assert doc_of(result.hits[0]) == "kb-101"


def test_scope_and_metadata_filters(engine: Plait) -> None:
    engine.index_documents(documents({"a": "tenant routing guide"}, scope="adr"))
    engine.index_documents(documents({"b": "tenant routing runbook"}, scope="docs"))
    assert [doc_of(h) for h in engine.search("tenant routing", scopes=["adr"]).hits] == ["a"]
    assert [doc_of(h) for h in engine.search("tenant routing", metadata={"docId": "b"}).hits] == ["b"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "query is empty"),
        ({"query": "   "}, "query is empty"),
        ({"query": "x" * 5000}, "the limit is 4096"),
        ({"query": "ok", "k": 0}, "k"),
        ({"query": "ok", "k": 10_000}, "k"),
        ({"query": "ok", "fusion": "magic"}, "fusion"),
        ({"query": "ok", "lexical_weight": 1.5}, "lexicalWeight"),
    ],
)
def test_bad_requests_are_validation_errors(engine: Plait, kwargs: dict, message: str) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    with pytest.raises(ValidationError, match=message):
        engine.search(**kwargs)


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "a* OR (b AND", "NEAR(x y)", "-x:y", "'; DROP TABLE chunks; --", "\x00\u200b\u202e"],
)
def test_query_syntax_and_injection_are_plain_text(engine: Plait, query: str) -> None:
    engine.index_documents(documents(ARTICLE_DOCS))
    result = engine.search(query)
    assert isinstance(result.hits, list)
    assert engine.collections()[0].chunks == 5


def test_unknown_collection(engine: Plait) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        engine.search("x", collection="nope")


def test_embedder_none_is_lexical_only(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        report = engine.index_documents(documents(ARTICLE_DOCS))
        assert report.embedding.available is False
        result = engine.search("ERR-4012")
        assert result.vector_available is False
        assert "none" in (result.vector_unavailable_reason or "")
        assert doc_of(result.hits[0]) == "kb-101"
        assert result.hits[0].match is Match.LEXICAL
        assert result.hits[0].vector_score is None
