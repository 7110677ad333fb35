"""The dense arm's int8 first pass (plait.stores.dense_bound) never changes a result.

``DenseMatrix(..., bounded_from=0)`` asks the first pass which rows can be in the top
``limit`` and scores only those; ``bounded_from=None`` is the full einsum scan. Both
must return the same (chunk id, score) lists, score for score to the bit, on data made
to be hard for it: exact ties, duplicate rows, zero rows, rows at the quantiser's
half steps, un-normalised rows, a filter, limits around the row count.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from plait.stores import dense_bound, sqlite_snapshot
from plait.stores.dense_bound import build_bounded_scan, kth_largest, split_levels
from plait.stores.sqlite_snapshot import BUILD_AFTER, DenseMatrix


@pytest.fixture(params=["split", "zero point"], autouse=True)
def levels(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test with both layouts of the query levels (four sign-split rows, or two
    with zero point 128: the one this CPU's probe chose is among them)."""
    monkeypatch.setattr(dense_bound, "split_levels", lambda: request.param == "split")
    return str(request.param)


def _pair(matrix: np.ndarray, rowids: np.ndarray | None = None) -> tuple[DenseMatrix, DenseMatrix]:
    n = matrix.shape[0]
    ids = np.arange(1, 2 * n + 1, 2, dtype=np.int64) if rowids is None else rowids
    names = [f"c{int(r)}" for r in ids]
    bounded = DenseMatrix(ids, matrix, names, bounded_from=0)
    bounded.build_first_pass()  # otherwise built in the background after BUILD_AFTER queries
    return DenseMatrix(ids, matrix, names, bounded_from=None), bounded


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _adversarial(seed: int) -> np.ndarray:
    """Clustered unit rows plus exact duplicates, zero rows, half-step rows and
    one-hot rows (ties among themselves)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((5, 48))
    rows = centres[rng.integers(0, 5, 600)] + 0.05 * rng.standard_normal((600, 48))
    matrix = _unit(rows)
    matrix[10:30] = matrix[5]  # twenty duplicates of row 5
    matrix[40:45] = 0.0  # zero vectors
    half = np.full(48, 0.5 / 127, dtype=np.float32)  # every component at a half step
    half[0] = 1.0
    matrix[50:60] = half
    matrix[60:70] = 0.0
    matrix[60:70, 3] = 1.0  # one-hot rows: exact ties for any query
    matrix[70:75] *= 3.5  # not normalised
    return matrix


def _queries(matrix: np.ndarray, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    picks = [matrix[5].copy(), matrix[60].copy(), matrix[50].copy(), matrix[100].copy()]
    picks += [matrix[i] + 0.01 * rng.standard_normal(matrix.shape[1]).astype(np.float32) for i in (7, 200, 433)]
    picks += [rng.standard_normal(matrix.shape[1]).astype(np.float32) for _ in range(4)]
    one_hot = np.zeros(matrix.shape[1], dtype=np.float32)
    one_hot[3] = 1.0
    picks.append(one_hot)
    return picks


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("limit", [1, 3, 10, 25, 60, 599, 600, 601, 5000])
def test_two_stage_equals_full_scan(seed: int, limit: int) -> None:
    matrix = _adversarial(seed)
    plain, bounded = _pair(matrix)
    for query in _queries(matrix, seed + 10):
        assert bounded.rank(query, limit=limit) == plain.rank(query, limit=limit)


@pytest.mark.parametrize("limit", [1, 5, 20, 199, 200, 250])
def test_two_stage_with_allowed_rows_equals_full_scan(limit: int) -> None:
    matrix = _adversarial(3)
    plain, bounded = _pair(matrix)
    rng = np.random.default_rng(4)
    allowed = np.sort(rng.choice(plain.rowids, 200, replace=False))
    allowed = np.union1d(allowed, plain.rowids[[5, 10, 11, 60, 61, 40]])  # duplicates, ties, a zero
    for query in _queries(matrix, 5):
        got = bounded.rank(query, limit=limit, allowed=allowed)
        assert got == plain.rank(query, limit=limit, allowed=allowed)
        assert {int(cid[1:]) for cid, _ in got} <= set(allowed.tolist())


def test_ties_at_the_cut_keep_the_smallest_rowids() -> None:
    """Twenty duplicates of one row tie at the top: the first pass keeps them all and
    the cut keeps the smallest rowids, as the full scan does."""
    matrix = _adversarial(0)
    plain, bounded = _pair(matrix)
    got = bounded.rank(matrix[5].copy(), limit=4)
    assert [cid for cid, _ in got] == ["c11", "c21", "c23", "c25"]  # rows 5, 10, 11, 12
    assert len({score for _, score in got}) == 1
    assert got == plain.rank(matrix[5].copy(), limit=4)


def test_hand_computed_ranking() -> None:
    """Three rows scored by hand: 0.6·1 + 0.8·0 = 0.6, 0·1 + 1·0 = 0, 0.8 (rows 1..3)."""
    matrix = np.array([[0.6, 0.8], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    _, bounded = _pair(matrix, np.array([7, 8, 9], dtype=np.int64))
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert bounded.rank(query, limit=2) == [("c9", 1.0), ("c7", pytest.approx(0.6))]


def test_zero_and_non_finite_queries_fall_back_to_the_full_scan() -> None:
    matrix = _adversarial(1)
    plain, bounded = _pair(matrix)
    zero = np.zeros(matrix.shape[1], dtype=np.float32)
    assert bounded.rank(zero, limit=5) == plain.rank(zero, limit=5) == [
        (f"c{2 * i + 1}", 0.0) for i in range(5)
    ]
    nan = np.full(matrix.shape[1], np.nan, dtype=np.float32)
    assert bounded.rank(nan, limit=5) == plain.rank(nan, limit=5)


def test_a_non_finite_matrix_gets_no_first_pass() -> None:
    matrix = _adversarial(2)
    matrix[3, 4] = np.inf
    assert build_bounded_scan(matrix) is None
    plain, bounded = _pair(matrix)
    query = matrix[100].copy()
    assert bounded.rank(query, limit=10) == plain.rank(query, limit=10)


def test_float64_queries_score_as_the_full_scan() -> None:
    matrix = _adversarial(0)
    plain, bounded = _pair(matrix)
    query = matrix[200].astype(np.float64) + 1e-3
    assert bounded.rank(query, limit=10) == plain.rank(query, limit=10)


def test_limit_none_and_zero() -> None:
    matrix = _adversarial(0)
    plain, bounded = _pair(matrix)
    query = matrix[9].copy()
    assert bounded.rank(query, limit=None) == plain.rank(query, limit=None)
    assert len(bounded.rank(query, limit=None)) == 600
    assert bounded.rank(query, limit=0) == []


def test_the_first_pass_rules_rows_out_and_keeps_the_top() -> None:
    """Not a speed check: the first pass must actually leave rows out (else the tests
    above compare the full scan with itself), and never the exact top ``limit``."""
    rng = np.random.default_rng(7)
    matrix = _unit(rng.standard_normal((3000, 64)))
    scan = build_bounded_scan(matrix)
    assert scan is not None
    for i in range(20):
        query = matrix[i] + 0.1 * rng.standard_normal(64).astype(np.float32)
        kept = scan.candidates(query, 10, None)
        assert kept is not None
        assert 10 <= kept.size < 300
        exact = np.einsum("ij,j->i", matrix, query)
        top = np.argsort(-exact, kind="stable")[:10]
        assert set(top.tolist()) <= set(kept.tolist())
        assert np.all(np.diff(kept) > 0)


def test_the_bound_holds_for_every_row() -> None:
    """|exact − estimate| ≤ err (+ floor) for every row, on rows built to maximise the
    quantisation error (components at the half steps) and random ones."""
    rng = np.random.default_rng(11)
    matrix = _unit(rng.standard_normal((500, 96)))
    matrix[:50] = np.where(rng.random((50, 96)) < 0.5, 0.5, -0.5) / 127
    matrix[:50, 0] = 1.0
    matrix[50:60] = np.where(rng.random((10, 96)) < 0.5, 1.0, -1.0)  # every code ±127
    matrix[60:70] = 1.0
    scan = build_bounded_scan(matrix)
    assert scan is not None
    extreme = [np.ones(96, dtype=np.float32), -np.ones(96, dtype=np.float32), matrix[50].copy()]
    for query in extreme + [rng.standard_normal(96).astype(np.float32) for _ in range(10)]:
        found = scan.bounds(query)
        assert found is not None
        estimate, err, floor = found
        t2 = float(np.max(np.abs(query.astype(np.float64)))) / 127 / 128
        exact = np.einsum("ij,j->i", matrix, query).astype(np.float64) / t2
        assert np.all(np.abs(exact - estimate) <= err + floor)


def test_the_probe_answers_for_this_cpu(levels: str) -> None:
    """The real probe (not the fixture's) runs and says whether to split; either way
    products of 255 and ±127 come out exact in the layout it picks."""
    split_levels.cache_clear()
    split = split_levels()
    assert isinstance(split, bool)
    matrix = np.where(np.arange(64 * 40).reshape(40, 64) % 3 == 0, 1.0, -1.0).astype(np.float32)
    dense_bound.split_levels = lambda: split  # the layout the probe chose
    scan = build_bounded_scan(matrix)
    assert scan is not None
    found = scan.bounds(np.ones(64, dtype=np.float32))
    assert found is not None
    estimate, _, _ = found
    # in units of t2 = 1/(127·128): exactly Σ±1 · 127·128 up to float64 rounding (a
    # saturated pair would be off by thousands)
    assert np.allclose(estimate, matrix.sum(axis=1).astype(np.float64) * 127 * 128, rtol=1e-12, atol=0)


@pytest.mark.parametrize("size", [1, 7, 64, 1000, 9121])
@pytest.mark.parametrize("k", [1, 2, 10, 60])
def test_kth_largest(size: int, k: int) -> None:
    if k > size:
        return
    rng = np.random.default_rng(size + k)
    values = np.round(rng.standard_normal(size), 1)  # many ties
    assert kth_largest(values, k) == float(np.sort(values)[::-1][k - 1])


def test_large_matrix_uses_the_first_pass_by_default() -> None:
    """At or above BOUNDED_FROM rows the default DenseMatrix builds the first pass (in
    the background, after BUILD_AFTER queries); its results stay the full scan's."""
    rng = np.random.default_rng(3)
    matrix = _unit(rng.standard_normal((2500, 32)))
    ids = np.arange(2500, dtype=np.int64)
    default = DenseMatrix(ids, matrix, [str(i) for i in ids])
    plain = DenseMatrix(ids, matrix, [str(i) for i in ids], bounded_from=None)
    query = matrix[17].copy()
    for _ in range(BUILD_AFTER - 1):
        assert default.rank(query, limit=50) == plain.rank(query, limit=50)
    assert default._builder is None  # not yet: a generation soon replaced never pays
    assert default.rank(query, limit=50) == plain.rank(query, limit=50)
    assert default._builder is not None
    default._builder.join(timeout=60)
    assert default._bounded is not None
    assert default.rank(query, limit=50) == plain.rank(query, limit=50)


def test_searches_never_wait_for_the_first_pass_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the first pass is being built (held here until released), other threads'
    searches return at once with the full scan's results; the build starts once."""
    rng = np.random.default_rng(5)
    matrix = _unit(rng.standard_normal((300, 16)))
    ids = np.arange(300, dtype=np.int64)
    names = [str(i) for i in ids]
    started, release = threading.Event(), threading.Event()
    builds: list[int] = []
    real = sqlite_snapshot.build_bounded_scan

    def slow_build(m: np.ndarray, **options: Any) -> dense_bound.BoundedScan | None:
        builds.append(1)
        started.set()
        release.wait(30)
        return real(m, **options)

    monkeypatch.setattr(sqlite_snapshot, "build_bounded_scan", slow_build)
    dense = DenseMatrix(ids, matrix, names, bounded_from=0, build_after=1)
    plain = DenseMatrix(ids, matrix, names, bounded_from=None)
    query = matrix[7].copy()
    try:
        assert dense.rank(query, limit=10) == plain.rank(query, limit=10)
        assert started.wait(10)  # the build is running, blocked
        results: list[list[tuple[str, float]]] = []
        workers = [threading.Thread(target=lambda: results.append(dense.rank(query, limit=10))) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=5)
        assert not any(w.is_alive() for w in workers)
        assert results == [plain.rank(query, limit=10)] * 3
        assert builds == [1]
    finally:
        release.set()
    assert dense._builder is not None
    dense._builder.join(timeout=60)
    assert dense._bounded is not None and builds == [1]
    assert dense.rank(query, limit=10) == plain.rank(query, limit=10)


def test_float32_scores_that_overflow_rank_as_the_full_scan() -> None:
    """Review 6 #6a: scores of 1e40 and 2e40 are inf in float32; the full scan ties them
    and breaks the tie by rowid (c0 first), which the finite estimates must not undo."""
    matrix = np.zeros((10, 4), dtype=np.float32)
    matrix[0] = [1e20, 0, 0, 0]
    matrix[1] = [2e20, 0, 0, 0]
    matrix[2:] = 1.0
    ids = np.arange(10, dtype=np.int64)
    names = [f"c{i}" for i in ids]
    bounded = DenseMatrix(ids, matrix, names, bounded_from=0)
    bounded.build_first_pass()
    query = np.array([1e20, 0, 0, 0], dtype=np.float32)
    with np.errstate(all="ignore"):
        assert bounded.rank(query, limit=1) == [("c0", float("inf"))]
        assert bounded.rank(query, limit=3) == [("c0", float("inf")), ("c1", float("inf")), ("c2", float(np.float32(1e20)))]


def test_a_float64_query_whose_norm_overflows_still_finds_its_rows() -> None:
    """Review 6 #6b: ‖q‖ of (1e200,)*4 overflows float64 when computed directly; row 3
    (score 0) beats every other row (score -4e200)."""
    matrix = np.full((10, 4), -1.0, dtype=np.float32)
    matrix[3] = 0.0
    ids = np.arange(10, dtype=np.int64)
    names = [f"c{i}" for i in ids]
    bounded = DenseMatrix(ids, matrix, names, bounded_from=0)
    assert bounded.build_first_pass() is not None
    query = np.full(4, 1e200)
    assert bounded.rank(query, limit=1) == [("c3", 0.0)]
    assert bounded.rank(query, limit=2) == [("c3", 0.0), ("c0", -4e200)]
