"""Calibrations proportionate to change (plait.staleness): ask's gate and the arm estimate
are measured again when more than a tenth of their chunks changed, at a full reindex and
by ``plait calibrate`` — not after every one-file edit — and deciding so reads no chunk
id (the gate's fingerprint sorted every chunk id on every ask)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from plait.arm_estimate import ESTIMATE_KEY
from plait.ask_gate import GATE_KEY, GateCalibration
from plait.ask_gate_state import ensure_gate
from plait.embeddings.base import TextKind
from plait.embeddings.fake import FakeEmbedder
from plait.refinery.cards import sync_cards
from plait.refinery.models import CardMode, CardStatus, FaqCard
from plait.service import Plait
from plait.stores.sqlite import SQLiteStore

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]
FILES = 300


class CountingEmbedder(FakeEmbedder):
    """The fake embedder, counting the query texts it embeds (calibrations embed queries),
    with no query cache (a calibration measured again embeds its texts again)."""

    def __init__(self) -> None:
        super().__init__(dimension=32)
        self.query_cache_size = 0
        self.queries = 0

    def _embed_batch(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        if kind == "query":
            self.queries += len(texts)
        return super()._embed_batch(texts, kind)


class CountingStore(SQLiteStore):
    """The SQLite store, counting reads of a collection's chunk ids."""

    id_reads = 0

    def chunk_ids(self, collection: str, source_id: str | None = None) -> list[str]:
        self.id_reads += 1
        return super().chunk_ids(collection, source_id)


def _text(i: int, edit: int = 0) -> str:
    words = " ".join(WORDS[(i * 7 + j * 3 + edit) % len(WORDS)] + str((i + j) % 13) for j in range(12))
    return f"# Note {i}\n\nNote {i} is about {words}. It has a second sentence of ten words {i} {edit}.\n"


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(FILES):
        (folder / f"n{i:03d}.md").write_text(_text(i), encoding="utf-8")
    return folder


@pytest.fixture
def engine(tmp_path: Path, notes: Path) -> Iterator[tuple[Plait, CountingEmbedder]]:
    embedder = CountingEmbedder()
    with Plait(str(tmp_path / "p.db"), embedder=embedder, llm="none") as e:
        e.index(notes, collection="kb")
        yield e, embedder


def _gate(engine: Plait) -> GateCalibration:
    return GateCalibration.model_validate(engine.store.get_settings("kb")[GATE_KEY])


def _estimate(engine: Plait) -> dict[str, object]:
    record = engine.store.get_settings("kb")[ESTIMATE_KEY]
    assert isinstance(record, dict)
    return record


def _edit(notes: Path, files: range, edit: int) -> None:
    for i in files:
        (notes / f"n{i:03d}.md").write_text(_text(i, edit), encoding="utf-8")


def test_a_small_edit_keeps_both_calibrations_and_the_gate_says_how_stale(
    engine: tuple[Plait, CountingEmbedder], notes: Path
) -> None:
    e, embedder = engine
    info = e.store.get_collection("kb")
    assert info is not None and info.chunks == FILES  # one chunk per note
    gate, estimate = _gate(e), _estimate(e)
    assert (gate.chunks, gate.changes_at, gate.calibrated_by) == (FILES, FILES, "index")
    assert (estimate["chunks"], estimate["changesAt"]) == (FILES, FILES)

    _edit(notes, range(1), 1)  # one file of 300
    embedder.queries = 0
    report = e.reindex(collection="kb")
    assert (report.chunks_updated, report.complete) == (1, True)
    assert embedder.queries == 0  # neither the gate (64 texts) nor the estimate (200) measured again
    assert (_gate(e), _estimate(e)) == (gate, estimate)
    assert e.store.get_settings("kb")["chunkChanges"] == FILES + 1
    answer = e.ask("What is note 7 about?", collection="kb")
    assert answer.gate is not None and answer.gate.calibrated_at == gate.calibrated_at
    assert answer.gate.changed_since == round(1 / FILES, 4) == 0.0033
    assert e.store.get_settings("kb")[GATE_KEY] == gate.model_dump(mode="json", by_alias=True)  # not by the ask either

    _edit(notes, range(1, 30), 1)  # 30 of 300 changed since: a tenth, not more
    e.reindex(collection="kb")
    assert (_gate(e), _estimate(e)) == (gate, estimate)
    _edit(notes, range(30, 31), 1)  # 31 of 300: stale, both measured again by the run
    embedder.queries = 0
    e.reindex(collection="kb")
    again, measured = _gate(e), _estimate(e)
    assert (again.changes_at, measured["changesAt"]) == (FILES + 31, FILES + 31)
    assert again.calibrated_by == "index" and again.fingerprint == f"{FILES}-0-c{FILES + 31}"
    assert embedder.queries == again.samples + len(again.outside_cosine) + measured["samples"] > 0


