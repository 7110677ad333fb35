"""Ingest: stable ids, incremental vectors, honest degradation and backfill, model checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.chunking import ChunkSettings
from plait.embeddings.fake import FakeEmbedder
from plait.embeddings.remote import OllamaEmbedder
from plait.errors import ModelMismatchError
from plait.ingest import build_chunks
from plait.service import Plait
from plait.sources.base import SourceDocument, SourcePart
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.testing.wire import WireServer, closed_port
from plait.types import FileOrigin


def _doc(text: str, source_id: str = "guide.md") -> SourceDocument:
    return SourceDocument(
        source_id=source_id,
        scope="docs",
        parts=(SourcePart(text=text, origin=FileOrigin(source_path=source_id), markdown=True),),
    )


def test_chunk_ids_are_stable_and_heading_paths_kept() -> None:
    text = "# Decisão\n\nintro\n\n## 2. Chunking\n\nbody text here\n"
    a = build_chunks(_doc(text), ChunkSettings())
    b = build_chunks(_doc(text), ChunkSettings())
    assert [c.id for c in a] == [c.id for c in b]
    assert len({c.id for c in a}) == len(a)
    assert [c.origin.heading_path for c in a] == [["Decisão"], ["Decisão", "2. Chunking"]]
    assert a[1].content.startswith("## 2. Chunking")
    # a known value pins the id scheme across processes and versions
    assert a[0].id == build_chunks(_doc(text), ChunkSettings(target=500))[0].id


def test_heading_only_parent_sections_are_not_chunks() -> None:
    text = "# Guide\n\n## Reasons\n\n### Expired card\n\nThe card expired.\n\n## Empty\n"
    chunks = build_chunks(_doc(text), ChunkSettings())
    # "# Guide" and "## Reasons" only introduce subsections: their words live on in
    # the subsection's heading path; "## Empty" has no subsection, so it stays.
    assert [c.origin.heading_path for c in chunks] == [["Guide", "Reasons", "Expired card"], ["Guide", "Empty"]]


def test_incremental_reindex_embeds_only_changed_chunks(tmp_path: Path) -> None:
    fake = FakeEmbedder()
    with Plait(str(tmp_path / "p.db"), embedder=fake) as engine:
        first = engine.index_documents(documents(ARTICLE_DOCS))
        assert (first.chunks_added, first.embedding.embedded, first.complete) == (5, 5, True)
        again = engine.index_documents(documents(ARTICLE_DOCS))
        assert (again.chunks_added, again.chunks_unchanged, again.embedding.embedded) == (0, 5, 0)
        assert again.embedding.calls == 0
        edited = dict(ARTICLE_DOCS, **{"kb-103": "ERR-4021: stock is stale for SKU-88213-B after a sync."})
        third = engine.index_documents(documents(edited))
        assert (third.chunks_updated, third.chunks_unchanged, third.embedding.embedded) == (1, 4, 1)
        assert fake.passages_embedded == 6  # the gate's calibration at each changing run embeds queries too


def test_identical_content_reuses_vectors(tmp_path: Path) -> None:
    fake = FakeEmbedder()
    with Plait(str(tmp_path / "p.db"), embedder=fake) as engine:
        engine.index_documents(documents({"a": "same text"}))
        report = engine.index_documents(documents({"b": "same text"}))
        assert (report.embedding.embedded, report.embedding.reused) == (0, 1)
        assert fake.texts_embedded == 1


def test_embedder_down_indexes_lexically_then_backfills(tmp_path: Path) -> None:
    down = OllamaEmbedder(base_url=closed_port(), timeout=2.0, retries=1, backoff=0.01)
    store = str(tmp_path / "p.db")
    with Plait(store, embedder=down) as engine:
        report = engine.index_documents(documents(ARTICLE_DOCS))
        assert report.chunks_added == 5
        assert report.embedding.available is False
        assert report.embedding.embedded == 0 and report.embedding.skipped == 5
        assert report.embedding.reason and "127.0.0.1" in report.embedding.reason
        assert report.complete is False
        result = engine.search("ERR-4012")
        assert result.vector_available is False
        assert result.hits[0].metadata["docId"] == "kb-101"
    with WireServer(dimension=32) as server:
        up = OllamaEmbedder(base_url=server.url, timeout=5.0)
        with Plait(store, embedder=up) as engine:
            report = engine.reindex()
            assert report.embedding.embedded == 5 and report.embedding.skipped == 0
            assert report.complete is True
            info = engine.collections()[0]
            assert (info.embedder_provider, info.embedder_model, info.dimension) == ("ollama", "nomic-embed-text", 32)
            assert engine.search("ERR-4012").vector_available is True


def test_model_mismatch_is_refused(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    with Plait(store, embedder=FakeEmbedder(model="model-a")) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
    with Plait(store, embedder=FakeEmbedder(model="model-b")) as engine:
        with pytest.raises(ModelMismatchError, match="model-a.*model-b"):
            engine.index_documents(documents(ARTICLE_DOCS))
        with pytest.raises(ModelMismatchError, match="model-a.*model-b"):
            engine.search("ERR-4012")


def test_recorded_embedder_is_used_by_default(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    with Plait(store, embedder="fake") as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
    with Plait(store) as engine:
        _, name = engine.embedder_for("default")
        assert name == "fake"
        assert engine.search("ERR-4012").vector_available is True


def test_wrong_dimension_from_provider_is_reported(tmp_path: Path) -> None:
    store = str(tmp_path / "p.db")
    with WireServer(dimension=32) as server, Plait(store, embedder=OllamaEmbedder(base_url=server.url)) as engine:
        engine.index_documents(documents({"a": "alpha"}))
    with WireServer(dimension=48) as server, Plait(store, embedder=OllamaEmbedder(base_url=server.url)) as engine:
        report = engine.index_documents(documents({"b": "beta"}))
        assert report.embedding.available is False
        assert "48-d" in (report.embedding.reason or "") and "32-d" in (report.embedding.reason or "")
        assert report.chunks_added == 1 and report.complete is False
