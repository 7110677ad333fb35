"""An approximate-nearest-neighbour (HNSW) index for the embedded store's dense arm.

Below a configurable number of vectors the dense arm stays exact (a matrix product);
at or above it, :class:`AnnIndex` answers ``k``-nearest queries from an HNSW graph
(`hnswlib <https://github.com/nmslib/hnswlib>`_, Malkov & Yashunin 2018, "Efficient
and robust approximate nearest neighbor search using Hierarchical Navigable Small
World graphs").

The graph is persisted next to the SQLite file as ``<db>.<collection id>.hnsw`` with a
sidecar ``….hnsw.npz`` recording the chunk rowids it holds (labels *are* rowids), the
collection generation it reflects and the index file's size. :meth:`AnnIndex.sync`
brings the graph in line with the rows actually in SQLite — adds missing rowids, marks
removed ones deleted, re-adds rows whose vector changed — so the two arms never
disagree on which chunks exist, whichever process wrote them. hnswlib is an optional
dependency (``pip install 'plait[ann]'``); without it the arm stays exact.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plait.config import Settings
from plait.errors import ConfigError

__all__ = [
    "DEFAULT_ANN_THRESHOLD",
    "AnnIndex",
    "AnnSettings",
    "hnswlib_available",
    "resolve_ann_threshold",
]

DEFAULT_ANN_THRESHOLD = 20_000


def resolve_ann_threshold(explicit: int | None, env: Mapping[str, str] | None = None) -> int:
    """The ANN threshold: ``explicit`` wins, then ``PLAIT_ANN_THRESHOLD``, then 20 000."""
    if explicit is not None:
        value: Any = explicit
    else:
        configured = (Settings.resolve() if env is None else Settings.from_env(env)).ann_threshold
        if configured is None:
            return DEFAULT_ANN_THRESHOLD
        value = configured
    if not isinstance(value, int) or value < 0:
        raise ConfigError(f"ann_threshold={value!r} is invalid: use an integer >= 0")
    return value


def hnswlib_available() -> bool:
    """Whether the optional ``hnswlib`` package can be imported."""
    try:
        import hnswlib  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


_SYNC_BLOCK = 8192
"""Rows compared per step when a loaded graph is checked against the stored vectors."""


@dataclass(frozen=True, kw_only=True)
class AnnSettings:
    """HNSW build and search parameters (see the hnswlib docs for their trade-offs).

    Measured on 100k synthetic 384-d vectors of intrinsic dimension 32, 2 cores
    (benchmarks/results/performance.md): ``ef_construction`` 200 → 64 builds 2.5-3x
    faster (136 s → 46 s) at the same recall once ``ef_search`` is 384 (recall@10
    0.997; 0.9905 at 256). At 1M vectors (build 247 s) recall@10 is 0.9405 / 0.9685 /
    0.984 at ``ef_search`` 256 / 384 / 512, at 34x / 23x / 18x the exact queries/s:
    512 is the default, the smallest that keeps recall >= 0.98 at 1M (benchmarks/
    results/hnsw_build.md). ``m`` 16 → 8 or 12 loses recall that no ``ef_search`` wins
    back cheaply (0.88 / 0.96 at 256). Search time pays for a cheap build, a good trade:
    a query costs ~2.5 ms, a build minutes.
    """

    threshold: int = DEFAULT_ANN_THRESHOLD
    m: int = 16
    ef_construction: int = 64
    ef_search: int = 512
    overfetch: int = 10  # filtered queries fetch limit * overfetch candidates


class AnnIndex:
    """One collection's persisted HNSW graph; labels are chunk rowids."""

    def __init__(self, path: Path, dimension: int, settings: AnnSettings) -> None:
        import hnswlib

        self.path = path
        self.meta_path = path.with_name(path.name + ".npz")
        self.dimension = dimension
        self.settings = settings
        self.members = np.zeros(0, dtype=np.int64)  # sorted rowids live in the graph
        self.generation: int | None = None
        self.loaded_from_disk = False
        self._hnswlib = hnswlib
        self._index: Any = None
        self._load()

    # persistence -----------------------------------------------------------------
    def _new(self, capacity: int) -> Any:
        index = self._hnswlib.Index(space="ip", dim=self.dimension)
        index.init_index(
            max_elements=max(capacity, 16),
            ef_construction=self.settings.ef_construction,
            M=self.settings.m,
            random_seed=100,
        )
        index.set_ef(self.settings.ef_search)
        return index

    def _load(self) -> None:
        if not (self.path.exists() and self.meta_path.exists()):
            return
        try:
            with np.load(self.meta_path) as meta:
                members = np.asarray(meta["rowids"], dtype=np.int64)
                generation = int(meta["generation"])
                dimension = int(meta["dimension"])
                size = int(meta["size"])
            if dimension != self.dimension or size != self.path.stat().st_size:
                return  # another dimension, or a torn write: rebuild
            index = self._hnswlib.Index(space="ip", dim=self.dimension)
            index.load_index(str(self.path), max_elements=max(int(members.size), 16))
            index.set_ef(self.settings.ef_search)
        except (OSError, ValueError, KeyError, RuntimeError):
            return  # unreadable: rebuilt on the next sync
        self._index, self.members, self.generation = index, np.sort(members), generation
        self.loaded_from_disk = True

    def save(self) -> None:
        """Write the graph and its sidecar atomically (temp file, then rename)."""
        if self._index is None:
            return
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        self._index.save_index(str(tmp))
        size = tmp.stat().st_size
        os.replace(tmp, self.path)
        meta_tmp = self.meta_path.with_name(self.meta_path.name + f".{os.getpid()}.tmp.npz")
        np.savez(
            meta_tmp,
            rowids=self.members,
            generation=np.int64(-1 if self.generation is None else self.generation),
            dimension=np.int64(self.dimension),
            size=np.int64(size),
        )
        os.replace(meta_tmp, self.meta_path)

    def remove_files(self) -> None:
        """Delete the persisted graph (the collection is gone)."""
        for p in (self.path, self.meta_path):
            p.unlink(missing_ok=True)

    # keeping in line with SQLite -----------------------------------------------------
    def sync(self, rowids: np.ndarray, matrix: np.ndarray, generation: int) -> bool:
        """Make the graph hold exactly ``rowids`` with these vectors; return whether it changed.

        ``rowids`` is sorted and ``matrix[i]`` is the vector of ``rowids[i]``. Missing rows
        are added, removed rows marked deleted, rows whose stored vector differs re-added.
        """
        if self._index is None:
            self._index = self._new(int(rowids.size))
            self.members = np.zeros(0, dtype=np.int64)
        removed = np.setdiff1d(self.members, rowids, assume_unique=True)
        added_mask = ~np.isin(rowids, self.members, assume_unique=True)
        common_pos = np.flatnonzero(~added_mask)
        changed_parts: list[np.ndarray] = []
        # Compared in blocks: reading the whole graph's vectors back at once cost
        # several copies of the matrix in temporaries (peak memory, not time).
        for start in range(0, int(common_pos.size), _SYNC_BLOCK):
            block = common_pos[start : start + _SYNC_BLOCK]
            try:
                stored = np.asarray(
                    self._index.get_items(rowids[block].tolist(), return_type="numpy"),
                    dtype=np.float32,
                )
            except RuntimeError:  # sidecar and graph from different writes: rebuild
                self._index, self.members = None, np.zeros(0, dtype=np.int64)
                self.generation = None
                return self.sync(rowids, matrix, generation)
            differs = np.abs(stored - matrix[block]).max(axis=1) > 1e-6
            changed_parts.append(block[differs])
        changed = np.concatenate(changed_parts) if changed_parts else np.zeros(0, dtype=np.int64)
        for label in removed.tolist():
            self._index.mark_deleted(int(label))
        write_pos = np.concatenate([np.flatnonzero(added_mask), changed])
        if write_pos.size:
            needed = int(self._index.get_current_count()) + int(write_pos.size)
            if needed > int(self._index.get_max_elements()):
                self._index.resize_index(max(needed, int(self._index.get_max_elements()) * 2))
            self._index.add_items(matrix[write_pos], rowids[write_pos])
        dirty = bool(removed.size or write_pos.size) or self.generation != generation
        self.members = rowids.copy()
        self.generation = generation
        return dirty

    # queries ---------------------------------------------------------------------
    def query(self, vector: np.ndarray, k: int) -> np.ndarray:
        """The rowids of (approximately) the ``k`` nearest vectors, best first."""
        k = min(k, int(self.members.size))
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        self._index.set_ef(max(self.settings.ef_search, k))
        try:
            labels, _ = self._index.knn_query(vector.reshape(1, -1), k=k, num_threads=1)
        except RuntimeError:  # fewer than k reachable (a sparse graph after many deletes)
            k = max(1, k // 2)
            labels, _ = self._index.knn_query(vector.reshape(1, -1), k=k, num_threads=1)
        return np.asarray(labels[0], dtype=np.int64)

    def search(
        self,
        query: np.ndarray,
        rowids: np.ndarray,
        matrix: np.ndarray,
        *,
        limit: int,
        allowed: np.ndarray | None = None,
    ) -> list[tuple[int, float]] | None:
        """Top ``limit`` (rowid, score) pairs, best first; None means "answer exactly".

        Scores are recomputed exactly (``matrix @ query``) for the candidates, so both
        paths score alike and ties break by rowid. A filtered query over-fetches
        ``limit * overfetch`` candidates and gives up (None) when fewer than ``limit``
        of them pass the filter while more would exist.
        """
        if limit <= 0:
            return []
        k = limit if allowed is None else limit * self.settings.overfetch
        labels = self.query(query, k)
        if allowed is not None:
            labels = labels[np.isin(labels, allowed)]
            wanted = min(limit, int(np.isin(rowids, allowed).sum()))
            if labels.size < wanted:
                return None
        positions = np.searchsorted(rowids, labels)
        scores = matrix[positions] @ query
        order = np.lexsort((labels, -scores))[:limit]
        return [(int(labels[i]), float(scores[i])) for i in order]
