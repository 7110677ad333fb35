"""A copy renamed within one store gives its cards new ids; the card chunks copied with
them must name those ids (source ``card:<new id>``, metadata ``cardId``), and the copy's
``searchHidden`` must list its own card chunks, or ``qa_first`` and card review act on
the source collection's cards (they kept ``card:<old id>``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.collection_settings import read_settings
from plait.copying import copy_collection
from plait.embeddings.fake import FakeEmbedder
from plait.refinery import CARD_SCOPE
from plait.refinery.cards import card_source_id
from plait.service import Plait

FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"
ROTATE = "How do I rotate an API key?"


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Plait]:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64)) as e:
        e.index(folder, collection="kb")
        e.refinery.run("kb", mode="extractive")
        yield e


def _card_chunks(engine: Plait, collection: str) -> dict[str, str]:
    """Card chunk id -> the source id it is stored under."""
    store = engine.store
    return {
        cid: source.source_id
        for source in store.list_sources(collection, CARD_SCOPE)
        for cid in store.chunk_ids(collection, source.source_id)
    }


def test_a_renamed_copy_in_one_store_indexes_its_own_cards(engine: Plait) -> None:
    store = engine.store
    report = copy_collection(store, store, "kb", target_name="kb2")
    assert report.verification is not None and report.verification.ok
    old = {c.id: c for c in engine.refinery.cards("kb")}
    new = {c.id: c for c in engine.refinery.cards("kb2")}
    assert len(old) == len(new) == 16 and not set(old) & set(new)

    # every card chunk of the copy is under one of the copy's card ids, and names it
    sources = sorted(s.source_id for s in store.list_sources("kb2", CARD_SCOPE))
    assert sources == sorted(card_source_id(cid) for cid in new)
    chunks = _card_chunks(engine, "kb2")
    assert len(chunks) == 16 and not set(chunks) & set(_card_chunks(engine, "kb"))
    stored = store.get_chunks("kb2", list(chunks))
    for cid, chunk in stored.items():
        card = new[str(chunk.metadata["cardId"])]
        assert chunks[cid] == card_source_id(card.id) and chunk.content == card.question
        assert chunk.origin.source_path == f"faq/{card.id}"
    # the copy hides its own card chunks from ordinary search (not the source's)
    assert read_settings(store, "kb2").search_hidden[CARD_SCOPE] == sorted(chunks)
    assert all(h.scope != CARD_SCOPE for h in engine.search(ROTATE, collection="kb2", k=50).hits)

    # a resumed copy finds every source, card sources included, already written
    store.update_settings("kb2", {"copyInProgress": {"collection": "kb", "startedAt": "x", "usageCopied": True}})
    again = copy_collection(store, store, "kb", target_name="kb2")
    assert (again.sources_copied, again.sources_already_there) == (0, report.sources_copied)
    assert again.verification is not None and again.verification.ok

    # qa_first on the copy serves the copy's approved card
    rotate = next(c for c in new.values() if c.question == ROTATE)
    engine.refinery.approve("kb2", rotate.id)
    assert _card_chunks(engine, "kb2") == chunks  # the ids an index run of the copy's cards builds
    served = engine.search("how do I rotate my API keys", collection="kb2", qa_first=True)
    assert served.answered_by == "card" and served.card is not None and served.card.card_id == rotate.id
    # the source collection's card is still a draft there
    assert engine.search("how do I rotate my API keys", collection="kb", qa_first=True).answered_by == "search"

    # rejecting it takes the copy's card chunk out of the copy's index only
    engine.refinery.reject("kb2", rotate.id)
    assert card_source_id(rotate.id) not in {s.source_id for s in store.list_sources("kb2", CARD_SCOPE)}
    assert len(_card_chunks(engine, "kb2")) == 15 and len(_card_chunks(engine, "kb")) == 16
    assert engine.search("how do I rotate my API keys", collection="kb2", qa_first=True).answered_by == "search"
    assert all(
        h.metadata.get("cardId") != rotate.id
        for h in engine.search(ROTATE, collection="kb2", scopes=[CARD_SCOPE], k=20).hits
    )
