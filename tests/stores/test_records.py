"""Issue 19 item 3: refinery runs and cards, API keys live in the store.

* the former side files (``refinery.db``, ``keys.db``) are imported on first open, once,
  with nothing lost and the files left as they were;
* two servers on one PostgreSQL database share cards and keys;
* a Milvus store keeps them in a SQLite sidecar next to its milvus-lite file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from plait.api.keys import hash_token
from plait.embeddings.fake import FakeEmbedder
from plait.refinery.models import CardStatus, RunStatus
from plait.service import Plait
from plait.stores.postgres import PostgresStore
from plait.testing.corpus import ARTICLE_DOCS, documents
from plait.testing.pg import postgres_dsn, throwaway_schema

# The side files exactly as plait wrote them before the records moved into the store.
_OLD_REFINERY = (
    """CREATE TABLE IF NOT EXISTS runs (
        id TEXT PRIMARY KEY, collection TEXT NOT NULL, status TEXT NOT NULL, mode TEXT NOT NULL,
        chunks_scanned INTEGER NOT NULL DEFAULT 0, chunks_total INTEGER NOT NULL DEFAULT 0,
        cards_made INTEGER NOT NULL DEFAULT 0, cards_merged INTEGER NOT NULL DEFAULT 0,
        llm_calls INTEGER NOT NULL DEFAULT 0, groups_skipped INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL, started_at REAL, finished_at REAL, heartbeat_at REAL,
        pid INTEGER, error TEXT, note TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS cards (
        id TEXT PRIMARY KEY, collection TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL,
        sources TEXT NOT NULL, status TEXT NOT NULL, mode TEXT NOT NULL, run_id TEXT,
        created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
)
_OLD_KEYS = """CREATE TABLE IF NOT EXISTS api_keys (
    id INTEGER PRIMARY KEY AUTOINCREMENT, token_hash TEXT NOT NULL UNIQUE, hint TEXT NOT NULL,
    role TEXT NOT NULL, collection TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT)"""


def _old_side_files(folder: Path) -> dict[str, str]:
    """A refinery.db with one run and three cards (two of collection kb) and a keys.db
    with three keys (ids 1, 2, 5; id 2 revoked). Returns the tokens by name."""
    folder.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(folder / "refinery.db") as db:
        for statement in _OLD_REFINERY:
            db.execute(statement)
        db.execute(
            "INSERT INTO runs (id, collection, status, mode, chunks_scanned, chunks_total, cards_made, "
            "created_at, started_at, finished_at) VALUES ('run_old', 'kb', 'succeeded', 'extractive', 5, 5, 2, 100, 101, 102)"
        )
        for card_id, collection, question, created in (
            ("card_a", "kb", "What does ERR-4012 mean?", 200.0),
            ("card_b", "kb", "Why was my payment declined?", 201.0),
            ("card_x", "gone", "A collection this store does not have?", 202.0),
        ):
            db.execute(
                "INSERT INTO cards VALUES (?, ?, ?, 'an answer', ?, 'approved', 'extractive', 'run_old', ?, ?)",
                (card_id, collection, question, json.dumps(["c1", "c2"]), created, created),
            )
    tokens = {"reader": "plait_reader-token", "revoked": "plait_revoked-token", "admin": "plait_admin-token"}
    with sqlite3.connect(folder / "keys.db") as db:
        db.execute(_OLD_KEYS)
        for key_id, name, role, collection, revoked in (
            (1, "reader", "reader", "kb", None),
            (2, "revoked", "reader", "kb", "2026-01-02T00:00:00+00:00"),
            (5, "admin", "admin", "*", None),
        ):
            db.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, '2026-01-01T00:00:00+00:00', ?)",
                (key_id, hash_token(tokens[name]), "plait_xxxx…", role, collection, revoked),
            )
    return tokens


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def _check_imported(engine: Plait, tokens: dict[str, str]) -> None:
    cards = engine.refinery.cards("kb")
    assert [(c.id, c.question, c.sources, c.status) for c in cards] == [
        ("card_a", "What does ERR-4012 mean?", ["c1", "c2"], CardStatus.APPROVED),
        ("card_b", "Why was my payment declined?", ["c1", "c2"], CardStatus.APPROVED),
    ]
    run = engine.refinery.store.get_run("run_old")
    assert (run.status, run.progress.chunks_scanned, run.progress.cards_made) == (RunStatus.SUCCEEDED, 5, 2)
    keys = engine.keys
    assert [(k.id, k.collection, k.revoked_at is not None) for k in keys.list_keys() if k.id <= 5] == [
        (1, "kb", False), (2, "kb", True), (5, "*", False)
    ]
    reader = keys.authenticate(tokens["reader"])
    assert reader is not None and reader.id == 1
    assert keys.authenticate(tokens["revoked"]) is None
    admin = keys.authenticate(tokens["admin"])
    assert admin is not None and admin.id == 5


