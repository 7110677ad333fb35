"""The dense arm's int8 first pass is counted in DenseMatrix.nbytes and in the
PostgreSQL dense cache's budget, from the moment the matrix is cached (review 6 #7)."""

from __future__ import annotations

import numpy as np

from plait.stores.dense_bound import first_pass_bytes
from plait.stores.postgres_dense import DenseCache
from plait.stores.sqlite_snapshot import BOUNDED_FROM, DenseMatrix


def _matrix(rows: int, dimension: int, **options: int | None) -> DenseMatrix:
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, dimension)).astype(np.float32)
    ids = np.arange(rows, dtype=np.int64)
    return DenseMatrix(ids, matrix, [f"c{i:04d}" for i in ids], **options)  # type: ignore[arg-type]


def test_first_pass_bytes_is_three_int8_copies_plus_two_float64_per_row() -> None:
    assert first_pass_bytes(2500, 32) == (3 * 32 + 16) * 2500 == 280_000
    assert first_pass_bytes(9121, 384) == 10_653_328  # measured: 9.96 MiB = 10.44 MB


def test_nbytes_counts_the_first_pass_before_and_after_it_is_built() -> None:
    large = _matrix(2500, 32)  # >= BOUNDED_FROM (2048): a first pass will be built
    arrays = 2500 * 8 + 2500 * 32 * 4
    assert large.nbytes == arrays + 280_000
    built = large.build_first_pass()
    assert built is not None and built.nbytes == 280_000
    assert large.nbytes == arrays + 280_000
    assert _matrix(2500, 32, bounded_from=None).nbytes == arrays
    small = _matrix(BOUNDED_FROM - 1, 32)
    assert small.nbytes == (BOUNDED_FROM - 1) * (8 + 128)


def test_the_dense_cache_budget_holds_the_lazily_built_first_pass() -> None:
    """A budget that holds the arrays and ids but not the first pass keeps nothing."""
    matrix = _matrix(2500, 32)
    ids = 2500 * (5 + 49 + 8)  # 'c0000'..'c2499'
    arrays = 2500 * 8 + 2500 * 32 * 4
    tight = DenseCache(budget=arrays + ids + 280_000 - 1)
    tight.keep(1, (1, 1), matrix)
    assert tight.get(1) is None and tight.bytes == 0
    # the estimate counts each chunk id's 57 B besides its characters (review 5 #1: the
    # estimate and the cached size are one function; the characters are known after a load)
    per_id = 2500 * (49 + 8)
    assert not DenseCache(budget=arrays + per_id + 280_000 - 1).fits(2500, 32)
    assert DenseCache(budget=arrays + per_id + 280_000).fits(2500, 32)
    roomy = DenseCache(budget=arrays + ids + 280_000)
    roomy.keep(1, (1, 1), matrix)
    assert roomy.get(1) is not None and roomy.bytes == arrays + ids + 280_000
