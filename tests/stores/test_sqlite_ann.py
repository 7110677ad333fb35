"""The SQLite store's dense arm above its ANN threshold: an HNSW graph beside the file.

A tiny threshold puts the graph on the path; the vectors are well separated (one-hot
directions plus a small, distinct tilt), so the approximate answer must equal the exact
one. Speed is measured in benchmarks/, never here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from plait.errors import ConfigError
from plait.stores.ann import DEFAULT_ANN_THRESHOLD, resolve_ann_threshold
from plait.stores.base import Filters
from plait.stores.sqlite import SQLiteStore
from plait.testing.contract import StoreContract, make_chunk

pytest.importorskip("hnswlib")

DIM = 8


def _vec(axis: int, tilt: float = 0.0) -> list[float]:
    """Unit vector near ``axis`` tilted towards the next axis by ``tilt``."""
    v = np.zeros(DIM)
    v[axis % DIM] = 1.0
    v[(axis + 1) % DIM] = tilt
    return list(v / np.linalg.norm(v))


def _fill(store: SQLiteStore, n: int = 24, *, collection: str = "c") -> None:
    store.ensure_collection(collection)
    for i in range(n):
        scope = "even" if i % 2 == 0 else "odd"
        store.replace_source(
            collection,
            f"s{i}",
            scope,
            [make_chunk(f"k{i}", f"chunk {i}", source_id=f"s{i}", scope=scope, vector=_vec(i, 0.01 * (i // DIM + 1)))],
        )


def _q(axis: int) -> np.ndarray:
    return np.array(_vec(axis), np.float32)


class TestSQLiteAnnContract(StoreContract):
    """The whole store contract with every dense query answered by the graph."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteStore]:
        s = SQLiteStore(tmp_path / "plait.db", ann_threshold=0)
        yield s
        s.close()


def test_threshold_from_env_and_errors() -> None:
    assert resolve_ann_threshold(None, {}) == DEFAULT_ANN_THRESHOLD == 20_000
    assert resolve_ann_threshold(None, {"PLAIT_ANN_THRESHOLD": "500"}) == 500
    assert resolve_ann_threshold(7, {"PLAIT_ANN_THRESHOLD": "500"}) == 7
    with pytest.raises(ConfigError, match="'lots'"):
        resolve_ann_threshold(None, {"PLAIT_ANN_THRESHOLD": "lots"})
    with pytest.raises(ConfigError, match="-1"):
        resolve_ann_threshold(-1, {})


def test_below_threshold_stays_exact_and_writes_no_graph(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "plait.db", ann_threshold=25)
    _fill(store, 24)
    hits = store.vector_search("c", _q(3), limit=3)
    assert store.last_vector_path == "exact"
    assert hits[0][0] == "k3"
    assert not list(tmp_path.glob("*.hnsw"))
    store.close()


def test_ann_path_equals_exact(tmp_path: Path) -> None:
    ann = SQLiteStore(tmp_path / "plait.db", ann_threshold=10)
    exact = SQLiteStore(tmp_path / "plait.db", ann_threshold=10_000)
    _fill(ann, 24)
    for axis in range(DIM):
        got = ann.vector_search("c", _q(axis), limit=5)
        assert ann.last_vector_path == "ann"
        want = exact.vector_search("c", _q(axis), limit=5)
        assert exact.last_vector_path == "exact"
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    # axis 3 is held by k3, k11, k19 (tilts .01, .02, .03: the smallest tilt is nearest)
    assert [i for i, _ in ann.vector_search("c", _q(3), limit=3)] == ["k3", "k11", "k19"]
    assert (tmp_path / "plait.db.1.hnsw").exists()
    assert (tmp_path / "plait.db.1.hnsw.npz").exists()
    ann.close()
    exact.close()


