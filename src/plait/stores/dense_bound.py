"""A provably exact first pass for the dense arm's top k: an int8 copy with error bounds.

The exact scan (:class:`plait.stores.sqlite_snapshot.DenseMatrix`) reads every float32
vector for every query; at SciFact size (9k x 384, 14 MB) that product is memory-bound
and was the largest single stage of a hybrid search. This module keeps a compact copy of
the matrix, one int8 row per vector with its own scale (``e ≈ s·E``, ``|E| ≤ 127``), and
answers which rows *can* be in the top ``limit``; only those are scored exactly, so the
result is the exact scan's (same rows, same float32 scores, same order, same ties).

The bound, per row ``i`` (``q`` the query, ``f_i`` the float32 score the exact scan
computes, ``a_i`` the estimate)::

    t1 = max|q|/127,  Q1 = rint(q/t1);  t2 = t1/128,  Q2 = rint((q − t1·Q1)/t2)
    ρ = q − t1·Q1 − t2·Q2,  |ρ_j| ≤ t2/2,  so ‖ρ‖ ≤ √d·‖q‖/(256·127)
    a_i = s_i·t2·(128·Q1·E_i + Q2·E_i)                (integer products: exact)
    q·e_i − a_i = s_i·ρ·E_i + q·(e_i − s_i·E_i)
    |f_i − a_i| ≤ ‖q‖·c_i,   c_i = s_i·‖E_i‖·√d/(256·127) + ‖e_i − s_i·E_i‖ + γ·‖e_i‖

(Cauchy-Schwarz twice; ``γ = (d+1)·u/(1 − (d+1)·u)`` bounds the float rounding of a
d-term dot product in any summation order, Higham's γ_n, ``u`` float32's unit roundoff:
valid for float64 scores too; the first term is widened by 1%). The bound is widened
by a relative 2⁻²⁰ (float64 rounding of the estimate itself) and an absolute
``d·2⁻¹²⁶`` (subnormal products). With ``lo = a − err`` and ``hi = a + err``: a row
whose ``hi`` is below the ``limit``-th largest ``lo`` has at least ``limit`` rows
strictly above it, so it can be neither in the top ``limit`` nor tied at the cut.
Every other row is a candidate and is scored exactly. Everything is computed in units
of ``t2`` (a positive scale changes no comparison).

The integer products run in onnxruntime's ``MatMulInteger``: uint8 query rows by the
int8 matrix (u8s8, VNNI where the CPU has it), one thread, on the caller's thread. Where
a probe (:func:`split_levels`, once per process) sees the kernel add products of 255 and
±127 exactly, the two levels are two uint8 rows with zero point 128. Otherwise (AVX2's
``vpmaddubsw`` saturates such pairs at ±2¹⁵) each level is split into its positive and
negative parts (four uint8 rows in ``[0, 127]``, no zero point): no pair of products
then exceeds 2·127·127 < 2¹⁵, and the int32 products are exact on every path. Without onnxruntime, or for a matrix with a
non-finite value, no first pass is built and the exact scan answers alone. The bound
assumes finite scores: a query for which ``‖q‖·max_i‖e_i‖·(1+γ)`` reaches the score
dtype's largest value (a score or partial sum could overflow), or whose bound or
``limit``-th lower bound is not finite, is scanned exactly (``‖q‖`` is computed as
``max|q|·‖q/max|q|‖``, so it does not overflow itself).

Memory: measured (RSS of built copies kept alive) about ``3·d + 16`` bytes per row,
1.1–1.3 kB per vector at 384-d (9k and 20k rows), 80% on top of the float32 matrix: the
int8 matrix in the model's initializer and again in onnxruntime's packed layout, plus
two float64 per row (the scale and the bound's coefficient). :func:`first_pass_bytes`
is that figure, which :attr:`BoundedScan.nbytes` reports and caches count.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

__all__ = ["BoundedScan", "build_bounded_scan", "first_pass_bytes", "kth_largest", "split_levels"]

log = logging.getLogger(__name__)

_LEVELS = 127.0
_BLOCK = 1024  # rows converted to float64 at a time when building
_SECOND = 128.0  # the second level's step: the first's / 128
_WIDEN = 1.0 + 2.0**-20
_SUBNORMAL = 2.0**-126  # above any one float32 product's underflow error


def first_pass_bytes(rows: int, dimension: int) -> int:
    """The memory a built first pass over ``rows`` x ``dimension`` holds (measured, see
    the module docstring): three int8 copies' worth plus two float64 per row."""
    return (3 * dimension + 16) * rows