def test_sqlite_store_imports_its_side_files_once(tmp_path: Path) -> None:
    store = tmp_path / "plait.db"
    with Plait(str(store), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    tokens = _old_side_files(tmp_path)
    before = _digest(tmp_path / "refinery.db", tmp_path / "keys.db")
    with Plait(str(store), embedder=FakeEmbedder(dimension=16)) as engine:
        _check_imported(engine, tokens)
        new, _ = engine.keys.create(role="reader", collection="kb")
        assert new.id == 6  # after the imported ids
    with Plait(str(store), embedder=FakeEmbedder(dimension=16)) as engine:  # a second open imports nothing
        _check_imported(engine, tokens)
        assert len(engine.keys.list_keys()) == 4
    assert _digest(tmp_path / "refinery.db", tmp_path / "keys.db") == before  # read, never written
    with sqlite3.connect(store) as db:
        imported = db.execute("SELECT source, runs, cards, keys FROM record_imports ORDER BY source").fetchall()
        assert db.execute("SELECT count(*) FROM refinery_cards WHERE collection = 'gone'").fetchone() == (0,)
    assert imported == [(str(tmp_path / "keys.db"), 0, 0, 3), (str(tmp_path / "refinery.db"), 1, 2, 0)]


# ------------------------------------------------------------------------ PostgreSQL
@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn("plait-pg-records-") as dsn:
        yield dsn


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    with throwaway_schema(pg_dsn, "plait_t_") as name:
        yield name


def test_postgres_imports_the_cwd_side_files(
    pg_dsn: str, pg_schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a PostgreSQL store's refinery.db / keys.db were in ``./.plait/``."""
    monkeypatch.chdir(tmp_path)
    with Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    tokens = _old_side_files(tmp_path / ".plait")
    with Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16)) as engine:
        _check_imported(engine, tokens)
        new, _ = engine.keys.create(role="reader", collection="kb")
        assert new.id == 6  # the identity moved past the imported ids
    with Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16)) as engine:
        _check_imported(engine, tokens)
        assert len(engine.keys.list_keys()) == 4


