"""A copy adds the source's usage rows to the target once: the rows and the copy marker's
``usageCopied`` are written in one transaction of the target store, so a failure between
the two (injected here by a trigger of the target's own database refusing the marker
update) leaves neither, and the resumed copy adds the rows once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from plait.copying import copy_collection
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.stores.base import Store
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.corpus import ARTICLE_DOCS, documents

from .test_copy import USAGE


def _source(path: Path) -> SQLiteStore:
    with Plait(str(path), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(documents(ARTICLE_DOCS), collection="kb")
    store = SQLiteStore(path)
    store.add_usage("kb", USAGE)
    return store


def _copy_fails_then_resumes(source: Store, target: Store, lift: object) -> None:
    with pytest.raises(Exception, match="injected"):
        copy_collection(source, target, "kb")
    assert target.get_settings("kb")["copyInProgress"].get("usageCopied") is None
    lift()  # type: ignore[operator]
    report = copy_collection(source, target, "kb")
    assert report.verification is not None and report.verification.ok
    assert target.usage("kb") == source.usage("kb")
    # by hand: the 09:00 embedding row is 3 calls, 12 texts, 4800 characters, 1200 tokens
    nine = [r for r in target.usage("kb") if r.bucket == USAGE[0].bucket]
    assert [(r.calls, r.texts, r.characters, r.input_tokens) for r in nine] == [(3, 12, 4800, 1200)]
    assert report.usage_rows == len(source.usage("kb"))


def test_a_failure_before_the_usage_marker_adds_the_rows_once_sqlite(tmp_path: Path) -> None:
    source = _source(tmp_path / "from.db")
    target = SQLiteStore(tmp_path / "to.db")
    with sqlite3.connect(tmp_path / "to.db") as db:
        db.execute(
            "CREATE TRIGGER inject BEFORE UPDATE OF settings ON collections "
            "WHEN NEW.settings LIKE '%usageCopied%' BEGIN SELECT RAISE(ABORT, 'injected'); END"
        )

    def lift() -> None:
        with sqlite3.connect(tmp_path / "to.db") as db:
            db.execute("DROP TRIGGER inject")

    try:
        _copy_fails_then_resumes(source, target, lift)
    finally:
        source.close()
        target.close()


def test_a_failure_before_the_usage_marker_adds_the_rows_once_postgres(
    tmp_path: Path, pg_dsn: str
) -> None:
    source = _source(tmp_path / "from.db")
    schema = "plait_usage_once"
    target = PostgresStore(pg_dsn, schema=schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE FUNCTION {schema}.inject() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected'; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER inject BEFORE UPDATE ON {schema}.plait_collections FOR EACH ROW "
            "WHEN ((NEW.settings -> 'copyInProgress') ? 'usageCopied') EXECUTE FUNCTION "
            f"{schema}.inject()"
        )

    def lift() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER inject ON {schema}.plait_collections")

    try:
        _copy_fails_then_resumes(source, target, lift)
    finally:
        source.close()
        target.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_milvus_writes_the_usage_rows_and_the_marker_in_one_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Milvus has no transactions: the rows and the marker go in one upsert request, so a
    failed request (injected) leaves neither, and the resumed copy adds the rows once."""
    pytest.importorskip("milvus_lite")
    from plait.stores.milvus import MilvusStore

    source = _source(tmp_path / "from.db")
    target = MilvusStore(str(tmp_path / "to.db"), prefix="t")
    upsert = target._client.upsert
    requests: list[list[str]] = []

    def failing(name: str, rows: list[dict[str, object]], *args: object, **kwargs: object) -> object:
        keys = [str(r.get("key", "")) for r in rows]
        if any("usageCopied" in str(r.get("body", "")) for r in rows):
            requests.append(keys)
            raise RuntimeError("injected")
        return upsert(name, rows, *args, **kwargs)

    monkeypatch.setattr(target._client, "upsert", failing)
    try:
        with pytest.raises(Exception, match="injected"):
            copy_collection(source, target, "kb")
        [keys] = requests
        assert sum(k.startswith("c/") for k in keys) == 1 and len(keys) == 1 + len(source.usage("kb"))
        assert target.usage("kb") == []
        monkeypatch.setattr(target._client, "upsert", upsert)
        report = copy_collection(source, target, "kb")
        assert report.verification is not None and report.verification.ok
        assert target.usage("kb") == source.usage("kb")
    finally:
        source.close()
        target.close()
