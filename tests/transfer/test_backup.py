"""Issue 27 item 3: a consistent backup of a live SQLite store (online backup API)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from plait.backup import backup_store
from plait.copying import verify_copy
from plait.embeddings.fake import FakeEmbedder
from plait.errors import ConfigError
from plait.service import Plait
from plait.stores.sqlite import SQLiteStore
from plait.testing.corpus import documents

from .test_copy import USAGE


def _docs(round_: int) -> dict[str, str]:
    return {f"doc{i:02d}": f"ERR-{4000 + i} round {round_} means part {i} failed. " * 3 for i in range(20)}


def test_backup_while_reindex_and_searches_run(tmp_path: Path) -> None:
    store = tmp_path / "live.db"
    engine = Plait(str(store), embedder=FakeEmbedder(dimension=16))
    engine.index_documents(documents(_docs(0)), collection="kb")
    engine.store.add_usage("kb", USAGE)  # usage metering is part of the store: in the backup too
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        round_ = 0
        try:
            while not stop.is_set():
                round_ += 1
                engine.index_documents(documents(_docs(round_)), collection="kb")
        except BaseException as exc:  # reported below
            errors.append(exc)

    def read() -> None:
        reader = Plait(str(store), embedder=FakeEmbedder(dimension=16))
        try:
            while not stop.is_set():
                reader.search("ERR-4003", collection="kb", k=3)
        except BaseException as exc:
            errors.append(exc)
        finally:
            reader.close()

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    try:
        for n in range(3):
            report = backup_store(str(store), tmp_path / f"copy{n}.db")
            assert report.bytes > 0 and not (tmp_path / f"copy{n}.db.partial").exists()
            with sqlite3.connect(tmp_path / f"copy{n}.db") as db:
                assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
                # one commit's state: every source holds exactly its one chunk, all of one round
                rounds = {r[0].split(" round ")[1].split()[0] for r in db.execute("SELECT content FROM chunks")}
                per_source = db.execute("SELECT count(*) FROM chunks GROUP BY source_id").fetchall()
            assert set(per_source) == {(1,)} and len(per_source) == 20
            assert len(rounds) <= 2  # a reindex commits source by source: at most the old and the new round
            restored = Plait(str(tmp_path / f"copy{n}.db"), embedder=FakeEmbedder(dimension=16))
            assert restored.search("ERR-4003", collection="kb", k=1).hits[0].origin.title == "doc03"  # type: ignore[union-attr]
            restored.close()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    final = backup_store(str(store), tmp_path / "final.db")
    live, copy = SQLiteStore(store), SQLiteStore(Path(final.path))
    try:
        assert verify_copy(live, copy, "kb").ok  # a backup of the quiet store is the same collection
        assert copy.usage("kb") == live.usage("kb") == USAGE
    finally:
        live.close()
        copy.close()
    engine.close()


def test_backup_of_a_server_store_points_to_its_tools() -> None:
    with pytest.raises(ConfigError, match="pg_dump"):
        backup_store("postgresql://db/plait", "x.db")
    with pytest.raises(ConfigError, match="plait export"):
        backup_store("milvus:///tmp/m.db", "x.db")


def test_a_backup_takes_no_collection_or_embedder(tmp_path: Path) -> None:
    """``plait backup -c kb`` and ``--embedder e5`` were accepted and dropped: the whole store
    was backed up, vectors as they were, whatever they named. A backup is the whole store and
    embeds nothing, so either one is refused before the store is even looked at."""
    store = tmp_path / "live.db"
    with Plait(str(store), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(_docs(0)), collection="kb")
    out = tmp_path / "backup.db"
    tail = (
        "not apply to plait backup: a backup copies the whole store as it is, every collection with its vectors, "
        "and embeds nothing; leave {} out (plait export -c NAME writes one collection)"
    )
    cases = [
        ({"collection": "kb"}, "--collection 'kb' does " + tail.format("it")),
        ({"embedder": "e5"}, "--embedder 'e5' does " + tail.format("it")),
        ({"collection": "kb", "embedder": "e5"}, "--collection 'kb' and --embedder 'e5' do " + tail.format("them")),
    ]
    for given, message in cases:
        with pytest.raises(ConfigError) as refused:
            backup_store(str(store), out, **given)
        assert str(refused.value) == message
        with pytest.raises(ConfigError) as refused:  # before the store is looked at
            backup_store("postgresql://db/plait", out, **given)
        assert str(refused.value) == message
    assert not out.exists()
    assert backup_store(str(store), out, collection=None, embedder=None).bytes == out.stat().st_size