def test_filters_over_fetch_and_explain_stays_exact(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "plait.db", ann_threshold=10)
    _fill(store, 24)
    odd = store.vector_search("c", _q(3), limit=2, filters=Filters(scopes=("odd",)))
    assert store.last_vector_path == "ann"
    assert [i for i, _ in odd] == ["k3", "k11"]
    # only k4, k12, k20 are even and on axis 4; limit=None ranks every even chunk exactly
    ranked = store.vector_search("c", _q(4), limit=None, filters=Filters(scopes=("even",)))
    assert store.last_vector_path == "exact"
    assert [i for i, _ in ranked][:3] == ["k4", "k12", "k20"]
    assert len(ranked) == 12
    store.close()


def test_incremental_add_and_delete(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "plait.db", ann_threshold=10)
    _fill(store, 24)
    assert store.vector_search("c", _q(5), limit=1)[0][0] == "k5"
    store.delete_source("c", "s5")
    assert [i for i, _ in store.vector_search("c", _q(5), limit=2)] == ["k13", "k21"]
    store.replace_source("c", "new", "odd", [make_chunk("fresh", "fresh", source_id="new", vector=_vec(5))])
    assert store.vector_search("c", _q(5), limit=1)[0] == ("fresh", pytest.approx(1.0))
    # a changed vector for the same chunk id moves it
    store.set_vectors("c", {"fresh": np.array(_vec(6), np.float32)})
    assert store.vector_search("c", _q(6), limit=1)[0] == ("fresh", pytest.approx(1.0))
    assert store.vector_search("c", _q(5), limit=1)[0][0] == "k13"
    assert store.last_vector_path == "ann"
    store.close()


def test_persisted_graph_reopens_and_drift_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "plait.db"
    first = SQLiteStore(path, ann_threshold=10)
    _fill(first, 24)
    first.vector_search("c", _q(0), limit=1)
    first.close()
    meta = np.load(tmp_path / "plait.db.1.hnsw.npz")
    assert sorted(meta["rowids"].tolist()) == list(range(1, 25))

    reopened = SQLiteStore(path, ann_threshold=10)
    assert reopened.vector_search("c", _q(2), limit=1)[0][0] == "k2"
    index = reopened._ann[1]
    assert index.loaded_from_disk

    # another process (another handle) writes while this one holds the graph
    other = SQLiteStore(path, ann_threshold=10_000)
    other.delete_source("c", "s2")
    other.replace_source("c", "x", "even", [make_chunk("x2", "x", source_id="x", vector=_vec(2))])
    other.close()
    hits = reopened.vector_search("c", _q(2), limit=2)
    assert reopened.last_vector_path == "ann"
    assert [i for i, _ in hits] == ["x2", "k10"]
    assert "k2" not in {i for i, _ in reopened.vector_search("c", _q(2), limit=30)}
    reopened.close()

    # a fresh handle reads the repaired graph from disk and agrees
    third = SQLiteStore(path, ann_threshold=10)
    assert [i for i, _ in third.vector_search("c", _q(2), limit=2)] == ["x2", "k10"]
    assert third._ann[1].loaded_from_disk
    third.close()


def test_delete_collection_removes_graph(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "plait.db", ann_threshold=10)
    _fill(store, 12)
    store.vector_search("c", _q(0), limit=1)
    assert (tmp_path / "plait.db.1.hnsw").exists()
    store.delete_collection("c")
    assert not (tmp_path / "plait.db.1.hnsw").exists()
    assert not (tmp_path / "plait.db.1.hnsw.npz").exists()
    store.close()


def test_collection_counts_follow_writes_from_another_handle(tmp_path: Path) -> None:
    """get_collection's counts are cached per generation: a write elsewhere shows at once."""
    path = tmp_path / "plait.db"
    reader, writer = SQLiteStore(path), SQLiteStore(path)
    writer.ensure_collection("c")
    writer.replace_source("c", "d", "docs", [make_chunk("a", "alpha", source_id="d", vector=_vec(0))])
    info = reader.get_collection("c")
    assert info is not None and (info.chunks, info.chunks_without_vector, info.sources) == (1, 0, 1)
    writer.replace_source("c", "e", "docs", [make_chunk("b", "beta", source_id="e"), make_chunk("x", "gamma", source_id="e")])
    info = reader.get_collection("c")
    assert info is not None and (info.chunks, info.chunks_without_vector, info.sources) == (3, 2, 2)
    reader.close()
    writer.close()