def test_a_full_reindex_and_plait_calibrate_measure_again_whatever_changed(
    engine: tuple[Plait, CountingEmbedder],
) -> None:
    e, embedder = engine
    gate = _gate(e)
    embedder.queries = 0
    report = e.reindex(collection="kb", full=True)
    assert (report.chunks_added, report.chunks_updated, report.chunks_deleted) == (0, 0, 0)
    full, estimate = _gate(e), _estimate(e)
    assert full.changes_at == gate.changes_at == FILES and full.calibrated_by == "index"
    assert embedder.queries == full.samples + len(full.outside_cosine) + estimate["samples"] > 0

    embedder.queries = 0
    result = e.calibrate(collection="kb")
    by_calibrate, reused = _gate(e), _estimate(e)
    assert by_calibrate.calibrated_by == "calibrate"
    # the estimate reuses the calibration's 200 pseudo-queries: they are not embedded twice
    assert reused["samples"] == result.samples == 200
    assert (reused["lexicalMrr"], reused["denseMrr"]) == (result.lexical_mrr, result.dense_mrr)
    assert embedder.queries == result.samples + by_calibrate.samples + len(by_calibrate.outside_cosine)
    answer = e.ask("What is note 7 about?", collection="kb")
    assert answer.gate is not None and answer.gate.calibrated_by == "calibrate" and answer.gate.changed_since == 0.0


def test_deciding_on_the_gate_reads_no_chunk_id(tmp_path: Path, notes: Path) -> None:
    store = CountingStore(tmp_path / "p.db")
    embedder = CountingEmbedder()
    with Plait(store, embedder=embedder, llm="none") as e:
        e.index(notes, collection="kb")
        before = _gate(e)
        store.id_reads = 0
        assert ensure_gate(store, "kb", embedder) == before
        assert store.id_reads == 0  # the fingerprint sorted all 300 ids on every ask
        # a change the store holds but no index run counted (a card rejected, say) is
        # within the counter's blind spot only while it is small: 200 chunks deleted
        # directly are seen as the count they took away
        for i in range(200):
            store.delete_source("kb", f"n{i:03d}.md")
        again = ensure_gate(store, "kb", embedder)
        assert again is not None and again.chunks == 100 and again.calibrated_by == "ask"


def test_chunks_deleted_outside_an_index_run_count_in_what_the_gate_shows(
    engine: tuple[Plait, CountingEmbedder],
) -> None:
    # the staleness decision counts chunks removed without an index run (a rejected FAQ
    # card: the counter does not see them); the share ask and explain show must be that
    # same share, not the counter's alone (it said 0.0 here)
    e, _ = engine
    gate = _gate(e)
    sources = sorted(s.source_id for s in e.store.list_sources("kb"))
    for source_id in sources[:15]:  # 15 of 300: 0.05, not stale
        e.store.delete_source("kb", source_id)
    answer = e.ask("What is note 7 about?", collection="kb")
    assert _gate(e) == gate  # kept: not more than a tenth changed
    assert answer.gate is not None and answer.gate.changed_since == round(15 / FILES, 4) == 0.05
    shown = e.explain("What is note 7 about?", path="n007.md", collection="kb")
    assert shown.ask_gate is not None and shown.ask_gate.gate.changed_since == 0.05


