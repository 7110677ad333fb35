"""The collection's arm estimate (issue 21): made when indexing, saved, used as the
adaptive base, recomputed when the index changes, explained in every response."""

from __future__ import annotations

from pathlib import Path

from plait.arm_estimate import ESTIMATE_KEY, MIN_CHUNKS, base_from_ratio, estimate_record
from plait.calibration import source_mrr
from plait.collection_settings import write_settings
from plait.embeddings import FakeEmbedder
from plait.service import Plait
from plait.testing.contract import SourceEmbedder
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
        assert saved["base"] == base_from_ratio(saved["lexicalSourceMrr"], saved["denseSourceMrr"])
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


def _two_part_docs(n: int) -> dict[str, str]:
    def part(i: int, words: range) -> str:
        return " ".join(f"s{i}w{j}" for j in words)

    return {f"d{i:03d}": f"# Doc {i}\n\n## One\n\n{part(i, range(150))}.\n\n## Two\n\n{part(i, range(150, 300))}.\n"
            for i in range(n)}


def test_the_estimate_judges_the_pseudo_querys_source_not_its_chunk(tmp_path: Path) -> None:
    # Each document is two or three chunks of words no other document has (s<i>w<j>). BM25 finds a
    # pseudo-query's own chunk first every time; the dense arm returns the document's
    # chunks tied, so by chunk it scored ~0.63 and the collection got the floor base
    # 0.45, though the dense arm never missed the document.
    with Plait(str(tmp_path / "p.db"), embedder=SourceEmbedder(dimension=128)) as engine:
        engine.index_documents(documents(_two_part_docs(100)))
        saved = engine.store.get_settings("default")[ESTIMATE_KEY]
        assert saved["chunks"] >= MIN_CHUNKS and saved["samples"] == 200
        assert (saved["lexicalMrr"], saved["lexicalSourceMrr"], saved["denseSourceMrr"]) == (1.0, 1.0, 1.0)
        assert saved["denseMrr"] < 0.8
        assert (saved["ratio"], saved["base"]) == (1.0, 0.9)
        assert "found their source with MRR@10 lexical 1.000, dense 1.000" in saved["reason"]


def test_source_mrr_ranks_distinct_sources_in_order_of_their_first_chunk() -> None:
    ranked = [("a1", 0.9), ("a2", 0.8), ("b1", 0.7), ("c1", 0.6), ("b2", 0.5)]
    source_of = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c"}
    assert [source_mrr(ranked, source_of, s) for s in ("a", "b", "c", "d")] == [1.0, 0.5, 1 / 3, 0.0]
    # only the first ten distinct sources count
    many = [(f"x{i}", 1.0 - i / 100) for i in range(12)]
    assert source_mrr(many, {f"x{i}": f"s{i}" for i in range(12)}, "s9") == 0.1
    assert source_mrr(many, {f"x{i}": f"s{i}" for i in range(12)}, "s10") == 0.0


def test_an_estimate_saved_before_source_mrrs_is_read_by_its_chunk_mrrs() -> None:
    old = estimate_record({"samples": 200, "lexicalMrr": 0.9, "denseMrr": 0.81}, 300)
    assert (old["ratio"], old["base"]) == (0.9, 0.9) and "found their chunk" in old["reason"]
    new = estimate_record({"samples": 200, "lexicalMrr": 0.9, "denseMrr": 0.54,
                           "lexicalSourceMrr": 0.95, "denseSourceMrr": 0.76}, 300)
    assert (new["ratio"], new["base"]) == (0.8, 0.65) and "found their source" in new["reason"]


def test_an_estimate_judged_by_chunk_is_measured_again_by_the_next_index_run(tmp_path: Path) -> None:
    # An estimate saved by an older version (no source MRRs) would otherwise stay until a
    # tenth of the collection changed: the next index run, even an unchanged one, replaces it.
    with Plait(str(tmp_path / "p.db"), embedder=SourceEmbedder(dimension=128)) as engine:
        docs = documents(_two_part_docs(100))
        engine.index_documents(docs)
        current = engine.store.get_settings("default")[ESTIMATE_KEY]
        old = {k: v for k, v in current.items() if k not in ("lexicalSourceMrr", "denseSourceMrr")}
        old.update(estimate_record(old, old["chunks"]))
        write_settings(engine.store, "default", arm_estimate=old)
        assert engine.store.get_settings("default")[ESTIMATE_KEY]["base"] == 0.45  # chunk ratio ~0.63
        report = engine.index_documents(docs)
        assert report.search_changes == 0
        again = engine.store.get_settings("default")[ESTIMATE_KEY]
        assert again == current and again["base"] == 0.9
        # and a current one stays put through an unchanged run
        engine.index_documents(docs)
        assert engine.store.get_settings("default")[ESTIMATE_KEY] == current
