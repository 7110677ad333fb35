"""A first-pass build for a matrix a write has replaced stops early and installs nothing.

The int8 first pass (:mod:`plait.stores.dense_bound`) is built on a background thread
after a matrix's 16th query. Before, a build for a generation that a write had since
replaced ran to completion (up to 0.8 s of a core at 20k rows) and installed a pass on a
matrix no search would use again. Now the build asks between blocks of 1,024 rows
whether its matrix was retired (the SQLite store retires a generation's snapshot when it
sees a newer one, or the collection is deleted) or dropped by its cache (the thread holds
it only weakly), stops there, and never installs a stale pass.
"""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plait.stores import sqlite_snapshot
from plait.stores.dense_bound import BoundedScan, build_bounded_scan
from plait.stores.sqlite import SQLiteStore
from plait.stores.sqlite_snapshot import BOUNDED_FROM, BUILD_AFTER, DenseMatrix
from plait.testing.contract import make_chunk


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_a_cancelled_build_stops_between_blocks() -> None:
    # 5,000 rows: five blocks of 1,024. Asked before each block, the third answer True:
    # blocks 0 and 1 were converted, the build stops before block 2 and returns None.
    matrix = _unit(np.random.default_rng(1).standard_normal((5000, 16)))
    asked: list[int] = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) == 3

    assert build_bounded_scan(matrix, cancelled=cancelled) is None
    assert len(asked) == 3
    # never cancelled: asked before each of the five blocks and once before compiling
    asked.clear()
    assert build_bounded_scan(matrix, cancelled=lambda: bool(asked.append(1))) is not None
    assert len(asked) == 6


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """(started, release): a background build, once started, waits for ``release``
    before running the real build (with the cancellation check it was given)."""
    started, release = threading.Event(), threading.Event()
    real = sqlite_snapshot.build_bounded_scan

    def waiting(matrix: np.ndarray, **options: Any) -> BoundedScan | None:
        started.set()
        release.wait(30)
        return real(matrix, **options)

    monkeypatch.setattr(sqlite_snapshot, "build_bounded_scan", waiting)
    try:
        yield started, release
    finally:
        release.set()


def _store_with_vectors(path: Path, rows: int) -> tuple[SQLiteStore, np.ndarray]:
    vectors = _unit(np.random.default_rng(2).standard_normal((rows, 8)))
    store = SQLiteStore(path)
    store.ensure_collection("kb")
    store.set_embedder("kb", provider="fake", model="m", dimension=8)
    chunks = [
        make_chunk(f"c{i}", f"text {i}", source_id="a.md", vector=vectors[i].tolist(), ordinal=i)
        for i in range(rows)
    ]
    store.replace_source("kb", "a.md", "docs", chunks)
    return store, vectors


def test_a_build_for_a_matrix_a_write_replaced_is_cancelled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, held: tuple[threading.Event, threading.Event]
) -> None:
    started, release = held
    rows = BOUNDED_FROM + 1000  # three blocks
    store, vectors = _store_with_vectors(tmp_path / "kb.db", rows)
    query = vectors[5]
    try:
        for _ in range(BUILD_AFTER - 1):
            store.vector_search("kb", query, limit=5)
        cid = next(iter(store._snapshots))
        old = store._snapshots[cid].dense
        assert old is not None and old._builder is None
        store.vector_search("kb", query, limit=5)  # the 16th query starts the build
        builder = old._builder
        assert builder is not None and started.wait(30)  # running, held before its first block
        # a write: the next search sees a new generation and retires the old snapshot
        store.replace_source("kb", "b.md", "docs", [make_chunk("b0", "more", source_id="b.md", vector=query.tolist())])
        hits = store.vector_search("kb", query, limit=2)
        assert {h for h, _ in hits} == {"c5", "b0"}
        with caplog.at_level(logging.DEBUG, logger="plait.stores.dense_bound"):
            release.set()
            builder.join(timeout=60)
        assert not builder.is_alive()
        assert old._bounded is None and old.first_pass_cancelled  # no stale pass installed
        assert "int8 first pass cancelled after 0 of 3 blocks" in caplog.text
        # the retired matrix still answers, exactly, and never starts another build
        assert [h for h, _ in old.rank(query, limit=1)] == ["c5"]
        assert old._builder is builder
        # the new generation's matrix builds its own pass as before
        new = store._snapshots[cid].dense
        assert new is not None and new is not old and new.build_first_pass() is not None
        assert not new.first_pass_cancelled
    finally:
        store.close()


def test_a_build_whose_matrix_its_cache_dropped_stops(
    caplog: pytest.LogCaptureFixture, held: tuple[threading.Event, threading.Event]
) -> None:
    """A cache (the PostgreSQL store's) that replaces a matrix just drops it: the build,
    holding it only weakly, stops at its next block."""
    started, release = held
    matrix = _unit(np.random.default_rng(3).standard_normal((4 * 1024, 8)))
    ids = np.arange(matrix.shape[0], dtype=np.int64)
    dense = DenseMatrix(ids, matrix, [str(i) for i in ids], bounded_from=0, build_after=1)
    dense.rank(matrix[0], limit=3)  # starts the build
    builder = dense._builder
    assert builder is not None and started.wait(30)
    gone = weakref.ref(dense)
    del dense
    gc.collect()
    assert gone() is None  # the build thread does not keep it alive
    with caplog.at_level(logging.DEBUG, logger="plait.stores.dense_bound"):
        release.set()
        builder.join(timeout=60)
    assert not builder.is_alive()
    assert "int8 first pass cancelled after 0 of 4 blocks" in caplog.text