class BoundedScan:
    """The int8 first pass over one matrix (see the module docstring)."""

    def __init__(
        self,
        session: Any,
        scale: np.ndarray,
        coef: np.ndarray,
        dimension: int,
        *,
        split: bool,
        max_norm: float = np.inf,
        dtype: np.dtype[Any] | None = None,
    ) -> None:
        self._session = session
        self._split = split  # four uint8 rows (each level's two signs), else two with zero point 128
        self._scale = scale  # s_i (float64; 0 for a zero row)
        self._coef = coef  # the bound per unit of ‖q‖ (module docstring)
        self._floor = dimension * _SUBNORMAL  # absolute: every product's underflow
        self.rows = int(scale.size)
        self._max_norm = max_norm  # max_i ‖e_i‖: whether a score can overflow
        self._dtype = np.dtype(np.float32) if dtype is None else dtype  # the matrix's
        self._gamma = _gamma(dimension)
        self.nbytes = first_pass_bytes(self.rows, dimension)

    def bounds(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Every row's (estimate, error bound) for ``query`` in units of the query's second
        quantisation step, and the absolute floor in those units (add it to both bounds);
        None when the query is zero or not finite, or when an exact score could overflow
        (the bound assumes finite scores) or the bound itself is not finite: the caller
        then scans exactly."""
        q = np.asarray(query, dtype=np.float64)
        top = float(np.max(np.abs(q))) if q.size else 0.0
        if not np.isfinite(top) or top == 0.0:
            return None
        q_norm = top * float(np.linalg.norm(q / top))  # ‖q‖ without overflow
        limit = float(np.finfo(np.result_type(self._dtype, query.dtype)).max)
        if not q_norm * self._max_norm * (1.0 + self._gamma) < limit:
            return None  # |partial sums| ≤ ‖q‖·‖e_i‖·(1 + γ): none may overflow
        t1 = top / _LEVELS
        t2 = t1 / _SECOND  # a power of two: exact
        q1 = np.rint(q / t1)
        q2 = np.rint((q - t1 * q1) / t2)
        if self._split:
            levels = np.empty((4, q.size), dtype=np.uint8)
            np.maximum(q1, 0.0, out=levels[0], casting="unsafe")
            np.maximum(-q1, 0.0, out=levels[1], casting="unsafe")
            np.maximum(q2, 0.0, out=levels[2], casting="unsafe")
            np.maximum(-q2, 0.0, out=levels[3], casting="unsafe")
            dots = self._session.run(None, {"q": levels})[0]
            combined = np.subtract(dots[0], dots[1]) * _SECOND
            combined += np.subtract(dots[2], dots[3])
        else:
            levels = np.empty((2, q.size), dtype=np.uint8)
            np.add(q1, 128.0, out=levels[0], casting="unsafe")
            np.add(q2, 128.0, out=levels[1], casting="unsafe")
            dots = self._session.run(None, {"q": levels})[0]
            combined = dots[0] * _SECOND
            combined += dots[1]
        estimate = np.multiply(self._scale, combined, out=combined)
        err = self._coef * (q_norm / t2 * _WIDEN)
        if not (np.isfinite(err).all() and np.isfinite(estimate).all()):
            return None
        return estimate, err, self._floor / t2

    def candidates(self, query: np.ndarray, limit: int, among: np.ndarray | None) -> np.ndarray | None:
        """Ascending row indices that can be in the exact top ``limit`` (``among``: the
        ascending indices allowed, None: all); None when the caller should scan exactly."""
        found = self.bounds(query)
        if found is None:
            return None
        estimate, err, floor = found
        if among is not None:
            estimate, err = estimate[among], err[among]
        if limit <= 0 or limit >= estimate.size:
            return None
        cut = kth_largest(estimate - err, limit)
        if not np.isfinite(cut):
            return None
        # lo = estimate − err − floor, hi = estimate + err + floor: hi ≥ the limit-th lo
        keep = np.flatnonzero(estimate + err >= cut - 2.0 * floor)
        return keep if among is None else among[keep]


def kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (1 ≤ k ≤ size), without partitioning them all.

    The ``k``-th largest of an evenly strided sample is at most the true one, so every
    value at or above the true one is at or above it: the true one is the ``k``-th
    largest of those (about ``stride·k`` values). Stride ``√(size/k)`` balances the two
    partitions.
    """
    size = values.size
    stride = int(np.sqrt(size / k))
    if stride < 4:
        return float(np.partition(values, size - k)[size - k])
    sample = values[::stride]  # at least √(size·k) ≥ k values
    floor = np.partition(sample, sample.size - k)[sample.size - k]
    above = values[values >= floor]
    return float(np.partition(above, above.size - k)[above.size - k])


def _gamma(dimension: int) -> float:
    """Higham's γ for a ``dimension``-term float32 dot product (float64: smaller)."""
    unit = float(np.finfo(np.float32).eps) / 2.0
    n = dimension + 1
    return n * unit / (1.0 - n * unit)


def build_bounded_scan(matrix: np.ndarray, *, cancelled: Callable[[], bool] | None = None) -> BoundedScan | None:
    """The first pass over ``matrix`` (rows x d), its bounds valid for exact scores
    computed in float32 or float64; None when it cannot be built (onnxruntime missing,
    a non-finite value, an empty matrix) or when ``cancelled`` — asked before each block
    of rows and before the integer kernel is compiled — answers True (the matrix was
    replaced by a write: the build stops there)."""
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        return None
    rows, dimension = matrix.shape
    packed = np.empty((dimension, rows), dtype=np.int8)
    scale = np.empty(rows, dtype=np.float64)
    coef = np.empty(rows, dtype=np.float64)
    max_norm = 0.0
    # ‖ρ‖ ≤ √d·t1/256 ≤ √d/(256·127)·‖q‖ (t1 = max|q|/127 ≤ ‖q‖/127), 1% for rounding
    rho = 1.01 * np.sqrt(dimension) / (2.0 * _SECOND * _LEVELS)
    gamma = _gamma(dimension)
    blocks = -(-rows // _BLOCK)
    for start in range(0, rows, _BLOCK):  # float64 one block at a time: small temporaries
        if cancelled is not None and cancelled():
            log.debug("int8 first pass cancelled after %d of %d blocks", start // _BLOCK, blocks)
            return None
        block = np.asarray(matrix[start : start + _BLOCK], dtype=np.float64)
        if not np.isfinite(block).all():
            return None
        end = start + block.shape[0]
        peak = np.max(np.abs(block), axis=1)
        s = peak / _LEVELS
        codes = np.clip(np.rint(block / np.where(s > 0.0, s, 1.0)[:, None]), -_LEVELS, _LEVELS)
        residual = np.linalg.norm(block - s[:, None] * codes, axis=1)
        norms = np.linalg.norm(block, axis=1)
        max_norm = max(max_norm, float(np.max(norms)))
        scale[start:end] = s
        coef[start:end] = s * np.linalg.norm(codes, axis=1) * rho + residual + gamma * norms
        packed[:, start:end] = codes.T
    if cancelled is not None and cancelled():
        log.debug("int8 first pass cancelled after %d of %d blocks", blocks, blocks)
        return None
    split = split_levels()
    session = _session(packed, split=split)
    if session is None:
        return None
    return BoundedScan(session, scale, coef, dimension, split=split, max_norm=max_norm, dtype=matrix.dtype)


@cache
def split_levels() -> bool:
    """Whether the query levels must be split by sign: True unless onnxruntime's u8s8
    kernel on this CPU is seen to add products of 255 and ±127 without saturating (a
    VNNI kernel does; AVX2's ``vpmaddubsw`` saturates pairs of them at ±2¹⁵)."""
    probe = np.where(np.arange(32) % 2 == 0, 127, -127).astype(np.int8)[None, :].repeat(64, axis=0)
    session = _session(probe, split=False)
    if session is None:
        return True
    query = np.array([[255] * 64, [1] * 64], dtype=np.uint8)  # 127 and -127 after the zero point
    got = session.run(None, {"q": query})[0]
    want = (query.astype(np.int64) - 128) @ probe.astype(np.int64)
    return not np.array_equal(got, want)


def _session(packed: np.ndarray, *, split: bool) -> Any:
    """onnxruntime's MatMulInteger of the query levels by the constant (d, rows) int8
    matrix: four uint8 rows without zero point (``split``), else two with zero point 128."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:  # pragma: no cover - both are core dependencies
        log.debug("onnx/onnxruntime missing: the dense arm scans exactly")
        return None
    d, rows = packed.shape
    levels = 4 if split else 2
    constants = [numpy_helper.from_array(packed, "matrix")]
    if not split:
        constants.append(numpy_helper.from_array(np.array(128, dtype=np.uint8), "zero"))
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["q", "matrix"] if split else ["q", "matrix", "zero"], ["dots"])],
        "plait-dense-bound",
        [helper.make_tensor_value_info("q", TensorProto.UINT8, [levels, d])],
        [helper.make_tensor_value_info("dots", TensorProto.INT32, [levels, rows])],
        constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="plait")
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the caller's thread: one core, as the exact scan
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own types; the exact scan answers
        log.warning("no int8 first pass for the dense arm: %s", exc)
        return None
