"""The store contract on the embedded SQLite store, plus what only SQLite has."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from plait.errors import StoreError
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import StoreContract, make_chunk


class TestSQLiteContract(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteStore]:
        s = SQLiteStore(tmp_path / "plait.db")
        yield s
        s.close()


def test_second_process_sees_writes(tmp_path: Path) -> None:
    """Caches are keyed by the collection's generation: another handle's write shows."""
    path = tmp_path / "plait.db"
    reader, writer = SQLiteStore(path), SQLiteStore(path)
    writer.ensure_collection("c")
    writer.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[1, 0])])
    assert [i for i, _ in reader.lexical_search("c", ["alpha"], [], limit=5)] == ["a"]
    writer.replace_source("c", "e", "docs", [make_chunk("b", "alpha alpha", source_id="e", vector=[1, 0])])
    assert {i for i, _ in reader.lexical_search("c", ["alpha"], [], limit=5)} == {"a", "b"}
    assert {i for i, _ in reader.vector_search("c", np.array([1.0, 0.0], np.float32), limit=5)} == {"a", "b"}
    reader.close()
    writer.close()


def test_failed_write_rolls_back_both_arms(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "plait.db")
    store.ensure_collection("c")
    store.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d")])
    bad = make_chunk("b", "beta", source_id="d")
    broken = type(bad)(bad.chunk, bad.exact, bad.stems, "not a vector")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.replace_source("c", "d", "docs", [make_chunk("x", "gamma", source_id="d"), broken, make_chunk("y", "delta", source_id="d")])
    assert store.chunk_ids("c", "d") == ["a"]
    assert [i for i, _ in store.lexical_search("c", ["gamma"], [], limit=5)] == []
    store.close()


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        SQLiteStore(path)


def test_schema_version_recorded(tmp_path: Path) -> None:
    path = tmp_path / "plait.db"
    SQLiteStore(path).close()
    SQLiteStore(path).close()
    rows = sqlite3.connect(path).execute("SELECT version FROM schema_version").fetchall()
    assert rows == [(1,), (2,), (3,), (4,), (5,), (6,)]  # 6: usage
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "usage" in tables


def test_migration_4_lets_a_version_3_file_be_backfilled_by_claims(tmp_path: Path) -> None:
    """A file indexed before claims existed, holding a chunk without a vector, opens at
    version 4 and the chunk can be claimed."""
    from plait.stores.sqlite_schema import MIGRATIONS

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    db.execute("BEGIN")
    for number, migration in enumerate(MIGRATIONS[:3], start=1):
        migration(db)
        db.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))
    db.execute("COMMIT")
    db.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("INSERT INTO collections (name, created_at) VALUES ('c', 'then')")
    db.execute(
        "INSERT INTO chunks (collection_id, chunk_id, source_id, scope, ordinal, content, content_hash, "
        "origin, metadata, vector, len_exact, len_stems) VALUES (1, 'a', 'd', 'docs', 0, 'alpha', 'h', "
        "'{\"kind\": \"file\", \"sourcePath\": \"d\"}', '{}', NULL, 1, 1)"
    )
    db.close()
    store = SQLiteStore(path)
    try:
        assert store.claim_without_vector("c", owner="o", limit=5, lease_seconds=60) == [("a", "alpha")]
        assert store.claim_owners("c") == {"o": 1}
    finally:
        store.close()
    versions = sqlite3.connect(path).execute("SELECT version FROM schema_version").fetchall()
    assert versions == [(1,), (2,), (3,), (4,), (5,), (6,)]


def test_migration_2_upgrades_a_version_1_file(tmp_path: Path) -> None:
    """A store written before sources knew their root opens with root '' for old rows."""
    from plait.stores.sqlite_schema import MIGRATIONS

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    db.execute("BEGIN")
    MIGRATIONS[0](db)
    db.execute("INSERT INTO schema_version (version) VALUES (1)")
    db.execute("INSERT INTO collections (name, created_at) VALUES ('c', 'then')")
    db.execute("INSERT INTO sources VALUES (1, 'old.md', 'docs', 'then')")
    db.execute("COMMIT")
    db.close()
    store = SQLiteStore(path)
    assert [(s.source_id, s.root) for s in store.list_sources("c")] == [("old.md", "")]
    store.replace_source("c", "old.md", "docs", [make_chunk("a", "a", source_id="old.md")], root="folder:/x")
    assert [s.root for s in store.list_sources("c")] == ["folder:/x"]
    store.close()


def test_get_chunks_in_one_statement_keeps_its_contract(tmp_path: Path) -> None:
    """get_chunks looks the collection up inside its one statement: a missing collection
    is still NotFoundError (with ids or none), an existing one without those ids an
    empty dict; each chunk read equals the validated model (metadata a fresh dict)."""
    from plait.errors import NotFoundError
    from plait.types import Chunk

    store = SQLiteStore(tmp_path / "plait.db")
    with pytest.raises(NotFoundError):
        store.get_chunks("nope", ["a"])
    with pytest.raises(NotFoundError):
        store.get_chunks("nope", [])
    store.ensure_collection("c")
    assert store.get_chunks("c", ["missing"]) == {}
    assert store.get_chunks("c", []) == {}
    item = make_chunk("a", "alpha", source_id="d", metadata={"k": [1, 2]}, ordinal=3)
    store.replace_source("c", "d", "docs", [item])
    got = store.get_chunks("c", ["a", "missing", "a"])
    assert list(got) == ["a"]
    assert got["a"] == item.chunk == Chunk.model_validate(got["a"].model_dump())
    assert type(got["a"].ordinal) is int and got["a"].ordinal == 3
    got["a"].metadata["k"].append(3)
    assert store.get_chunks("c", ["a"])["a"].metadata == {"k": [1, 2]}
    store.close()


def test_collection_with_settings_is_get_collection_and_get_settings(tmp_path: Path) -> None:
    """The search's first read in one statement: the same collection and settings as the
    two reads (scopes' latest index time, counts), None for a missing collection."""
    from plait.stores.base import CollectionReadStore

    store = SQLiteStore(tmp_path / "plait.db")
    assert isinstance(store, CollectionReadStore)
    assert store.collection_with_settings("nope") is None
    store.ensure_collection("c")
    assert store.collection_with_settings("c") == (store.get_collection("c"), {})
    store.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=[1, 0])])
    store.replace_source("c", "e", "adr", [make_chunk("b", "beta", source_id="e")])
    store.update_settings("c", {"fusion": {"rrfK": 30}})
    info, settings = store.collection_with_settings("c")  # type: ignore[misc]
    assert (info, settings) == (store.get_collection("c"), {"fusion": {"rrfK": 30}})
    assert (info.chunks, info.chunks_without_vector, info.sources) == (2, 1, 2)
    store.close()


def test_collection_with_settings_after_an_index_run(tmp_path: Path) -> None:
    """With scopes indexed (their latest index time set), the one statement still reads
    what get_collection and get_settings do."""
    from plait.service import Plait

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha beta\n", encoding="utf-8")
    with Plait(str(tmp_path / "p.db"), embedder="none") as engine:
        engine.index(root)
        store = engine.store
        assert isinstance(store, SQLiteStore)
        both = store.collection_with_settings("default")
        assert both is not None
        assert both == (store.get_collection("default"), store.get_settings("default"))
        assert both[0].last_indexed_at is not None and both[0].chunks == 1
