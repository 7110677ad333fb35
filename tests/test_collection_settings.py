"""Issue 19 item 3: a collection's settings are one typed model with a version."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.chunking import ChunkSettings
from plait.collection_settings import SETTINGS_VERSION, parse_settings, read_settings, recorded_chunking, write_settings
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError, ValidationError
from plait.service import Plait
from plait.stores.sqlite import SQLiteStore


def test_settings_are_typed_versioned_and_keep_unknown_keys(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    try:
        store.ensure_collection("c")
        assert read_settings(store, "c").settings_version == 0  # nothing written yet
        store.update_settings("c", {"searchHidden": {"faq": ["x"]}, "fromANewerPlait": 7})  # a bag as written before
        saved = write_settings(store, "c", embedder="e5", roots=[{"kind": "folder", "path": "/r"}])
        assert (saved.embedder, saved.search_hidden, saved.settings_version) == ("e5", {"faq": ["x"]}, SETTINGS_VERSION)
        assert store.get_settings("c") == {
            "embedder": "e5",
            "roots": [{"kind": "folder", "path": "/r"}],
            "searchHidden": {"faq": ["x"]},
            "fromANewerPlait": 7,
            "settingsVersion": 1,
        }
        with pytest.raises(ValidationError, match=r"unknown collection setting\(s\) \['embeder'\]"):
            write_settings(store, "c", embeder="e5")
        with pytest.raises(ValidationError, match="invalid collection settings: search_hidden.faq"):
            write_settings(store, "c", search_hidden={"faq": "not a list"})
        assert store.get_settings("c")["searchHidden"] == {"faq": ["x"]}  # nothing written by the refused calls
        store.update_settings("c", {"settingsVersion": SETTINGS_VERSION + 1})
        with pytest.raises(ConfigError, match="newer than this plait understands"):
            read_settings(store, "c")
    finally:
        store.close()


def test_a_malformed_stored_bag_is_a_config_error_not_a_crash(tmp_path: Path) -> None:
    """Regression: a bag the model cannot read raised pydantic's ValidationError on every
    search of the collection (an HTTP 500, "internal error")."""
    from plait.embeddings.fake import FakeEmbedder
    from plait.service import Plait
    from plait.testing.corpus import ARTICLE_DOCS, documents

    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
        engine.store.update_settings("kb", {"calibration": []})  # written by hand or a foreign tool
    invalid = r"stored settings of collection 'kb' are invalid: calibration"
    # the recorded embedder is read from the settings
    with Plait(str(tmp_path / "p.db")) as engine, pytest.raises(ConfigError, match=invalid):
        engine.search("ERR-4012", collection="kb")


def test_the_arm_estimate_is_a_typed_field_and_the_portable_bag_keeps_unknown_keys(tmp_path: Path) -> None:
    """The arm estimate is read and written through the model like every other setting;
    what travels with a copy or an archive is the bag as stored, less the copy marker."""
    from plait.collection_settings import portable_settings, restore_settings

    source, target = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
    try:
        source.ensure_collection("c")
        target.ensure_collection("d")
        record = {"base": 0.45, "reason": "collection estimate: test"}
        saved = write_settings(source, "c", arm_estimate=record, copy_in_progress={"from": "x"})
        assert saved.arm_estimate == record
        assert source.get_settings("c")["armEstimate"] == record  # the key the store held before the field
        source.update_settings("c", {"fromANewerPlait": [1, 2]})
        bag = portable_settings(source, "c")
        assert bag == {"armEstimate": record, "fromANewerPlait": [1, 2], "settingsVersion": 1}
        restore_settings(target, "d", bag)
        assert target.get_settings("d") == bag
        assert read_settings(target, "d").arm_estimate == record
        assert read_settings(target, "d").copy_in_progress is None
    finally:
        source.close()
        target.close()


def test_a_field_set_back_to_none_leaves_no_null_in_the_stored_bag(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    try:
        store.ensure_collection("c")
        write_settings(store, "c", copy_in_progress={"collection": "kb"}, embedder="e5")
        assert store.get_settings("c")["copyInProgress"] == {"collection": "kb"}
        saved = write_settings(store, "c", copy_in_progress=None)
        assert saved.copy_in_progress is None and saved.embedder == "e5"
        assert store.get_settings("c") == {"embedder": "e5", "settingsVersion": SETTINGS_VERSION}
        write_settings(store, "c", embedder=None)  # a None default too: removed, read back as None
        assert store.get_settings("c") == {"settingsVersion": SETTINGS_VERSION}
        assert read_settings(store, "c").embedder is None
    finally:
        store.close()


def test_index_runs_record_their_chunk_sizes_and_ask_reads_them(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nThe widget rotates its keys every week.\n", encoding="utf-8")
    small = ChunkSettings(target=300, overlap=30, window=50)
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16), chunk_settings=small) as engine:
        engine.index(notes, collection="kb")
        assert recorded_chunking(read_settings(engine.store, "kb"), collection="kb") == small
    with Plait(str(tmp_path / "p.db"), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.reindex(collection="kb")  # the default sizes cut every chunk again
        assert engine.store.get_settings("kb")["chunking"] == {"target": 1200, "overlap": 150, "window": 200}
    # none recorded (indexed before they were): the chunker's defaults; a key this
    # version does not know is ignored, a value the chunker refuses is a one-line error
    assert recorded_chunking(parse_settings({}), collection="kb") == ChunkSettings()
    assert recorded_chunking(parse_settings({"chunking": {"target": 500, "unit": "chars"}}), collection="kb") == (
        ChunkSettings(target=500)
    )
    with pytest.raises(ConfigError, match=r"^the stored settings of collection 'kb' are invalid: chunking: "
                       r"chunk target must be greater than 0, got 0$"):
        recorded_chunking(parse_settings({"chunking": {"target": 0}}), collection="kb")