def _card(i: int) -> FaqCard:
    return FaqCard(
        id=f"card{i:03d}", collection="kb", question=f"What does note {i} say about {WORDS[i % len(WORDS)]}?",
        answer=f"Note {i} says so.", status=CardStatus.APPROVED, mode=CardMode.EXTRACTIVE,
        created_at="2026-12-01T00:00:00Z", updated_at="2026-12-01T00:00:00Z",
    )


def test_faq_cards_indexed_do_not_make_the_calibrations_stale(engine: tuple[Plait, CountingEmbedder]) -> None:
    # 60 cards (a fifth of 300 chunks) are indexed, hidden from search (searchHidden);
    # the calibrations sample only what a search can return, so the cards changed none
    # of it: nothing is measured again, the counter and the share shown stay as they were
    e, embedder = engine
    gate, estimate = _gate(e), _estimate(e)
    embedder.queries = 0
    sync_cards(e, "kb", [_card(i) for i in range(60)])
    info = e.store.get_collection("kb")
    assert info is not None and info.chunks == FILES + 60
    assert embedder.queries == 0  # neither calibration measured again
    assert (_gate(e), _estimate(e)) == (gate, estimate)
    assert e.store.get_settings("kb")["chunkChanges"] == FILES
    answer = e.ask("What is note 7 about?", collection="kb")
    assert answer.gate is not None and answer.gate.changed_since == 0.0
    assert _gate(e) == gate  # nor by the ask


def test_rejecting_faq_cards_does_not_make_the_calibrations_stale(engine: tuple[Plait, CountingEmbedder]) -> None:
    # 60 cards indexed, then 40 of them rejected with the other 20 kept: the 40 are
    # deleted and the index run for the 20 calibrates at its end; the rejected cards'
    # ids had stayed in searchHidden meanwhile, so the searchable count (chunks less
    # hidden ids) fell by 40 and both calibrations were measured again (264 query
    # embeddings) although no searchable chunk changed
    e, embedder = engine
    cards = [_card(i) for i in range(60)]
    sync_cards(e, "kb", cards)
    gate, estimate = _gate(e), _estimate(e)
    embedder.queries = 0
    rejected = [c.model_copy(update={"status": CardStatus.REJECTED}) if i < 40 else c for i, c in enumerate(cards)]
    sync_cards(e, "kb", rejected)
    info = e.store.get_collection("kb")
    assert info is not None and info.chunks == FILES + 20
    assert embedder.queries == 0  # neither calibration measured again
    assert (_gate(e), _estimate(e)) == (gate, estimate)
    hidden = e.store.get_settings("kb")["searchHidden"]
    assert isinstance(hidden, dict) and len(hidden["faq-card"]) == 20


def test_a_skipped_file_does_not_stop_the_calibrations(tmp_path: Path, notes: Path) -> None:
    # a binary file and one with a Latin-1 byte are skipped, so the run is not complete;
    # every chunk it indexed has a vector all the same, so both calibrations are measured
    # at its end (they were left to the first ask, and the arm estimate never came)
    (notes / "logo.md").write_bytes(b"\x89PNG\x00\x01")
    (notes / "latin.md").write_bytes(b"# Caf\xe9\n")
    with Plait(str(tmp_path / "p.db"), embedder=CountingEmbedder(), llm="none") as e:
        report = e.index(notes, collection="kb")
        assert (report.sources_indexed, len(report.skipped), report.complete) == (FILES, 2, False)
        assert report.embedding.skipped == 0
        gate, estimate = _gate(e), _estimate(e)
        assert (gate.chunks, gate.calibrated_by) == (FILES, "index")
        assert (estimate["chunks"], estimate["changesAt"]) == (FILES, FILES)
