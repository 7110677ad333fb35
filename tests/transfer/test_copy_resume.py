"""Issue 27 item 1: a copy killed mid-way (SIGKILL) continues on a re-run and never duplicates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from plait.copying import copy_collection
from plait.embeddings.fake import FakeEmbedder
from plait.service import Plait
from plait.stores.base import Store
from plait.stores.postgres import PostgresStore
from plait.stores.sqlite import SQLiteStore
from plait.testing.corpus import documents

SRC = Path(__file__).resolve().parents[2] / "src"


def _kill_after_4(*args: str) -> None:
    """Run copy_driver.py with ``args``, SIGKILL it once 4 sources are written."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("copy_driver.py")), *args],
        env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.split() == ["STOPPED", "4", "4"], line
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()


def _resume(source: Store, target: Store) -> None:
    half = target.get_collection("kb")
    assert half is not None and (half.sources, half.chunks) == (4, 4)  # whole sources only
    assert target.get_settings("kb")["copyInProgress"]["collection"] == "kb"
    report = copy_collection(source, target, "kb")  # no --replace needed: it is the same copy
    assert (report.sources_already_there, report.sources_copied, report.chunks_copied) == (4, 6, 6)
    assert report.verification is not None and report.verification.ok
    done = target.get_collection("kb")
    assert done is not None and (done.sources, done.chunks, done.chunks_without_vector) == (10, 10, 0)
    assert sorted(target.chunk_ids("kb")) == sorted(source.chunk_ids("kb"))
    assert "copyInProgress" not in target.get_settings("kb")


def _indexed(path: Path) -> None:
    docs = documents({f"doc{i:02d}": f"ERR-{4000 + i} means part {i} failed." for i in range(10)})
    with Plait(str(path), embedder=FakeEmbedder(dimension=16)) as engine:
        engine.index_documents(docs, collection="kb")


def test_a_killed_copy_resumes_without_duplicates(tmp_path: Path) -> None:
    source_path, target_path = tmp_path / "from.db", tmp_path / "to.db"
    _indexed(source_path)
    _kill_after_4(str(source_path), str(target_path), "4")
    source, target = SQLiteStore(source_path), SQLiteStore(target_path)
    try:
        _resume(source, target)
    finally:
        source.close()
        target.close()


def _hnsw_indexes(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'plait_chunks_hnsw_%%'", (schema,)
        ).fetchone()
    return int(row[0]) if row else -1


def test_a_killed_batched_copy_into_postgres_resumes(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Into PostgreSQL the copy writes batches of whole sources (2 one-chunk sources here):
    killed after the second batch, the target holds exactly those 4 sources."""
    dsn = request.getfixturevalue("pg_dsn")
    schema = f"plait_r_{uuid.uuid4().hex[:10]}"
    source_path = tmp_path / "from.db"
    _indexed(source_path)
    try:
        _kill_after_4(str(source_path), dsn, "4", "2", schema)
        source, target = SQLiteStore(source_path), PostgresStore(dsn, schema=schema)
        try:
            assert _hnsw_indexes(dsn, schema) == 0  # killed inside the deferred-index block
            _resume(source, target)
            assert _hnsw_indexes(dsn, schema) == 1  # the resumed copy built it
        finally:
            source.close()
            target.close()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
