"""The collection's arm estimate (issue 21): made when indexing, saved, used as the
adaptive base, recomputed when the index changes, explained in every response."""

from __future__ import annotations

from pathlib import Path

from plait.arm_estimate import ESTIMATE_KEY, MIN_CHUNKS, base_from_ratio
from plait.embeddings import FakeEmbedder
from plait.service import Plait
from plait.testing.corpus import ARTICLE_DOCS, documents

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]


def _docs(n: int, offset: int = 0) -> dict[str, str]:
    out = {}
    for i in range(offset, offset + n):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] + str((i + j) % 11) for j in range(12)]
        out[f"d{i:04d}"] = f"Document {i} is about {' '.join(words)}. It has a second sentence of ten words {i}."
    return out


def test_small_collections_get_no_estimate_and_keep_the_default_base(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        engine.index_documents(documents(ARTICLE_DOCS))
        assert engine.store.get_collection("default").chunks < MIN_CHUNKS  # type: ignore[union-attr]
        assert engine.store.get_settings("default").get(ESTIMATE_KEY) is None
        decided = engine.search("bank rejected my purchase", k=3).fusion_decided
        assert decided is not None
        assert (decided.parameters["denseWeight"], decided.parameters["denseWeightFrom"]) == (0.4, "settings")
        assert "collection estimate" not in (decided.reason or "")


def test_index_saves_an_estimate_that_search_uses_and_explains(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        engine.index_documents(documents(_docs(MIN_CHUNKS)))
        saved = engine.store.get_settings("default")[ESTIMATE_KEY]
        assert saved["chunks"] == MIN_CHUNKS and saved["samples"] > 0
        assert saved["base"] == base_from_ratio(saved["lexicalMrr"], saved["denseMrr"])
        decided = engine.search("alpha3 bravo4 charlie5", k=3).fusion_decided
        assert decided is not None
        assert (decided.parameters["denseWeight"], decided.parameters["denseWeightFrom"]) == (
            saved["base"], "collection estimate")
        assert (decided.reason or "").startswith("collection estimate: ")
        assert f"base {saved['base']:g}" in (decided.reason or "")
        why = engine.explain("alpha3 bravo4 charlie5", path="d0000.md")
        assert (why.fusion.settings.fusion_reason or "").startswith("collection estimate: ")
        assert why.fusion.settings.estimated_base == saved["base"]
        # an explicit denseWeight in the request wins, and the reason says nothing of the estimate
        own = engine.search(
            "alpha3 bravo4 charlie5", k=3, fusion={"method": "adaptive", "denseWeight": 0.2}
        ).fusion_decided
        assert own is not None and own.parameters["denseWeightFrom"] == "settings"
        assert "collection estimate" not in (own.reason or "") and "base 0.2" in (own.reason or "")
        # an unchanged reindex keeps the estimate; new documents re-measure it once more
        # than a tenth of its chunks changed (plait.staleness): 20 of 200 is not more
        engine.index_documents(documents(_docs(MIN_CHUNKS)))
        assert engine.store.get_settings("default")[ESTIMATE_KEY] == saved
        engine.index_documents(documents(_docs(MIN_CHUNKS + 20)))
        assert engine.store.get_settings("default")[ESTIMATE_KEY] == saved
        engine.index_documents(documents(_docs(MIN_CHUNKS + 21)))
        again = engine.store.get_settings("default")[ESTIMATE_KEY]
        assert (again["chunks"], again["changesAt"]) == (MIN_CHUNKS + 21, MIN_CHUNKS + 21)


def test_no_estimate_while_vectors_are_missing(tmp_path: Path) -> None:
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder()) as engine:
        engine.index_documents(documents(_docs(MIN_CHUNKS)), backfill=False)
        assert engine.store.get_settings("default").get(ESTIMATE_KEY) is None
        engine.backfill()
        assert engine.store.get_settings("default")[ESTIMATE_KEY]["chunks"] == MIN_CHUNKS
