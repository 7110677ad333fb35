"""Review 8 #4: two spellings of one Milvus server that the guard cannot link ("unknown":
127.0.0.1 and 127.0.0.2 on a server listening on all addresses; "different": a plain TCP port
forward) sharing one records file. A copy under another name (what the refusal recommends)
kept the source's card ids, so every card insert collided with the source's and was dropped:
the copy had no FAQ cards. The copy now sees its source's rows in the target's records and
gives its runs and cards new ids, as within one store. Real milvus-lite gRPC server."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.copying import copy_collection
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.store_identity import store_sameness

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[int]:
    pytest.importorskip("milvus_lite")
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    grpc_server, db, port = start_server_in_thread(data_dir=str(tmp_path / "data"), host="0.0.0.0", port=0)
    try:
        yield int(port)
    finally:
        grpc_server.stop(grace=0)
        db.close()


@pytest.fixture(autouse=True)
def _no_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


def _copy_keeps_cards(first: Any, second: Any, tmp_path: Path, sameness: str) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(FAQ, folder / "faq.md")
    with Plait(first, embedder=FakeEmbedder(dimension=64)) as engine:
        engine.index(folder, collection="kb")
        engine.refinery.run("kb", mode="extractive")
        cards = engine.refinery.cards("kb")
        assert len(cards) > 0
        assert store_sameness(first, second) == sameness
        report = copy_collection(first, second, "kb", target_name="kb2")
        copied = engine.refinery.cards("kb2")
        assert len(copied) == len(cards)
        assert report.cards == len(cards) and report.runs == 1
        assert not {c.id for c in copied} & {c.id for c in cards}  # the copy's own ids
        # (the lexical arm's scores on one Milvus server are not compared here: BM25 there
        # counts every row of the shared physical collection, the source's rewritten card rows
        # too, so its pseudo-queries may differ between kb and kb2 — older than this test)
        assert report.verification is not None and report.verification.checksum_mismatches == []
        assert report.verification.source_records == report.verification.target_records == [1, len(cards)]
        assert len(engine.refinery.cards("kb")) == len(cards)  # the source's untouched


def test_unknown_spellings_with_one_records_file(server: int, tmp_path: Path) -> None:
    from plait.stores.milvus import MilvusStore

    records = tmp_path / "u.records.sqlite"
    first = MilvusStore(f"http://127.0.0.1:{server}", prefix="u", records=records)
    second = MilvusStore(f"http://127.0.0.2:{server}", prefix="u", records=records)
    try:
        _copy_keeps_cards(first, second, tmp_path, "unknown")
    finally:
        first.close()
        second.close()


def test_two_separate_stores_keep_the_source_ids(server: int, tmp_path: Path) -> None:
    """Between two stores with their own records the cards keep their ids (nothing shared)."""
    from plait.stores.milvus import MilvusStore
    from plait.stores.sqlite import SQLiteStore

    first = MilvusStore(f"http://127.0.0.1:{server}", prefix="s", records=tmp_path / "s.records.sqlite")
    second = SQLiteStore(tmp_path / "t.db")
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(FAQ, folder / "faq.md")
    try:
        with Plait(first, embedder=FakeEmbedder(dimension=64)) as engine:
            engine.index(folder, collection="kb")
            engine.refinery.run("kb", mode="extractive")
            ids = {c.id for c in engine.refinery.cards("kb")}
            report = copy_collection(first, second, "kb", target_name="kb2")
            assert report.verification is not None and report.verification.checksum_mismatches == []
            assert report.verification.source_records == report.verification.target_records
        with Plait(second, embedder=FakeEmbedder(dimension=64)) as target:
            assert {c.id for c in target.refinery.cards("kb2")} == ids
    finally:
        first.close()
        second.close()

