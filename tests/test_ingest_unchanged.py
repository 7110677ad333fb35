"""Unchanged sources cost almost nothing on reindex: no analysis, no embedding, no write.

The analyser is observed through a counting wrapper around the real
``plait.analysis.analyse`` (``plait.stored_chunk``'s reference is replaced, the analysis
itself still runs); the embedder is the counting :class:`FakeEmbedder`. The store is
compared table by table, so "nothing written" means byte for byte.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from plait import ingest, stored_chunk
from plait.analysis import Analysed, analyse
from plait.embeddings.fake import FakeEmbedder
from plait.ingest import Indexer
from plait.service import Plait
from plait.stores.base import ChunkState
from plait.stores.sqlite import SQLiteStore

GUIDE = "# Guide\n\n## Alpha\n\nAlpha keys ERR-4012 rotate.\n\n## Beta\n\nBeta refunds settle.\n"
GUIDE_SWAPPED = "# Guide\n\n## Beta\n\nBeta refunds settle.\n\n## Alpha\n\nAlpha keys ERR-4012 rotate.\n"
FILES = {
    "guide.md": GUIDE,  # "# Guide" alone is a bare parent: 2 chunks (Alpha, Beta)
    "notes.md": "# Notes\n\nOrders are event sourced.\n",  # 1 chunk
    "faq.md": "# FAQ\n\nPayments declined twice.\n",  # 1 chunk
}
TOTAL = 4


class Counting:
    """The real analyser, counting the texts it is given."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str) -> Analysed:
        self.texts.append(text)
        return analyse(text)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Counting:
    counting = Counting()
    monkeypatch.setattr(stored_chunk, "analyse", counting)  # where the indexer analyses
    return counting


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _tables(db_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table that holds chunks, terms, postings and sources."""
    db = sqlite3.connect(db_path)
    try:
        return {
            "chunks": db.execute("SELECT * FROM chunks ORDER BY rowid").fetchall(),
            "postings": db.execute("SELECT * FROM postings ORDER BY term_id, chunk_rowid").fetchall(),
            "terms": db.execute("SELECT * FROM terms ORDER BY id").fetchall(),
            "sources": db.execute("SELECT * FROM sources ORDER BY source_id").fetchall(),
            "generation": db.execute("SELECT name, generation FROM collections").fetchall(),
        }
    finally:
        db.close()


def test_unchanged_reindex_analyses_embeds_and_writes_nothing(
    engine: Plait, fake: FakeEmbedder, folder: Path, spy: Counting, tmp_path: Path
) -> None:
    first = engine.index(folder)
    assert first.chunks_added == TOTAL and len(spy.texts) == TOTAL and fake.passages_embedded == TOTAL
    before = _tables(tmp_path / "plait.db")
    assert len(before["chunks"]) == TOTAL
    assert all(row[10] is not None for row in before["chunks"])  # every chunk has its vector
    # "guide docs\nGuide\nAlpha\n\nAlpha\nAlpha keys ERR-4012 rotate." (path words and
    # scope, heading path, visible text; issue 20): exact field guide x2, docs, alpha x3,
    # keys, err-4012, rotate -> 6 distinct terms, 6 exact postings
    guide_alpha = next(r[0] for r in before["chunks"] if "ERR-4012" in r[6])
    exact_postings = [p for p in before["postings"] if p[1] == guide_alpha and p[0] in
                      {t[0] for t in before["terms"] if t[2] == 0}]
    assert sorted(p[2] for p in exact_postings) == [1, 1, 1, 1, 2, 3]

    spy.texts.clear()
    calls = fake.calls
    for report in (engine.reindex(), engine.reindex()):
        assert (report.chunks_added, report.chunks_updated, report.chunks_unchanged) == (0, 0, TOTAL)
        assert report.sources_indexed == 3 and report.complete is True
        assert (report.embedding.calls, report.embedding.embedded) == (0, 0)
    assert spy.texts == []
    assert fake.calls == calls
    assert _tables(tmp_path / "plait.db") == before  # same rows, vectors, postings, generation


def test_one_changed_chunk_is_the_only_one_analysed_and_embedded(
    engine: Plait, fake: FakeEmbedder, folder: Path, spy: Counting, tmp_path: Path
) -> None:
    engine.index(folder)
    before = _tables(tmp_path / "plait.db")
    (folder / "guide.md").write_text(GUIDE.replace("settle", "settle fast"), encoding="utf-8")
    spy.texts.clear()
    embedded = fake.passages_embedded  # passages: 1 chunk of few changed re-measures the gate (queries)
    report = engine.reindex()
    assert (report.chunks_added, report.chunks_updated, report.chunks_unchanged) == (0, 1, 3)
    assert spy.texts == ["guide docs\nGuide\nBeta\n\nBeta\nBeta refunds settle fast."]
    assert fake.passages_embedded - embedded == 1
    after = _tables(tmp_path / "plait.db")
    untouched = {r[2] for r in before["chunks"]} - {r[2] for r in after["chunks"] if "fast" in r[6]}
    def keep(rows):
        return [r for r in rows if r[2] in untouched]
    # notes.md and faq.md were not written: same rowids, same vectors, same indexed_at
    assert [r for r in keep(after["chunks"]) if r[3] != "guide.md"] == [
        r for r in keep(before["chunks"]) if r[3] != "guide.md"
    ]
    assert [s for s in after["sources"] if s[1] != "guide.md"] == [
        s for s in before["sources"] if s[1] != "guide.md"
    ]


def test_reordered_sections_are_rewritten_without_analysis(
    engine: Plait, folder: Path, spy: Counting, tmp_path: Path
) -> None:
    """Same chunk ids and contents, new ordinals and offsets: not "unchanged" for the
    skip, yet nothing needs analysing (the postings stay as they were)."""
    engine.index(folder)
    ordered = engine.store.chunk_ids("default", "guide.md")
    before = _tables(tmp_path / "plait.db")
    (folder / "guide.md").write_text(GUIDE_SWAPPED, encoding="utf-8")
    spy.texts.clear()
    report = engine.reindex()
    assert (report.chunks_added, report.chunks_updated, report.chunks_unchanged) == (0, 0, TOTAL)
    assert spy.texts == []
    assert engine.store.chunk_ids("default", "guide.md") == ordered[::-1]
    chunks = engine.store.get_chunks("default", ordered)
    assert [chunks[c].metadata["charStart"] for c in ordered] == [len("# Guide\n\n## Beta\n\nBeta refunds settle.\n\n"), len("# Guide\n\n")]
    after = _tables(tmp_path / "plait.db")
    assert after["postings"] == before["postings"] and after["terms"] == before["terms"]


def test_a_full_reindex_still_embeds_and_writes_every_chunk(
    tmp_path: Path, fake: FakeEmbedder, folder: Path, spy: Counting
) -> None:
    with Plait(str(tmp_path / "plait.db"), embedder=fake) as engine:
        engine.index(folder)
        generation = _tables(tmp_path / "plait.db")["generation"]
        embedded = fake.texts_embedded
        report = engine.reindex(full=True)
        assert report.chunks_unchanged + report.chunks_added == TOTAL
        assert fake.texts_embedded - embedded == TOTAL
        assert _tables(tmp_path / "plait.db")["generation"] != generation  # sources were written


def test_deferred_fields_are_the_analysis_when_a_store_reads_them(spy: Counting) -> None:
    """A store that rewrites an unchanged row (Milvus does) reads the real fields."""
    store = SQLiteStore(":memory:")
    try:
        store.ensure_collection("c")
        docs = [ingest.build_chunks(_doc(), ingest.ChunkSettings())]
        chunk = docs[0][0]
        state = ChunkState(chunk.id, chunk.content_hash, True)
        item = stored_chunk.stored_chunk(chunk, state, None)
        assert spy.texts == []  # deferred: nothing analysed yet
        expected = analyse("Alpha\n\n# Alpha\n\nAlpha keys ERR-4012 rotate.")
        assert list(item.exact) == expected.exact == ["alpha", "alpha", "alpha", "keys", "err-4012", "rotate"]
        assert list(item.stems) == expected.stems == ["alpha", "alpha", "alpha", "key", "err-4012", "rotat"]
        assert len(item.exact) == 6 and item.exact[4] == "err-4012"
        assert len(spy.texts) == 1  # analysed once for both fields
        fresh = stored_chunk.stored_chunk(chunk, ChunkState(chunk.id, "another-hash", True), None)
        assert list(fresh.exact) == expected.exact and len(spy.texts) == 2  # eager
    finally:
        store.close()


def test_sources_repeated_in_one_run_keep_the_last_one(tmp_path: Path, spy: Counting) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "d1", "text": "first words"}\n', encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder="none") as engine:
        engine.index(corpus)
        corpus.write_text(
            '{"_id": "d1", "text": "first words"}\n{"_id": "d1", "text": "second words"}\n',
            encoding="utf-8",
        )
        engine.reindex()
        [only] = engine.store.get_chunks("default", engine.store.chunk_ids("default")).values()
        assert only.content == "second words"


def _doc() -> Any:
    from plait.sources.base import SourceDocument, SourcePart
    from plait.types import FileOrigin

    return SourceDocument(
        source_id="a.md",
        scope="docs",
        parts=(SourcePart(text="# Alpha\n\nAlpha keys ERR-4012 rotate.\n", origin=FileOrigin(source_path="a.md"), markdown=True),),
    )


def test_indexer_unchanged_documents_skip_the_store_write(tmp_path: Path, spy: Counting) -> None:
    """Documents from code (no root) are skipped too, and a changed root is not."""
    store = SQLiteStore(tmp_path / "s.db")
    try:
        indexer = Indexer(store, None)
        indexer.index("c", [_doc()])
        generation = _tables(tmp_path / "s.db")["generation"]
        spy.texts.clear()
        report = indexer.index("c", [_doc()])
        assert (report.chunks_unchanged, report.sources_indexed) == (1, 1)
        assert _tables(tmp_path / "s.db")["generation"] == generation and spy.texts == []
        indexer.index("c", [_doc()], root="some-root")  # the stored root changes: written
        assert [s.root for s in store.list_sources("c")] == ["some-root"]
        assert spy.texts == []
    finally:
        store.close()
