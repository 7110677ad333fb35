"""One ask reads its collection once: ``ensure_gate`` read the collection and its settings,
then ask read both again for the gate's ``changedSince`` and its settings, then its search
read both once more (on PostgreSQL a round trip each). Now the ask's one read serves the
gate, the settings and the search. Counted on the store's calls."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.stores.sqlite import SQLiteStore
from plait.types import CollectionInfo


class CountingStore(SQLiteStore):
    """The SQLite store, counting reads of a collection's row and of its settings."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: Counter[str] = Counter()

    def get_collection(self, name: str) -> CollectionInfo | None:
        self.calls["get_collection"] += 1
        return super().get_collection(name)

    def get_settings(self, name: str) -> dict[str, Any]:
        self.calls["get_settings"] += 1
        return super().get_settings(name)

    def collection_with_settings(self, name: str) -> tuple[CollectionInfo, dict[str, Any]] | None:
        # both read at once (one statement): a read of each
        self.calls["get_collection"] += 1
        self.calls["get_settings"] += 1
        return super().collection_with_settings(name)


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[Plait, CountingStore]]:
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(40):
        (notes / f"n{i:02d}.md").write_text(
            f"# Note {i}\n\nNote {i} explains how the widget {i} rotates its keys every {i + 1} days.\n",
            encoding="utf-8",
        )
    store = CountingStore(tmp_path / "p.db")
    with Plait(store, embedder=FakeEmbedder(dimension=32), llm="none") as e:
        e.index(notes, collection="kb")
        yield e, store


def _reads(e: Plait, store: CountingStore, **request: Any) -> tuple[Counter[str], Counter[str]]:
    store.calls.clear()
    e.ask("How does the widget 7 rotate its keys?", collection="kb", **request)
    asked = Counter(store.calls)
    store.calls.clear()
    e.search("How does the widget 7 rotate its keys?", collection="kb", **request)
    return asked, Counter(store.calls)


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_an_ask_reads_its_collection_once_besides_its_search(
    engine: tuple[Plait, CountingStore], mode: str
) -> None:
    # by hand: the ask reads the collection and its settings once (gate check, its
    # changedSince share, the ask settings, and its search, given that read); a search
    # alone reads both once. The ask read them twice before this (its own read, its
    # search's), and the collection 4 times before that (hybrid: the service's existence
    # check, ensure_gate, the share; the search) and the settings 3 times
    e, store = engine
    asked, searched = _reads(e, store, mode=mode)
    assert searched == Counter({"get_collection": 1, "get_settings": 1})
    assert asked == Counter({"get_collection": 1, "get_settings": 1})


def test_a_stale_gate_measured_by_the_ask_is_the_one_it_uses(engine: tuple[Plait, CountingStore]) -> None:
    # the settings the ask uses are those ensure_gate left: a gate removed is measured
    # by the ask and shown by it without another read of the collection
    e, store = engine
    store.update_settings("kb", {"askGate": None})
    store.calls.clear()
    answer = e.ask("How does the widget 7 rotate its keys?", collection="kb")
    assert answer.gate is not None and answer.gate.calibrated_by == "ask" and answer.gate.changed_since == 0.0
    # the ask's read and the calibration's own (calibrate_gate); the search uses the ask's
    assert store.calls["get_collection"] == 2


def test_asking_a_missing_collection_is_not_found(engine: tuple[Plait, CountingStore]) -> None:
    from plait.errors import NotFoundError

    e, _ = engine
    with pytest.raises(NotFoundError, match="collection 'nope' does not exist"):
        e.ask("anything?", collection="nope")