def test_postgres_imports_cwd_side_files_once_not_from_every_folder(
    pg_dsn: str, pg_schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the import was keyed by the side file's absolute path, so a plait run
    from any folder holding a stray ``./.plait/keys.db`` copied its keys, admin ones
    included, into the shared database, where every server accepts them."""
    from plait.api.keys import hash_token

    first, other = tmp_path / "first", tmp_path / "other"
    first.mkdir()
    monkeypatch.chdir(first)
    with Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    tokens = _old_side_files(first / ".plait")
    with Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16)) as engine:
        _check_imported(engine, tokens)  # the migration: the first folder's files come in
    intruder = "plait_" + "x" * 40
    (other / ".plait").mkdir(parents=True)
    with sqlite3.connect(other / ".plait" / "keys.db") as db:
        db.execute(_OLD_KEYS)
        db.execute(
            "INSERT INTO api_keys (token_hash, hint, role, collection, created_at) VALUES (?, 'xxxx', 'admin', '*', 't')",
            (hash_token(intruder),),
        )
    monkeypatch.chdir(other)
    with Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16)) as engine:
        assert engine.keys.authenticate(intruder) is None
        assert len(engine.keys.list_keys()) == 3  # the three of the first import


def test_two_servers_on_one_postgres_database_share_cards_and_keys(pg_dsn: str, pg_schema: str) -> None:
    pytest.importorskip("fastapi", reason="needs the server extra")
    from plait.api.http import create_app
    from plait.refinery.models import CardMode
    from plait.testing.asgi_server import UvicornThread

    one = Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16))
    two = Plait(PostgresStore(pg_dsn, schema=pg_schema), embedder=FakeEmbedder(dimension=16))
    try:
        one.index_documents(documents(ARTICLE_DOCS), collection="kb")
        with UvicornThread(create_app(one, keys=one.keys)) as first, UvicornThread(create_app(two, keys=two.keys)) as second:
            _, token = one.keys.create(role="maintainer", collection="kb")  # made through server one's store
            headers = {"Authorization": f"Bearer {token}"}
            card = one.refinery.store.add_card(
                "kb", question="What does ERR-4012 mean?", answer="the tenant database is down",
                sources=["c1"], mode=CardMode.EXTRACTIVE,
            )
            for server in (first, second):
                listed = httpx.get(f"{server.url}/v1/collections/kb/faq", headers=headers, timeout=30)
                assert listed.status_code == 200, listed.text
                assert [(c["id"], c["question"]) for c in listed.json()] == [(card.id, "What does ERR-4012 mean?")]
            approved = httpx.post(f"{second.url}/v1/collections/kb/faq/{card.id}/approve", headers=headers, timeout=30)
            assert approved.status_code == 200, approved.text
            assert one.refinery.cards("kb")[0].status == CardStatus.APPROVED  # server two's review, seen by one
            key = two.keys.list_keys()[0]
            two.keys.revoke(key.id)  # revoked on server two: server one refuses it at once
            refused = httpx.get(f"{first.url}/v1/collections/kb/faq", headers=headers, timeout=30)
            assert refused.status_code == 401
    finally:
        one.close()
        two.close()


# ---------------------------------------------------------------------------- Milvus
def test_milvus_keeps_records_in_a_sidecar_next_to_its_file(tmp_path: Path) -> None:
    pytest.importorskip("milvus_lite")
    from plait.api.keys import KeyStore
    from plait.stores.milvus import MilvusStore

    uri = str(tmp_path / "m.db")
    store = MilvusStore.from_url(f"milvus://{uri}?prefix=rec")
    try:
        _, token = KeyStore(store.records()).create(role="reader", collection="kb")
        assert store.records_path == Path(f"{uri}.rec.records.sqlite") and store.records_path.is_file()
    finally:
        store.close()
    again = MilvusStore.from_url(f"milvus://{uri}?prefix=rec")
    try:
        found = KeyStore(again.records()).authenticate(token)
        assert found is not None and found.collection == "kb"
    finally:
        again.close()


def test_milvus_names_its_sidecar_from_the_resolved_file_and_imports_the_spelled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One milvus-lite file, two spellings: a symlink's name and a relative path. The
    # sidecar was named from the path as typed: through the symlink another file (the
    # keys made there missing when the file was opened by its own name), and a relative
    # one resolved only when the records were first opened (after a chdir: elsewhere).
    pytest.importorskip("milvus_lite")
    from plait.api.keys import KeyStore
    from plait.stores.milvus import MilvusStore
    from plait.stores.records import open_records_file

    data = tmp_path / "data"
    data.mkdir()
    real, link = data / "m.db", data / "link.db"
    link.symlink_to(real)
    # a key an earlier plait wrote through the symlink, in the sidecar named from it
    spelled = open_records_file(data / "link.db.rec.records.sqlite")
    _, old_token = KeyStore(spelled).create(role="reader", collection="kb")
    spelled.close()

    monkeypatch.chdir(data)
    store = MilvusStore.from_url("milvus://link.db?prefix=rec")  # relative, through the link
    try:
        assert store.records_path == Path(f"{real}.rec.records.sqlite")
        monkeypatch.chdir(tmp_path)  # records opened later, from another folder
        keys = KeyStore(store.records())
        found = keys.authenticate(old_token)
        assert found is not None and found.collection == "kb"  # imported, nothing lost
        _, new_token = keys.create(role="reader", collection="docs")
    finally:
        store.close()
    assert not (tmp_path / "link.db.rec.records.sqlite").exists()  # nothing made in the other folder
    again = MilvusStore.from_url(f"milvus://{real}?prefix=rec")  # absolute, its own name
    try:
        keys = KeyStore(again.records())
        assert keys.authenticate(new_token) is not None and keys.authenticate(old_token) is not None
        assert len(keys.list_keys()) == 2  # the old key imported once, not twice
    finally:
        again.close()
