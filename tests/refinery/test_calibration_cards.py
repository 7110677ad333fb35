"""Calibration (the ask gate, the dense weight and so the arm estimate) samples only
chunks an ordinary search can return: FAQ card chunks (``searchHidden``) are never a
pseudo-question nor a candidate, so two builds of one corpus whose cards got other
(random) ids calibrate the same figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait import ask_gate, calibration
from plait.ask_gate import GateCalibration, calibrate_gate
from plait.calibration import Calibration, calibrate
from plait.collection_settings import read_settings
from plait.embeddings.fake import FakeEmbedder
from plait.llm import OllamaLLM
from plait.refinery import CARD_SCOPE
from plait.refinery import store as refinery_store
from plait.service import Plait
from plait.testing.wire import WireServer

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"


def _build(
    root: Path, ids: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[GateCalibration, GateCalibration, Calibration, set[str]]:
    """The FAQ indexed with its cards drafted (extractive), card and run ids taken from
    ``ids`` (two random uuid4 draws, made fixed): the gate its runs stored, the gate and
    the calibration measured again, and the contents of its hidden card chunks."""
    names = iter(ids)
    monkeypatch.setattr(refinery_store, "_new_id", lambda prefix: f"{prefix}_{next(names)}")
    folder = root / "docs"
    folder.mkdir(parents=True)
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    embedder = FakeEmbedder(dimension=64)
    with WireServer(chat=lambda messages: "unused [1].") as server, Plait(
        str(root / "plait.db"), embedder=embedder,
        llm=OllamaLLM(base_url=server.url, model="m", retries=0),
    ) as e:
        e.index(folder, collection="kb")
        e.refinery.run("kb", mode="extractive")
        hidden = read_settings(e.store, "kb").search_hidden[CARD_SCOPE]
        assert len(hidden) >= 3
        stored = GateCalibration.model_validate(read_settings(e.store, "kb").ask_gate)
        cards = {c.content for c in e.store.get_chunks("kb", hidden).values()}
        gate = calibrate_gate(e.store, "kb", embedder)
        weight = calibrate(e.store, "kb", embedder)
    return stored, gate, weight, cards


def test_two_builds_with_cards_calibrate_one_gate_and_no_card_is_a_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    for module in (ask_gate, calibration):
        original = module.pseudo_query

        def spy(content: str, *args: object, original: object = original, **kwargs: object) -> str | None:
            asked.append(content)
            return original(content, *args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(module, "pseudo_query", spy)
    up = [f"{n:012x}" for n in range(1, 60)]
    down = [f"{0xffffffffffff - n * 0x0123456789:012x}" for n in range(1, 60)]
    stored_a, gate_a, weight_a, cards_a = _build(tmp_path / "a", up, monkeypatch)
    asked_a = list(asked)
    stored_b, gate_b, weight_b, cards_b = _build(tmp_path / "b", down, monkeypatch)
    assert cards_a == cards_b and asked_a
    assert not cards_a & set(asked)  # no card question was ever a pseudo-question
    assert asked[len(asked_a):] == asked_a  # the same chunks, in the same order
    fields = ("min_cosine", "min_term_coverage", "inside_cosine", "outside_cosine", "inside_coverage",
              "outside_coverage", "samples")
    assert [getattr(gate_a, f) for f in fields] == [getattr(gate_b, f) for f in fields]
    assert [getattr(stored_a, f) for f in fields] == [getattr(stored_b, f) for f in fields]
    assert [getattr(stored_a, f) for f in fields] == [getattr(gate_a, f) for f in fields]
    assert (weight_a.lexical_mrr, weight_a.dense_mrr, weight_a.samples) == (
        weight_b.lexical_mrr, weight_b.dense_mrr, weight_b.samples)
